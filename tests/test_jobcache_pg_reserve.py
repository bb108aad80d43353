# -*- test-case-name: tests.test_jobcache_pg_reserve -*-
"""
Tests for jids unique across the masters of a cluster that share one
PostgreSQL job cache: L{PostgresJobCache.reserveJob} and
L{salttwist.master.publishing.reserveJid}, against a real server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import gatherResults
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import TestCase

from salttwist.jid import JidGenerator
from salttwist.master.jobcache_pg import PostgresJobCache
from salttwist.master.jobcache_pgsql import JobCacheUnavailable, PostgresJobCacheDatabase
from salttwist.master.jobcachequeue import JobCacheQueueFull
from salttwist.master.publishing import JobNotStored, reserveJid
from tests._postgres import temporaryDatabase
from tests.test_jobcache_contract import NOW

#: The microsecond both masters' clocks are forced to.
INSTANT = datetime(2026, 11, 27, 6, 0, 0, 123456)


def _load(jid: str) -> dict[str, Any]:
    """
    The same job, as two masters could be asked for it at once (a cron on
    each).
    """
    return {
        "jid": jid,
        "fun": "test.ping",
        "arg": [],
        "tgt": "*",
        "tgt_type": "glob",
        "user": "root",
    }


class ReserveJidTests(TestCase):
    """
    Two masters (two caches, two jid generators) on one database.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)
        self.options = temporaryDatabase(self)

    async def _cache(self) -> PostgresJobCache:
        cache = PostgresJobCache(self.options, reactor, clock=self.clock)
        self.addCleanup(cache.close)
        await cache.whenOpen()
        return cache

    def _count(self, jid: str) -> int:
        import psycopg

        with psycopg.connect(autocommit=True, **self.options) as connection:
            row = connection.execute(
                "SELECT count(*) FROM salttwist_jobs WHERE jid = %s", (jid,)
            ).fetchone()
        assert row is not None
        return int(row[0])

    async def test_sameMicrosecondDifferentJids(self) -> None:
        """
        Two masters whose generators make the same jid in the same
        microsecond, reserving at once for two identical jobs: one job gets
        the jid, the other the next one; both are stored, each with its own
        minions.
        """
        first, second = await self._cache(), await self._cache()
        jidsA, jidsB = JidGenerator(now=lambda: INSTANT), JidGenerator(now=lambda: INSTANT)
        loadA, loadB = _load(jidsA.next()), _load(jidsB.next())
        self.assertEqual(loadA["jid"], loadB["jid"])
        made = loadA["jid"]
        taken = await gatherResults(
            [
                reserveJid(first, jidsA, loadA, ["web1"]),
                reserveJid(second, jidsB, loadB, ["web1"]),
            ]
        )
        self.assertEqual(sorted(taken), [made, f"{int(made) + 1:020d}"])
        self.assertEqual([loadA["jid"], loadB["jid"]], taken)
        for jid in taken:
            job = await first.getJob(jid)
            self.assertIsNotNone(job)
            self.assertEqual((job["fun"], job["minions"]), ("test.ping", ["web1"]))
            self.assertEqual(self._count(jid), 1)

    async def test_takenJidNotOverwritten(self) -> None:
        """
        A jid another master's job holds is not given to a second job: the
        reservation answers C{False} and stores nothing; the first job is
        unchanged.
        """
        first, second = await self._cache(), await self._cache()
        jid = JidGenerator(now=lambda: INSTANT).next()
        self.assertTrue(await first.reserveJob(jid, _load(jid), ["a"]))
        other = dict(_load(jid), fun="cmd.run")
        self.assertFalse(await second.reserveJob(jid, other, ["b"]))
        job = await second.getJob(jid)
        self.assertEqual((job["fun"], job["minions"]), ("test.ping", ["a"]))
        self.assertEqual(self._count(jid), 1)

    async def test_replayStoredOnce(self) -> None:
        """
        The job one master reserved, stored again as the other masters
        receive it from the broker (C{storeJob}), is stored once and is no
        collision. A new reservation of its jid, even for the same load, is
        another job's: refused.
        """
        first, second = await self._cache(), await self._cache()
        jids = JidGenerator(now=lambda: INSTANT)
        load = _load(jids.next())
        jid = await reserveJid(first, jids, load, ["a"])
        await second.storeJob(jid, load, ["a"])
        await first.storeJob(jid, load, ["a"])
        self.assertEqual(self._count(jid), 1)
        self.assertEqual((await second.getJob(jid))["minions"], ["a"])
        self.assertFalse(await first.reserveJob(jid, load, ["a"]))

    def _terminate(self, pid: int) -> None:
        """
        End the server process of the connection C{pid} from another
        connection, as a server restart or a lost network path would.
        """
        import psycopg

        with psycopg.connect(autocommit=True, **self.options) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))

    def test_reservationRetriedFindsItsOwnRow(self) -> None:
        """
        A reservation whose connection breaks after the commit, before its
        answer is read, is run again by the cache on a new connection; the
        retry finds the row the first attempt stored under the same token:
        the job holds the jid (stored once). Another token does not.
        """
        database = PostgresJobCacheDatabase(self.options)
        self.addCleanup(database.close)
        jid = JidGenerator(now=lambda: INSTANT).next()
        row = (jid, "test.ping", b"\x90", "*", "glob", "root", b"\x91\xa1a", NOW)

        def breakConnection(connection: Any) -> None:
            database.afterReservation = None
            self._terminate(connection.info.backend_pid)
            # The committed statement's answer is lost with the connection.
            connection.execute("SELECT 1")

        database.afterReservation = breakConnection
        self.assertTrue(database.reserveJob(row, "token-1"))
        self.assertIsNone(database.afterReservation)
        self.assertEqual(database.connections, 2)
        self.assertEqual(self._count(jid), 1)
        self.assertFalse(database.reserveJob(row, "token-2"))
        self.assertEqual(self._count(jid), 1)

    def test_reservationCutAfterCommitReleased(self) -> None:
        """
        A reservation whose connection the cache cuts (the server did not
        answer within the operation timeout) after its commit fails with
        L{JobCacheUnavailable}, so its job is refused; the row it may have
        stored is deleted before anything else once a connection works
        again: the refused job is never read or listed as a job. A jid
        another job holds is not touched by that.
        """
        times = [0.0]
        database = PostgresJobCacheDatabase(self.options, monotonic=lambda: times[0])
        self.addCleanup(database.close)
        jids = JidGenerator(now=lambda: INSTANT)
        jid, other = jids.next(), jids.next()
        row = (jid, "test.ping", b"\x90", "*", "glob", "root", b"\x91\xa1a", NOW)
        otherRow = (other,) + row[1:]
        self.assertTrue(database.runOperation(1, "reserveJob", otherRow, "token-other"))

        def cutConnection(connection: Any) -> None:
            database.afterReservation = None
            database.cut(2, 5)
            # The committed statement's answer never comes: the cut ends
            # the wait for it.
            connection.execute("SELECT 1")

        database.afterReservation = cutConnection
        with self.assertRaises(JobCacheUnavailable) as raised:
            database.runOperation(2, "reserveJob", row, "token-1")
        self.assertIn("did not answer within 5 s", str(raised.exception))
        self.assertEqual(self._count(jid), 1)
        # The reservation of the other jid under this token is left alone.
        database._failedReservations[other] = "token-1"
        times[0] = 60.0
        self.assertIsNone(database.runOperation(3, "getJob", jid))
        self.assertEqual(self._count(jid), 0)
        self.assertEqual(self._count(other), 1)
        self.assertEqual(
            [j["jid"] for j in database.listJobs(None, None, None, None, None)], [other]
        )

    def test_releaseErrorNotRepeated(self) -> None:
        """
        A failed reservation whose row cannot be deleted for a reason other
        than the connection (here a jid PostgreSQL refuses as text) is
        logged at critical level and given up: the operations after it run,
        instead of each failing on the same delete.
        """
        database = PostgresJobCacheDatabase(self.options)
        self.addCleanup(database.close)
        jid = JidGenerator(now=lambda: INSTANT).next()
        row = (jid, "test.ping", b"\x90", "*", "glob", "root", b"\x91\xa1a", NOW)
        self.assertTrue(database.runOperation(1, "reserveJob", row, "token-1"))
        database._failedReservations["bad\x00jid"] = "token-2"
        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.assertIsNotNone(database.runOperation(2, "getJob", jid))
        self.assertEqual(database._failedReservations, {})
        critical = [e for e in logged if e.get("log_level") == LogLevel.critical]
        self.assertEqual(len(critical), 1, list(logged))
        self.assertIn("could not delete the rows", critical[0]["log_format"])
        self.assertIsNotNone(database.runOperation(3, "getJob", jid))

    async def test_jobsStoredElsewhereAreNotReservations(self) -> None:
        """
        A jid held by a job stored with C{storeJob} (made by another master,
        or by a master before this version) is not free for a reservation.
        """
        cache = await self._cache()
        jid = JidGenerator(now=lambda: INSTANT).next()
        await cache.storeJob(jid, _load(jid), ["a"])
        self.assertFalse(await cache.reserveJob(jid, _load(jid), ["a"]))

    async def test_refusedAfterAttempts(self) -> None:
        """
        When every jid tried is another job's, the job is refused with
        L{JobNotStored} after C{attempts} of them, and nothing is stored
        for it.
        """
        first, second = await self._cache(), await self._cache()
        jidsA, jidsB = JidGenerator(now=lambda: INSTANT), JidGenerator(now=lambda: INSTANT)
        for _ in range(3):
            load = _load(jidsA.next())
            self.assertEqual(await reserveJid(first, jidsA, load, ["a"]), load["jid"])
        load = _load(jidsB.next())
        error = await self.assertFailure(
            reserveJid(second, jidsB, load, ["b"], attempts=3), JobNotStored
        )
        self.assertIn("3 jids in a row were other jobs'", str(error))
        self.assertEqual(len(await second.listJobs()), 3)

    async def test_reservationRefusedPastQueueBound(self) -> None:
        """
        A new job's reservation is bounded like the writes: while
        C{maxQueuedCalls} operations wait (a server that hangs holds the
        one in progress), it fails at once with L{JobCacheQueueFull}, so
        the job is refused to its client instead of waiting without end;
        nothing is stored for it.
        """
        cache = await self._cache()
        cache._operations.maxQueuedCalls = 0
        jids = JidGenerator(now=lambda: INSTANT)
        load = _load(jids.next())
        await self.assertFailure(reserveJid(cache, jids, load, ["a"]), JobCacheQueueFull)
        await self.assertFailure(cache.getJob(load["jid"]), JobCacheQueueFull)
        self.assertEqual(self._count(load["jid"]), 0)

    async def test_invalidArgumentsFail(self) -> None:
        """
        A reservation checks its arguments as C{storeJob} does.
        """
        cache = await self._cache()
        await self.assertFailure(cache.reserveJob("1", _load("1"), ["a"]), ValueError)
        jid = JidGenerator(now=lambda: INSTANT).next()
        await self.assertFailure(
            cache.reserveJob(jid, dict(_load(jid), fun="a\x00b"), ["a"]), ValueError
        )
        await self.assertFailure(cache.reserveJob(jid, _load(jid), "a"), ValueError)
