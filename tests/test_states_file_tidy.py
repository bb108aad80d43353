# -*- test-case-name: tests.test_states_file_tidy -*-
"""
Tests for C{file.tidied} (L{salttwist.states.file.tidied} and
L{salttwist.states._filetidy}): real trees in temporary directories, with
times set through C{os.utime}. The comments and changes are those
C{salt-call --local state.single file.tidied} (Salt 3008.5) gave for the
same trees.
"""

from __future__ import annotations

import datetime
import os
import time

from twisted.trial.unittest import SynchronousTestCase

from salttwist.states import _filetidy as tidy
from tests.test_states_file import FileStateTestCase, writeFile

DAY = 86400


def age(path: str, days: float) -> str:
    """
    Set the access and modification times of C{path} (not following a
    symlink) to C{days} ago.

    @return: C{path}.
    """
    when = time.time() - days * DAY
    os.utime(path, (when, when), follow_symlinks=False)
    return path


class HumanToBytesTests(SynchronousTestCase):
    """
    L{tidy.humanToBytes} reads sizes as Salt's C{human_to_bytes} with
    metric units, and refuses what is not a size.
    """

    def test_units(self) -> None:
        """
        Binary units (C{K}, C{KiB}, C{M}) are powers of 1024, metric ones
        (C{KB}, C{MB}) powers of 1000; a number is bytes.
        """
        self.assertEqual(tidy.humanToBytes(5), 5)
        self.assertEqual(tidy.humanToBytes("5"), 5)
        self.assertEqual(tidy.humanToBytes("2K"), 2048)
        self.assertEqual(tidy.humanToBytes("2KiB"), 2048)
        self.assertEqual(tidy.humanToBytes("2kb"), 2000)
        self.assertEqual(tidy.humanToBytes("1.5M"), 1572864)
        self.assertEqual(tidy.humanToBytes("1GB"), 10**9)
        self.assertEqual(tidy.humanToBytes("3 B"), 3)

    def test_invalid(self) -> None:
        """
        A size that is not one is an error naming it (Salt reads it as 0,
        which would make every file qualify).
        """
        for bad in ("abc", "10X", "-1", -1, True, "1.2.3"):
            with self.assertRaises(tidy.TidyError) as caught:
                tidy.humanToBytes(bad)
            self.assertEqual(str(caught.exception), f"Invalid size: {bad!r}")


class TidyRulesTests(SynchronousTestCase):
    """
    L{tidy.TidyRules.fromArguments} handles arguments as Salt does.
    """

    def test_defaults(self) -> None:
        """
        Unknown operators, fields and C{age_size_only} values fall back to
        Salt's defaults; C{age_size_only} wins over the operator.
        """
        rules = tidy.TidyRules.fromArguments(
            time_comparison="birth", age_size_logical_operator="xor", age_size_only="both"
        )
        self.assertEqual((rules.timeField, rules.combine), ("atime", "OR"))
        rules = tidy.TidyRules.fromArguments(
            time_comparison="MTIME", age_size_logical_operator="and", age_size_only="Size"
        )
        self.assertEqual((rules.timeField, rules.combine), ("mtime", "size"))
        self.assertTrue(rules.nameMatches("anything"))

    def test_combine(self) -> None:
        """
        C{OR} needs the age or the size, C{AND} both, C{age}/C{size} that
        one alone.
        """
        cases = {"OR": (True, True, False), "AND": (False, False, False)}
        for operator, expected in cases.items():
            rules = tidy.TidyRules.fromArguments(
                age=5, size=100, age_size_logical_operator=operator
            )
            self.assertEqual(
                (rules.oldOrBig(5, 0), rules.oldOrBig(0, 100), rules.oldOrBig(4, 99)), expected
            )
        onlyAge = tidy.TidyRules.fromArguments(age=5, size=100, age_size_only="age")
        self.assertEqual((onlyAge.oldOrBig(5, 0), onlyAge.oldOrBig(0, 1000)), (True, False))

    def test_badArguments(self) -> None:
        """
        An age that is not a number and a bad regular expression are errors
        naming them.
        """
        with self.assertRaises(tidy.TidyError) as caught:
            tidy.TidyRules.fromArguments(age="old")
        self.assertEqual(str(caught.exception), "Invalid age: 'old' (a number of days)")
        with self.assertRaises(tidy.TidyError) as caught:
            tidy.TidyRules.fromArguments(matches=["("])
        self.assertTrue(str(caught.exception).startswith("Invalid regular expression in matches: "))
        with self.assertRaises(tidy.TidyError):
            tidy.TidyRules.fromArguments(exclude={"a": 1})

    def test_calendarDays(self) -> None:
        """
        Ages are counted in calendar days from C{today}, as Salt's
        C{date.today() - date.fromtimestamp(...)}.
        """
        top = os.path.abspath(self.mktemp())
        path = writeFile(os.path.join(top, "f"), "x")
        stamp = datetime.datetime(2026, 1, 10, 23, 59).timestamp()
        os.utime(path, (stamp, stamp))
        rules = tidy.TidyRules.fromArguments(age=1, size="1G", time_comparison="mtime")
        self.assertEqual(tidy.toTidy(top, rules, today=lambda: datetime.date(2026, 1, 11)), [path])
        self.assertEqual(tidy.toTidy(top, rules, today=lambda: datetime.date(2026, 1, 10)), [])


class TidiedTests(FileStateTestCase):
    """
    C{file.tidied} on real trees.
    """

    def setUp(self) -> None:
        """
        A tree: C{a.log} and C{sub/c.log} ten days old, C{b.txt} new, a
        2 KiB C{big.bin} new, C{sub} itself new, a symlink C{link.log}.
        """
        super().setUp()
        self.top = self.path("tidy")
        self.a = age(writeFile(os.path.join(self.top, "a.log"), "a"), 10)
        self.b = writeFile(os.path.join(self.top, "b.txt"), "b")
        self.big = writeFile(os.path.join(self.top, "big.bin"), b"\0" * 2048)
        self.c = age(writeFile(os.path.join(self.top, "sub", "c.log"), "c"), 10)
        self.sub = os.path.join(self.top, "sub")
        self.link = os.path.join(self.top, "link.log")
        os.symlink(self.b, self.link)

    def left(self) -> list[str]:
        """
        @return: what is left in the tree, relative paths, sorted.
        """
        found = []
        for root, dirs, files in os.walk(self.top):
            for entry in dirs + files:
                found.append(os.path.relpath(os.path.join(root, entry), self.top))
        return sorted(found)

    async def test_everythingByDefault(self) -> None:
        """
        With neither age nor size every file and symlink goes (size 0 is
        always reached), directories stay; deepest first.
        """
        ret = await self.state("tidied", self.top)
        removed = [self.c, self.a, self.b, self.big, self.link]
        self.assertEqual(
            ret,
            {
                "name": self.top,
                "result": True,
                "changes": {"removed": removed},
                "comment": f"Removed 5 files or directories from directory {self.top}",
            },
        )
        self.assertEqual(self.left(), ["sub"])

    async def test_testMode(self) -> None:
        """
        In test mode what would go is listed; nothing is removed.
        """
        ctx = self.context(test=True)
        ret = await self.state(
            "tidied", self.top, age=5, size="1K", age_size_logical_operator="OR", ctx=ctx
        )
        self.assertEqual(
            ret,
            {
                "name": self.top,
                "result": None,
                "changes": {"removed": [self.c, self.a, self.big]},
                "comment": f"{self.top} is set for tidy",
            },
        )
        self.assertEqual(len(self.left()), 6)

    async def test_ageAndSize(self) -> None:
        """
        C{AND} needs both: only old files at least C{size} big; the 1-byte
        old logs stay.
        """
        age(self.big, 30)
        ret = await self.state(
            "tidied", self.top, age=5, size="1K", age_size_logical_operator="AND"
        )
        self.assertEqual(ret["changes"], {"removed": [self.big]})
        self.assertEqual(self.left(), ["a.log", "b.txt", "link.log", "sub", "sub/c.log"])

    async def test_timeComparison(self) -> None:
        """
        C{time_comparison: mtime} looks at the modification time only: a
        file read today but changed long ago is old.
        """
        when = time.time() - 10 * DAY
        os.utime(self.b, (time.time(), when))
        ret = await self.state(
            "tidied", self.top, age=5, age_size_only="age", time_comparison="mtime"
        )
        self.assertEqual(ret["changes"], {"removed": [self.c, self.a, self.b]})
        atime = await self.state("tidied", self.top, age=5, age_size_only="age")
        self.assertEqual(atime["comment"], f"Nothing to remove from directory {self.top}")

    async def test_matchesExclude(self) -> None:
        """
        C{matches} and C{exclude} are matched against names from their
        start; with C{full_path_match}, against full paths.
        """
        ret = await self.state(
            "tidied", self.top, matches=[r".*\.log"], exclude=["link"], rmlinks=True
        )
        self.assertEqual(ret["changes"], {"removed": [self.c, self.a]})
        writeFile(self.c, "c")
        ret = await self.state("tidied", self.top, matches=[f"{self.sub}/"], full_path_match=True)
        self.assertEqual(ret["changes"], {"removed": [self.c]})
        unanchored = await self.state("tidied", self.top, matches=["log"])
        self.assertEqual(unanchored["changes"], {})

    async def test_rmdirsRmlinks(self) -> None:
        """
        Directories go only with C{rmdirs} (after their contents); symlinks
        stay with C{rmlinks: False}.
        """
        ret = await self.state("tidied", self.top, rmdirs=True, rmlinks=False)
        self.assertEqual(ret["changes"], {"removed": [self.c, self.a, self.b, self.big, self.sub]})
        self.assertEqual(self.left(), ["link.log"])
        self.assertTrue(os.path.islink(self.link))

    async def test_nothing(self) -> None:
        """
        Nothing qualifying: Salt's words, no changes, in test mode too.
        """
        for ctx in (self.context(), self.context(test=True)):
            ret = await self.state("tidied", self.top, age=100, size="1G", ctx=ctx)
            self.assertEqual(
                ret,
                {
                    "name": self.top,
                    "result": True,
                    "changes": {},
                    "comment": f"Nothing to remove from directory {self.top}",
                },
            )

    async def test_failures(self) -> None:
        """
        A relative path, a file, a missing directory, a bad size or regular
        expression fail naming the problem; nothing is removed.
        """
        cases = [
            ("relative/dir", {}, "Specified file relative/dir is not an absolute path"),
            (self.b, {}, f"{self.b} does not exist or is not a directory."),
            (self.path("none"), {}, f"{self.path('none')} does not exist or is not a directory."),
            (self.top, {"size": "lots"}, "Invalid size: 'lots'"),
            (
                self.top,
                {"matches": ["[a-"]},
                "Invalid regular expression in matches: unterminated character set at position 0",
            ),
        ]
        for name, extra, comment in cases:
            ret = await self.state("tidied", name, **extra)
            self.assertEqual((ret["result"], ret["comment"], ret["changes"]), (False, comment, {}))
        self.assertEqual(len(self.left()), 6)
