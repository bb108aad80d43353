# -*- test-case-name: tests.test_local_client -*-
"""
Tests for how L{LocalClient.run} gathers returns: no waiting for minions that
are not connected, and C{saltutil.find_job} before giving up on silent ones.
The req channel and event bus are fakes; time is a L{Clock}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError, Deferred, fail, succeed
from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.client.base import MAX_REFUSED_FIND_JOBS
from salttwist.client.local import JobResult, LocalClient, MasterUnavailable
from salttwist.transport.errors import RequestError

JID = "20261122000000000001"
FIND_JID = "20261122000000000002"


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def loseConnection(self) -> None:
        self.closed = True


class _FakeEvents:
    def __init__(self) -> None:
        self.lost: Deferred[None] = Deferred()
        self.transport = _Transport()


class _FakeReq:
    """
    Answers publish requests from a script and records them.
    """

    def __init__(self, replies: list[dict[str, Any] | Exception]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        self.transport = _Transport()
        self.lost: Deferred[None] = Deferred()

    def request(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        self.requests.append(payload)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            # The master refused the request.
            return fail(reply)
        return succeed(reply)


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

    def script(self, *replies: dict[str, Any] | Exception) -> _FakeReq:
        """
        Make the master answer the client's publish requests with C{replies}
        (an exception: the master refused that request).
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

    def test_findJobRefusedKeepsWaiting(self) -> None:
        """
        A C{saltutil.find_job} the master refuses for a reason that may pass
        (C{job refused:}, its job cache's server away) says nothing of the
        minion: the client waits another timeout, asks again, and takes
        the return when it comes.
        """
        req = self.script(
            {"jid": JID, "minions": ["a"], "connected": ["a"]},
            RequestError("job refused: the job cache could not store it (db away)"),
            {"jid": FIND_JID, "minions": ["a"], "connected": ["a"]},
        )
        d = self.startJob(timeout=5)
        self.clock.advance(5)
        self.assertNoResult(d)
        self.assertEqual(len(req.requests), 2)
        self.clock.advance(5)
        self.assertEqual(req.requests[2]["fun"], "saltutil.find_job")
        self.ret(FIND_JID, "a", {"jid": JID, "fun": "test.sleep"})
        self.clock.advance(1)
        self.ret(JID, "a", True)
        result = self.successResultOf(d)
        self.assertEqual((list(result.returns), result.missing), (["a"], []))

    def test_findJobRefusedTooOftenFails(self) -> None:
        """
        Past L{MAX_REFUSED_FIND_JOBS} refusals in a row, the wait ends with
        the master's error: the job cache's server or the broker does not
        come back.
        """
        refusal = RequestError("job refused: the cluster's broker has been unreachable for 9 s")
        req = self.script(
            {"jid": JID, "minions": ["a"], "connected": ["a"]},
            *[refusal] * (MAX_REFUSED_FIND_JOBS + 1),
        )
        d = self.startJob(timeout=5)
        for _ in range(MAX_REFUSED_FIND_JOBS):
            self.clock.advance(5)
        self.assertNoResult(d)
        self.clock.advance(5)
        self.assertIn("unreachable", str(self.failureResultOf(d, RequestError).value))
        self.assertEqual(len(req.requests), MAX_REFUSED_FIND_JOBS + 2)

    def test_findJobOtherRefusalFails(self) -> None:
        """
        Any other refusal of C{saltutil.find_job} (the ACL's) ends the
        wait with that error, as before.
        """
        self.script(
            {"jid": JID, "minions": ["a"], "connected": ["a"]},
            RequestError("Authorization error occurred: user bob may not run find_job"),
        )
        d = self.startJob(timeout=5)
        self.clock.advance(5)
        self.assertIn("Authorization error", str(self.failureResultOf(d, RequestError).value))

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


class _JobReq(_FakeReq):
    """
    A fake req session whose master answers each publish with a new jid
    targeting minion C{a}, and records the jids it gave.
    """

    def __init__(self, jids: Any) -> None:
        super().__init__([])
        self._jids = jids
        self.jidsGiven: list[str] = []

    def request(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        self.requests.append(payload)
        jid = next(self._jids)
        self.jidsGiven.append(jid)
        return succeed({"jid": jid, "minions": ["a"], "connected": ["a"]})


class KeptConnectionTests(SynchronousTestCase):
    """
    L{LocalClient} with C{keepConnected} shares one event subscription and
    one req session between commands; without it each command has its own.
    """

    def setUp(self) -> None:
        """
        Fake connections; C{self.pending}, when a list, holds the connects
        until the test fires them (or fails them).
        """
        self.clock = Clock()
        self.connections: list[tuple[_FakeEvents, _JobReq, Any]] = []
        self.pending: list[Deferred[None]] | None = None
        self.jids = iter(f"2026112200000000{n:04d}" for n in range(1, 1000))

    def client(self, keepConnected: bool) -> LocalClient:
        """
        A client whose C{_connect} makes fake connections.
        """
        client = LocalClient({}, self.clock, keepConnected=keepConnected)

        async def connect(onEvent: Any, prefixes: list[str]) -> Any:
            if self.pending is not None:
                waiter: Deferred[None] = Deferred()
                self.pending.append(waiter)
                await waiter
            events, req = _FakeEvents(), _JobReq(self.jids)
            self.connections.append((events, req, onEvent))
            return events, req

        self.patch(client, "_connect", connect)
        return client

    def job(self, client: LocalClient) -> Deferred[JobResult]:
        """
        Start C{test.ping} on C{*}.
        """
        return Deferred.fromCoroutine(
            client.run("*", "test.ping", [], timeout=5, gatherJobTimeout=2.0)
        )

    def answer(self, jidIndex: int = -1, connection: int = -1) -> None:
        """
        Make minion C{a} return for a job published on a connection (by
        default the last job on the last connection).
        """
        _, req, onEvent = self.connections[connection]
        onEvent(f"salt/job/{req.jidsGiven[jidIndex]}/ret/a", {"id": "a", "return": True})

    def test_oneShotClosesConnections(self) -> None:
        """
        Without C{keepConnected}, every command opens its own connections
        and closes both when it is done.
        """
        client = self.client(keepConnected=False)
        for _ in range(2):
            d = self.job(client)
            self.answer()
            self.assertEqual(list(self.successResultOf(d).returns), ["a"])
            events, req, _ = self.connections[-1]
            self.assertTrue(events.transport.closed)
            self.assertTrue(req.transport.closed)
        self.assertEqual(len(self.connections), 2)

    def logins(self, client: LocalClient) -> list[_JobReq]:
        """
        Make C{client}'s C{_login} open fake req sessions, and return the
        list they go to.
        """
        sessions: list[_JobReq] = []

        async def login() -> _JobReq:
            sessions.append(_JobReq(self.jids))
            return sessions[-1]

        self.patch(client, "_login", login)
        return sessions

    def test_publishWithoutTheBus(self) -> None:
        """
        Without C{keepConnected}, L{LocalClient.publish} (C{--async}) opens
        only a req session, publishes on it and closes it: nothing waits for
        returns, so nothing subscribes to the event bus.
        """
        client = self.client(keepConnected=False)
        sessions = self.logins(client)
        reply = self.successResultOf(Deferred.fromCoroutine(client.publish("*", "test.ping", [])))
        [req] = sessions
        self.assertEqual(reply["jid"], req.jidsGiven[0])
        self.assertEqual([r["fun"] for r in req.requests], ["test.ping"])
        self.assertTrue(req.transport.closed)
        self.assertEqual(self.connections, [])

    def test_publishLost(self) -> None:
        """
        A publish whose req session is lost before the master answered fails
        with L{MasterUnavailable}, and the session is closed.
        """
        client = self.client(keepConnected=False)
        lost = _FakeReq([])
        lost.request = lambda payload: fail(ConnectionLost("gone"))  # type: ignore[method-assign]

        async def login() -> _FakeReq:
            return lost

        self.patch(client, "_login", login)
        d = Deferred.fromCoroutine(client.publish("*", "test.ping", []))
        failure = self.failureResultOf(d, MasterUnavailable)
        self.assertEqual(str(failure.value), "the connection to the master was lost")
        self.assertTrue(lost.transport.closed)

    def test_lostDuringRequest(self) -> None:
        """
        A request whose connection is lost before the master answered (a
        runner here, on the shared channel) fails with L{MasterUnavailable},
        which every command reports, not with Twisted's C{ConnectionLost}.
        """
        client = self.client(keepConnected=True)
        self.successResultOf(Deferred.fromCoroutine(client.publish("*", "test.ping", [])))
        [(_, req, _)] = self.connections
        req.request = lambda payload: fail(ConnectionLost("gone"))  # type: ignore[method-assign]
        d = Deferred.fromCoroutine(client.runner("manage.up", []))
        failure = self.failureResultOf(d, MasterUnavailable)
        self.assertEqual(str(failure.value), "the connection to the master was lost")

    def test_keptPublishSharesTheChannel(self) -> None:
        """
        With C{keepConnected}, L{LocalClient.publish} uses the shared
        channel, which stays open.
        """
        client = self.client(keepConnected=True)
        sessions = self.logins(client)
        for _ in range(2):
            self.successResultOf(Deferred.fromCoroutine(client.publish("*", "test.ping", [])))
        [(events, req, _)] = self.connections
        self.assertEqual(len(req.requests), 2)
        self.assertFalse(req.transport.closed)
        self.assertEqual(sessions, [])

    def test_keptConnectionReused(self) -> None:
        """
        With C{keepConnected}, the second command uses the connections the
        first opened, and they stay open until L{LocalClient.close}.
        """
        client = self.client(keepConnected=True)
        for _ in range(2):
            d = self.job(client)
            self.answer()
            self.assertEqual(list(self.successResultOf(d).returns), ["a"])
        [(events, req, _)] = self.connections
        self.assertEqual(len(req.requests), 2)
        self.assertFalse(events.transport.closed or req.transport.closed)
        client.close()
        self.assertTrue(events.transport.closed and req.transport.closed)

    def test_concurrentJobsShareConnections(self) -> None:
        """
        Jobs started while the connections are being opened wait for the
        same connections, and each gathers only its own returns.
        """
        client = self.client(keepConnected=True)
        self.pending = []
        first, second = self.job(client), self.job(client)
        self.assertEqual(len(self.pending), 1)
        self.pending.pop().callback(None)
        self.assertEqual(len(self.connections), 1)
        self.answer(jidIndex=0)
        done = [d for d in (first, second) if d.called]
        self.assertEqual(len(done), 1)
        self.answer(jidIndex=1)
        results = [self.successResultOf(d) for d in (first, second)]
        self.assertEqual(sorted(r.jid for r in results), sorted(self.connections[0][1].jidsGiven))
        self.assertEqual([list(r.returns) for r in results], [["a"], ["a"]])

    def test_openFailureReachesEveryWaiter(self) -> None:
        """
        When opening the shared connections fails, every job waiting for
        them fails with the same error, and the next job tries again.
        """
        client = self.client(keepConnected=True)
        self.pending = []
        first, second = self.job(client), self.job(client)
        self.pending.pop().errback(MasterUnavailable("no master"))
        self.failureResultOf(first, MasterUnavailable)
        self.failureResultOf(second, MasterUnavailable)
        self.pending = None
        d = self.job(client)
        self.answer()
        self.assertEqual(list(self.successResultOf(d).returns), ["a"])

    def test_cancelledJobDoesNotStopOpening(self) -> None:
        """
        Cancelling the job that started opening the shared connections
        (its timeout) fails that job only: the others waiting for them get
        them.
        """
        client = self.client(keepConnected=True)
        self.pending = []
        first, second = self.job(client), self.job(client)
        first.cancel()
        self.failureResultOf(first, CancelledError)
        self.pending.pop().callback(None)
        self.answer()
        self.assertEqual(list(self.successResultOf(second).returns), ["a"])
        self.assertEqual(len(self.connections), 1)

    def test_reconnectAfterLoss(self) -> None:
        """
        When the kept connections are lost (the master restarted), both are
        closed and the next job opens new ones.
        """
        client = self.client(keepConnected=True)
        d = self.job(client)
        self.answer()
        self.successResultOf(d)
        events, req, _ = self.connections[0]
        req.lost.callback(None)
        self.assertTrue(events.transport.closed)
        d = self.job(client)
        self.assertEqual(len(self.connections), 2)
        self.answer()
        self.assertEqual(list(self.successResultOf(d).returns), ["a"])

    def test_lossDuringJobStopsWaiting(self) -> None:
        """
        A job whose connections are lost while it waits stops waiting at
        once, without asking the silent minions with C{saltutil.find_job}
        on the dead session.
        """
        client = self.client(keepConnected=True)
        d = self.job(client)
        _, req, _ = self.connections[0]
        req.lost.callback(None)
        self.assertEqual(self.successResultOf(d).missing, ["a"])
        self.assertEqual(len(req.requests), 1)

    def test_returnsOfOtherJobsNotKept(self) -> None:
        """
        Returns of jobs this client is not publishing (another client's,
        or its own once finished) are dropped, not kept in memory while the
        connection stays open; a return that arrives while a publish waits
        for its reply is kept for that job.
        """
        client = self.client(keepConnected=True)
        d = self.job(client)
        self.answer()
        self.successResultOf(d)
        _, _, onEvent = self.connections[0]
        for n in range(10):
            onEvent(f"salt/job/2026112299999999{n:04d}/ret/a", {"return": True})
        self.answer(jidIndex=0)
        collector = client._shared.collector  # type: ignore[union-attr]
        self.assertEqual((len(collector._early), collector._gathers), (0, {}))

    def test_earlyReturnsKeptPerPublish(self) -> None:
        """
        With jobs published at once on the kept connection, a return of an
        unknown jid is kept while a publish sent before it came still waits
        for its reply (it may be that job's), and dropped once none does.
        """
        client = self.client(keepConnected=True)
        replies: list[Deferred[dict[str, Any]]] = []

        def held(payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
            d: Deferred[dict[str, Any]] = Deferred()
            replies.append(d)
            return d

        opened = self.job(client)
        self.answer()
        self.successResultOf(opened)
        _, req, onEvent = self.connections[0]
        req.request = held  # type: ignore[method-assign]
        first = self.job(client)
        onEvent("salt/job/20261122999999990001/ret/a", {"return": "other"})
        second = self.job(client)
        onEvent("salt/job/20261122999999990002/ret/a", {"return": True})
        collector = client._shared.collector  # type: ignore[union-attr]
        self.assertEqual(len(collector._early), 2)
        replies[0].callback({"jid": "20261122999999990003", "minions": ["a"], "connected": ["a"]})
        self.assertEqual(len(collector._early), 1)
        replies[1].callback({"jid": "20261122999999990002", "minions": ["a"], "connected": ["a"]})
        self.assertEqual(self.successResultOf(second).returns["a"]["return"], True)
        self.assertEqual(len(collector._early), 0)
        self.assertNoResult(first)
