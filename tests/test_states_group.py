# -*- test-case-name: tests.test_states_group -*-
"""
Tests for L{salttwist.states.group}: C{group.present} and C{group.absent}
on a temporary system root, through the real execution modules and tools.
"""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from salttwist.modules import user
from tests._statectx import makeStateContext, runState
from tests._sysroot import entry, makeRoot


class GroupStateTests(TestCase):
    """
    C{group.present} and C{group.absent}.
    """

    def setUp(self) -> None:
        self.root = makeRoot(self)
        for name in ("ann", "ben", "cid"):
            user.add(name, root=self.root, usergroup=False, createhome=False)
        self.ctx = makeStateContext()
        self.testCtx = makeStateContext(test=True)

    async def test_create(self) -> None:
        """
        A missing group is created with its gid and members; the changes
        are its info. Test mode first changes nothing.
        """
        preview = await runState(
            "group.present", name="web", gid=4000, root=self.root, ctx=self.testCtx
        )
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, "Group web set to be added")
        )
        self.assertIsNone(entry(self.root, "group", "web"))
        ret = await runState(
            "group.present",
            name="web",
            gid=4000,
            members=["ann", "ben"],
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(ret["comment"], "New group web created")
        self.assertTrue(ret["result"])
        self.assertEqual(
            ret["changes"], {"name": "web", "passwd": "x", "gid": 4000, "members": ["ann", "ben"]}
        )
        self.assertEqual(entry(self.root, "group", "web"), ["web", "x", "4000", "ann,ben"])
        again = await runState(
            "group.present",
            name="web",
            gid=4000,
            members=["ben", "ann"],
            root=self.root,
            ctx=self.ctx,
        )
        self.assertEqual(
            (again["result"], again["comment"], again["changes"]),
            (True, "Group web is present and up to date", {}),
        )

    async def test_gidTaken(self) -> None:
        """
        A gid another group has is refused, naming that group.
        """
        ret = await runState("group.present", name="web", gid=2, root=self.root, ctx=self.ctx)
        self.assertFalse(ret["result"])
        self.assertEqual(
            ret["comment"], "Group web is not present but gid 2 is already taken by group bin"
        )

    async def test_change(self) -> None:
        """
        C{addusers}/C{delusers} and the gid are changed, with Salt's
        comment and changes.
        """
        await runState("group.present", name="web", members=["ann"], root=self.root, ctx=self.ctx)
        preview = await runState(
            "group.present",
            name="web",
            gid=4100,
            addusers=["ben"],
            delusers=["ann"],
            root=self.root,
            ctx=self.testCtx,
        )
        self.assertIsNone(preview["result"])
        self.assertEqual(
            preview["comment"],
            "The following group attributes are set to be changed:\n"
            "gid: 4100\naddusers: ['ben']\ndelusers: ['ann']\n",
        )
        self.assertEqual(entry(self.root, "group", "web")[3], "ann")
        ret = await runState(
            "group.present",
            name="web",
            gid=4100,
            addusers=["ben"],
            delusers=["ann"],
            root=self.root,
            ctx=self.ctx,
        )
        self.assertTrue(ret["result"])
        self.assertEqual(ret["changes"], {"Final": "All changes applied successfully"})
        self.assertEqual(entry(self.root, "group", "web"), ["web", "x", "4100", "ben"])

    async def test_emptyMembers(self) -> None:
        """
        C{members: []} removes every member.
        """
        await runState(
            "group.present", name="web", members=["ann", "cid"], root=self.root, ctx=self.ctx
        )
        ret = await runState("group.present", name="web", members=[], root=self.root, ctx=self.ctx)
        self.assertTrue(ret["result"])
        self.assertEqual(entry(self.root, "group", "web")[3], "")

    async def test_conflict(self) -> None:
        """
        C{members} with C{addusers} is refused with Salt's words.
        """
        ret = await runState(
            "group.present",
            name="web",
            members=["ann"],
            addusers=["ben"],
            root=self.root,
            ctx=self.ctx,
        )
        self.assertIsNone(ret["result"])
        self.assertIn('Conflicting options "members"', ret["comment"])

    async def test_absent(self) -> None:
        """
        C{group.absent} removes a present group; test mode only says so.
        """
        await runState("group.present", name="web", root=self.root, ctx=self.ctx)
        preview = await runState("group.absent", name="web", root=self.root, ctx=self.testCtx)
        self.assertEqual(
            (preview["result"], preview["comment"]), (None, "Group web is set for removal")
        )
        ret = await runState("group.absent", name="web", root=self.root, ctx=self.ctx)
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, "Removed group web", {"web": ""}),
        )
        self.assertIsNone(entry(self.root, "group", "web"))
        again = await runState("group.absent", name="web", root=self.root, ctx=self.ctx)
        self.assertEqual(again["comment"], "Group not present")
