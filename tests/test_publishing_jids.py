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

from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher

from salttwist.blocking import runSynchronously
from salttwist.jid import JidGenerator
from salttwist.master.core import Master
from salttwist.transport.reqclient import RequestError
from tests.test_job_durability import HeldJobCache
from tests.test_master_core import MasterTestCase

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

    def reserveJob(self, jid: str, load: dict[str, Any], minions: Any) -> Deferred[bool]:
        self.reservations.append(jid)
        if jid in self.taken or jid in self.jobs:
            return succeed(False)
        self.jobs[jid] = dict(load, minions=list(minions))
        return succeed(True)


class ReservedJidTests(MasterTestCase):
    """
    C{publish} with a job cache that reserves jids.
    """

    def makeMaster(self, runBlocking: Any) -> Master:
        master = super().makeMaster(runSynchronously)
        self.cache = ReservingJobCache()
        master.jobCache = self.cache
        return master

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
        self.assertEqual(self.received, [])
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.flushLoggedErrors()
