# -*- test-case-name: tests.test_jobcache_pg_long -*-
"""
Tests for the PostgreSQL job cache's long operations and its recovery
(L{salttwist.master.jobcache_pg}): a prune runs in bounded steps, each an
operation of its own, so none comes near the operation timeout however
many rows go; a long listing whose fetches the server answers is not cut;
after an outage the back-off is at most
L{salttwist.master.jobcache_pgsql.RECONNECT_MAX} and a new job's
reservation tries at once, at most once a second. Against the real
PostgreSQL server (a database of each test's own); time on a L{Clock}.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from salttwist.master import jobcache_pgsql
from salttwist.master.jobcache_pg import PostgresJobCache
from salttwist.master.jobcache_pgsql import (
    EARLY_RECONNECT,
    RECONNECT_MAX,
    JobCacheUnavailable,
    PostgresJobCacheDatabase,
    _jidAt,
)
from tests._postgres import temporaryDatabase
from tests.test_jobcache_contract import NOW, jid, load

#: The operation timeout of these tests, in seconds of their clock.
TIMEOUT = 10.0


def _advanceFromThread(clock: Clock, seconds: float) -> None:
    """
    From the cache's thread: advance C{clock} on the reactor by C{seconds}
    (as if the step just run had taken them) and wait until it has, so the
    operation's timer has seen it before the operation goes on.
    """
    advanced = threading.Event()

    def advance() -> None:
        try:
            clock.advance(seconds)
        finally:
            advanced.set()

    reactor.callFromThread(advance)
    advanced.wait()


class SlowStepsDatabase(PostgresJobCacheDatabase):
    """
    A database whose prune steps each take 0.6 operation timeouts of the
    test's clock, and whose listing fetches each take 0.6 too.

    @ivar steps: the C{(rows, more)} of each row-by-row prune step.
    @ivar countProgress: whether a fetch counts as progress (as the real
        one does); if not, a long listing is cut like a hung one.
    """

    def __init__(self, options: dict[str, Any], clock: Clock) -> None:
        super().__init__(options)
        self.clock = clock
        self.steps: list[tuple[int, bool]] = []
        self.countProgress = True

    def pruneJobsStep(self, cutoff: float, chunk: int = 10000) -> tuple[int, bool]:
        result = super().pruneJobsStep(cutoff, chunk)
        self.steps.append(result)
        _advanceFromThread(self.clock, 0.6 * TIMEOUT)
        return result

    def pruneOrphansStep(self, cutoff: float, chunk: int = 10000) -> tuple[int, bool]:
        result = super().pruneOrphansStep(cutoff, chunk)
        self.steps.append(result)
        _advanceFromThread(self.clock, 0.6 * TIMEOUT)
        return result

    def progressed(self) -> None:
        if self.countProgress:
            super().progressed()
        _advanceFromThread(self.clock, 0.6 * TIMEOUT)


class LongOperationTests(TestCase):
    """
    Long operations are not cut by the operation timeout.
    """

    timeout = 120

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)
        self.options = temporaryDatabase(self)
        self.database = SlowStepsDatabase(self.options, self.clock)

    async def _cache(self, **kwargs: Any) -> PostgresJobCache:
        cache = PostgresJobCache(
            self.options,
            reactor,
            clock=self.clock,
            database=self.database,
            operationTimeout=TIMEOUT,
            **kwargs,
        )
        self.addCleanup(cache.close)
        await cache.whenOpen()
        return cache

    async def test_pruneInBoundedSteps(self) -> None:
        """
        A prune deletes at most C{pruneChunk} rows of each table a step,
        each step an operation of its own: ten steps of 0.6 timeouts each
        (6 timeouts in all) remove every expired row, jobs, their returns
        and returns without a job, and a write called meanwhile runs
        between two steps.
        """
        cache = await self._cache(pruneChunk=3)
        expired = [jid(n) for n in range(1, 5)]
        for n, job in enumerate(expired):
            await cache.storeJob(job, load(), ["a", "b", "c", "d", "e"])
            for minion in "abcde":
                await cache.storeReturn(job, minion, {"return": n})
        # Returns of a job never stored, whose jid is older than the cutoff.
        orphan = _jidAt(NOW + 10)
        for minion in "abcd":
            await cache.storeReturn(orphan, minion, {"return": "orphan"})
        self.clock.advance(100)
        kept = jid(99)
        await cache.storeJob(kept, load(), ["a"])
        await cache.storeReturn(kept, "a", {"return": "kept"})
        pruning = cache.prune(50)
        # Called after the prune started: it runs between its steps.
        written = cache.storeReturn(kept, "b", {"return": "meanwhile"})
        stepsBeforeWrite: list[int] = []
        written.addCallback(lambda _: stepsBeforeWrite.append(len(self.database.steps)))
        removed = await pruning
        self.assertEqual(len(stepsBeforeWrite), 1)
        self.assertLess(stepsBeforeWrite[0], len(self.database.steps))
        self.assertEqual(removed, 4 + 4 * 5 + 4)
        self.assertGreater(len(self.database.steps), 4)
        self.assertTrue(all(rows <= 2 * 3 for rows, _ in self.database.steps))
        self.assertGreater(self.clock.seconds() - NOW - 100, 4 * TIMEOUT)
        self.assertEqual(self.database.connections, 1)
        self.assertEqual([j["jid"] for j in await cache.listJobs()], [kept])
        self.assertEqual(sorted(await cache.getReturns(kept)), ["a", "b"])
        for job in [*expired, orphan]:
            self.assertEqual(await cache.getReturns(job), {})

    async def test_prunedAtOnceAsBefore(self) -> None:
        """
        The database's own C{prune} (all steps in a row) removes what the
        cache's does.
        """
        cache = await self._cache(pruneChunk=2)
        for n in range(1, 4):
            await cache.storeJob(jid(n), load(), ["a", "b", "c"])
            for minion in "abc":
                await cache.storeReturn(jid(n), minion, {"return": n})
        await cache.flush()
        database = PostgresJobCacheDatabase(self.options)
        self.addCleanup(database.close)
        self.assertEqual(database.prune(NOW + 1, chunk=2), 3 + 9)
        self.assertEqual(await cache.listJobs(), [])

    async def test_longListingNotCut(self) -> None:
        """
        A listing fetched in several round trips, each 0.6 timeouts long
        (2.4 in all), is not cut: each answer counts as progress.
        """
        self.patch(jobcache_pgsql, "LIST_FETCH_ROWS", 2)
        cache = await self._cache()
        for n in range(1, 8):
            await cache.storeJob(jid(n), load(), ["a"])
        before = self.clock.seconds()
        listed = await cache.listJobSummaries()
        self.assertEqual([row[0] for row in listed], [jid(n) for n in range(7, 0, -1)])
        self.assertGreater(self.clock.seconds() - before, 2 * TIMEOUT)
        self.assertEqual([j["jid"] for j in await cache.listJobs(limit=5)], listedJids(5))

    async def test_noProgressCut(self) -> None:
        """
        The same listing whose fetches did not count as progress is cut
        after one timeout, as an operation a hung server leaves unanswered.
        """
        self.patch(jobcache_pgsql, "LIST_FETCH_ROWS", 2)
        cache = await self._cache()
        for n in range(1, 8):
            await cache.storeJob(jid(n), load(), ["a"])
        self.database.countProgress = False
        with self.assertRaises(JobCacheUnavailable) as raised:
            await cache.listJobSummaries()
        self.assertIn(f"did not answer within {TIMEOUT:g} s", str(raised.exception))
        self.flushLoggedErrors(JobCacheUnavailable)


def listedJids(count: int) -> list[str]:
    """
    @return: the newest C{count} of the seven jobs of
        L{LongOperationTests.test_longListingNotCut}, newest first.
    """
    return [jid(n) for n in range(7, 7 - count, -1)]


class RecoveryTests(TestCase):
    """
    After an outage the cache is back within L{RECONNECT_MAX} seconds, and
    at once for a new job.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)
        self.good = temporaryDatabase(self)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # A port nothing listens on: every attempt is refused at once.
        self.database = PostgresJobCacheDatabase(
            {**self.good, "port": port}, monotonic=self.clock.seconds
        )
        self.cache = PostgresJobCache(self.good, reactor, clock=self.clock, database=self.database)
        self.addCleanup(self.cache.close)

    async def _outage(self) -> None:
        """
        Fail to connect until the back-off is at its longest.
        """
        with self.assertRaises(JobCacheUnavailable):
            await self.cache.whenOpen()
        for _ in range(10):
            self.clock.advance(RECONNECT_MAX)
            with self.assertRaises(JobCacheUnavailable):
                await self.cache.getJob(jid(1))
        self.flushLoggedErrors(JobCacheUnavailable)

    async def test_backoffCapped(self) -> None:
        """
        However long the outage, the next attempt is at most
        L{RECONNECT_MAX} (5) seconds away; once the server is back, an
        operation after that connects.
        """
        await self._outage()
        self.assertEqual(RECONNECT_MAX, 5.0)
        with self.assertRaises(JobCacheUnavailable) as raised:
            await self.cache.getJob(jid(1))
        self.assertIn(f"next attempt in {RECONNECT_MAX:.1f} s", str(raised.exception))
        self.database.options = self.good
        self.clock.advance(RECONNECT_MAX)
        self.assertIsNone(await self.cache.getJob(jid(1)))

    async def test_newJobTriesEarly(self) -> None:
        """
        Within the back-off, a new job's reservation tries to connect if
        the last attempt was L{EARLY_RECONNECT} (1) seconds ago or more
        (other operations wait for the back-off): a job published just
        after the server came back is taken. A reservation that fails so
        makes the next one wait another second.
        """
        await self._outage()
        self.clock.advance(EARLY_RECONNECT)
        with self.assertRaises(JobCacheUnavailable) as raised:
            await self.cache.reserveJob(jid(1), load(), ["a"])
        self.assertIn("cannot connect", str(raised.exception))
        self.clock.advance(EARLY_RECONNECT / 2)
        with self.assertRaises(JobCacheUnavailable) as raised:
            await self.cache.reserveJob(jid(1), load(), ["a"])
        self.assertIn("next attempt in", str(raised.exception))
        self.database.options = self.good
        with self.assertRaises(JobCacheUnavailable):
            await self.cache.getJob(jid(1))
        self.clock.advance(EARLY_RECONNECT / 2)
        self.assertTrue(await self.cache.reserveJob(jid(1), load(), ["a"]))
        self.assertEqual((await self.cache.getJob(jid(1)))["jid"], jid(1))
        self.flushLoggedErrors(JobCacheUnavailable)
