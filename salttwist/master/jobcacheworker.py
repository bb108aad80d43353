# -*- test-case-name: tests.test_jobcache_worker -*-
"""
The job cache in a worker process (issue 5): L{WorkerJobCache} checks
arguments, queues operations and batches writes on the reactor exactly as
L{SQLiteJobCache} does (the code is theirs in common,
L{BatchingJobCache}), but the SQL runs in one dedicated worker process, a
L{WorkerPool} of size 1 running L{salttwist.master.jobcachetasks}, instead
of a thread of the master. The master's process then spends no time in
SQLite or in its GIL-holding parts.

One process, not several: SQLite serialises writers anyway, and one
process running reads and writes in call order keeps the cache's promise
that a read sees every write called before it. Runners in the main worker
pool read the same file through their own read-only connections (WAL lets
them read while this worker writes) after L{flush}.

Failures: when the worker dies or hangs (past C{taskTimeout}) the pool
replaces it and runs the operation in flight once more on the replacement
(every job cache task is idempotent, see L{salttwist.master.jobcachetasks});
if that fails too, the callers' L{Deferred}s fail with
L{salttwist.workers.WorkerFailed} and a lost write batch is logged at
critical level with its size. Nothing is left waiting.

Large returns cross the AMP connection as L{salttwist.workers.commands.BigBytes}
(one batch holds at most L{MAX_BATCH_BYTES} of returns, a single larger row
goes alone; the pool's limit is L{MAX_PAYLOAD_BYTES}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from salttwist.master.jobcache import (
    MAX_BATCH_BYTES,
    PRUNE_INTERVAL,
    BatchingJobCache,
    JobCacheClosed,
    _Call,
)
from salttwist.master.jobcachetasks import OPERATIONS, OpenJobCache
from salttwist.workers.commands import MAX_PAYLOAD_BYTES
from salttwist.workers.pool import WorkerPool

__all__ = ["JOB_CACHE_TASKS_MODULE", "MAX_BATCH_BYTES", "MAX_PAYLOAD_BYTES", "WorkerJobCache"]

JOB_CACHE_TASKS_MODULE = "salttwist.master.jobcachetasks"
"""
The task module of the job cache worker.
"""

JOB_CACHE_TASK_TIMEOUT = 300.0
"""
Seconds one job cache operation (a batch of up to 64 MB, a prune of a large
cache) may take before its worker is considered hung and killed.
"""


class WorkerJobCache(BatchingJobCache):
    """
    An L{IJobCache} whose SQLite file is written and read by one worker
    process. Nothing runs until L{start}: call it once the process may spawn
    children (after dropping privileges); operations called before are
    queued.

    @ivar pool: the L{IWorkerPool} of the job cache worker.
    """

    _runsAtOnce = False

    def __init__(
        self,
        path: str,
        reactor: Any,
        keepJobsHours: float = 24,
        clock: Any = None,
        pruneInterval: float = PRUNE_INTERVAL,
        pool: Any = None,
        taskTimeout: float = JOB_CACHE_TASK_TIMEOUT,
    ) -> None:
        """
        @param pool: the pool to run the tasks on (by default a
            L{WorkerPool} of one process on C{reactor} that opens C{path} as
            its init task); tests pass an L{InlineWorkerPool} built with
            the same init task.
        @param taskTimeout: see L{JOB_CACHE_TASK_TIMEOUT}.
        Other parameters as L{SQLiteJobCache}'s.
        """
        if pool is None:
            pool = WorkerPool(
                reactor,
                1,
                spawnArgs=[JOB_CACHE_TASKS_MODULE],
                initTasks=[(OpenJobCache, {"path": path})],
                taskTimeout=taskTimeout,
            )
        self.pool = pool
        self._started = False
        self._closedBeforeStart = False
        self._startResult: Deferred[None] = Deferred()
        super().__init__(path, reactor, keepJobsHours, clock, pruneInterval)

    def start(self) -> Deferred[None]:
        """
        Start the worker, which opens the database, then run what was
        queued.

        @return: a L{Deferred} as L{whenOpen}'s.
        """
        if not self._started and not self._closedBeforeStart:
            self._started = True
            self.pool.start().chainDeferred(self._startResult)
            self._operations.running = True
            self._operations.pump()
        return self.whenOpen()

    def _startBackend(self) -> Deferred[None]:
        return self._startResult

    def _run(self, operation: str, *args: Any) -> Deferred[Any]:
        command, names = OPERATIONS[operation]
        return self.pool.call(command, **dict(zip(names, args, strict=True)))

    def _stopBackend(self) -> Deferred[None]:
        return self.pool.stop()

    def _batchFailed(self, failure: Failure, rows: int) -> None:
        self.log.critical(
            "job cache write batch of {rows} jobs and returns was NOT stored in {path}: {error}",
            rows=rows,
            path=self.path,
            error=failure.value,
        )

    def _startClosing(self) -> Deferred[None]:
        if self._started:
            return super()._startClosing()
        self._closedBeforeStart = True
        closing = super()._startClosing()
        # Closed before it was started: nothing was opened, nothing runs.
        for item in self._operations.takeAll():
            if isinstance(item, _Call) and item.operation == "close":
                item.result.callback(None)
            else:
                item.result.errback(
                    JobCacheClosed("the job cache was closed before it was started")
                )
        return closing
