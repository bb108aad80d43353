# -*- test-case-name: tests.test_workers_contract -*-
"""
The contract of L{IWorkerPool}, run against every implementation.

L{WorkerPoolTests} is what every pool does: provide the interface, run a
task by name or by function with msgpack-able arguments, report a task's
exception as L{TaskError}, refuse work before L{IWorkerPool.start} and after
L{IWorkerPool.stop} with L{PoolStopped}, run typed task commands
(L{IWorkerPool.call}), refuse arguments msgpack cannot
encode, and count its work in L{IWorkerPool.stats}. L{RealWorkerPoolTests}
is what only pools of worker processes do besides: carry payloads over
AMP's 65,535-byte value limit.

The implementations:
  - L{InlineWorkerPool}: tasks run in this process;
  - L{WorkerPool} on the fake process reactor of L{tests.test_workers},
    whose children are in-process L{ChildAMP}s pumped by hand;
  - L{WorkerPool} with real child processes on the real reactor.

Detailed tests of each stay in L{tests.test_workers} and
L{tests.test_workers_real}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.trial.unittest import TestCase
from zope.interface.verify import verifyObject

from salttwist.interfaces import IWorkerPool
from salttwist.serial import SerialError
from salttwist.workers import PoolStopped, TaskError, tasks
from salttwist.workers.commands import Echo, RaiseError
from salttwist.workers.pool import InlineWorkerPool, WorkerPool
from tests.test_workers import FakeProcessReactor

ECHO = "salttwist.workers.tasks.echo"
STATS_KEYS = {"size", "busy", "idle", "queued", "restarts", "completed", "failed"}


class WorkerPoolTests:
    """
    What every L{IWorkerPool} does. Mixed into a L{TestCase} that says how
    to make a pool (L{makePool}) and how its answers arrive (L{settle}).
    """

    def makePool(self) -> IWorkerPool:
        """
        @return: a new pool, not started; it is stopped after the test.
        """
        raise NotImplementedError()

    def settle(self, d: Deferred[Any]) -> Deferred[Any]:
        """
        Let the pool's work happen (a fake reactor pumps its processes).

        @return: C{d}.
        """
        return d

    async def started(self) -> IWorkerPool:
        """
        @return: a new pool, started.
        """
        pool = self.makePool()
        self.assertIsNone(await self.settle(pool.start()))  # type: ignore[attr-defined]
        return pool

    async def test_interface(self) -> None:
        """
        The pool provides L{IWorkerPool}.
        """
        self.assertTrue(verifyObject(IWorkerPool, self.makePool()))  # type: ignore[attr-defined]

    async def test_run(self) -> None:
        """
        C{run} runs a task by its name or by its function, with positional
        and keyword arguments, and fires with its result.
        """
        pool = await self.started()
        value = {"a": [1, 2.5, None, True], "b": b"\x00\xff", "c": "\u00e9"}
        self.assertEqual(await self.settle(pool.run(ECHO, value)), value)  # type: ignore[attr-defined]
        self.assertEqual(await self.settle(pool.run(tasks.echo, value="kw")), "kw")  # type: ignore[attr-defined]

    async def test_call(self) -> None:
        """
        C{call} runs the task of a typed command with its arguments and
        fires with the C{result} of its answer.
        """
        pool = await self.started()
        value = {"a": [1, 2.5, None], "b": b"\x00\xff"}
        self.assertEqual(await self.settle(pool.call(Echo, value=value)), value)  # type: ignore[attr-defined]

    async def test_callTaskError(self) -> None:
        """
        A typed command's task that raises fails the call with L{TaskError}
        naming the task, the type and the message; the pool goes on.
        """
        pool = await self.started()
        with self.assertRaises(TaskError) as caught:  # type: ignore[attr-defined]
            await self.settle(pool.call(RaiseError, message="bad input"))
        error = caught.exception
        self.assertEqual((error.typeName, error.message), ("ValueError", "bad input"))  # type: ignore[attr-defined]
        self.assertEqual(await self.settle(pool.call(Echo, value=1)), 1)  # type: ignore[attr-defined]

    async def test_callUnserialisable(self) -> None:
        """
        Arguments a typed command cannot serialise fail that call (with
        L{SerialError} for a value msgpack cannot encode), and the pool goes
        on.
        """
        pool = await self.started()
        with self.assertRaises(SerialError):  # type: ignore[attr-defined]
            await self.settle(pool.call(Echo, value=object()))
        self.assertEqual(await self.settle(pool.call(Echo, value=2)), 2)  # type: ignore[attr-defined]

    async def test_taskError(self) -> None:
        """
        A task's exception fails its call with L{TaskError} carrying the
        task's name, the exception's type name and message; the pool goes
        on serving.
        """
        pool = await self.started()
        with self.assertRaises(TaskError) as caught:  # type: ignore[attr-defined]
            await self.settle(pool.run(tasks.raiseError, "bad input"))
        error = caught.exception
        self.assertEqual(  # type: ignore[attr-defined]
            (error.taskName, error.typeName, error.message),
            ("salttwist.workers.tasks.raiseError", "ValueError", "bad input"),
        )
        self.assertEqual(await self.settle(pool.run(ECHO, 1)), 1)  # type: ignore[attr-defined]

    async def test_unknownTask(self) -> None:
        """
        A name no task module registered fails with L{TaskError} of type
        C{UnknownTask}.
        """
        pool = await self.started()
        with self.assertRaises(TaskError) as caught:  # type: ignore[attr-defined]
            await self.settle(pool.run("os.system", "true"))
        self.assertEqual(caught.exception.typeName, "salttwist.workers.UnknownTask")  # type: ignore[attr-defined]

    async def test_notATask(self) -> None:
        """
        A plain function is refused with L{TypeError}.
        """
        pool = await self.started()
        with self.assertRaises(TypeError):  # type: ignore[attr-defined]
            await self.settle(pool.run(len, "x"))

    async def test_unserialisableArguments(self) -> None:
        """
        Arguments msgpack cannot encode fail with L{SerialError}.
        """
        pool = await self.started()
        with self.assertRaises(SerialError):  # type: ignore[attr-defined]
            await self.settle(pool.run(ECHO, object()))

    async def test_refusedWhenNotRunning(self) -> None:
        """
        Before C{start} and after C{stop}, C{run} fails with L{PoolStopped}.
        """
        pool = self.makePool()
        with self.assertRaises(PoolStopped):  # type: ignore[attr-defined]
            await self.settle(pool.run(ECHO, 1))
        await self.settle(pool.start())
        await self.settle(pool.stop())
        with self.assertRaises(PoolStopped):  # type: ignore[attr-defined]
            await self.settle(pool.run(ECHO, 1))

    async def test_stats(self) -> None:
        """
        C{stats} has the documented keys and counts completed and failed
        calls.
        """
        pool = await self.started()
        self.assertEqual(set(pool.stats()), STATS_KEYS)  # type: ignore[attr-defined]
        before = pool.stats()
        await self.settle(pool.run(ECHO, 1))
        with self.assertRaises(TaskError):  # type: ignore[attr-defined]
            await self.settle(pool.run(tasks.raiseError, "x"))
        after = pool.stats()
        self.assertEqual(  # type: ignore[attr-defined]
            (after["completed"] - before["completed"], after["failed"] - before["failed"]),
            (1, 1),
        )
        self.assertEqual((after["busy"], after["queued"]), (0, 0))  # type: ignore[attr-defined]
        self.assertGreaterEqual(after["idle"], 1)  # type: ignore[attr-defined]

    async def test_stop(self) -> None:
        """
        C{stop} fires with L{None}.
        """
        pool = await self.started()
        self.assertIsNone(await self.settle(pool.stop()))  # type: ignore[attr-defined]


class RealWorkerPoolTests(WorkerPoolTests):
    """
    What pools of worker processes (speaking AMP) do besides.
    """

    async def test_bigTypedPayloads(self) -> None:
        """
        A typed command's 2 MB argument and result cross intact.
        """
        pool = await self.started()
        blob = os.urandom(2 * 1024 * 1024)
        self.assertEqual(await self.settle(pool.call(Echo, value=blob)), blob)  # type: ignore[attr-defined]

    async def test_bigPayloads(self) -> None:
        """
        A 2 MB argument and a 2 MB result, over AMP's 65,535-byte value
        limit, cross intact.
        """
        pool = await self.started()
        blob = os.urandom(2 * 1024 * 1024)
        self.assertEqual(await self.settle(pool.run(ECHO, blob)), blob)  # type: ignore[attr-defined]


class InlineWorkerPoolContractTests(WorkerPoolTests, TestCase):
    """
    L{InlineWorkerPool} keeps the L{IWorkerPool} contract.
    """

    def makePool(self) -> IWorkerPool:
        pool = InlineWorkerPool()
        self.addCleanup(pool.stop)
        return pool


class FakeReactorWorkerPoolContractTests(RealWorkerPoolTests, TestCase):
    """
    L{WorkerPool} on a fake process reactor keeps the L{IWorkerPool}
    contract.
    """

    def makePool(self) -> IWorkerPool:
        self.reactor = FakeProcessReactor()
        pool = WorkerPool(self.reactor, 2)
        self.addCleanup(lambda: self.settle(pool.stop()))
        return pool

    def settle(self, d: Deferred[Any]) -> Deferred[Any]:
        self.reactor.pumpAll()
        return d


class RealWorkerPoolContractTests(RealWorkerPoolTests, TestCase):
    """
    L{WorkerPool} with real processes keeps the L{IWorkerPool} contract.
    """

    timeout = 60

    def makePool(self) -> IWorkerPool:
        pool = WorkerPool(reactor, 1)
        self.addCleanup(pool.stop)
        return pool
