# -*- test-case-name: tests.test_workers -*-
"""
A small pool of worker processes speaking AMP, for the master's CPU-heavy and
blocking work (RSA during authentication, job cache writes, runners).

Why our own pool and not C{ampoule} (see C{../shared/style.md} section 7):

  - ampoule's C{main.py} imports the global reactor at module scope, its pool
    calls C{callLater} on that reactor, and idle pruning runs on
    C{time.time()} through a C{LoopingCall} started in C{__init__}, so a
    L{MemoryReactorClock} cannot drive it and its crash and timeout paths
    cannot be unit tested without real processes and wall time;
  - its C{ProcessStarter} defaults to C{env={}}, so children lose C{PATH};
  - its timeout handling (issue #3) and extra spawned processes (issue #16)
    are long-standing open issues, and the project is kept working, little
    more.

So this package is built like Twisted's C{twisted.trial._dist} instead: the
reactor (L{IReactorProcess}, L{IReactorTime}) is injected, children are
spawned with C{childFDs={0: "w", 1: "r", 2: "r", 3: "w", 4: "r"}} and speak
AMP on fds 3 and 4 (stdout and stderr stay free for logs), and we borrow
ampoule's policy knobs (a per-call timeout with SIGKILL, replacement of dead
children).

Layout:
  - L{salttwist.workers.commands}: the AMP commands, all parent to child;
  - L{salttwist.workers.tasks}: the registry of functions a worker may run
    (the parent sends a registered dotted name and msgpack arguments, never
    code) and the built-in tasks;
  - L{salttwist.workers.child}: the child's entry point,
    C{python -m salttwist.workers.child [taskModule ...]};
  - L{salttwist.workers.protocol}: the parent's C{ProcessProtocol} adapting
    fds 3 and 4 into a transport for AMP;
  - L{salttwist.workers.lifecycle}: one worker's life (starting, idle,
    busy, stopping, killed, ended) as an automat machine;
  - L{salttwist.workers.startup}: spawning a worker and its start-up
    (L{Hello}, then the pool's init tasks);
  - L{salttwist.workers.sizing}: how many workers a pool keeps (its
    minimum and maximum, idle retirement, the restart back-off);
  - L{salttwist.workers.pool}: L{WorkerPool} (real processes) and
    L{InlineWorkerPool} (same API, runs tasks in-process, for unit tests of
    code that uses a pool).

This module holds only the errors, so that the child, which imports it
first, stays light; L{IWorkerPool} is in L{salttwist.interfaces} (and
still found here).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "IWorkerPool",
    "PayloadTooLarge",
    "PoolStopped",
    "QueueFull",
    "TaskError",
    "UnknownTask",
    "WorkerError",
    "WorkerFailed",
]


class WorkerError(Exception):
    """
    Base class of the errors a L{IWorkerPool.run} L{Deferred} fails with.
    """


class TaskError(WorkerError):
    """
    The task raised an exception in the worker.

    @ivar taskName: the dotted name of the task.
    @ivar typeName: the name of the exception's type (C{"ValueError"} for a
        builtin, C{"module.Class"} otherwise).
    @ivar message: C{str()} of the exception, possibly truncated.
    """

    def __init__(self, taskName: str, typeName: str, message: str) -> None:
        super().__init__(f"{taskName} raised {typeName}: {message}")
        self.taskName = taskName
        self.typeName = typeName
        self.message = message


class WorkerFailed(WorkerError):
    """
    The worker process running the task died, hung past the task timeout, or
    broke the protocol, or no worker could be started; the task may or may
    not have run.

    @ivar taskName: the dotted name of the task, or C{None} for a failure
        to start a worker.
    @ivar pid: the worker's process id, or C{None} if no worker was involved.
    @ivar reason: what happened, in words (C{"exited with signal 9"}).
    """

    def __init__(self, taskName: str | None, pid: int | None, reason: str, note: str = "") -> None:
        """
        @param note: said after the rest, for example that the task had
            already been retried.
        """
        if pid is None:
            text = f"cannot run {taskName}: {reason}" if taskName else reason
        else:
            text = f"worker pid {pid} {reason}"
            if taskName:
                text += f" while running {taskName}"
        super().__init__(text + note)
        self.taskName = taskName
        self.pid = pid
        self.reason = reason


class QueueFull(WorkerError):
    """
    Every worker is busy and the queue already holds C{maxQueue} requests.
    """


class PoolStopped(WorkerError):
    """
    The pool is stopping or stopped (or was never started) and takes no work.
    """


class UnknownTask(LookupError):
    """
    No task is registered under that name (raised in the worker, so it reaches
    the caller as a L{TaskError} whose C{typeName} ends in C{UnknownTask}).
    """


class PayloadTooLarge(ValueError):
    """
    Serialised arguments or a serialised result exceed the payload limit.
    """


def __getattr__(name: str) -> Any:
    """
    L{IWorkerPool} moved to L{salttwist.interfaces}; it is still found here,
    but looked up only when asked for, so that the child, which imports this
    module first, does not import the interfaces (and L{twisted.plugin}).
    """
    if name == "IWorkerPool":
        from salttwist.interfaces import IWorkerPool

        return IWorkerPool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
