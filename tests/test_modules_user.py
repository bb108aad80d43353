# -*- test-case-name: tests.test_modules_user -*-
"""
Tests for L{salttwist.modules.user}: the real shadow tools on a temporary
system root (L{tests._sysroot}), checked by reading its files.
"""

from __future__ import annotations

import os
import pwd

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, user
from tests._sysroot import entry, makeRoot


class UserTests(SynchronousTestCase):
    """
    The C{user} functions change C{<root>/etc/passwd}, C{group}, C{shadow}.
    """

    def setUp(self) -> None:
        self.root = makeRoot(self)

    def test_addAndInfo(self) -> None:
        """
        C{user.add} runs C{useradd --root}: the passwd file gets the user
        with its uid, shell, GECOS and home (created); C{user.info} reads it
        back in Salt's shape.
        """
        self.assertTrue(
            user.add(
                "alice",
                uid=2001,
                shell="/bin/sh",
                fullname="Alice A",
                workphone="123",
                root=self.root,
            )
        )
        self.assertEqual(
            entry(self.root, "passwd", "alice"),
            [
                "alice",
                "x",
                "2001",
                entry(self.root, "passwd", "alice")[3],
                "Alice A,,123",
                "/home/alice",
                "/bin/sh",
            ],
        )
        self.assertTrue(os.path.isdir(os.path.join(self.root, "home/alice")))
        info = user.info("alice", root=self.root)
        self.assertEqual(info["uid"], 2001)
        self.assertEqual(info["fullname"], "Alice A")
        self.assertEqual(info["workphone"], "123")
        self.assertEqual(info["roomnumber"], "")
        self.assertEqual(info["home"], "/home/alice")
        self.assertEqual(info["shell"], "/bin/sh")
        self.assertEqual(
            sorted(info),
            sorted(
                [
                    "name",
                    "passwd",
                    "uid",
                    "gid",
                    "home",
                    "shell",
                    "fullname",
                    "roomnumber",
                    "workphone",
                    "homephone",
                    "other",
                    "groups",
                ]
            ),
        )
        self.assertEqual(user.info("nobody-here", root=self.root), {})
        self.assertIn("alice", user.list_users(root=self.root))
        self.assertIn("root", [u["name"] for u in user.getent(root=self.root)])

    def test_addTwice(self) -> None:
        """
        Adding a user that exists raises, naming the user and useradd's
        complaint.
        """
        user.add("bob", root=self.root)
        error = self.assertRaises(CommandExecutionError, user.add, "bob", root=self.root)
        self.assertIn("Cannot add user bob", str(error))
        self.assertIn("already exists", str(error))

    def test_changes(self) -> None:
        """
        C{chuid}, C{chgid}, C{chshell}, C{chhome}, C{chfullname} change the
        passwd line and return True.
        """
        user.add("carol", uid=2002, root=self.root, usergroup=False)
        self.assertTrue(user.chuid("carol", 2003, root=self.root))
        self.assertTrue(user.chgid("carol", "bin", root=self.root))
        self.assertTrue(user.chshell("carol", "/bin/false", root=self.root))
        self.assertTrue(user.chhome("carol", "/srv/carol", root=self.root))
        self.assertTrue(user.chfullname("carol", "Carol C", root=self.root))
        self.assertTrue(user.chworkphone("carol", "555", root=self.root))
        self.assertTrue(user.chother("carol", "on call", root=self.root))
        self.assertEqual(entry(self.root, "passwd", "carol")[4], "Carol C,,555,,on call")
        self.assertTrue(user.chworkphone("carol", "", root=self.root))
        self.assertTrue(user.chother("carol", "", root=self.root))
        self.assertEqual(
            entry(self.root, "passwd", "carol"),
            ["carol", "x", "2003", "2", "Carol C", "/srv/carol", "/bin/false"],
        )
        error = self.assertRaises(
            CommandExecutionError, user.chshell, "zed", "/bin/sh", root=self.root
        )
        self.assertEqual(str(error), "User 'zed' does not exist")

    def test_groups(self) -> None:
        """
        C{chgroups} sets the other groups (or appends with C{append=True});
        C{list_groups} gives them with the primary group.
        """
        user.add("dave", root=self.root, usergroup=False)
        self.assertTrue(user.chgroups("dave", "bin,root", root=self.root))
        self.assertEqual(user.list_groups("dave", root=self.root), ["bin", "root", "users"])
        self.assertTrue(user.chgroups("dave", ["bin"], root=self.root))
        self.assertEqual(entry(self.root, "group", "root"), ["root", "x", "0", ""])
        self.assertTrue(user.chgroups("dave", ["root"], append=True, root=self.root))
        self.assertEqual(user.info("dave", root=self.root)["groups"], ["bin", "root", "users"])

    def test_delete(self) -> None:
        """
        C{user.delete} removes the line, and with C{remove=True} the home.
        """
        user.add("frank", root=self.root)
        home = os.path.join(self.root, "home/frank")
        self.assertTrue(os.path.isdir(home))
        self.assertTrue(user.delete("frank", remove=True, root=self.root))
        self.assertIsNone(entry(self.root, "passwd", "frank"))
        self.assertFalse(os.path.exists(home))
        self.assertFalse(user.delete("frank", root=self.root))

    def test_machineUsers(self) -> None:
        """
        Without a root, the machine's users come from the name service.
        """
        self.assertEqual(user.info("root")["uid"], 0)
        self.assertEqual(len(user.list_users()), len({p.pw_name for p in pwd.getpwall()}))

    def test_missingRoot(self) -> None:
        """
        A root that does not exist is named.
        """
        error = self.assertRaises(CommandExecutionError, user.add, "x", root="/no/such/root")
        self.assertEqual(str(error), "The root directory /no/such/root does not exist")
