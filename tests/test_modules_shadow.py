# -*- test-case-name: tests.test_modules_shadow -*-
"""
Tests for L{salttwist.modules.shadow}: the real shadow tools on a temporary
system root, checked by reading its C{etc/shadow}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, shadow, user
from tests._sysroot import entry, makeRoot

HASH = "$6$abc$" + "x" * 20


class ShadowTests(SynchronousTestCase):
    """
    The C{shadow} functions change C{<root>/etc/shadow}.
    """

    def setUp(self) -> None:
        self.root = makeRoot(self)
        user.add("erin", root=self.root, createhome=False)

    def test_info(self) -> None:
        """
        C{shadow.info} reads a line in Salt's shape; a missing user has
        every value empty.
        """
        info = shadow.info("root", root=self.root)
        self.assertEqual(
            info,
            {
                "name": "root",
                "passwd": "*",
                "lstchg": 19000,
                "min": 0,
                "max": 99999,
                "warn": 7,
                "inact": "",
                "expire": "",
            },
        )
        self.assertEqual(shadow.info("erin", root=self.root)["passwd"], shadow.default_hash())
        self.assertEqual(set(shadow.info("nobody", root=self.root).values()), {""})

    def test_password(self) -> None:
        """
        C{set_password} writes the hash; lock and unlock put and take away
        the C{!}; C{del_password} empties it.
        """
        self.assertTrue(shadow.set_password("erin", HASH, root=self.root))
        self.assertEqual(entry(self.root, "shadow", "erin")[1], HASH)
        self.assertTrue(shadow.lock_password("erin", root=self.root))
        self.assertEqual(entry(self.root, "shadow", "erin")[1], "!" + HASH)
        self.assertTrue(shadow.lock_password("erin", root=self.root))
        self.assertTrue(shadow.unlock_password("erin", root=self.root))
        self.assertEqual(entry(self.root, "shadow", "erin")[1], HASH)
        self.assertTrue(shadow.del_password("erin", root=self.root))
        self.assertEqual(entry(self.root, "shadow", "erin")[1], "")
        error = self.assertRaises(
            CommandExecutionError, shadow.set_password, "zed", HASH, root=self.root
        )
        self.assertEqual(str(error), "User 'zed' does not exist")

    def test_ageing(self) -> None:
        """
        The ageing fields go through C{chage}.
        """
        self.assertTrue(shadow.set_mindays("erin", 1, root=self.root))
        self.assertTrue(shadow.set_maxdays("erin", 90, root=self.root))
        self.assertTrue(shadow.set_warndays("erin", 5, root=self.root))
        self.assertTrue(shadow.set_inactdays("erin", 30, root=self.root))
        self.assertTrue(shadow.set_expire("erin", "2030-01-01", root=self.root))
        self.assertTrue(shadow.set_date("erin", 19500, root=self.root))
        self.assertEqual(
            entry(self.root, "shadow", "erin")[2:8], ["19500", "1", "90", "5", "30", "21915"]
        )
        self.assertTrue(shadow.set_expire("erin", -1, root=self.root))
        self.assertEqual(shadow.info("erin", root=self.root)["expire"], "")
