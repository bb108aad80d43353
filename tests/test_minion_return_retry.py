# -*- test-case-name: tests.test_minion_return_retry -*-
"""
How a minion sends again a return its master refused (issue 23, a job
running while the job cache's server or the cluster's broker restarts):

  - C{return not stored} is sent again after a back-off, 5 s doubling up to
    60 s, each wait drawn from its last half so a fleet refused at once
    spreads its tries; nothing is sent meanwhile, then one return at a
    time until one is stored, which ends the back-off; the return is never
    dropped (L{NotStoredBackOffTests});
  - an internal error of the master's is tried again the same way, up to
    L{ERROR_TRIES} times, then the return is set aside in the returns queue
    on disk; any other refusal drops the return, saying why
    (L{RefusalKindsTests}).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver, StringTransport
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial, wire
from salttwist.blocking import runSynchronously
from salttwist.minion.core import Minion
from salttwist.minion.returns import (
    ERROR_TRIES,
    RETRY_FIRST,
    RETRY_JITTER,
    RETRY_MAX,
    ReturnDelivery,
)
from salttwist.minion.returnsqueue import ReturnsQueue
from salttwist.transport.errors import RequestError
from tests.test_minion import MinionTestCase

NOT_STORED = f"{wire.RETURN_NOT_STORED}: the master's job cache could not store it"


class _Req:
    """
    A req session's protocol as L{ReturnDelivery} uses it: every request
    is recorded with the L{Deferred} of its answer.
    """

    def __init__(self) -> None:
        self.transport = StringTransport()
        self.requests: list[tuple[dict[str, Any], Deferred[Any]]] = []

    def request(self, payload: dict[str, Any]) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.requests.append((payload, d))
        return d

    def jids(self) -> list[str]:
        """
        The jids of the requests sent so far, in order.
        """
        return [payload["jid"] for payload, _ in self.requests]

    def answerAll(self, error: str | None) -> None:
        """
        Answer every request not yet answered: refused with C{error}, or
        acknowledged if it is L{None}.
        """
        for _, d in self.requests:
            if not d.called:
                if error is None:
                    d.callback({"ret": True})
                else:
                    d.errback(RequestError(error))


class _DeliveryTestCase(SynchronousTestCase):
    """
    A L{ReturnDelivery} on a L{Clock}, with a returns queue in a temporary
    directory written synchronously, and no jitter unless a test sets one.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.directory = os.path.abspath(self.mktemp())
        self.returnsQueue = ReturnsQueue(self.directory, runSynchronously)
        self.returnsQueue.load()
        self.delivery = ReturnDelivery("m1", self.clock, self.returnsQueue)
        self.delivery.stopped = False
        self.delivery.random = lambda: 0.0
        self.req = _Req()
        self.delivery.req = self.req  # type: ignore[assignment]
        self.addCleanup(self.delivery.stop)
        self.logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def finish(self, *jids: str) -> None:
        """
        Hand the delivery the returns of jobs C{jids}.
        """
        for jid in jids:
            self.delivery.jobDone(
                {"return": True, "retcode": 0, "success": True}, {"jid": jid, "fun": "test.ping"}
            )

    def onDisk(self) -> list[str]:
        """
        The jids of the returns in the returns queue's directory.
        """
        return sorted(
            serial.loads(open(os.path.join(self.directory, name), "rb").read())["jid"]
            for name in os.listdir(self.directory)
            if name.endswith(".ret")
        )

    def nextWait(self) -> float:
        """
        The seconds until the one delayed call due (the back-off's).
        """
        [call] = [c for c in self.clock.getDelayedCalls() if c.func == self.delivery._sendAgain]
        return call.getTime() - self.clock.seconds()

    def messages(self, level: LogLevel) -> list[str]:
        """
        The log lines at C{level}, formatted.
        """
        return [formatEvent(e) for e in self.logged if e["log_level"] == level]


class NotStoredBackOffTests(_DeliveryTestCase):
    """
    A return answered C{return not stored} is sent again after a back-off.
    """

    def test_doubling(self) -> None:
        """
        Without jitter, the waits are 5, 10, 20, 40 s, then 60 s each time;
        nothing is sent before a wait is over.
        """
        self.finish("1")
        waits = []
        for _ in range(7):
            self.req.answerAll(NOT_STORED)
            wait = self.nextWait()
            waits.append(wait)
            sent = len(self.req.requests)
            self.clock.advance(wait - 0.5)
            self.assertEqual(len(self.req.requests), sent)
            self.clock.advance(0.5)
            self.assertEqual(len(self.req.requests), sent + 1)
        self.assertEqual(waits, [5.0, 10.0, 20.0, 40.0, 60.0, 60.0, 60.0])
        self.assertEqual(self.req.jids(), ["1"] * 8)

    def test_jitter(self) -> None:
        """
        Each wait is drawn from its last L{RETRY_JITTER}: a draw of 0 waits
        the whole time, one near 1 half of it, so minions refused at once
        spread their tries.
        """
        self.delivery.retryAttempt = 1
        self.assertEqual(self.delivery.retryDelay(), RETRY_FIRST)
        self.delivery.random = lambda: 0.999
        self.assertAlmostEqual(self.delivery.retryDelay(), RETRY_FIRST * (1 - RETRY_JITTER * 0.999))
        self.delivery.retryAttempt = 50
        self.assertAlmostEqual(self.delivery.retryDelay(), RETRY_MAX * (1 - RETRY_JITTER * 0.999))
        self.delivery.retryAttempt = 0
        self.delivery.random = lambda: 0.1
        self.finish("1")
        self.req.answerAll(NOT_STORED)
        self.assertAlmostEqual(self.nextWait(), RETRY_FIRST * (1 - RETRY_JITTER * 0.1))

    def test_oneRoundPerRefusals(self) -> None:
        """
        Returns sent together and refused together wait one back-off, which
        grows once; then one goes, the others wait for its answer.
        """
        self.finish("1", "2", "3")
        self.assertEqual(self.req.jids(), ["1", "2", "3"])
        self.req.answerAll(NOT_STORED)
        self.assertEqual(self.delivery.retryAttempt, 1)
        self.assertEqual(self.nextWait(), RETRY_FIRST)
        self.clock.advance(RETRY_FIRST)
        self.assertEqual(len(self.req.requests), 4)
        # A new return waits too.
        self.finish("4")
        self.assertEqual(len(self.req.requests), 4)
        self.req.answerAll(NOT_STORED)
        self.assertEqual(self.delivery.retryAttempt, 2)
        self.assertEqual(self.nextWait(), 2 * RETRY_FIRST)
        self.assertEqual(len(self.req.requests), 4)
        first, second = self.messages(LogLevel.warn)
        self.assertIn(
            "the master could not store the return for {jid}",
            [e for e in self.logged if e["log_level"] == LogLevel.warn][0]["log_format"],
        )
        self.assertIn("the master could not store the return for 1 (return not stored", first)
        self.assertIn("3 return(s) not stored, sent again in 5.0 s (refusal 1 in a row)", first)
        self.assertIn("sent again in 10.0 s (refusal 2 in a row)", second)

    def test_storedEndsTheBackOff(self) -> None:
        """
        Once a return is stored, every waiting return is sent at once, and
        a later refusal waits L{RETRY_FIRST} again.
        """
        self.finish("1", "2", "3")
        self.req.answerAll(NOT_STORED)
        self.clock.advance(RETRY_FIRST)
        self.req.answerAll(NOT_STORED)
        self.clock.advance(2 * RETRY_FIRST)
        sent = len(self.req.requests)
        self.req.requests[-1][1].callback({"ret": True})
        self.assertEqual(self.delivery.retryAttempt, 0)
        self.assertEqual(len(self.req.requests), sent + 2)
        self.assertEqual(sorted(self.req.jids()[-3:]), ["1", "2", "3"])
        self.req.answerAll(NOT_STORED)
        self.assertEqual(self.nextWait(), RETRY_FIRST)
        self.clock.advance(RETRY_FIRST)
        self.req.answerAll(None)
        self.assertEqual(self.delivery.pending, type(self.delivery.pending)())
        self.assertEqual(self.delivery.unacknowledged, {})
        self.assertEqual(self.onDisk(), [])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_neverDropped(self) -> None:
        """
        A return refused for an hour is still kept, on disk, and stored in
        the end.
        """
        self.finish("1")
        for _ in range(70):
            self.req.answerAll(NOT_STORED)
            self.clock.advance(RETRY_MAX)
        self.assertEqual(self.onDisk(), ["1"])
        self.assertEqual(len(self.req.requests), 71)
        self.req.answerAll(None)
        self.assertEqual(self.onDisk(), [])
        self.assertEqual(self.delivery.memoryUsed, 0)

    def test_newSessionSendsAtOnce(self) -> None:
        """
        A new session (this master back, or another one) ends the wait: one
        return goes at once; refused again, the back-off goes on growing.
        """
        self.finish("1", "2")
        self.req.answerAll(NOT_STORED)
        self.delivery.req = None
        other = _Req()
        self.delivery.req = other  # type: ignore[assignment]
        self.delivery.flush()
        self.assertEqual(len(other.requests), 1)
        other.answerAll(NOT_STORED)
        self.assertEqual(self.nextWait(), 2 * RETRY_FIRST)
        self.clock.advance(2 * RETRY_FIRST)
        other.answerAll(None)
        # The first sent again, then the other: both stored.
        self.assertEqual(len(other.requests), 3)
        self.assertEqual(sorted(set(other.jids())), ["1", "2"])
        self.assertEqual(self.delivery.pending, type(self.delivery.pending)())

    def test_stopCancels(self) -> None:
        """
        A stopping minion leaves no back-off timer behind.
        """
        self.finish("1")
        self.req.answerAll(NOT_STORED)
        self.delivery.stop()
        self.assertEqual(
            [c for c in self.clock.getDelayedCalls() if c.func == self.delivery._sendAgain], []
        )


class RefusalKindsTests(_DeliveryTestCase):
    """
    What the minion does with each kind of refusal.
    """

    def test_internalErrorRetried(self) -> None:
        """
        An internal error of the master's is tried again with the same
        back-off; stored at last, nothing is left.
        """
        self.finish("1")
        for _ in range(ERROR_TRIES - 1):
            self.req.answerAll("internal error in _return")
            self.clock.advance(self.nextWait())
        self.assertEqual(len(self.req.requests), ERROR_TRIES)
        self.req.answerAll(None)
        self.assertEqual(self.onDisk(), [])
        self.assertEqual(self.delivery.retryAttempt, 0)
        self.assertEqual(self.messages(LogLevel.error), [])
        self.assertIn(
            "the master failed on the return for 1 (internal error in _return)",
            self.messages(LogLevel.warn)[0],
        )

    def test_internalErrorSetAside(self) -> None:
        """
        After L{ERROR_TRIES} internal errors in a row the return is set
        aside: kept in the returns queue on disk (the next start sends it
        again), no longer sent nor held in memory, logged as an error; the
        other returns go on.
        """
        self.finish("1")
        for _ in range(ERROR_TRIES):
            self.req.answerAll("internal error in _return")
            self.clock.advance(self.nextWait())
        self.assertEqual(self.req.jids(), ["1"] * ERROR_TRIES)
        self.assertEqual(self.onDisk(), ["1"])
        self.assertEqual(self.delivery.memoryUsed, 0)
        self.assertEqual(self.delivery.unacknowledged, {})
        [line] = self.messages(LogLevel.error)
        self.assertIn(f"failed {ERROR_TRIES} times in a row on the return for 1", line)
        self.assertIn("kept in the returns queue on disk", line)
        self.finish("2")
        self.clock.advance(RETRY_MAX)
        self.req.answerAll(None)
        self.assertEqual(self.req.jids(), ["1"] * ERROR_TRIES + ["2"])
        self.assertEqual(self.onDisk(), ["1"])
        self.assertEqual(
            [jid for _, ret in self.returnsQueue.load() for jid in [ret["jid"]]], ["1"]
        )

    def test_finalRefusalDropped(self) -> None:
        """
        A refusal that sending again would not change (the master has the
        return already) drops it, with a line saying why; no back-off.
        """
        self.finish("1", "2")
        self.req.requests[0][1].errback(
            RequestError("return refused: minion m1 already returned for job 1")
        )
        self.assertEqual(self.onDisk(), [])
        [line] = self.messages(LogLevel.warn)
        self.assertIn("refused the return for 1, which is dropped", line)
        self.assertIn("already returned", line)
        self.finish("3")
        self.assertEqual(self.req.jids(), ["1", "2", "3"])
        self.req.answerAll(None)
        self.assertEqual(
            [c for c in self.clock.getDelayedCalls() if c.func == self.delivery._sendAgain], []
        )


class ConfiguredBackOffTests(_DeliveryTestCase):
    """
    The back-off's first wait, longest wait and internal errors allowed are
    L{ReturnDelivery.retryFirst}, L{ReturnDelivery.retryMax} and
    L{ReturnDelivery.errorTries} (C{return_retry_timer},
    C{return_retry_timer_max} and C{return_retry_tries}).
    """

    def setUp(self) -> None:
        super().setUp()
        self.delivery.retryFirst = 2
        self.delivery.retryMax = 7
        self.delivery.errorTries = 3

    def test_waits(self) -> None:
        """
        The waits start at C{retryFirst} and double up to C{retryMax}; the
        jitter draws each from its last half.
        """
        self.finish("1")
        waits = []
        for _ in range(5):
            self.req.answerAll(NOT_STORED)
            waits.append(self.nextWait())
            self.clock.advance(waits[-1])
        self.assertEqual(waits, [2, 4, 7, 7, 7])
        self.req.answerAll(None)
        self.delivery.random = lambda: 0.5
        self.finish("2")
        self.req.answerAll(NOT_STORED)
        self.assertEqual(self.nextWait(), 2 * (1 - RETRY_JITTER * 0.5))

    def test_errorTries(self) -> None:
        """
        The return is set aside after C{errorTries} internal errors in a
        row.
        """
        self.finish("1")
        for _ in range(3):
            self.req.answerAll("internal error in _return")
            self.clock.advance(self.nextWait())
        self.assertEqual(self.req.jids(), ["1"] * 3)
        self.assertEqual(self.onDisk(), ["1"])
        [line] = self.messages(LogLevel.error)
        self.assertIn("failed 3 times in a row on the return for 1", line)


class MinionConfigTests(MinionTestCase):
    """
    A minion built from its config backs off as C{return_retry_timer},
    C{return_retry_timer_max} and C{return_retry_tries} say.
    """

    def heldReturns(self, minion: Minion) -> list[tuple[dict[str, Any], Deferred[Any]]]:
        """
        Make the returns C{minion} sends on its session wait for the test:
        each is recorded with the L{Deferred} the test fires as the
        master's answer. Other requests go to the master.
        """
        assert minion.req is not None
        held: list[tuple[dict[str, Any], Deferred[Any]]] = []
        send = minion.req.request

        def request(payload: dict[str, Any]) -> Deferred[Any]:
            if payload.get("cmd") != "_return":
                return send(payload)
            d: Deferred[Any] = Deferred()
            held.append((payload, d))
            return d

        minion.req.request = request  # type: ignore[method-assign]
        return held

    def nextWait(self, minion: Minion) -> float:
        """
        The seconds until C{minion}'s back-off sends again.
        """
        reactor = self.net.reactor
        [call] = [c for c in reactor.getDelayedCalls() if c.func == minion.returns._sendAgain]
        return call.getTime() - reactor.seconds()

    def test_configured(self) -> None:
        """
        With C{return_retry_timer: 2}, C{return_retry_timer_max: 7} and
        C{return_retry_tries: 3}, a return answered C{return not stored}
        is sent again after 2, 4, then 7 s (no jitter drawn here), and one
        the master fails on is set aside after 3 tries.
        """
        minion = self.readyMinion(
            return_retry_timer=2, return_retry_timer_max=7, return_retry_tries=3
        )
        minion.returns.random = lambda: 0.0
        held = self.heldReturns(minion)
        jid = self.publish("test.ping")
        waits = []
        for _ in range(4):
            [(payload, answer)] = [(p, d) for p, d in held if not d.called]
            self.assertEqual(payload["jid"], jid)
            answer.errback(RequestError(NOT_STORED))
            waits.append(self.nextWait(minion))
            self.net.advance(waits[-1])
        self.assertEqual(waits, [2, 4, 7, 7])
        for _ in range(3):
            [(_, answer)] = [(p, d) for p, d in held if not d.called]
            answer.errback(RequestError("internal error in _return"))
            self.net.advance(self.nextWait(minion))
        self.assertEqual(len(held), 7)
        self.assertEqual([d for _, d in held if not d.called], [])
        self.assertEqual(minion.returns.unacknowledged, {})
        self.assertEqual(len(self.logged("failed 3 times in a row on the return for")), 1)
