# -*- test-case-name: tests.test_jobcache_worker -*-
"""
The job cache as worker tasks (issue 5): the one job-cache worker process
(see L{salttwist.master.jobcacheworker.WorkerJobCache}) opens the SQLite
file once, as its pool's init task, and then runs the SQL of
L{salttwist.master.jobcache.JobCacheDatabase} for the master: write batches
and reads, one at a time.

The master calls them with typed AMP commands (L{OpenJobCache} as the
worker's init task, then L{OPERATIONS}); only the tests'
L{crashOnNextWrite} runs by name, over L{RunTask}.

Every task here is idempotent, so the pool runs it once more on a
replacement worker when the worker running it dies or hangs: a write batch
is C{INSERT OR IGNORE} of rows the master made (times included), so writing
it twice stores what writing it once does; reads and the close change
nothing; a second prune with the same cut-off removes what the first one
left, which is what the caller asked for.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.protocols import amp

from salttwist.workers.commands import TASK_ERROR_RESPONSE, Packed, TaskCommand
from salttwist.workers.tasks import task

_state: dict[str, Any] = {}


# The typed commands of the job cache worker (its operations' arguments are
# known, so they do not go through the generic RunTask).


class OpenJobCache(TaskCommand):
    """
    L{openJobCache}: open the job cache at C{path} (the worker's init task).
    """

    commandName = b"JobCacheOpen"
    arguments = [(b"path", amp.Unicode())]
    response = [(b"result", amp.Unicode(optional=True)), *TASK_ERROR_RESPONSE]


class WriteBatch(TaskCommand):
    """
    L{writeBatch}: the rows of C{jobs} and C{returns} (lists of rows).
    """

    commandName = b"JobCacheWriteBatch"
    arguments = [(b"jobs", Packed()), (b"returns", Packed())]


class GetJob(TaskCommand):
    """
    L{getJob}: the job of C{jid}, or L{None}.
    """

    commandName = b"JobCacheGetJob"
    arguments = [(b"jid", amp.Unicode())]
    response = [(b"result", Packed(optional=True)), *TASK_ERROR_RESPONSE]


class GetReturns(TaskCommand):
    """
    L{getReturns}: the returns of C{jid}, by minion id.
    """

    commandName = b"JobCacheGetReturns"
    arguments = [(b"jid", amp.Unicode())]
    response = [(b"result", Packed(optional=True)), *TASK_ERROR_RESPONSE]


class ListJobs(TaskCommand):
    """
    L{listJobs}: the jobs matching the (checked) filters, newest first.
    """

    commandName = b"JobCacheListJobs"
    arguments = [
        (b"functions", Packed()),
        (b"targets", Packed()),
        (b"start", amp.Float(optional=True)),
        (b"end", amp.Float(optional=True)),
        (b"limit", amp.Integer(optional=True)),
    ]
    response = [(b"result", Packed(optional=True)), *TASK_ERROR_RESPONSE]


class Prune(TaskCommand):
    """
    L{prune}: remove the jobs started before C{cutoff}, with their returns.
    """

    commandName = b"JobCachePrune"
    arguments = [(b"cutoff", amp.Float())]
    response = [(b"result", amp.Integer(optional=True)), *TASK_ERROR_RESPONSE]


class Close(TaskCommand):
    """
    L{close}: close the connection.
    """

    commandName = b"JobCacheClose"
    arguments: list[tuple[bytes, amp.Argument]] = []


#: Each operation of L{salttwist.master.jobcache.JobCacheDatabase} the
#: master runs here: its command and the names of its arguments, in order.
OPERATIONS: dict[str, tuple[type[TaskCommand], tuple[str, ...]]] = {
    "writeBatch": (WriteBatch, ("jobs", "returns")),
    "getJob": (GetJob, ("jid",)),
    "getReturns": (GetReturns, ("jid",)),
    "listJobs": (ListJobs, ("functions", "targets", "start", "end", "limit")),
    "prune": (Prune, ("cutoff",)),
    "close": (Close, ()),
}


def _database() -> Any:
    database = _state.get("database")
    if database is None:
        raise RuntimeError("openJobCache has not run in this worker")
    return database


@task(idempotent=True, command=OpenJobCache)
def openJobCache(path: str) -> str:
    """
    Open (or create) the job cache at C{path} in this worker.

    @return: C{path}.
    """
    from salttwist.master.jobcache import JobCacheDatabase

    previous = _state.pop("database", None)
    if previous is not None:
        previous.close()
    database = JobCacheDatabase(path)
    database.open()
    _state["database"] = database
    return path


@task(idempotent=True, command=WriteBatch)
def writeBatch(jobs: list[list[Any]], returns: list[list[Any]]) -> None:
    """
    Write one batch of job and return rows in one transaction (see
    L{JobCacheDatabase.writeBatch}).
    """
    crash = _state.pop("crashOnNextWrite", None)
    if crash == "before":
        os._exit(70)
    _database().writeBatch(jobs, returns)
    if crash == "after":
        os._exit(70)


@task(idempotent=True, command=GetJob)
def getJob(jid: str) -> dict[str, Any] | None:
    """
    See L{JobCacheDatabase.getJob}.
    """
    return _database().getJob(jid)


@task(idempotent=True, command=GetReturns)
def getReturns(jid: str) -> dict[str, dict[str, Any]]:
    """
    See L{JobCacheDatabase.getReturns}.
    """
    return _database().getReturns(jid)


@task(idempotent=True, command=ListJobs)
def listJobs(
    functions: list[str] | None,
    targets: list[str] | None,
    start: float | None,
    end: float | None,
    limit: int | None,
) -> list[dict[str, Any]]:
    """
    See L{JobCacheDatabase.listJobs}.
    """
    return _database().listJobs(functions, targets, start, end, limit)


@task(idempotent=True, command=Prune)
def prune(cutoff: float) -> int:
    """
    See L{JobCacheDatabase.prune}.
    """
    return _database().prune(cutoff)


@task(idempotent=True, command=Close)
def close() -> None:
    """
    Close the connection (SQLite checkpoints the WAL into the file); a later
    task fails until L{openJobCache} runs again.
    """
    database = _state.pop("database", None)
    if database is not None:
        database.close()


@task
def crashOnNextWrite(when: str = "before") -> None:
    """
    Fault injection for tests: make the next L{writeBatch} in this worker
    end the process abruptly, C{"before"} it writes anything or C{"after"}
    it has committed (so its answer is lost). The replacement worker does
    not inherit it.
    """
    if when not in ("before", "after"):
        raise ValueError(f"when must be 'before' or 'after', not {when!r}")
    _state["crashOnNextWrite"] = when
