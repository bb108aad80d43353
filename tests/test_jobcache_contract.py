# -*- test-case-name: tests.test_jobcache_contract -*-
"""
The contract of L{IJobCache}, run against every implementation.

L{JobCacheTests} is what every implementation, fakes included, must do:
provide the interface, keep jobs and returns as stored (the first of each
wins), read its own writes, list jobs newest first with Salt's filters, and
refuse an invalid jid on a read. L{RealJobCacheTests} is what only the real
caches do besides: check every argument before storing, prune, and refuse
work once closed.

The implementations:
  - L{SQLiteJobCache}: the SQL on a thread of this process;
  - L{WorkerJobCache} over an L{InlineWorkerPool}: the job cache tasks run
    in this process;
  - L{WorkerJobCache} with its real worker process;
  - L{tests.test_runners_jobs.FakeJobCache}: the in-memory cache the
    runners' tests use;
  - and, for its reads only, the read-only cache a runner gets in a
    worker (L{salttwist.master.runnertasks.jobCacheReader}).

Both real caches share L{BatchingJobCache}, which these tests therefore
cover twice, once over each backend. Detailed tests of each stay in
L{tests.test_jobcache} and L{tests.test_jobcache_worker}.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from zope.interface.verify import verifyObject

from salttwist.interfaces import IJobCache
from salttwist.master import jobcachetasks
from salttwist.master.jobcache import JobCacheClosed, SQLiteJobCache
from salttwist.master.jobcacheworker import WorkerJobCache
from salttwist.workers.pool import InlineWorkerPool
from tests.test_runners_jobs import FakeJobCache

NOW = 1_700_000_000.0


def jid(n: int) -> str:
    """
    @return: the C{n}th valid jid of 2024-01-01.
    """
    return f"20240101000000{n:06d}"


def load(fun: str = "test.ping", tgt: Any = "*", **extra: Any) -> dict[str, Any]:
    """
    @return: a job load as the master stores it.
    """
    result: dict[str, Any] = {
        "fun": fun,
        "arg": [],
        "tgt": tgt,
        "tgt_type": "glob",
        "user": "root",
    }
    result.update(extra)
    return result


class _NoTriggers:
    """
    A reactor for caches whose backend needs none: the shutdown trigger a
    L{BatchingJobCache} registers is kept, not registered.
    """

    def addSystemEventTrigger(self, *args: Any) -> object:
        return args

    def removeSystemEventTrigger(self, trigger: Any) -> None:
        pass


class JobCacheTests:
    """
    What every L{IJobCache} does. Mixed into a L{TestCase} whose
    L{makeCache} returns a ready cache using C{self.clock}.
    """

    clock: Clock

    def makeCache(self) -> Deferred[IJobCache]:
        """
        @return: a L{Deferred} firing with a new, empty cache ready for use,
            whose times come from C{self.clock}; it is closed after the test.
        """
        raise NotImplementedError()

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)

    async def test_interface(self) -> None:
        """
        The cache provides L{IJobCache}.
        """
        cache = await self.makeCache()
        self.assertTrue(verifyObject(IJobCache, cache))  # type: ignore[attr-defined]

    async def test_jobRoundTrip(self) -> None:
        """
        C{getJob} gives back the stored job: its load's fields, its minions
        and the clock's time as its start time.
        """
        cache = await self.makeCache()
        arg = ["echo hi", {"cwd": "/tmp"}, 3, None]
        await cache.storeJob(jid(1), load("cmd.run", ["web1", "web2"], arg=arg), ["web1"])
        self.assertEqual(  # type: ignore[attr-defined]
            await cache.getJob(jid(1)),
            {
                "jid": jid(1),
                "fun": "cmd.run",
                "arg": arg,
                "tgt": ["web1", "web2"],
                "tgt_type": "glob",
                "user": "root",
                "minions": ["web1"],
                "start_time": NOW,
            },
        )

    async def test_unknownJob(self) -> None:
        """
        An unknown jid has no job (L{None}) and no returns (an empty dict).
        """
        cache = await self.makeCache()
        self.assertIsNone(await cache.getJob(jid(9)))  # type: ignore[attr-defined]
        self.assertEqual(await cache.getReturns(jid(9)), {})  # type: ignore[attr-defined]

    async def test_returnRoundTrip(self) -> None:
        """
        C{getReturns} gives, per minion, the return, its retcode and success
        flag, and the clock's time when it was stored.
        """
        cache = await self.makeCache()
        await cache.storeJob(jid(1), load(), ["a", "b"])
        await cache.storeReturn(jid(1), "a", {"return": True, "retcode": 0, "success": True})
        self.clock.advance(2.5)
        await cache.storeReturn(
            jid(1), "b", {"return": {"out": "text", "n": [1, 2.5]}, "retcode": 1, "success": False}
        )
        self.assertEqual(  # type: ignore[attr-defined]
            await cache.getReturns(jid(1)),
            {
                "a": {"return": True, "retcode": 0, "success": True, "time": NOW},
                "b": {
                    "return": {"out": "text", "n": [1, 2.5]},
                    "retcode": 1,
                    "success": False,
                    "time": NOW + 2.5,
                },
            },
        )

    async def test_firstOfEachKept(self) -> None:
        """
        A jid stored twice keeps its first job; a second return of a minion
        for a job is ignored.
        """
        cache = await self.makeCache()
        await cache.storeJob(jid(1), load("test.ping"), ["a"])
        await cache.storeJob(jid(1), load("cmd.run"), ["b"])
        await cache.storeReturn(jid(1), "a", {"return": "first"})
        await cache.storeReturn(jid(1), "a", {"return": "second"})
        job = await cache.getJob(jid(1))
        self.assertEqual((job["fun"], job["minions"]), ("test.ping", ["a"]))  # type: ignore[attr-defined]
        returns = await cache.getReturns(jid(1))
        self.assertEqual(returns["a"]["return"], "first")  # type: ignore[attr-defined]

    async def test_readsSeeEarlierWrites(self) -> None:
        """
        A read called after a write, without waiting for it, sees it.
        """
        cache = await self.makeCache()
        stored = cache.storeJob(jid(1), load(), ["a"])
        returned = cache.storeReturn(jid(1), "a", {"return": 1})
        job = cache.getJob(jid(1))
        returns = cache.getReturns(jid(1))
        await stored
        await returned
        self.assertEqual((await job)["jid"], jid(1))  # type: ignore[attr-defined]
        self.assertEqual(list(await returns), ["a"])  # type: ignore[attr-defined]

    async def test_listJobs(self) -> None:
        """
        C{listJobs} lists jobs newest first; C{searchFunction} and
        C{searchTarget} take globs (split at commas), the time bounds are
        inclusive, and C{limit} keeps the newest.
        """
        cache = await self.makeCache()
        for n, (fun, tgt) in enumerate(
            [("test.ping", "web*"), ("cmd.run", ["db1", "db2"]), ("test.echo", "*")], start=1
        ):
            await cache.storeJob(jid(n), load(fun, tgt), [])
            self.clock.advance(10)

        async def jids(**kwargs: Any) -> list[str]:
            return [job["jid"] for job in await cache.listJobs(**kwargs)]

        self.assertEqual(await jids(), [jid(3), jid(2), jid(1)])  # type: ignore[attr-defined]
        self.assertEqual(await jids(searchFunction="test.*"), [jid(3), jid(1)])  # type: ignore[attr-defined]
        self.assertEqual(await jids(searchFunction="cmd.run,test.ping"), [jid(2), jid(1)])  # type: ignore[attr-defined]
        self.assertEqual(await jids(searchTarget="db2"), [jid(2)])  # type: ignore[attr-defined]
        self.assertEqual(  # type: ignore[attr-defined]
            await jids(startTime=NOW + 10, endTime=NOW + 10), [jid(2)]
        )
        self.assertEqual(await jids(limit=2), [jid(3), jid(2)])  # type: ignore[attr-defined]

    async def test_invalidJidRead(self) -> None:
        """
        Reading with a jid that is not 20 digits fails with L{ValueError}.
        """
        cache = await self.makeCache()
        for bad in ("1 OR 1=1", "../x", "2024010100000000000"):
            for read in (cache.getJob, cache.getReturns):
                with self.assertRaises(ValueError):  # type: ignore[attr-defined]
                    await read(bad)

    async def test_close(self) -> None:
        """
        C{close} fires with L{None} once what was called before it is done.
        """
        cache = await self.makeCache()
        stored = cache.storeJob(jid(1), load(), ["a"])
        self.assertIsNone(await cache.close())  # type: ignore[attr-defined]
        self.assertIsNone(await stored)  # type: ignore[attr-defined]


class RealJobCacheTests(JobCacheTests):
    """
    What the real caches do besides.
    """

    async def test_invalidArgumentsStoreNothing(self) -> None:
        """
        An invalid jid, minion id, load or return fails its call with
        L{ValueError}, and nothing is stored.
        """
        cache = await self.makeCache()
        for call in (
            lambda: cache.storeJob("../x", load(), ["a"]),
            lambda: cache.storeJob(jid(1), load(), ["../a"]),
            lambda: cache.storeJob(jid(1), {"fun": 3}, ["a"]),
            lambda: cache.storeJob(jid(1), load(), "a"),
            lambda: cache.storeReturn(jid(1), "../a", {"return": 1}),
            lambda: cache.storeReturn(jid(1), "a", "not a dict"),
            lambda: cache.storeReturn(jid(1), "a", {"return": object()}),
            lambda: cache.listJobs(limit=-1),
            lambda: cache.prune(-1),
        ):
            with self.assertRaises(ValueError):  # type: ignore[attr-defined]
                await call()
        self.assertIsNone(await cache.getJob(jid(1)))  # type: ignore[attr-defined]
        self.assertEqual(await cache.getReturns(jid(1)), {})  # type: ignore[attr-defined]

    async def test_listJobSummaries(self) -> None:
        """
        C{listJobSummaries} lists what C{listJobs} does, with the same
        filters, as C{(jid, fun, arg, tgt, tgt_type, user)}; the lists of
        two jobs stored alike are each the caller's own.
        """
        cache = await self.makeCache()
        stored = [
            ("test.ping", "web*", []),
            ("cmd.run", ["db1", "db2"], ["uptime"]),
            ("cmd.run", ["db1", "db2"], ["uptime"]),
            ("test.echo", "*", [{"__kwarg__": True, "metadata": {"a": 1}}]),
        ]
        for n, (fun, tgt, arg) in enumerate(stored, start=1):
            await cache.storeJob(jid(n), dict(load(fun, tgt), arg=arg), ["m1", "m2"])
            self.clock.advance(10)
        summaries = await cache.listJobSummaries()  # type: ignore[attr-defined]
        self.assertEqual(  # type: ignore[attr-defined]
            summaries,
            [
                (jid(n), fun, arg, tgt, "glob", "root")
                for n, (fun, tgt, arg) in reversed(list(enumerate(stored, start=1)))
            ],
        )
        summaries[1][2].append("changed")
        summaries[1][3].append("changed")
        self.assertEqual(summaries[2][2:4], (["uptime"], ["db1", "db2"]))  # type: ignore[attr-defined]
        self.assertEqual(  # type: ignore[attr-defined]
            [s[0] for s in await cache.listJobSummaries(searchFunction="test.*", limit=1)],
            [jid(4)],
        )
        self.assertEqual(  # type: ignore[attr-defined]
            [s[0] for s in await cache.listJobSummaries(searchTarget="db2")], [jid(3), jid(2)]
        )
        self.assertEqual(  # type: ignore[attr-defined]
            [s[0] for s in await cache.listJobSummaries(startTime=NOW + 10, endTime=NOW + 20)],
            [jid(3), jid(2)],
        )
        with self.assertRaises(ValueError):  # type: ignore[attr-defined]
            await cache.listJobSummaries(limit=-1)  # type: ignore[attr-defined]

    async def test_prune(self) -> None:
        """
        C{prune} removes the jobs that started more than the given seconds
        ago, with their returns, and says how many rows it removed.
        """
        cache = await self.makeCache()
        await cache.storeJob(jid(1), load(), ["a"])
        await cache.storeReturn(jid(1), "a", {"return": 1})
        self.clock.advance(100)
        await cache.storeJob(jid(2), load(), ["a"])
        self.assertEqual(await cache.prune(50), 2)  # type: ignore[attr-defined]
        self.assertIsNone(await cache.getJob(jid(1)))  # type: ignore[attr-defined]
        self.assertEqual(await cache.getReturns(jid(1)), {})  # type: ignore[attr-defined]
        self.assertEqual((await cache.getJob(jid(2)))["jid"], jid(2))  # type: ignore[attr-defined]

    async def test_closedRefuses(self) -> None:
        """
        Once closed, the cache fails every operation with
        L{JobCacheClosed}; closing again is harmless.
        """
        cache = await self.makeCache()
        await cache.close()
        for call in (
            lambda: cache.storeJob(jid(1), load(), ["a"]),
            lambda: cache.storeReturn(jid(1), "a", {"return": 1}),
            lambda: cache.getJob(jid(1)),
            lambda: cache.getReturns(jid(1)),
            lambda: cache.listJobs(),
            lambda: cache.prune(0),
        ):
            with self.assertRaises(JobCacheClosed):  # type: ignore[attr-defined]
                await call()
        self.assertIsNone(await cache.close())  # type: ignore[attr-defined]


def _newPath(testCase: TestCase) -> str:
    directory = testCase.mktemp()
    os.makedirs(directory)
    return os.path.join(directory, "jobs.sqlite")


class SQLiteJobCacheContractTests(RealJobCacheTests, TestCase):
    """
    L{SQLiteJobCache} keeps the L{IJobCache} contract.
    """

    def makeCache(self) -> Deferred[IJobCache]:
        cache = SQLiteJobCache(_newPath(self), reactor, clock=self.clock)
        self.addCleanup(cache.close)
        return cache.whenOpen().addCallback(lambda _: cache)


class InlineWorkerJobCacheContractTests(RealJobCacheTests, TestCase):
    """
    L{WorkerJobCache} over an L{InlineWorkerPool} keeps the L{IJobCache}
    contract.
    """

    def makeCache(self) -> Deferred[IJobCache]:
        path = _newPath(self)
        pool = InlineWorkerPool(initTasks=[(jobcachetasks.openJobCache, [path])])
        cache = WorkerJobCache(path, _NoTriggers(), clock=self.clock, pool=pool)
        self.addCleanup(cache.close)
        return cache.start().addCallback(lambda _: cache)


class RealWorkerJobCacheContractTests(RealJobCacheTests, TestCase):
    """
    L{WorkerJobCache} with its real worker process keeps the L{IJobCache}
    contract.
    """

    timeout = 120

    def makeCache(self) -> Deferred[IJobCache]:
        cache = WorkerJobCache(_newPath(self), reactor, clock=self.clock)
        self.addCleanup(cache.close)
        return cache.start().addCallback(lambda _: cache)


class FakeJobCacheContractTests(JobCacheTests, TestCase):
    """
    The runners' tests' in-memory L{FakeJobCache} keeps the part of the
    L{IJobCache} contract its users rely on.
    """

    def makeCache(self) -> Deferred[IJobCache]:
        return ensureDeferred(self._make())

    async def _make(self) -> IJobCache:
        return FakeJobCache(self.clock)


class ReadOnlyJobCacheContractTests(TestCase):
    """
    The read-only job cache a runner gets in a worker
    (L{salttwist.master.runnertasks.jobCacheReader}) provides L{IJobCache}
    and reads what the master's cache wrote exactly as that cache does; it
    writes nothing.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)

    async def _written(self) -> tuple[str, SQLiteJobCache]:
        path = _newPath(self)
        writer = SQLiteJobCache(path, reactor, clock=self.clock)
        self.addCleanup(writer.close)
        await writer.storeJob(jid(1), load("test.ping", "web*"), ["a", "b"])
        self.clock.advance(10)
        await writer.storeJob(jid(2), load("cmd.run", ["db1"], arg=["ls"]), ["db1"])
        await writer.storeReturn(jid(1), "a", {"return": True, "retcode": 0, "success": True})
        await writer.flush()
        return path, writer

    def _reader(self, path: str) -> IJobCache:
        from salttwist.master import runnertasks

        reader = runnertasks._readerClass()(path, runnertasks._NoReactor())
        self.addCleanup(reader.close)
        return reader  # type: ignore[no-any-return]

    async def test_interface(self) -> None:
        """
        The reader provides L{IJobCache}.
        """
        path, _ = await self._written()
        self.assertTrue(verifyObject(IJobCache, self._reader(path)))

    async def test_sameReads(self) -> None:
        """
        C{getJob}, C{getReturns} and C{listJobs} answer as the writing
        cache's own do; an invalid jid fails with L{ValueError}.
        """
        path, writer = await self._written()
        reader = self._reader(path)
        for read in (
            lambda cache: cache.getJob(jid(1)),
            lambda cache: cache.getJob(jid(9)),
            lambda cache: cache.getReturns(jid(1)),
            lambda cache: cache.listJobs(),
            lambda cache: cache.listJobs(searchFunction="cmd.*", limit=1),
        ):
            self.assertEqual(await read(reader), await read(writer))
        with self.assertRaises(ValueError):
            await reader.getJob("../x")

    async def test_writesFail(self) -> None:
        """
        A write through the reader fails and stores nothing.
        """
        path, writer = await self._written()
        reader = self._reader(path)
        with self.assertRaises(sqlite3.OperationalError):
            await reader.storeJob(jid(3), load(), ["a"])
        self.assertIsNone(await writer.getJob(jid(3)))
