# -*- test-case-name: tests.test_runners_workers -*-
"""
Runners as worker tasks (issue 5): the runners marked with
L{salttwist.runners.inWorker} run in a worker of the master's main pool,
with a L{RunnerContext} built here. Its C{master} is a L{WorkerRunnerMaster}:
the master's config, a read-only connection to the job cache file (WAL lets
it read while the job cache worker writes) and a synchronous
C{runBlocking}.

Two tasks, so the pool knows which calls it may retry: L{runIdempotentRunner}
for runners marked idempotent (C{jobs.*} reads), L{runRunner} for the
others; each refuses a runner not marked for it.
"""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.defer import maybeDeferred
from twisted.python.failure import Failure

from salttwist.workers.tasks import task

_state: dict[str, Any] = {}


class _NoReactor:
    """
    What L{BatchingJobCache} needs of a reactor, in a process that runs
    none: the time, and no shutdown triggers.
    """

    def seconds(self) -> float:
        return time.time()

    def addSystemEventTrigger(self, *args: Any, **kwargs: Any) -> None:
        return None

    def removeSystemEventTrigger(self, trigger: Any) -> None:
        pass


def _readerClass() -> type:
    from salttwist.master.jobcache import BatchingJobCache, JobCacheDatabase

    class ReadOnlyJobCache(BatchingJobCache):
        """
        The job cache's API over a read-only connection, run synchronously:
        every L{Deferred} has fired when it is returned. Arguments are
        checked as by the master's job cache; writes fail.
        """

        def _startBackend(self) -> Any:
            self._database = JobCacheDatabase(self.path, readOnly=True)
            return maybeDeferred(self._database.open)

        def _run(self, operation: str, *args: Any) -> Any:
            return maybeDeferred(getattr(self._database, operation), *args)

        def _stopBackend(self) -> None:
            return None

    return ReadOnlyJobCache


def jobCacheReader(path: str) -> Any:
    """
    @return: this worker's read-only job cache over C{path}, opened on first
        use (again after a failed open).
    """
    cache = _state.get("reader")
    if cache is not None and cache.path == path and cache._openError is None:
        return cache
    if cache is not None:
        cache.close()
    cache = _readerClass()(path, _NoReactor())
    if cache._openError is not None:
        _state.pop("reader", None)
        cache._openError.raiseException()
    _state["reader"] = cache
    return cache


class WorkerRunnerMaster:
    """
    What a runner sees as C{context.master} in a worker.

    @ivar config: the master's config.
    @ivar jobCache: a read-only job cache, or L{None} when the master's job
        cache is not an SQLite file.
    @ivar runBlocking: runs its function now (this process may block).
    @ivar clock: L{None}: there is no reactor here.
    """

    def __init__(self, config: dict[str, Any], jobCachePath: str | None) -> None:
        from salttwist.blocking import runSynchronously

        self.config = config
        self.jobCache = jobCacheReader(jobCachePath) if jobCachePath is not None else None
        self.runBlocking = runSynchronously
        self.clock = None


def _runMarked(
    fun: str,
    args: list[Any],
    kwargs: dict[str, Any],
    config: dict[str, Any],
    jobCachePath: str | None,
    idempotent: bool,
) -> Any:
    from salttwist.runners import RunnerContext, loadRunners, workerPlacement

    runners = _state.get("runners")
    if runners is None:
        runners = _state["runners"] = loadRunners()
    function = runners.get(fun)
    placement = workerPlacement(function)
    if placement is None or placement.idempotent is not idempotent:
        raise LookupError(f"runner {fun!r} is not marked to run in this task")
    master = WorkerRunnerMaster(config, jobCachePath if placement.needsJobCache else None)
    outcome: list[Any] = []
    maybeDeferred(function, RunnerContext(master), *args, **kwargs).addBoth(outcome.append)  # type: ignore[arg-type]
    if not outcome:
        raise RuntimeError(f"runner {fun} waited on something a worker cannot provide")
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


@task
def runRunner(
    fun: str,
    args: list[Any],
    kwargs: dict[str, Any],
    config: dict[str, Any],
    jobCachePath: str | None,
) -> Any:
    """
    Run the runner C{fun} (marked L{inWorker} and not idempotent).

    @return: its value.
    """
    return _runMarked(fun, args, kwargs, config, jobCachePath, False)


@task(idempotent=True)
def runIdempotentRunner(
    fun: str,
    args: list[Any],
    kwargs: dict[str, Any],
    config: dict[str, Any],
    jobCachePath: str | None,
) -> Any:
    """
    Run the runner C{fun} (marked L{inWorker} with C{idempotent=True}).

    @return: its value.
    """
    return _runMarked(fun, args, kwargs, config, jobCachePath, True)
