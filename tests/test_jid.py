# -*- test-case-name: tests.test_jid -*-
"""
Tests for L{salttwist.jid}.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from twisted.trial.unittest import SynchronousTestCase

from salttwist.jid import JidGenerator, isJid

START = datetime(2024, 5, 6, 7, 8, 9, 123456)


class FakeNow:
    """
    A settable stand-in for C{datetime.now}.
    """

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        """
        @return: the current fake time.
        """
        return self.now


class JidGeneratorTests(SynchronousTestCase):
    """
    L{JidGenerator} makes Salt-style jids that only ever increase.
    """

    def test_format(self) -> None:
        """
        A jid is the 20-digit local timestamp C{YYYYmmddHHMMSSffffff}.
        """
        jid = JidGenerator(FakeNow(START)).next()
        self.assertEqual(jid, "20240506070809123456")
        self.assertTrue(isJid(jid))

    def test_defaultClock(self) -> None:
        """
        With the default clock a jid is 20 digits.
        """
        self.assertTrue(isJid(JidGenerator().next()))

    def test_followsClock(self) -> None:
        """
        When the clock moves forward, the jid is the new time.
        """
        now = FakeNow(START)
        generator = JidGenerator(now)
        generator.next()
        now.now = START + timedelta(seconds=1)
        self.assertEqual(generator.next(), "20240506070810123456")

    def test_clockRepeats(self) -> None:
        """
        Jids asked for within one microsecond are bumped by one microsecond
        each, so they are distinct and increasing.
        """
        generator = JidGenerator(FakeNow(START))
        jids = [generator.next() for _ in range(5)]
        self.assertEqual(
            jids,
            [
                "20240506070809123456",
                "20240506070809123457",
                "20240506070809123458",
                "20240506070809123459",
                "20240506070809123460",
            ],
        )

    def test_clockGoesBack(self) -> None:
        """
        When the clock goes back, jids still increase.
        """
        now = FakeNow(START)
        generator = JidGenerator(now)
        first = generator.next()
        now.now = START - timedelta(hours=1)
        second = generator.next()
        third = generator.next()
        self.assertTrue(first < second < third)
        self.assertTrue(all(isJid(j) for j in (first, second, third)))

    def test_strictlyIncreasing(self) -> None:
        """
        Over a clock that jumps back and forth, every jid is larger than the
        one before, and all have 20 digits.
        """
        now = FakeNow(START)
        generator = JidGenerator(now)
        offsets = [0, 0, -5, 3, 3, -1, 10, 0, -100]
        jids = []
        for offset in offsets:
            now.now = START + timedelta(microseconds=offset)
            jids.append(generator.next())
        self.assertEqual(jids, sorted(set(jids)))
        self.assertTrue(all(len(j) == 20 for j in jids))


class IsJidTests(SynchronousTestCase):
    """
    L{isJid} accepts exactly strings of 20 digits.
    """

    def test_good(self) -> None:
        """
        Strings of 20 ASCII digits are jids.
        """
        for value in ["20240506070809123456", "0" * 20]:
            self.assertTrue(isJid(value), value)

    def test_bad(self) -> None:
        """
        Wrong lengths, non-digits, path tricks, whitespace, non-ASCII digits
        and non-strings are not jids.
        """
        for value in [
            "2024050607080912345",
            "202405060708091234567",
            "",
            "../x",
            "2024050607080912345a",
            "20240506070809123456\n",
            " 20240506070809123456",
            "\u0661" * 20,
            20240506070809123456,
            b"20240506070809123456",
            None,
            ["20240506070809123456"],
        ]:
            self.assertFalse(isJid(value), repr(value))
