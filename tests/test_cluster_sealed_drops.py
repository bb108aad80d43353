# -*- test-case-name: tests.test_cluster_sealed_drops -*-
"""
The log lines of the messages a L{SealedClusterBus} drops by its replay
window (issue 23: after a broker restart the broker delivers again every
message whose acknowledgement it did not get, hundreds after a big job):
counted, one line per kind and reason every L{DROP_LOG_INTERVAL} seconds
at most; a copy of a message handled already at C{info}, a message outside
the window (too old, or from the future) as a warning.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.cluster.interfaces import RETURN
from salttwist.cluster.memory import MemoryBroker, MemoryClusterBus
from salttwist.cluster.sealed import (
    DROP_LOG_INTERVAL,
    FUTURE_SKEW,
    MAX_AGES,
    DropCounter,
    SealedClusterBus,
)
from tests._clustercontract import subscribeAll

KEY = bytes(range(32))


class DropCounterTests(SynchronousTestCase):
    """
    L{DropCounter} logs the first drop at once and the rest of an interval
    together.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.lines: list[tuple[float, int, str]] = []
        self.counter = DropCounter(
            self.clock, lambda count, why: self.lines.append((self.clock.seconds(), count, why))
        )

    def test_burst(self) -> None:
        """
        A burst makes two lines: the first drop at once, the others when the
        interval ends, counted, with the last one's reason.
        """
        for n in range(500):
            self.counter.dropped(f"reason {n}")
        self.assertEqual(self.lines, [(0.0, 1, "reason 0")])
        self.clock.advance(DROP_LOG_INTERVAL)
        self.assertEqual(self.lines[1:], [(DROP_LOG_INTERVAL, 499, "reason 499")])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_quiet(self) -> None:
        """
        A drop after a quiet interval is logged at once; one within the
        interval waits for its end.
        """
        self.counter.dropped("a")
        self.clock.advance(DROP_LOG_INTERVAL + 5)
        self.counter.dropped("b")
        self.clock.advance(3)
        self.counter.dropped("c")
        self.assertEqual(len(self.lines), 2)
        self.clock.advance(DROP_LOG_INTERVAL - 3)
        self.assertEqual(
            self.lines,
            [
                (0.0, 1, "a"),
                (DROP_LOG_INTERVAL + 5, 1, "b"),
                (2 * DROP_LOG_INTERVAL + 5, 1, "c"),
            ],
        )

    def test_stop(self) -> None:
        """
        Stopping logs what was not logged yet and leaves no timer.
        """
        self.counter.dropped("a")
        self.counter.dropped("b")
        self.counter.stop()
        self.assertEqual(self.lines, [(0.0, 1, "a"), (0.0, 1, "b")])
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.counter.stop()
        self.assertEqual(len(self.lines), 2)


class SealedDropsLoggedTests(TestCase):
    """
    Two sealed members of one in-memory broker on a L{Clock}: copies and
    stale messages reach B's replay window.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.broker = MemoryBroker()
        self.observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.sentAt = [1000.0]
        self.a = self.member("a", lambda: self.sentAt[0])
        self.b = self.member("b", lambda: 1000.0 + self.clock.seconds())

    def member(self, memberId: str, now: Any) -> SealedClusterBus:
        inner = MemoryClusterBus(self.broker, memberId, self.clock)
        bus = SealedClusterBus(inner, KEY, "c1", now=now, clock=self.clock)
        bus.got = subscribeAll(bus, (RETURN,), None)  # type: ignore[attr-defined]
        bus.start()
        self.addCleanup(bus.stop)
        return bus

    def lines(self, level: LogLevel) -> list[str]:
        """
        What member B logged at C{level} about dropped messages.
        """
        return [
            formatEvent(e)
            for e in self.observer
            if e["log_level"] == level
            and e.get("log_source") is self.b
            and e["log_format"].startswith("cluster: dropped")
        ]

    async def sendAgain(self, copies: int) -> None:
        """
        The broker delivers the sealed return A sent C{copies} more times.
        """
        [(_, sealed)] = self.broker.stored[RETURN]
        for _ in range(copies):
            await self.broker._members["a"].publish(RETURN, sealed)

    async def test_redeliveriesAtInfo(self) -> None:
        """
        Twelve copies of a return handled already make one info line at
        once and one counting the other eleven when the interval ends; no
        warning.
        """
        await self.a.publish(RETURN, b"return")
        await self.sendAgain(12)
        self.assertEqual(self.b.got[RETURN], [b"return"])  # type: ignore[attr-defined]
        [first] = self.lines(LogLevel.info)
        self.assertIn("dropped 1 return message(s) this master had handled already", first)
        self.assertIn("after a reconnection: normal", first)
        self.clock.advance(DROP_LOG_INTERVAL)
        self.assertIn("dropped 11 return message(s)", self.lines(LogLevel.info)[1])
        self.assertEqual(len(self.lines(LogLevel.info)), 2)
        self.assertEqual(self.lines(LogLevel.warn), [])

    async def test_outsideTheWindowWarned(self) -> None:
        """
        A return older than the window, or from too far in the future, is
        dropped with a warning naming why; a burst of them makes two lines.
        """
        self.sentAt[0] = 1000.0 - MAX_AGES[RETURN] - 1
        for _ in range(5):
            await self.a.publish(RETURN, b"stale")
        self.sentAt[0] = 1000.0 + FUTURE_SKEW + 100
        await self.a.publish(RETURN, b"future")
        self.assertEqual(self.b.got[RETURN], [])  # type: ignore[attr-defined]
        [first] = self.lines(LogLevel.warn)
        self.assertIn("dropped 1 return message(s) outside the replay window", first)
        self.assertIn(f"sent {MAX_AGES[RETURN] + 1:.0f} s ago", first)
        self.clock.advance(DROP_LOG_INTERVAL)
        second = self.lines(LogLevel.warn)[1]
        self.assertIn("dropped 5 return message(s) outside the replay window", second)
        self.assertIn("in the future", second)
        self.assertEqual(self.lines(LogLevel.info), [])

    async def test_stopLogsTheRest(self) -> None:
        """
        A member that stops logs the drops it counted and leaves no timer.
        """
        await self.a.publish(RETURN, b"return")
        await self.sendAgain(3)
        self.b.stop()
        self.assertIn("dropped 2 return message(s)", self.lines(LogLevel.info)[1])
        self.a.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
