# -*- test-case-name: tests.test_runners_workers -*-
"""
Tests for runners in worker processes (L{salttwist.runners.inWorker},
L{salttwist.master.runnertasks}, L{Master.clientRunner}): which runners run
where, that a worker runs them with the same results as the master, and that
a worker that dies gives the client a clear error.

The master's pool is an L{InlineWorkerPool} (the runner tasks run in this
process, through msgpack, with a read-only connection of their own) and its
job cache a L{WorkerJobCache} over another one, so everything is
synchronous; a recording pool shows which task a runner is sent as.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.master import jobcachetasks, runnertasks
from salttwist.master.core import RUN_IDEMPOTENT_RUNNER_TASK, RUN_RUNNER_TASK
from salttwist.master.jobcacheworker import WorkerJobCache
from salttwist.runners import loadRunners, workerPlacement
from salttwist.workers import WorkerFailed
from salttwist.workers.pool import InlineWorkerPool
from tests.test_runners_jobs import FakeSession, makeMaster, wireArgs

IN_WORKER = {
    "jobs.exit_success",
    "jobs.list_job",
    "jobs.list_jobs",
    "jobs.lookup_jid",
    "jobs.print_job",
    "salt.cmd",
}


class _NoTriggers:
    def addSystemEventTrigger(self, *args: Any) -> None:
        return None


class _RecordingPool(InlineWorkerPool):
    """
    An L{InlineWorkerPool} that records the task of every call, and fails
    them with C{failure} when set.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.failure: Exception | None = None

    def run(self, taskOrName: Any, *args: Any, **kwargs: Any) -> Deferred[Any]:
        self.calls.append(taskOrName)
        if self.failure is not None:
            return fail(self.failure)
        return super().run(taskOrName, *args, **kwargs)


class PlacementTests(SynchronousTestCase):
    """
    Which runners may run in a worker.
    """

    def test_marked(self) -> None:
        """
        The C{jobs.*} readers of the job cache and C{salt.cmd} are marked to
        run in a worker; C{jobs.active} and C{manage.*}, which read the
        master's live state, are not. Only the C{jobs.*} ones are idempotent
        and need the job cache.
        """
        runners = loadRunners()
        marked = {name for name, f in runners.items() if workerPlacement(f) is not None}
        self.assertEqual(marked, IN_WORKER)
        self.assertTrue(any(name.startswith("manage.") for name in runners))
        for name in IN_WORKER:
            placement = workerPlacement(runners[name])
            assert placement is not None
            self.assertEqual(placement.idempotent, name.startswith("jobs."), name)
            self.assertEqual(placement.needsJobCache, name.startswith("jobs."), name)

    def test_saltCmdOnlyBlockingFunctions(self) -> None:
        """
        C{salt.cmd} goes to a worker only for a blocking function that does
        not take the loader context: not for C{cmd.run} (on the reactor) or
        an unknown function.
        """
        placement = workerPlacement(loadRunners()["salt.cmd"])
        assert placement is not None and placement.accepts is not None
        self.assertTrue(placement.accepts("test.fib", 10))
        self.assertFalse(placement.accepts("test.arg", 1))
        self.assertFalse(placement.accepts("cmd.run", "true"))
        self.assertFalse(placement.accepts("no.such"))

    def test_taskRefusesUnmarked(self) -> None:
        """
        The worker tasks refuse a runner not marked for them: C{jobs.active}
        at all, a non-idempotent runner through the idempotent task.
        """
        for task, fun in [
            (runnertasks.runRunner, "jobs.active"),
            (runnertasks.runRunner, "jobs.lookup_jid"),
            (runnertasks.runIdempotentRunner, "salt.cmd"),
        ]:
            with self.assertRaises(LookupError):
                task(fun, [], {}, {}, None)


class WorkerRunnerTests(SynchronousTestCase):
    """
    Runners through L{Master.clientRunner} with a master that has workers.
    """

    def setUp(self) -> None:
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        path = os.path.join(directory, "jobs.sqlite")
        clock = Clock()
        self.cache = WorkerJobCache(
            path,
            _NoTriggers(),
            clock=clock,
            pool=InlineWorkerPool(initTasks=[(jobcachetasks.openJobCache, [path])]),
        )
        self.successResultOf(self.cache.start())
        self.addCleanup(self.cache.close)
        self.addCleanup(runnertasks._state.clear)
        self.master = makeMaster(self, jobCache=self.cache)
        clock.advance(self.master.clock.seconds())
        self.pool = _RecordingPool()
        self.successResultOf(self.pool.start())

    def publishAndReturn(self) -> str:
        """
        Publish a job to the three minions; two return.

        @return: its jid.
        """
        reply = self.successResultOf(
            self.master.clientPublish(
                None,  # type: ignore[arg-type]
                {"fun": "test.echo", "arg": ["hi"], "tgt": "*", "user": "alice"},
            )
        )
        jid = reply["jid"]
        for minionId, value in (("minion1", "hi"), ("minion2", {"big": b"x" * 100000})):
            self.master.minionReturn(
                FakeSession(minionId),  # type: ignore[arg-type]
                {"id": minionId, "jid": jid, "return": value, "retcode": 0, "success": True},
            )
        return jid

    def runner(self, fun: str, *args: Any, **kwargs: Any) -> Deferred[dict[str, Any]]:
        return self.master.clientRunner(
            None,  # type: ignore[arg-type]
            {"fun": fun, "arg": wireArgs(args, kwargs)},
        )

    def test_sameResults(self) -> None:
        """
        C{jobs.lookup_jid} (with C{missing=True}), C{jobs.list_jobs} and
        C{jobs.list_job} give the same results in a worker as in the
        master, on the same data; the worker ones went to the idempotent
        runner task.
        """
        jid = self.publishAndReturn()
        calls = [
            ("jobs.lookup_jid", (jid,), {"missing": True}),
            ("jobs.list_jobs", (), {"search_function": "test.*"}),
            ("jobs.list_job", (jid,), {}),
        ]
        inMaster = [self.successResultOf(self.runner(f, *a, **k))["return"] for f, a, k in calls]
        self.assertEqual(self.pool.calls, [])
        self.master.workers = self.pool
        inWorker = [self.successResultOf(self.runner(f, *a, **k))["return"] for f, a, k in calls]
        self.assertEqual(inWorker, inMaster)
        self.assertEqual(inWorker[0]["minion3"], "Minion did not return")
        self.assertEqual(self.pool.calls, [RUN_IDEMPOTENT_RUNNER_TASK] * 3)

    def test_errorsAsInMaster(self) -> None:
        """
        A runner's L{ValueError} in the worker reaches the client as the
        same message it has in the master.
        """
        inMaster = str(
            self.failureResultOf(self.runner("jobs.lookup_jid", "bad"), ValueError).value
        )
        self.master.workers = self.pool
        inWorker = str(
            self.failureResultOf(self.runner("jobs.lookup_jid", "bad"), ValueError).value
        )
        self.assertIn("invalid jid", inWorker)
        self.assertEqual(inWorker, inMaster)
        self.assertEqual(self.pool.calls, [RUN_IDEMPOTENT_RUNNER_TASK])

    def test_whereEachRuns(self) -> None:
        """
        With workers, C{salt.cmd test.fib} runs in the non-idempotent
        runner task (with the same Fibonacci number as in the master);
        C{jobs.active} and C{manage.up} run in the master.
        """
        self.master.workers = self.pool
        inWorker = self.successResultOf(self.runner("salt.cmd", "test.fib", 10))["return"]
        self.assertEqual(self.pool.calls, [RUN_RUNNER_TASK])
        self.master.workers = None
        inMaster = self.successResultOf(self.runner("salt.cmd", "test.fib", 10))["return"]
        self.assertEqual(inWorker[0], inMaster[0])
        self.master.workers = self.pool
        self.successResultOf(self.runner("jobs.active"))
        self.successResultOf(self.runner("manage.up"))
        self.assertEqual(self.pool.calls, [RUN_RUNNER_TASK])

    def test_workerDiedClearError(self) -> None:
        """
        A worker that dies running a runner fails it with a L{ValueError}
        (which the req server sends to the client) naming the runner and
        what happened to the worker, and fires the C{salt/run/<jid>/ret}
        event with C{success} false.
        """
        events: list[tuple[str, Any]] = []
        self.master.bus.subscribe(["salt/run/"], lambda tag, data: events.append((tag, data)))
        self.master.workers = self.pool
        self.pool.failure = WorkerFailed(
            RUN_RUNNER_TASK, 4242, "exited with signal 9", " (not retried)"
        )
        message = str(
            self.failureResultOf(self.runner("salt.cmd", "test.fib", 3), ValueError).value
        )
        self.assertEqual(
            message,
            "runner salt.cmd did not complete: worker pid 4242 exited with signal 9 while "
            f"running {RUN_RUNNER_TASK} (not retried)",
        )
        [(tag, data)] = [e for e in events if e[0].endswith("/ret")]
        self.assertFalse(data["success"])
        self.assertEqual(data["return"], message)
