# -*- test-case-name: tests.test_jobcache_worker -*-
"""
Tests for L{salttwist.master.jobcacheworker.WorkerJobCache}: the job cache
whose SQL runs in a worker process of its own. The first tests run the
tasks in this process (L{InlineWorkerPool}); the others start a real worker
on the real reactor, as L{tests.test_workers_real} does, for what only a
process shows: a crash in the middle of a batch, and a 50 MB return crossing
the AMP connection both ways.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred, gatherResults
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface.verify import verifyObject

from salttwist.interfaces import IJobCache
from salttwist.master import jobcachetasks
from salttwist.master.jobcache import JobCacheClosed, SQLiteJobCache
from salttwist.master.jobcacheworker import WorkerJobCache
from salttwist.workers import WorkerFailed
from salttwist.workers.pool import InlineWorkerPool

JID = "20261122010203456789"
LOAD = {"fun": "test.ping", "arg": [1], "tgt": "web*", "tgt_type": "glob", "user": "root"}


class _FakeReactor:
    """
    The shutdown triggers L{WorkerJobCache} registers, recorded.
    """

    def __init__(self) -> None:
        self.triggers: list[Any] = []

    def addSystemEventTrigger(self, *args: Any) -> object:
        self.triggers.append(args)
        return args

    def removeSystemEventTrigger(self, trigger: Any) -> None:
        self.triggers.remove(trigger)


class InlineWorkerJobCacheTests(SynchronousTestCase):
    """
    L{WorkerJobCache} over an L{InlineWorkerPool}: the tasks run in this
    process, so every L{Deferred} has fired on return.
    """

    def setUp(self) -> None:
        self.path = os.path.join(self.mktemp(), "jobs.sqlite")
        os.makedirs(os.path.dirname(self.path))
        self.clock = Clock()
        self.clock.advance(1000)
        self.pool = InlineWorkerPool(initTasks=[(jobcachetasks.openJobCache, [self.path])])
        self.cache = WorkerJobCache(self.path, _FakeReactor(), clock=self.clock, pool=self.pool)
        self.addCleanup(lambda: self.cache.close())

    def test_interface(self) -> None:
        """
        L{WorkerJobCache} provides L{IJobCache}.
        """
        self.assertTrue(verifyObject(IJobCache, self.cache))

    def test_queuedUntilStarted(self) -> None:
        """
        Operations called before L{WorkerJobCache.start} wait; once started,
        they run in call order, so a read sees the write called before it.
        """
        stored = self.cache.storeJob(JID, LOAD, ["m1"])
        read = self.cache.getJob(JID)
        self.assertNoResult(stored)
        self.assertNoResult(read)
        self.successResultOf(self.cache.start())
        self.assertIsNone(self.successResultOf(stored))
        job = self.successResultOf(read)
        assert job is not None
        self.assertEqual(
            (job["fun"], job["minions"], job["start_time"]), ("test.ping", ["m1"], 1000)
        )

    def test_invalidArgumentsFailBeforeTheWorker(self) -> None:
        """
        Invalid arguments fail with L{ValueError} in the master, before
        anything is sent to the worker.
        """
        self.successResultOf(self.cache.start())
        completed = self.pool.stats()["completed"]
        self.failureResultOf(self.cache.storeReturn("nope", "m1", {}), ValueError)
        self.failureResultOf(self.cache.getJob("1"), ValueError)
        self.failureResultOf(self.cache.listJobs(limit=-1), ValueError)
        self.assertEqual(self.pool.stats()["completed"], completed)

    def test_flush(self) -> None:
        """
        C{flush()} fires once everything called before it has finished, and
        costs no worker task.
        """
        stored = self.cache.storeReturn(JID, "m1", {"return": 1})
        flushed = self.cache.flush()
        self.assertNoResult(flushed)
        self.cache.start()
        completed = self.pool.stats()["completed"]
        self.successResultOf(stored)
        self.successResultOf(flushed)
        self.assertEqual(self.pool.stats()["completed"], completed)

    def test_closedBeforeStart(self) -> None:
        """
        Closing a cache that was never started starts nothing: queued
        operations fail with L{JobCacheClosed}, the close succeeds, and
        later operations fail too.
        """
        queued = self.cache.getJob(JID)
        self.successResultOf(self.cache.close())
        self.failureResultOf(queued, JobCacheClosed)
        self.failureResultOf(self.cache.storeJob(JID, LOAD, []), JobCacheClosed)
        self.assertEqual(self.pool.stats()["completed"], 0)


def _ret(value: Any) -> dict[str, Any]:
    return {"return": value, "retcode": 0, "success": True}


class RealWorkerJobCacheTests(TestCase):
    """
    L{WorkerJobCache} with its real worker process.
    """

    timeout = 120

    def makeCache(self) -> WorkerJobCache:
        """
        @return: a started cache over a new file, closed (and its worker
            stopped) after the test.
        """
        directory = self.mktemp()
        os.mkdir(directory)
        cache = WorkerJobCache(os.path.join(directory, "jobs.sqlite"), reactor)
        self.addCleanup(self._closeAndCheck, cache)
        return cache

    async def _check(self, cache: WorkerJobCache) -> None:
        pids = cache.pool.pids()
        await cache.close()
        self.assertEqual(cache.pool.pids(), [])
        for pid in pids:
            self.assertRaises(ProcessLookupError, os.kill, pid, 0)

    def _closeAndCheck(self, cache: WorkerJobCache) -> Deferred[None]:
        return ensureDeferred(self._check(cache))

    def test_crashMidBatchRetried(self) -> Deferred[None]:
        """
        When the worker dies with a write batch in flight, before writing
        or after committing it, the pool replaces it and writes the batch
        once more: every return of the batch is stored once, and every
        caller's L{Deferred} succeeds.
        """

        async def test() -> None:
            cache = self.makeCache()
            await cache.start()
            await cache.storeJob(JID, LOAD, ["m1", "m2", "m3", "m4"])
            [first] = cache.pool.pids()
            await cache.pool.run(jobcachetasks.crashOnNextWrite, "before")
            await gatherResults([cache.storeReturn(JID, m, _ret(m)) for m in ("m1", "m2")])
            [second] = cache.pool.pids()
            self.assertNotEqual(second, first)
            await cache.pool.run(jobcachetasks.crashOnNextWrite, "after")
            await gatherResults([cache.storeReturn(JID, m, _ret(m)) for m in ("m3", "m4")])
            self.assertNotIn(second, cache.pool.pids())
            returns = await cache.getReturns(JID)
            self.assertEqual({m: r["return"] for m, r in returns.items()}, {m: m for m in returns})
            self.assertEqual(sorted(returns), ["m1", "m2", "m3", "m4"])
            self.assertEqual(cache.pool.stats()["restarts"], 2)

        return ensureDeferred(test())

    def test_sameAnswersAsThreadVersion(self) -> Deferred[None]:
        """
        Stored through the worker, jobs and returns read back identically
        through the worker and through L{SQLiteJobCache} (the thread
        version) on the same file.
        """

        async def test() -> None:
            cache = self.makeCache()
            await cache.start()
            await cache.storeJob(JID, LOAD, ["m1", "m2"])
            await cache.storeReturn(JID, "m1", _ret({"a": [1, b"\x00"]}))
            await cache.storeReturn(JID, "m2", {"return": "no", "retcode": 1, "success": False})
            viaWorker = (
                await cache.getJob(JID),
                await cache.getReturns(JID),
                await cache.listJobs(searchTarget="web*"),
            )
            self.assertEqual(viaWorker[1]["m1"]["return"], {"a": [1, b"\x00"]})
            self.assertEqual(viaWorker[2], [viaWorker[0]])
            await cache.close()
            thread = SQLiteJobCache(cache.path, reactor)
            try:
                viaThread = (
                    await thread.getJob(JID),
                    await thread.getReturns(JID),
                    await thread.listJobs(searchTarget="web*"),
                )
            finally:
                await thread.close()
            self.assertEqual(viaThread, viaWorker)

        return ensureDeferred(test())

    def test_bigReturn(self) -> Deferred[None]:
        """
        A 50 MB return is stored through the worker and read back intact.
        """

        async def test() -> None:
            cache = self.makeCache()
            await cache.start()
            big = os.urandom(50 * 1024 * 1024)
            await cache.storeJob(JID, LOAD, ["big"])
            await cache.storeReturn(JID, "big", _ret(big))
            returns = await cache.getReturns(JID)
            self.assertEqual(len(returns["big"]["return"]), len(big))
            self.assertTrue(returns["big"]["return"] == big)

        return ensureDeferred(test())

    def test_reads(self) -> Deferred[None]:
        """
        C{getJob}, C{getReturns}, C{listJobs} and C{prune} run in the worker
        and answer as the job cache does.
        """

        async def test() -> None:
            cache = self.makeCache()
            await cache.start()
            other = "20261122010203456790"
            await cache.storeJob(JID, LOAD, ["m1"])
            await cache.storeJob(other, dict(LOAD, fun="cmd.run", tgt="db*"), ["m2"])
            await cache.storeReturn(JID, "m1", _ret(True))
            job = await cache.getJob(JID)
            assert job is not None
            self.assertEqual((job["arg"], job["tgt"]), ([1], "web*"))
            self.assertIsNone(await cache.getJob("20000101000000000000"))
            self.assertEqual(list(await cache.getReturns(JID)), ["m1"])
            listed = await cache.listJobs(searchFunction="cmd.*")
            self.assertEqual([j["jid"] for j in listed], [other])
            self.assertEqual(await cache.prune(10**6), 0)
            self.assertEqual(await cache.prune(-0.0), 3)
            self.assertEqual(await cache.listJobs(), [])

        return ensureDeferred(test())


class WorkerFailureTests(SynchronousTestCase):
    """
    A write batch whose retry failed too.
    """

    def test_lostBatchLoggedAndFailed(self) -> None:
        """
        When the pool fails a batch (after its retry), every caller's
        L{Deferred} fails with that L{WorkerFailed} and one critical line
        names the number of rows and the error.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

        class FailingPool(InlineWorkerPool):
            def call(self, command: Any, **kwargs: Any) -> Deferred[Any]:
                if command is jobcachetasks.WriteBatch:
                    from twisted.internet.defer import fail

                    name = command.commandName.decode()
                    return fail(WorkerFailed(name, 123, "exited with signal 9", " (retried)"))
                return super().call(command, **kwargs)

        directory = self.mktemp()
        os.mkdir(directory)
        path = os.path.join(directory, "jobs.sqlite")
        pool = FailingPool(initTasks=[(jobcachetasks.openJobCache, [path])])
        cache = WorkerJobCache(path, _FakeReactor(), clock=Clock(), pool=pool)
        self.addCleanup(cache.close)
        stored = [cache.storeReturn(JID, m, _ret(1)) for m in ("m1", "m2")]
        cache.start()
        for d in stored:
            self.assertIn("signal 9", str(self.failureResultOf(d, WorkerFailed).value))
        critical = [e for e in observer if e["log_level"] == LogLevel.critical]
        self.assertEqual(len(critical), 1)
        self.assertEqual(critical[0]["rows"], 2)
