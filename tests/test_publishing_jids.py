# -*- test-case-name: tests.test_publishing_jids -*-
"""
Tests for the jid a published job gets when the job cache is shared by the
masters of a cluster (it has C{reserveJob}): the database gives each jid to
one job only, and a job whose jid another master's job holds takes the
next one before anyone learns it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher

from salttwist.jid import JidGenerator
from salttwist.transport.reqclient import RequestError
from tests.test_job_durability import HeldCacheTestCase, HeldJobCache, OneMinionPublishTestCase

#: The microsecond this master's clock is stopped at.
INSTANT = datetime(2026, 11, 27, 6, 0, 0, 123456)


class ReservingJobCache(HeldJobCache):
    """
    A shared job cache in memory: C{reserveJob} gives a jid to the first
    job that asks; L{taken} jids are another master's jobs already.

    @ivar reservations: the jids asked for, in order.
    """

    def __init__(self) -> None:
        super().__init__()
        self.taken: set[str] = set()
        self.reservations: list[str] = []
        #: The error every reservation fails with, if set (the server away).
        self.unavailable: Exception | None = None

    def reserveJob(self, jid: str, load: dict[str, Any], minions: Any) -> Deferred[bool]:
        self.reservations.append(jid)
        if self.unavailable is not None:
            return fail(self.unavailable)
        if jid in self.taken or jid in self.jobs:
            return succeed(False)
        self.jobs[jid] = dict(load, minions=list(minions))
        return succeed(True)


class ReservedJidTests(OneMinionPublishTestCase):
    """
    C{publish} with a job cache that reserves jids.
    """

    cacheClass = ReservingJobCache

    def test_reservedNotStored(self) -> None:
        """
        The job's row is reserved (not written with C{storeJob}); the client
        gets the jid reserved.
        """
        d = self.publish()
        self.net.flush()
        reply = self.successResultOf(d)
        self.assertEqual(self.cache.reservations, [reply["jid"]])
        self.assertEqual(self.cache.pending, [])
        self.assertIn(reply["jid"], self.cache.jobs)
        self.assertEqual(len(self.received), 1)

    def test_takenJidBumped(self) -> None:
        """
        When the jid made is already another master's job, the job takes
        the next jids until one is free: the client, the registry, the
        minions and C{salt/job/<jid>/new} see only that one, and the
        collision is logged.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        jids = self.master.jobPublisher.jids = JidGenerator(now=lambda: INSTANT)
        made = int(jids.next())
        # The next two jids this master makes are other masters' jobs.
        self.cache.taken = {f"{made + 1:020d}", f"{made + 2:020d}"}
        d = self.publish()
        self.net.flush()
        reply = self.successResultOf(d)
        self.assertEqual(reply["jid"], f"{made + 3:020d}")
        self.assertEqual(self.cache.reservations, [f"{made + n:020d}" for n in (1, 2, 3)])
        self.assertEqual(self.cache.jobs[reply["jid"]]["fun"], "test.ping")
        for taken in self.cache.taken:
            self.assertIsNone(self.master.jobs.get(taken))
            self.assertNotIn(taken, self.cache.jobs)
        self.assertIsNotNone(self.master.jobs.get(reply["jid"]))
        self.assertEqual(
            [tag for tag, _ in self.eventsTagged("salt/job/")], [f"salt/job/{reply['jid']}/new"]
        )
        self.assertEqual(len(self.received), 1)
        warned = [e for e in observer if "is already another job's" in e.get("log_format", "")]
        self.assertEqual([e["jid"] for e in warned], sorted(self.cache.taken))

    def test_noFreeJidRefused(self) -> None:
        """
        A job that finds no free jid in
        L{salttwist.master.publishing.JID_ATTEMPTS} is refused, saying so,
        and never published.
        """
        from salttwist.master.publishing import JID_ATTEMPTS

        jids = self.master.jobPublisher.jids = JidGenerator(now=lambda: INSTANT)
        made = int(jids.next())
        self.cache.taken = {f"{made + n:020d}" for n in range(1, JID_ATTEMPTS + 1)}
        d = self.publish()
        self.net.flush()
        message = str(self.failureResultOf(d, RequestError).value)
        self.assertIn(f"{JID_ATTEMPTS} jids in a row were other jobs'", message)
        # Said once, not wrapped in a second refusal.
        self.assertEqual(message.count("job refused"), 1, message)
        self.assertEqual(self.received, [])
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.flushLoggedErrors()


class ReqJobReservedTests(HeldCacheTestCase):
    """
    The job a master makes for a C{salttwist-call} return (jid C{req})
    reserves its jid in a shared job cache as a published job does.
    """

    cacheClass = ReservingJobCache

    def setUp(self) -> None:
        super().setUp()
        self.minion, _, _ = self.authMinion("m1")
        self.events.clear()

    def reqReturn(self) -> Deferred[Any]:
        return self.request(
            self.minion,
            {
                "cmd": "_return",
                "id": "m1",
                "jid": "req",
                "fun": "test.echo",
                "fun_args": ["hi"],
                "return": "hi",
            },
        )

    def test_reserved(self) -> None:
        """
        The new job's row is reserved (not written with C{storeJob}) before
        anything else; the return is stored under that jid and the minion
        is answered with it.
        """
        reply = self.successResultOf(self.reqReturn())
        self.assertEqual(self.cache.reservations, [reply["jid"]])
        self.assertEqual(self.cache.pending, [])
        job = self.cache.jobs[reply["jid"]]
        self.assertEqual((job["fun"], job["arg"], job["minions"]), ("test.echo", ["hi"], ["m1"]))
        self.assertIn((reply["jid"], "m1"), self.cache.returns)
        self.assertEqual(
            [tag for tag, _ in self.eventsTagged("salt/job/")],
            [f"salt/job/{reply['jid']}/new", f"salt/job/{reply['jid']}/ret/m1"],
        )

    def test_takenJidBumped(self) -> None:
        """
        A jid another master's job holds is not taken: the job takes the
        next free one, and only that one is seen.
        """
        jids = self.master.jobPublisher.jids = JidGenerator(now=lambda: INSTANT)
        made = int(jids.next())
        self.cache.taken = {f"{made + 1:020d}"}
        reply = self.successResultOf(self.reqReturn())
        self.assertEqual(reply["jid"], f"{made + 2:020d}")
        self.assertIsNone(self.master.jobs.get(f"{made + 1:020d}"))
        self.assertNotIn((f"{made + 1:020d}", "m1"), self.cache.returns)
        self.assertIn((reply["jid"], "m1"), self.cache.returns)
        self.assertEqual(
            [tag for tag, _ in self.eventsTagged("salt/job/")],
            [f"salt/job/{reply['jid']}/new", f"salt/job/{reply['jid']}/ret/m1"],
        )
        self.flushLoggedErrors()

    def test_notReservedNotStored(self) -> None:
        """
        A reservation that fails (the database away) answers the return
        'return not stored', so the minion sends it again; no job is
        recorded and nothing is fired.
        """
        from salttwist import wire
        from salttwist.master.jobcache_pgsql import JobCacheUnavailable

        self.cache.unavailable = JobCacheUnavailable("the server is away")
        message = str(self.failureResultOf(self.reqReturn(), RequestError).value)
        self.assertIn(wire.RETURN_NOT_STORED, message)
        self.assertEqual(len(self.cache.reservations), 1)
        self.assertEqual(self.cache.jobs, {})
        self.assertEqual(self.cache.returns, {})
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.assertIsNone(self.master.jobs.get(self.cache.reservations[0]))
        self.cache.unavailable = None
        reply = self.successResultOf(self.reqReturn())
        self.assertIn((reply["jid"], "m1"), self.cache.returns)
        self.flushLoggedErrors()
