# -*- test-case-name: tests.test_states_user -*-
"""
Tests for L{salttwist.states.user}: C{user.present} and C{user.absent} on a
temporary system root, through the real execution modules and shadow tools.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import TestCase

from tests._statectx import makeStateContext, runState
from tests._sysroot import entry, makeRoot

HASH = "$6$saltsalt$" + "h" * 30


class PresentTests(TestCase):
    """
    C{user.present}.
    """

    def setUp(self) -> None:
        self.root = makeRoot(self)
        self.ctx = makeStateContext()
        self.testCtx = makeStateContext(test=True)

    async def test_create(self) -> None:
        """
        A missing user is created with its attributes and password; the
        changes are its info, the password redacted.
        """
        ret = await runState(
            "user.present",
            name="web",
            uid=2500,
            shell="/bin/sh",
            fullname="Web",
            groups=["bin"],
            password=HASH,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(ret["comment"], "New user web created")
        self.assertTrue(ret["result"])
        self.assertEqual(ret["changes"]["uid"], 2500)
        self.assertEqual(ret["changes"]["password"], "XXX-REDACTED-XXX")
        self.assertIn("bin", ret["changes"]["groups"])
        self.assertEqual(entry(self.root, "passwd", "web")[2], "2500")
        self.assertEqual(entry(self.root, "shadow", "web")[1], HASH)
        self.assertEqual(entry(self.root, "group", "bin")[3], "web")
        self.assertTrue(os.path.isdir(os.path.join(self.root, "home/web")))

        again = await runState(
            "user.present",
            name="web",
            uid=2500,
            shell="/bin/sh",
            fullname="Web",
            groups=["bin"],
            password=HASH,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(
            (again["result"], again["comment"], again["changes"]),
            (True, "User web is present and up to date", {}),
        )

    async def test_testModeCreate(self) -> None:
        """
        In test mode a missing user is not created: result None, Salt's
        comment, with the groups that do not exist yet.
        """
        ret = await runState(
            "user.present", name="web", groups=["later"], root=self.root, ctx=self.testCtx
        )
        self.assertIsNone(ret["result"])
        self.assertEqual(ret["comment"], "User web set to be added (pending groups: later)")
        self.assertIsNone(entry(self.root, "passwd", "web"))

    async def test_missingGroup(self) -> None:
        """
        A group in C{groups} that does not exist fails the state.
        """
        ret = await runState(
            "user.present", name="web", groups=["nope"], root=self.root, ctx=self.ctx
        )
        self.assertFalse(ret["result"])
        self.assertEqual(ret["comment"], "The following group(s) are not present: nope")
        self.assertIsNone(entry(self.root, "passwd", "web"))

    async def test_update(self) -> None:
        """
        A present user whose attributes differ is changed; the changes
        are the values that changed; test mode lists them first and
        changes nothing.
        """
        await runState("user.present", name="web", root=self.root, ctx=self.ctx)
        args = dict(
            name="web",
            uid=2600,
            shell="/bin/false",
            home="/srv/web",
            groups=["root"],
            optional_groups=["bin", "absent-group"],
            password=HASH,
            fullname="Web Server",
            roomnumber="12",
            allow_uid_change=True,
            root=self.root,
        )
        preview = await runState("user.present", ctx=self.testCtx, **args)
        self.assertIsNone(preview["result"])
        self.assertTrue(
            preview["comment"].startswith("The following user attributes are set to be changed:\n")
        )
        self.assertIn("uid: 2600\n", preview["comment"])
        self.assertIn("passwd: XXX-REDACTED-XXX\n", preview["comment"])
        self.assertIn("groups: ['bin', 'root']\n", preview["comment"])
        self.assertNotEqual(entry(self.root, "passwd", "web")[2], "2600")

        ret = await runState("user.present", ctx=self.ctx, **args)
        self.assertEqual(ret["comment"], "Updated user web")
        self.assertTrue(ret["result"])
        self.assertEqual(ret["changes"]["uid"], 2600)
        self.assertEqual(ret["changes"]["shell"], "/bin/false")
        self.assertEqual(ret["changes"]["home"], "/srv/web")
        self.assertEqual(ret["changes"]["fullname"], "Web Server")
        self.assertEqual(ret["changes"]["passwd"], "XXX-REDACTED-XXX")
        self.assertEqual(sorted(ret["changes"]["groups"]), ["bin", "root", "web"])
        line = entry(self.root, "passwd", "web")
        self.assertEqual(line[2], "2600")
        self.assertEqual(line[4:], ["Web Server,12", "/srv/web", "/bin/false"])
        self.assertTrue(os.path.isdir(os.path.join(self.root, "srv/web")))
        self.assertEqual(entry(self.root, "group", "root")[3], "web")

    async def test_removeGroups(self) -> None:
        """
        Groups not listed are removed, unless C{remove_groups=False}.
        """
        await runState(
            "user.present", name="web", groups=["bin", "root"], root=self.root, ctx=self.ctx
        )
        kept = await runState(
            "user.present",
            name="web",
            groups=["bin"],
            remove_groups=False,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(kept["comment"], "User web is present and up to date")
        ret = await runState(
            "user.present", name="web", groups=["bin"], root=self.root, ctx=self.ctx
        )
        self.assertEqual(ret["comment"], "Updated user web")
        self.assertEqual(entry(self.root, "group", "root")[3], "")
        self.assertEqual(entry(self.root, "group", "bin")[3], "web")

    async def test_gid(self) -> None:
        """
        C{gid} by name sets the primary group.
        """
        ret = await runState(
            "user.present", name="web", gid="bin", createhome=False, root=self.root, ctx=self.ctx
        )
        self.assertTrue(ret["result"])
        self.assertEqual(ret["changes"]["home"], "")
        self.assertEqual(entry(self.root, "passwd", "web")[3], "2")
        self.assertFalse(os.path.exists(os.path.join(self.root, "home/web")))

    async def test_failedChange(self) -> None:
        """
        A change the tools refuse (a primary group that does not exist)
        fails the state, naming the user and usermod's complaint.
        """
        await runState("user.present", name="web", root=self.root, ctx=self.ctx)
        ret = await runState(
            "user.present",
            name="web",
            gid="nogroup-here",
            allow_gid_change=True,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertFalse(ret["result"])
        self.assertTrue(ret["comment"].startswith("Failed to update user web: usermod -g"))
        self.assertIn("nogroup-here", ret["comment"])

    async def test_shadowFields(self) -> None:
        """
        The ageing fields and C{password_lock} are set on creation and
        changed later; C{hash_password} hashes a clear text once.
        """
        ret = await runState(
            "user.present",
            name="web",
            password="secret",
            hash_password=True,
            mindays=1,
            maxdays=90,
            warndays=5,
            inactdays=30,
            expire="2030-01-01",
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(ret["comment"], "New user web created")
        line = entry(self.root, "shadow", "web")
        self.assertTrue(line[1].startswith("$6$"))
        self.assertEqual(line[3:8], ["1", "90", "5", "30", "21915"])
        again = await runState(
            "user.present",
            name="web",
            password="secret",
            hash_password=True,
            mindays=1,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(again["comment"], "User web is present and up to date")
        self.assertEqual(entry(self.root, "shadow", "web")[1], line[1])
        preview = await runState(
            "user.present",
            name="web",
            maxdays=60,
            password_lock=True,
            root=self.root,
            ctx=self.testCtx,
        )
        self.assertEqual(
            preview["comment"],
            "The following user attributes are set to be changed:\nmaxdays: 60\n"
            "password_lock: True\n",
        )
        ret = await runState(
            "user.present",
            name="web",
            maxdays=60,
            password_lock=True,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(ret["comment"], "Updated user web")
        self.assertEqual(ret["changes"], {"passwd": "XXX-REDACTED-XXX", "max": 60})
        line = entry(self.root, "shadow", "web")
        self.assertTrue(line[1].startswith("!$6$"))
        self.assertEqual(line[4], "60")

    async def test_emptyPasswordNotEnforced(self) -> None:
        """
        With C{enforce_password: False} a password is set only where there
        is none yet (the default hash); C{empty_password} empties it.
        """
        await runState("user.present", name="web", root=self.root, ctx=self.ctx)
        ret = await runState(
            "user.present",
            name="web",
            password=HASH,
            enforce_password=False,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(ret["changes"], {"passwd": "XXX-REDACTED-XXX"})
        other = "$6$other$" + "o" * 30
        same = await runState(
            "user.present",
            name="web",
            password=other,
            enforce_password=False,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(same["comment"], "User web is present and up to date")
        self.assertEqual(entry(self.root, "shadow", "web")[1], HASH)
        empty = await runState(
            "user.present", name="web", empty_password=True, root=self.root, ctx=self.ctx
        )
        self.assertEqual(empty["comment"], "Updated user web")
        self.assertEqual(entry(self.root, "shadow", "web")[1], "")

    async def test_uidChangeRefused(self) -> None:
        """
        Without C{allow_uid_change}/C{allow_gid_change}, an existing user's
        uid and gid are not changed, with Salt's words.
        """
        await runState("user.present", name="web", uid=2800, root=self.root, ctx=self.ctx)
        ret = await runState(
            "user.present", name="web", uid=2801, gid="bin", root=self.root, ctx=self.ctx
        )
        self.assertFalse(ret["result"])
        self.assertEqual(ret["changes"], {})
        gid = entry(self.root, "passwd", "web")[3]
        self.assertEqual(
            ret["comment"],
            "Encountered error checking for needed changes. Additional info follows:\n\n"
            "- Changing uid (2800 -> 2801) not permitted, set allow_uid_change to True to"
            " force this change. Note that this will not change file ownership.\n"
            f"- Changing gid ({gid} -> bin) not permitted, set allow_gid_change to True to"
            " force this change. Note that this will not change file ownership.",
        )
        self.assertEqual(entry(self.root, "passwd", "web")[2], "2800")

    async def test_homeOwner(self) -> None:
        """
        A missing home is made, owned by the user's new uid.
        """
        await runState("user.present", name="web", createhome=False, root=self.root, ctx=self.ctx)
        ret = await runState(
            "user.present",
            name="web",
            uid=2700,
            allow_uid_change=True,
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(ret["comment"], "Updated user web")
        home = os.path.join(self.root, "home/web")
        self.assertEqual(os.stat(home).st_uid, 2700)


class AbsentTests(TestCase):
    """
    C{user.absent}.
    """

    def setUp(self) -> None:
        self.root = makeRoot(self)

    async def test_absent(self) -> None:
        """
        A present user is removed (its home too with C{purge}); test mode
        only says so; an absent one is fine.
        """
        ctx = makeStateContext()
        await runState("user.present", name="web", root=self.root, ctx=ctx)
        preview = await runState(
            "user.absent", name="web", root=self.root, ctx=makeStateContext(test=True)
        )
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, "User web set for removal")
        )
        self.assertIsNotNone(entry(self.root, "passwd", "web"))
        ret = await runState("user.absent", name="web", purge=True, root=self.root, ctx=ctx)
        self.assertEqual(ret["comment"], "Removed user web")
        self.assertEqual(ret["changes"]["web"], "removed")
        self.assertIsNone(entry(self.root, "passwd", "web"))
        self.assertFalse(os.path.exists(os.path.join(self.root, "home/web")))
        again = await runState("user.absent", name="web", root=self.root, ctx=ctx)
        self.assertEqual((again["result"], again["comment"]), (True, "User web is not present"))
