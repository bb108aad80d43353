# -*- test-case-name: tests.test_workers_real -*-
"""
Tests for L{salttwist.workers.pool.WorkerPool} with real child processes on
the real reactor: what the fake process reactor of L{tests.test_workers}
cannot show (pipes, signals, exit statuses, a real C{python -m
salttwist.workers.child}). Each pool is stopped after its test, with a check
that none of its processes remain. Retries of idempotent tasks are covered by
the unit tests: a real one would need a task module the child imports, and
importing this module (trial and all) would double the time of these tests.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, globalLogPublisher
from twisted.python import log
from twisted.trial.unittest import TestCase

from salttwist import crypt
from salttwist.workers import TaskError, WorkerFailed, tasks
from salttwist.workers.child import WORKER_GC_THRESHOLDS
from salttwist.workers.pool import WorkerPool
from tests._fresh import runWorkerChild


def processExists(pid: int) -> bool:
    """
    @return: whether a process C{pid} exists (a reaped child does not).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def waitFor(predicate: Any, timeout: float = 5.0) -> None:
    """
    Poll C{predicate} on the reactor until it is true.

    @raise AssertionError: after C{timeout} seconds.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {predicate}")
        await deferLater(reactor, 0.01, lambda: None)


class RealWorkerTests(TestCase):
    """
    A L{WorkerPool} of real processes.
    """

    timeout = 30

    def makePool(self, size: int = 1, **kwargs: Any) -> WorkerPool:
        """
        @return: a pool on the real reactor, stopped after the test with a
            check that its processes are gone.
        """
        pool = WorkerPool(reactor, size, **kwargs)
        self.addCleanup(lambda: ensureDeferred(self.stopAndCheck(pool)))
        return pool

    async def stopAndCheck(self, pool: WorkerPool) -> None:
        """
        Stop C{pool} and check that none of its processes remain.
        """
        pids = pool.pids()
        await pool.stop()
        self.assertEqual(pool.pids(), [])
        self.assertEqual([pid for pid in pids if processExists(pid)], [])

    def test_collectorThresholds(self) -> Deferred[None]:
        """
        A task runs with the collector enabled, at the worker's thresholds
        (L{WORKER_GC_THRESHOLDS}).
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        with open(os.path.join(directory, "salttwist_gc_probe.py"), "w") as f:
            f.write(
                "import gc\n"
                "from salttwist.workers.tasks import task\n"
                "@task\n"
                "def collector():\n"
                "    return [gc.isenabled(), list(gc.get_threshold())]\n"
            )
        pool = self.makePool(
            spawnArgs=["salttwist_gc_probe"],
            env={"PYTHONPATH": os.pathsep.join([directory, *sys.path])},
        )

        async def test() -> None:
            await pool.start()
            self.assertEqual(
                await pool.run("salttwist_gc_probe.collector"),
                [True, list(WORKER_GC_THRESHOLDS)],
            )

        return ensureDeferred(test())

    def test_roundTrips(self) -> Deferred[None]:
        """
        An C{echo} crosses to the child and back; a 5 MB argument goes to the
        child and the same 5 MB come back; a raising task fails with
        L{TaskError} and its traceback, written to the child's stderr, is
        logged by the parent at debug level.
        """

        async def test() -> None:
            observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
            pool = self.makePool()
            await pool.start()
            pid = pool.pids()[0]
            self.assertNotEqual(pid, os.getpid())
            value = {"k": ["v", 1, b"\x00"]}
            self.assertEqual(await pool.run(tasks.echo, value), value)
            blob = os.urandom(5 * 1024 * 1024)
            self.assertEqual(await pool.run(tasks.echo, blob), blob)

            with self.assertRaises(TaskError) as caught:
                await pool.run(tasks.raiseError, "it broke")
            self.assertEqual(caught.exception.typeName, "ValueError")
            self.assertEqual(caught.exception.message, "it broke")

            def tracebackLogged() -> bool:
                return any(
                    e.get("stream") == "stderr"
                    and e.get("pid") == pid
                    and e["log_level"] == LogLevel.debug
                    and e.get("line") == "ValueError: it broke"
                    for e in observer
                )

            await waitFor(tracebackLogged)
            self.assertEqual(pool.pids(), [pid])
            self.assertEqual(pool.stats()["completed"], 2)
            self.assertEqual(pool.stats()["failed"], 1)

        return ensureDeferred(test())

    def test_crashReplaced(self) -> Deferred[None]:
        """
        A task that kills its worker fails with L{WorkerFailed} naming the
        pid, the signal and the task; the worker is replaced and the next
        task runs on the replacement.
        """

        async def test() -> None:
            pool = self.makePool()
            await pool.start()
            [pid] = pool.pids()
            with self.assertRaises(WorkerFailed) as caught:
                await pool.run(tasks.crash, signalNumber=9)
            self.assertEqual(
                str(caught.exception),
                f"worker pid {pid} exited with signal 9 while running "
                "salttwist.workers.tasks.crash",
            )
            self.assertFalse(processExists(pid))
            self.assertEqual(await pool.run(tasks.echo, "next"), "next")
            [newPid] = pool.pids()
            self.assertNotEqual(newPid, pid)
            self.assertEqual(pool.stats()["restarts"], 1)

        return ensureDeferred(test())

    def test_hangKilled(self) -> Deferred[None]:
        """
        A task that runs past C{taskTimeout} gets its worker SIGKILLed and
        fails with L{WorkerFailed} saying it timed out; the next task runs.
        """

        async def test() -> None:
            pool = self.makePool(taskTimeout=1.0)
            await pool.start()
            [pid] = pool.pids()
            began = time.monotonic()
            with self.assertRaises(WorkerFailed) as caught:
                await pool.run(tasks.sleep, 60)
            elapsed = time.monotonic() - began
            self.assertEqual(
                str(caught.exception),
                f"worker pid {pid} timed out after 1 s (killed with SIGKILL) while running "
                "salttwist.workers.tasks.sleep",
            )
            log.msg(f"hung task failed after {elapsed:.2f} s (taskTimeout 1 s)")
            await waitFor(lambda: pid not in pool.pids())
            self.assertFalse(processExists(pid))
            self.assertEqual(await pool.run(tasks.echo, "after"), "after")

        return ensureDeferred(test())

    def test_initTasksOnReplacement(self) -> Deferred[None]:
        """
        C{initTasks} run on every worker, replacements included: with
        C{loadKey} as the init task, C{sign} works before and after a crash
        and its signatures verify with the public key.
        """

        async def test() -> None:
            path = self.mktemp()
            privateKey = crypt.generatePrivateKey(2048)
            crypt.writePrivateFile(path, crypt.privateKeyToPem(privateKey))
            publicKey = privateKey.public_key()
            pool = self.makePool(initTasks=[(tasks.loadKey, [path])])
            await pool.start()
            signature = await pool.run(tasks.sign, b"message one")
            crypt.verify(publicKey, signature, b"message one")
            with self.assertRaises(WorkerFailed):
                await pool.run(tasks.crash, exitCode=3)
            signature = await pool.run(tasks.sign, b"message two")
            crypt.verify(publicKey, signature, b"message two")
            self.assertEqual(pool.stats()["restarts"], 1)

        return ensureDeferred(test())

    def test_stopLeavesNoProcesses(self) -> Deferred[None]:
        """
        C{stop()} fires once every child has exited: none of their pids
        remain.
        """

        async def test() -> None:
            pool = WorkerPool(reactor, 2)
            await pool.start()
            pids = pool.pids()
            self.assertEqual(len(pids), 2)
            first, second = pool.run(tasks.echo, 1), pool.run(tasks.echo, 2)
            self.assertEqual(pool.stats()["busy"], 2)
            self.assertEqual([await first, await second], [1, 2])
            self.assertTrue(all(processExists(pid) for pid in pids))
            await pool.stop()
            self.assertEqual([pid for pid in pids if processExists(pid)], [])
            self.assertEqual(pool.stats()["busy"] + pool.stats()["idle"], 0)

        return ensureDeferred(test())


class ChildStartupTests(TestCase):
    """
    The worker child starts as the commands do (see L{salttwist._startup}).
    """

    def test_leanStartup(self) -> None:
        """
        While a real C{python -m salttwist.workers.child} imports its task
        modules, neither C{ssl} nor C{asyncio} is loaded (AMP came with a
        stand-in for C{asyncio}, see L{salttwist.workers.lean}),
        C{http.cookiejar} has not run and the garbage collector is held; the
        child ends with status 0 when its input closes.
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        report = os.path.join(directory, "report")
        with open(os.path.join(directory, "salttwist_probe_tasks.py"), "w") as f:
            f.write(
                "import gc, sys, types\n"
                "jar = sys.modules.get('http.cookiejar')\n"
                f"with open({report!r}, 'w') as f:\n"
                "    f.write(repr(['ssl' in sys.modules, 'asyncio' in sys.modules,\n"
                "        type(jar) is types.ModuleType, gc.isenabled()]))\n"
            )
        done = runWorkerChild(directory, ["salttwist_probe_tasks"], timeout=30)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(report) as f:
            self.assertEqual(f.read(), "[False, False, False, False]")
