# -*- test-case-name: tests.test_states_file_shared -*-
"""
Tests for what several C{file} states share in L{salttwist.states.file}:
the end of an edit in place (C{_editOutcome}: C{file.line},
C{file.replace}, C{file.blockreplace}) and the default owner and owner
checks of links and copies (C{_defaultOwner}, C{_ownerErrors}).
"""

from __future__ import annotations

import grp
import os
import pwd

from salttwist.states import file as filestates
from tests.test_states_file import FileStateTestCase, readFile, writeFile


class EditOutcomeTests(FileStateTestCase):
    """
    The three edits in place end alike: a diff and Salt's words, in test
    mode too, with C{file.replace}'s own test-mode words.
    """

    async def test_outcomes(self) -> None:
        """
        Each edit, in test mode, then for real, then again with nothing to
        do.
        """
        name = writeFile(
            self.path("f.conf"), "a=1\n#-- start managed zone --\n#-- end managed zone --\n"
        )
        calls = [
            ("line", {"content": "b=2", "mode": "ensure", "after": "a=1"}, "Changes would be made"),
            ("replace", {"pattern": "a=1", "repl": "a=3"}, "Changes would have been made"),
            ("blockreplace", {"content": "inside"}, "Changes would be made"),
        ]
        for function, kwargs, would in calls:
            before = readFile(name)
            dry = await self.state(function, name, ctx=self.context(test=True), **kwargs)
            self.assertEqual((dry["result"], dry["comment"]), (None, would), function)
            self.assertIn("diff", dry["changes"])
            self.assertEqual(readFile(name), before)
            done = await self.state(function, name, **kwargs)
            self.assertEqual((done["result"], done["comment"]), (True, "Changes were made"))
            self.assertEqual(done["changes"]["diff"], dry["changes"]["diff"])
            for test in (True, False):
                again = await self.state(function, name, ctx=self.context(test=test), **kwargs)
                self.assertEqual(
                    (again["result"], again["comment"], again["changes"]),
                    (True, "No changes needed to be made", {}),
                    (function, test),
                )
        self.assertEqual(
            readFile(name),
            b"a=3\nb=2\n#-- start managed zone --\ninside\n#-- end managed zone --\n",
        )


class OwnerTests(FileStateTestCase):
    """
    Links and copies: their default owner and Salt's words for missing
    owners.
    """

    def test_defaultOwner(self) -> None:
        """
        With no owner given, the minion's C{user} option (else the
        process's user) and that user's primary group.
        """
        me = pwd.getpwuid(os.geteuid())
        primary = grp.getgrgid(me.pw_gid).gr_name
        ctx = self.context()
        self.assertEqual(filestates._defaultOwner(ctx, None, None), (me.pw_name, primary))
        self.assertEqual(filestates._defaultOwner(ctx, None, "g"), (me.pw_name, "g"))
        ctx = self.context(opts={"user": "nobody"})
        nobody = pwd.getpwnam("nobody")
        self.assertEqual(
            filestates._defaultOwner(ctx, None, None),
            ("nobody", grp.getgrgid(nobody.pw_gid).gr_name),
        )
        self.assertEqual(filestates._defaultOwner(ctx, "nosuchuser_x", None), ("nosuchuser_x",) * 2)

    async def test_missingOwners(self) -> None:
        """
        C{file.symlink} and C{file.hardlink} name a missing user and group
        in one comment (a missing user's group defaults to its name);
        nothing is made.
        """
        target = writeFile(self.path("t"), "t")
        for function in ("symlink", "hardlink"):
            link = self.path(function)
            ret = await self.state(
                function, link, target=target, user="nosuchuser_x", group="nosuchgroup_x"
            )
            self.assertEqual(
                (ret["result"], ret["comment"]),
                (False, "User nosuchuser_x does not exist. Group nosuchgroup_x does not exist."),
            )
            one = await self.state(function, link, target=target, user="nosuchuser_x")
            self.assertEqual(
                one["comment"],
                "User nosuchuser_x does not exist. Group nosuchuser_x does not exist.",
            )
            group = grp.getgrgid(os.getegid()).gr_name
            known = await self.state(
                function, link, target=target, user="nosuchuser_x", group=group
            )
            self.assertEqual(known["comment"], "User nosuchuser_x does not exist")
            self.assertFalse(os.path.lexists(link))

    async def test_copyOwner(self) -> None:
        """
        C{file.copy} gives the copy the default owner when none is given.
        """
        source = writeFile(self.path("s"), "s")
        ret = await self.state("copy", self.path("c"), source=source)
        self.assertIs(ret["result"], True, ret)
        st = os.stat(self.path("c"))
        self.assertEqual((st.st_uid, st.st_gid), (os.geteuid(), pwd.getpwuid(os.geteuid()).pw_gid))
