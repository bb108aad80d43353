# -*- test-case-name: tests.test_states_file_retention -*-
"""
Tests for C{file.retention_schedule} (L{salttwist.states.file} and
L{salttwist.states._fileretention}) on real directories of backups. The
expected changes and comments are what C{salt-call --local state.single
file.retention_schedule} (Salt 3008.5) returned for the same files; a
60-backup tree checked against Salt for every rule agreed as well.
"""

from __future__ import annotations

import datetime
import os

from twisted.trial.unittest import SynchronousTestCase

from salttwist.states import _fileretention as retention
from tests.test_states_file import FileStateTestCase, writeFile

FORMAT = "backup_%Y%m%dT%H%M%S.tgz"

BACKUPS = [
    "backup_20241231T235959.tgz",
    "backup_20250601T000000.tgz",
    "backup_20260101T010000.tgz",
    "backup_20260101T013000.tgz",
    "backup_20260101T020000.tgz",
    "backup_20260102T000500.tgz",
    "backup_20260102T120000.tgz",
    "backup_20260201T000000.tgz",
]


def parsed(names: list[str]) -> dict[str, tuple[datetime.datetime, float]]:
    """
    @return: L{retention.fileTimes} of C{names} parsed with L{FORMAT}.
    """
    return retention.fileTimes("/nonexistent", names, FORMAT, None)


class RulesTests(SynchronousTestCase):
    """
    L{retention.retained} keeps what Salt's rules keep.
    """

    def test_eachRule(self) -> None:
        """
        Each rule keeps the earliest backup of the latest N periods that
        have backups (the latest N backups for C{most_recent}).
        """
        times = parsed(BACKUPS)
        cases = {
            "most_recent": (2, {"backup_20260201T000000.tgz", "backup_20260102T120000.tgz"}),
            "first_of_hour": (
                2,
                {"backup_20260201T000000.tgz", "backup_20260102T120000.tgz"},
            ),
            "first_of_day": (
                3,
                {
                    "backup_20260201T000000.tgz",
                    "backup_20260102T000500.tgz",
                    "backup_20260101T010000.tgz",
                },
            ),
            "first_of_month": (
                2,
                {"backup_20260201T000000.tgz", "backup_20260101T010000.tgz"},
            ),
            "first_of_year": (
                "all",
                {
                    "backup_20260101T010000.tgz",
                    "backup_20250601T000000.tgz",
                    "backup_20241231T235959.tgz",
                },
            ),
        }
        for rule, (count, kept) in cases.items():
            self.assertEqual(
                retention.retained(times, retention.checkRetain({rule: count})), kept, rule
            )

    def test_firstOfWeek(self) -> None:
        """
        C{first_of_week: N} keeps the first backup of N + 1 weeks, as
        Salt's does.
        """
        times = parsed(BACKUPS)
        self.assertEqual(
            retention.retained(times, {"first_of_week": 1}),
            {"backup_20260201T000000.tgz", "backup_20260101T010000.tgz"},
        )

    def test_fileTimes(self) -> None:
        """
        Names that do not parse with the format are not backups; without a
        format the entries' modification times are read (not C{.} and
        C{..}), in the given time zone.
        """
        self.assertEqual(list(parsed([".", "..", "README", BACKUPS[0]])), [BACKUPS[0]])
        top = os.path.abspath(self.mktemp())
        path = writeFile(os.path.join(top, "a"), "a")
        os.utime(path, (0, 3600))
        times = retention.fileTimes(top, [".", "..", "a", "gone"], None, datetime.UTC)
        self.assertEqual(
            times, {"a": (datetime.datetime(1970, 1, 1, 1, 0, tzinfo=datetime.UTC), 3600.0)}
        )

    def test_badRetain(self) -> None:
        """
        What is not a mapping, an unknown rule, a count that is not a
        number and an unknown time zone are errors naming them.
        """
        for retain, message in (
            (["most_recent"], "retain must be a dictionary of rules and counts"),
            (
                {"most_recnt": 1},
                "Unknown retention rule 'most_recnt'; the rules are: first_of_year, "
                "first_of_month, first_of_day, first_of_hour, most_recent, first_of_week",
            ),
            (
                {"most_recent": "some"},
                "The count of most_recent must be a number or 'all', not 'some'",
            ),
        ):
            with self.assertRaises(retention.RetentionError) as caught:
                retention.checkRetain(retain)
            self.assertEqual(str(caught.exception), message)
        self.assertEqual(retention.timezoneNamed("UTC").utcoffset(None), datetime.timedelta(0))
        self.assertIsNone(retention.timezoneNamed(None))
        with self.assertRaises(retention.RetentionError) as caught:
            retention.timezoneNamed("Mars/Olympus")
        self.assertEqual(str(caught.exception), "Unknown timezone: 'Mars/Olympus'")


class RetentionScheduleTests(FileStateTestCase):
    """
    C{file.retention_schedule} on a real directory.
    """

    RETAIN = {"most_recent": 2, "first_of_day": 2, "first_of_year": "all"}

    def setUp(self) -> None:
        """
        A directory of backups named by their time, and a C{README}.
        """
        super().setUp()
        self.backups = self.path("backups")
        for name in [*BACKUPS, "README"]:
            writeFile(os.path.join(self.backups, name), name)

    def changes(self) -> dict[str, list[str]]:
        """
        @return: the changes Salt gave for L{RETAIN} over these files.
        """
        return {
            "retained": [
                "backup_20260201T000000.tgz",
                "backup_20260102T120000.tgz",
                "backup_20260102T000500.tgz",
                "backup_20260101T010000.tgz",
                "backup_20250601T000000.tgz",
                "backup_20241231T235959.tgz",
            ],
            "deleted": ["backup_20260101T020000.tgz", "backup_20260101T013000.tgz"],
            "ignored": ["README", "..", "."],
        }

    async def test_testMode(self) -> None:
        """
        In test mode the plan is reported and nothing is deleted.
        """
        ret = await self.state(
            "retention_schedule",
            self.backups,
            retain=self.RETAIN,
            strptime_format=FORMAT,
            ctx=self.context(test=True),
        )
        self.assertEqual(
            ret,
            {
                "name": self.backups,
                "result": None,
                "changes": self.changes(),
                "comment": f"2 backups would have been removed from {self.backups}.\n",
            },
        )
        self.assertEqual(len(os.listdir(self.backups)), 9)

    async def test_delete(self) -> None:
        """
        The backups no rule keeps are deleted; run again, nothing is left
        to delete and there are no changes.
        """
        ret = await self.state(
            "retention_schedule", self.backups, retain=self.RETAIN, strptime_format=FORMAT
        )
        self.assertEqual(
            ret,
            {
                "name": self.backups,
                "result": True,
                "changes": self.changes(),
                "comment": f"2 backups were removed from {self.backups}.\n",
            },
        )
        self.assertEqual(
            sorted(os.listdir(self.backups)), sorted(["README", *self.changes()["retained"]])
        )
        for test in (True, False):
            again = await self.state(
                "retention_schedule",
                self.backups,
                retain=self.RETAIN,
                strptime_format=FORMAT,
                ctx=self.context(test=test),
            )
            verb = "would have been" if test else "were"
            self.assertEqual(
                again,
                {
                    "name": self.backups,
                    "result": True,
                    "changes": {},
                    "comment": f"0 backups {verb} removed from {self.backups}.\n",
                },
            )

    async def test_modificationTimes(self) -> None:
        """
        Without C{strptime_format}, every entry is a backup timed by its
        modification time (in C{timezone}).
        """
        for index, name in enumerate(sorted(os.listdir(self.backups))):
            os.utime(os.path.join(self.backups, name), (0, 86400 * 400 * index))
        ret = await self.state(
            "retention_schedule",
            self.backups,
            retain={"most_recent": 1, "first_of_year": 2},
            timezone="UTC",
        )
        self.assertEqual(
            ret["changes"]["retained"],
            ["backup_20260201T000000.tgz", "backup_20260102T120000.tgz"],
        )
        self.assertIn("README", ret["changes"]["deleted"])
        self.assertEqual(ret["changes"]["ignored"], ["..", "."])
        self.assertEqual(len(os.listdir(self.backups)), 2)

    async def test_failures(self) -> None:
        """
        A missing directory, bad rules and an unknown time zone fail
        naming the problem; nothing is deleted.
        """
        missing = self.path("none")
        for name, kwargs, comment in (
            (
                missing,
                {"retain": self.RETAIN},
                "Name provided to file.retention must be a directory",
            ),
            (self.backups, {"retain": {"last": 1}}, "Unknown retention rule 'last'"),
            (self.backups, {"retain": self.RETAIN, "timezone": "Nowhere/X"}, "Unknown timezone"),
        ):
            ret = await self.state("retention_schedule", name, **kwargs)
            self.assertIs(ret["result"], False)
            self.assertTrue(ret["comment"].startswith(comment), ret["comment"])
            self.assertEqual(ret["changes"], {})
        self.assertEqual(len(os.listdir(self.backups)), 9)
