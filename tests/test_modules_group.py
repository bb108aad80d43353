# -*- test-case-name: tests.test_modules_group -*-
"""
Tests for L{salttwist.modules.group}: the real shadow tools on a temporary
system root (L{tests._sysroot}), checked by reading its files.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, group, user
from tests._sysroot import entry, makeRoot


class GroupTests(SynchronousTestCase):
    """
    The C{group} functions change C{<root>/etc/group} and C{gshadow}.
    """

    def setUp(self) -> None:
        self.root = makeRoot(self)
        for name in ("ann", "ben"):
            user.add(name, root=self.root, usergroup=False, createhome=False)

    def test_addInfoDelete(self) -> None:
        """
        C{group.add} writes the group; C{info} and C{getent} read it in
        Salt's shape; C{delete} removes it.
        """
        self.assertTrue(group.add("web", gid=3000, root=self.root))
        self.assertEqual(entry(self.root, "group", "web"), ["web", "x", "3000", ""])
        self.assertEqual(
            group.info("web", root=self.root),
            {"name": "web", "passwd": "x", "gid": 3000, "members": []},
        )
        self.assertIn("web", [g["name"] for g in group.getent(root=self.root)])
        self.assertEqual(group.info("nope", root=self.root), {})
        self.assertTrue(group.delete("web", root=self.root))
        self.assertIsNone(entry(self.root, "group", "web"))
        self.assertFalse(group.delete("web", root=self.root))

    def test_system(self) -> None:
        """
        C{system=True} picks a system gid (below 1000).
        """
        group.add("sys", system=True, root=self.root)
        self.assertLess(group.info("sys", root=self.root)["gid"], 1000)

    def test_addTaken(self) -> None:
        """
        A gid already taken is refused, with groupadd's words.
        """
        error = self.assertRaises(CommandExecutionError, group.add, "other", gid=0, root=self.root)
        self.assertIn("Cannot add group other", str(error))
        self.assertIn("already exists", str(error))

    def test_members(self) -> None:
        """
        C{adduser}, C{deluser} and C{members} change the member list.
        """
        group.add("dev", root=self.root)
        self.assertTrue(group.adduser("dev", "ann", root=self.root))
        self.assertEqual(entry(self.root, "group", "dev")[3], "ann")
        self.assertTrue(group.members("dev", "ann,ben", root=self.root))
        self.assertEqual(group.info("dev", root=self.root)["members"], ["ann", "ben"])
        self.assertTrue(group.deluser("dev", "ann", root=self.root))
        self.assertTrue(group.deluser("dev", "ann", root=self.root))
        self.assertEqual(entry(self.root, "group", "dev")[3], "ben")
        self.assertEqual(entry(self.root, "gshadow", "dev")[3], "ben")
        error = self.assertRaises(
            CommandExecutionError, group.adduser, "none", "ann", root=self.root
        )
        self.assertEqual(str(error), "Group 'none' does not exist")

    def test_chgid(self) -> None:
        """
        C{chgid} changes the gid.
        """
        group.add("ops", gid=3100, root=self.root)
        self.assertTrue(group.chgid("ops", 3101, root=self.root))
        self.assertEqual(entry(self.root, "group", "ops")[2], "3101")
