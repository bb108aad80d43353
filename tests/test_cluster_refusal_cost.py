# -*- test-case-name: tests.test_cluster_refusal_cost -*-
"""
A return refused because the cluster's outgoing buffer holds its most
messages is refused before its message is made (issue 23: while the broker
is away every return is refused, and each refusal must cost little).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.cluster import fanout as fanoutModule
from salttwist.cluster.fanout import ClusterFanout
from salttwist.cluster.interfaces import RETURN, ClusterUnavailable
from salttwist.cluster.nats import NatsClusterBus
from salttwist.cluster.outbox import Outbox
from tests.test_cluster_outbox import URL, returnEvent


class WhyNoRoomTests(SynchronousTestCase):
    """
    L{Outbox.whyNoRoom} says whether the count of messages leaves room,
    whatever the next message's size.
    """

    def test_count(self) -> None:
        """
        Below C{maxMessages} there is room; at it, the reason names the
        count, the broker and the bound, as L{Outbox.whyFull} does.
        """
        outbox = Outbox("m", 2, 1000, broker=URL)
        outbox.add(RETURN, b"1")
        self.assertIsNone(outbox.whyNoRoom())
        outbox.add(RETURN, b"2")
        self.assertEqual(outbox.whyNoRoom(), outbox.whyFull())
        self.assertIn("2 messages not yet acknowledged", outbox.whyNoRoom() or "")

    def test_bytesNotJudged(self) -> None:
        """
        The bytes held are not judged without a size: a buffer with few
        messages has room by count, even when its bytes are near the bound.
        """
        outbox = Outbox("m", 10, 10, broker=URL)
        outbox.add(RETURN, b"1234567890")
        self.assertIsNone(outbox.whyNoRoom())
        self.assertIsNotNone(outbox.whyFull(1))


class ReturnRefusedCheaplyTests(SynchronousTestCase):
    """
    L{ClusterFanout.returnMessage} with a buffer of 3 messages, full: the
    return is refused without being serialised.
    """

    def setUp(self) -> None:
        self.clock = MemoryReactorClock()
        self.bus = NatsClusterBus(self.clock, URL, "c1", "b", maxMessages=3, unreachableLimit=10.0)
        self.fanout = ClusterFanout(self.bus, self.clock, sharedJobCache=False)
        self.bus.start()
        self.addCleanup(self.bus.stop)
        for n in range(3):
            event = returnEvent(n)
            self.fanout.returnAccepted(event, self.fanout.returnMessage(event))
        self.dumped: list[Any] = []
        realDumps = serial.dumps

        def dumps(value: Any) -> bytes:
            self.dumped.append(value)
            return realDumps(value)

        self.patch(fanoutModule.serial, "dumps", dumps)

    def test_notSerialised(self) -> None:
        """
        A return finding the buffer full by count is refused, naming the
        broker and the bound, and nothing was serialised for it.
        """
        error = self.assertRaises(ClusterUnavailable, self.fanout.returnMessage, returnEvent(3))
        self.assertIn("3 messages not yet acknowledged", str(error))
        self.assertIn(URL, str(error))
        self.assertEqual(self.dumped, [])

    def test_roomAgain(self) -> None:
        """
        Once the broker acknowledged a message, the next return is made
        (serialised once) and taken.
        """
        [first, *_] = self.bus.outbox.toSend()
        self.bus.outbox.acknowledged(first.msgId)
        event = returnEvent(3)
        payload = self.fanout.returnMessage(event)
        self.assertEqual(len(self.dumped), 1)
        self.assertEqual(serial.loads(payload)["event"], event)
