# -*- test-case-name: tests.test_job_durability -*-
"""
A published job's row is in the job cache before any minion gets the job
and before the client learns its jid: a master killed in between would
otherwise leave returns that the other masters (or the master restarted)
refuse as "unknown job".
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher
from zope.interface import implementer

from salttwist import wire
from salttwist.blocking import runSynchronously
from salttwist.interfaces import IJobCache
from salttwist.master import returns
from salttwist.master.core import Master
from salttwist.master.jobcache_pgsql import JobCacheUnavailable
from salttwist.transport.reqclient import RequestError
from tests.test_master_core import MasterTestCase


@implementer(IJobCache)
class HeldJobCache:
    """
    An in-memory job cache whose job writes commit only when the test says
    so (L{commit}), or fail (L{refuse}).

    @ivar jobs: the committed jobs, by jid.
    @ivar pending: the job writes not committed yet: (jid, minions, Deferred).
    @ivar flushes: how many times C{flush} was called.
    """

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pending: list[tuple[str, dict[str, Any], list[str], Deferred[None]]] = []
        self.flushes = 0
        #: Return writes held (when L{holdReturns}): (jid, minion, Deferred).
        self.pendingReturns: list[tuple[str, str, Deferred[None]]] = []
        self.holdReturns = False
        self.returns: dict[tuple[str, str], dict[str, Any]] = {}

    def storeJob(self, jid: str, load: dict[str, Any], minions: Any) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        self.pending.append((jid, dict(load), list(minions), d))
        return d

    def commit(self) -> None:
        """
        Commit every job write held.
        """
        pending, self.pending = self.pending, []
        for jid, load, minions, d in pending:
            self.jobs[jid] = dict(load, minions=minions)
            d.callback(None)

    def refuse(self, error: Exception | None = None) -> None:
        """
        Fail every job write held, as a database that is away (with
        C{error}, by default a L{ConnectionError}).
        """
        pending, self.pending = self.pending, []
        for _, _, _, d in pending:
            d.errback(error or ConnectionError("the database went away"))

    def flush(self) -> Deferred[None]:
        self.flushes += 1
        return succeed(None)

    def storeReturn(self, jid: str, minionId: str, ret: dict[str, Any]) -> Deferred[None]:
        if not self.holdReturns:
            self.returns.setdefault((jid, minionId), ret)
            return succeed(None)
        d: Deferred[None] = Deferred()
        self.pendingReturns.append((jid, minionId, d))
        d.addCallback(lambda _: self.returns.setdefault((jid, minionId), ret) and None)
        return d

    def getJob(self, jid: str) -> Deferred[dict[str, Any] | None]:
        return succeed(self.jobs.get(jid))

    def getReturns(self, jid: str) -> Deferred[dict[str, Any]]:
        return succeed({})

    def listJobs(self, *args: Any, **kwargs: Any) -> Deferred[list[Any]]:
        return succeed([])

    def prune(self, olderThanSeconds: float) -> Deferred[int]:
        return fail(NotImplementedError())


class HeldCacheTestCase(MasterTestCase):
    """
    A master (blocking work run at once) whose job cache is a
    C{cacheClass}, as C{self.cache}.
    """

    cacheClass: type[HeldJobCache] = HeldJobCache

    def makeMaster(self, runBlocking: Any) -> Master:
        master = super().makeMaster(runSynchronously)
        self.cache = self.cacheClass()
        master.jobCache = self.cache
        return master


class OneMinionPublishTestCase(HeldCacheTestCase):
    """
    L{HeldCacheTestCase} with C{m1} subscribed and a local client session;
    L{publish} sends it a job.
    """

    def setUp(self) -> None:
        """
        Open a session and pub subscription for C{m1}, and a local client
        session.
        """
        super().setUp()
        _, _, sessionKey = self.authMinion("m1")
        _, _, self.received, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        self.client, _ = self.authClient()
        self.events.clear()

    def publish(self) -> Deferred[Any]:
        return self.request(self.client, {"cmd": "publish", "tgt": "m1", "fun": "test.ping"})


class DurableJobTests(OneMinionPublishTestCase):
    """
    C{publish} with a job cache waits for the job's row.
    """

    def test_jidAfterTheRowIsStored(self) -> None:
        """
        Until the job cache has committed the job's row, the client has no
        jid, no minion has the job, the job is not in the registry and no
        C{salt/job/<jid>/new} is fired; the job cache is asked to write at
        once. Once it has, the job goes out and the client gets its jid,
        which the cache holds.
        """
        d = self.publish()
        self.assertNoResult(d)
        [(jid, load, minions, _)] = self.cache.pending
        self.assertEqual((load["fun"], minions), ("test.ping", ["m1"]))
        self.assertEqual(self.cache.flushes, 1)
        self.assertEqual(self.received, [])
        self.assertIsNone(self.master.jobs.get(jid))
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.cache.commit()
        self.net.flush()
        reply = self.successResultOf(d)
        self.assertEqual((reply["jid"], reply["minions"]), (jid, ["m1"]))
        self.assertIn(jid, self.cache.jobs)
        self.assertEqual(len(self.received), 1)
        self.assertEqual(
            [tag for tag, _ in self.eventsTagged("salt/job/")], [f"salt/job/{jid}/new"]
        )

    def test_notStoredRefused(self) -> None:
        """
        A job whose row the job cache could not write is refused, saying
        so, and never published.
        """
        d = self.publish()
        jid = self.cache.pending[0][0]
        self.cache.refuse()
        self.net.flush()
        message = str(self.failureResultOf(d, RequestError).value)
        self.assertIn("job refused: the job cache could not store it", message)
        self.assertIn("the database went away", message)
        self.assertEqual(self.received, [])
        self.assertIsNone(self.master.jobs.get(jid))
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.flushLoggedErrors(ConnectionError)

    def test_unavailableRefusedInALine(self) -> None:
        """
        A job refused because the job cache's server is away (the cache's
        L{JobCacheError}) is logged in one line naming the cache's error,
        without a traceback; the client is told the same error.
        """
        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        d = self.publish()
        self.cache.refuse(JobCacheUnavailable("cannot connect to the job cache db:5432/salt"))
        self.net.flush()
        message = str(self.failureResultOf(d, RequestError).value)
        self.assertIn("job refused: the job cache could not store it", message)
        self.assertIn("db:5432/salt", message)
        [line] = [e for e in logged if "did not store it" in e.get("log_format", "")]
        self.assertNotIn("log_failure", line)
        self.assertIn("db:5432/salt", line["error"])


class DurableReturnTests(HeldCacheTestCase):
    """
    A minion's return is acknowledged only once the job cache holds it: a
    master killed before the write leaves the return with the minion, which
    sends it again.
    """

    def setUp(self) -> None:
        """
        A session for C{m1}, and a job to it committed in the cache.
        """
        super().setUp()
        self.minion, _, sessionKey = self.authMinion("m1")
        _, _, self.received, answer = self.subscribe("m1", sessionKey)
        client, _ = self.authClient()
        d = self.request(client, {"cmd": "publish", "tgt": "m1", "fun": "test.ping"})
        self.cache.commit()
        self.net.flush()
        self.jid = self.successResultOf(d)["jid"]
        self.cache.holdReturns = True

    def sendReturn(self) -> Deferred[Any]:
        return self.request(
            self.minion, {"cmd": "_return", "id": "m1", "jid": self.jid, "return": True}
        )

    def test_acknowledgedOnceStored(self) -> None:
        """
        No acknowledgement while the return's write is pending; one (held
        back as usual) once it is committed. The event is fired at once.
        """
        d = self.sendReturn()
        self.assertNoResult(d)
        self.assertEqual(
            [tag for tag, _ in self.eventsTagged(f"salt/job/{self.jid}/ret/")],
            [f"salt/job/{self.jid}/ret/m1"],
        )
        [(_, _, stored)] = self.cache.pendingReturns
        stored.callback(None)
        self.master.clock.advance(1.0)
        self.net.flush()
        self.assertIs(self.successResultOf(d)["ret"], True)
        self.assertIn((self.jid, "m1"), self.cache.returns)

    def test_notStoredFiredOnce(self) -> None:
        """
        A return whose write failed was fired on the bus when it came: the
        copy the minion sends again is stored, not fired a second time;
        a third copy is refused as a duplicate.
        """
        d = self.sendReturn()
        [(_, _, stored)] = self.cache.pendingReturns
        stored.errback(ConnectionError("the database went away"))
        self.net.flush()
        self.failureResultOf(d, RequestError)
        self.flushLoggedErrors(ConnectionError)
        self.cache.holdReturns = False
        self.assertIs(self.successResultOf(self.sendReturn())["ret"], True)
        self.assertIn((self.jid, "m1"), self.cache.returns)
        self.assertEqual(
            [tag for tag, _ in self.eventsTagged(f"salt/job/{self.jid}/ret/")],
            [f"salt/job/{self.jid}/ret/m1"],
        )
        self.failureResultOf(self.sendReturn(), RequestError)
        self.assertEqual(self.master.minionRequests._firedNotStored, {})

    def test_firedNotStoredBounded(self) -> None:
        """
        At most L{MAX_FIRED_NOT_STORED} returns are remembered as fired but
        not stored: past that the oldest is forgotten.
        """
        self.patch(returns, "MAX_FIRED_NOT_STORED", 2)
        requests = self.master.minionRequests
        requests._firedNotStored = {("j1", "a"): None, ("j2", "b"): None}
        d = self.sendReturn()
        [(_, _, stored)] = self.cache.pendingReturns
        stored.errback(ConnectionError("the database went away"))
        self.net.flush()
        self.failureResultOf(d, RequestError)
        self.flushLoggedErrors(ConnectionError)
        self.assertEqual(list(requests._firedNotStored), [("j2", "b"), (self.jid, "m1")])

    def test_notStoredSentAgain(self) -> None:
        """
        A return whose write failed is refused with C{return not stored}
        (the minion keeps it) and is not counted as returned: sent again,
        it is taken and stored.
        """
        d = self.sendReturn()
        [(_, _, stored)] = self.cache.pendingReturns
        stored.errback(ConnectionError("the database went away"))
        self.net.flush()
        message = str(self.failureResultOf(d, RequestError).value)
        self.assertTrue(message.startswith(wire.RETURN_NOT_STORED), message)
        self.flushLoggedErrors(ConnectionError)
        self.cache.holdReturns = False
        self.assertIs(self.successResultOf(self.sendReturn())["ret"], True)
        self.assertIn((self.jid, "m1"), self.cache.returns)
