# -*- test-case-name: tests.test_local_client -*-
"""
Tests for how L{LocalClient.run} gathers returns: no waiting for minions that
are not connected, and C{saltutil.find_job} before giving up on silent ones.
The req channel and event bus are fakes; time is a L{Clock}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.client.local import JobResult, LocalClient

JID = "20261122000000000001"
FIND_JID = "20261122000000000002"


class _Transport:
    def loseConnection(self) -> None:
        pass


class _FakeEvents:
    def __init__(self) -> None:
        self.lost: Deferred[None] = Deferred()
        self.transport = _Transport()


class _FakeReq:
    """
    Answers publish requests from a script and records them.
    """

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        self.transport = _Transport()

    def request(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        self.requests.append(payload)
        return succeed(self.replies.pop(0))


class GatherTests(SynchronousTestCase):
    """
    L{LocalClient.run} against a scripted master.
    """

    def setUp(self) -> None:
        """
        A client on a clock whose connections are fakes.
        """
        self.clock = Clock()
        self.client = LocalClient({}, self.clock)
        self.events = _FakeEvents()
        self.onEvent: Any = None

    def script(self, *replies: dict[str, Any]) -> _FakeReq:
        """
        Make the master answer the client's publish requests with C{replies}.
        """
        req = _FakeReq(list(replies))

        async def connect(onEvent: Any, prefixes: list[str]) -> Any:
            self.onEvent = onEvent
            return self.events, req

        self.patch(self.client, "_connect", connect)
        return req

    def ret(self, jid: str, minionId: str, value: Any) -> None:
        """
        Fire a return event as the master's bus does.
        """
        self.onEvent(f"salt/job/{jid}/ret/{minionId}", {"id": minionId, "return": value})

    def startJob(self, timeout: float = 5.0) -> Deferred[JobResult]:
        """
        Start C{test.ping} on C{*}.
        """
        return Deferred.fromCoroutine(
            self.client.run("*", "test.ping", [], timeout=timeout, gatherJobTimeout=2.0)
        )

    def test_notConnectedNotWaitedFor(self) -> None:
        """
        Once every connected targeted minion returned, the client finishes
        at once; minions the master knew were not connected are reported as
        such, without waiting for the timeout.
        """
        self.script({"jid": JID, "minions": ["a", "b"], "connected": ["a"]})
        d = self.startJob()
        self.ret(JID, "a", True)
        result = self.successResultOf(d)
        self.assertEqual(list(result.returns), ["a"])
        self.assertEqual(result.notConnected, ["b"])
        self.assertEqual(result.missing, [])
        self.assertEqual(self.clock.seconds(), 0)

    def test_earlyReturnKept(self) -> None:
        """
        A return that arrives before the publish reply is read still counts.
        """
        req = self.script({"jid": JID, "minions": ["a"], "connected": ["a"]})
        original = req.request

        def answerAfterReturn(payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
            self.ret(JID, "a", True)
            return original(payload)

        req.request = answerAfterReturn  # type: ignore[method-assign]
        result = self.successResultOf(self.startJob())
        self.assertEqual(result.returns["a"]["return"], True)

    def test_findJobKeepsWaiting(self) -> None:
        """
        At the timeout the client asks the silent minion with
        C{saltutil.find_job}; while it still runs the job the client waits
        another timeout, and takes the return when it comes.
        """
        req = self.script(
            {"jid": JID, "minions": ["a"], "connected": ["a"]},
            {"jid": FIND_JID, "minions": ["a"], "connected": ["a"]},
        )
        d = self.startJob(timeout=5)
        self.clock.advance(5)
        self.assertEqual(
            {k: req.requests[1][k] for k in ("fun", "arg", "tgt", "tgt_type")},
            {"fun": "saltutil.find_job", "arg": [JID], "tgt": ["a"], "tgt_type": "list"},
        )
        self.ret(FIND_JID, "a", {"jid": JID, "fun": "test.sleep"})
        self.assertNoResult(d)
        self.clock.advance(3)
        self.ret(JID, "a", True)
        result = self.successResultOf(d)
        self.assertEqual(list(result.returns), ["a"])
        self.assertEqual(result.missing, [])

    def test_findJobEmptyGivesUp(self) -> None:
        """
        A silent minion that answers find_job with nothing is given up on
        as not returned.
        """
        self.script(
            {"jid": JID, "minions": ["a"], "connected": ["a"]},
            {"jid": FIND_JID, "minions": ["a"], "connected": ["a"]},
        )
        d = self.startJob(timeout=5)
        self.clock.advance(5)
        self.ret(FIND_JID, "a", {})
        result = self.successResultOf(d)
        self.assertEqual(result.missing, ["a"])

    def test_findJobUnansweredGivesUp(self) -> None:
        """
        A silent minion that does not answer find_job within
        C{gatherJobTimeout} is given up on.
        """
        self.script(
            {"jid": JID, "minions": ["a"], "connected": ["a"]},
            {"jid": FIND_JID, "minions": ["a"], "connected": ["a"]},
        )
        d = self.startJob(timeout=5)
        self.clock.advance(5)
        self.assertNoResult(d)
        self.clock.advance(2)
        self.assertEqual(self.successResultOf(d).missing, ["a"])

    def test_busLostStopsWaiting(self) -> None:
        """
        If the event bus connection goes away, the client stops waiting
        instead of hanging.
        """
        self.script(
            {"jid": JID, "minions": ["a"], "connected": ["a"]},
            {"jid": FIND_JID, "minions": ["a"], "connected": ["a"]},
        )
        d = self.startJob(timeout=5)
        self.events.lost.callback(None)
        self.clock.advance(5)
        self.clock.advance(2)
        self.assertEqual(self.successResultOf(d).missing, ["a"])
