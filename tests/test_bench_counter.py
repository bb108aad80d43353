# -*- test-case-name: tests.test_bench_counter -*-
"""
Tests for the throughput phase's subscriber in C{benchmarks/bench.py}: it
counts job returns from the tags of the frames the master's bus sends, and
hands every other event on decoded.
"""

from __future__ import annotations

import io
import sys
from typing import Any

from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.events.bus import EventPublisherFactory, LocalEventBus, stamp
from salttwist.transport.frames import HEADER
from tests._scripts import loadScript

JID = "20261122150000123456"


class ReturnCounterTests(SynchronousTestCase):
    """
    L{ReturnCounter} and L{leadingTag} read the bus's own frames.
    """

    def setUp(self) -> None:
        self.bench = loadScript("benchmarks", "bench.py")
        self.factory = EventPublisherFactory(LocalEventBus())

    def frame(self, tag: str, data: dict[str, Any]) -> bytes:
        """
        The frame the master's bus sends a subscriber for one event.
        """
        return self.factory.frameFor(tag, stamp(data))

    def test_leadingTag(self) -> None:
        """
        The tag is read from a frame's first bytes, for short tags (fixstr)
        and long ones (str 8); anything else gives L{None}.
        """
        short = f"salt/job/{JID}/ret/m1"
        long = f"salt/job/{JID}/ret/" + "m" * 200
        for tag in (short, long):
            self.assertEqual(self.bench.leadingTag(self.frame(tag, {"return": True})), tag)
        self.assertIsNone(self.bench.leadingTag(serial.dumps({"subscribed": True})))
        self.assertIsNone(self.bench.leadingTag(serial.dumps({"data": {}, "tag": short})))
        self.assertIsNone(self.bench.leadingTag(b"\x82\xa3tag\xa3\xff\xfe\xfd"))

    def test_countsReturnsDecodesTheRest(self) -> None:
        """
        A job's return is counted by jid without its event being decoded;
        a job's other events and the bus's dropped notice are handed on
        decoded, with their data.
        """
        returns: list[str] = []
        events: list[tuple[str, dict[str, Any]]] = []
        proto = self.bench.ReturnCounter(returns.append, lambda t, d: events.append((t, d)))
        proto.makeConnection(StringTransport())
        wire = [
            serial.dumps({"subscribed": True}),
            self.frame(f"salt/job/{JID}/ret/m1", {"id": "m1", "return": True}),
            self.frame(f"salt/job/{JID}/new", {"jid": JID, "minions": ["m1"]}),
            self.frame("salt/event/dropped", {"dropped": 3}),
            self.frame(f"salt/job/{JID}/ret/m2", {"id": "m2", "return": "x" * 300}),
        ]
        proto.dataReceived(b"".join(HEADER.pack(len(f)) + f for f in wire))
        self.assertTrue(proto.subscribed.called)
        self.assertEqual(returns, [JID, JID])
        self.assertEqual([t for t, _ in events], [f"salt/job/{JID}/new", "salt/event/dropped"])
        self.assertEqual(events[1][1]["dropped"], 3)


class OptionTests(SynchronousTestCase):
    """
    The benchmark's own options refuse what they cannot use.
    """

    def test_inFlight(self) -> None:
        """
        C{--in-flight} takes 0 (the default) or a number of jobs; a negative
        or non-numeric value is a usage error naming the option.
        """
        bench = loadScript("benchmarks", "bench.py")
        self.assertEqual(bench._parser().parse_args(["--in-flight", "3"]).in_flight, 3)
        self.assertEqual(bench._parser().parse_args([]).in_flight, 0)
        stderr = io.StringIO()
        self.patch(sys, "stderr", stderr)
        for bad in ("-1", "many"):
            self.assertRaises(SystemExit, bench._parser().parse_args, ["--in-flight", bad])
            self.assertIn(
                "argument --in-flight: must be a whole number of jobs >= 1", stderr.getvalue()
            )
            self.assertIn(repr(bad), stderr.getvalue())
