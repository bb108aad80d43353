# -*- test-case-name: tests.test_workers -*-
"""
Spawning a worker process and its start-up, for
L{salttwist.workers.pool.WorkerPool}: a new worker first answers L{Hello}
(its task registry, hence which tasks are idempotent), then runs the pool's
init tasks (for example loading the master key), each step under
C{startTimeout}, before it takes work.

L{WorkerStartup} reports each worker's outcome to the pool: ready, or
failed with the reason in words (a failed worker is killed first, unless
its process already ended, which the pool hears of on its own).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.error import ConnectionClosed
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist import serial
from salttwist.workers.child import PARENT_PID_ENV
from salttwist.workers.commands import Hello, RunTask, TaskCommand
from salttwist.workers.lifecycle import PHASE_STARTING, Worker
from salttwist.workers.protocol import CHILD_FDS, WorkerProcessProtocol
from salttwist.workers.tasks import taskName

CHILD_MODULE = "salttwist.workers.child"


def seconds(value: float) -> str:
    """
    @return: C{value} seconds, in words for a log line or an error.
    """
    return f"{value:g} s"


#: One init task: its name (a task's dotted name or a typed command's), the
#: command that runs it (L{RunTask}, or the typed command) and its arguments
#: (a list for L{RunTask}, keywords for a typed command).
InitStep = tuple[str, Any, Any]


def initStep(task: Any, args: Any) -> InitStep:
    """
    @param task: a task (its dotted name or its function), run with the
        list C{args}; or a L{TaskCommand} subclass, run with the keyword
        arguments in the mapping C{args}.
    @return: the L{InitStep}.
    @raise TypeError: for anything else.
    """
    if isinstance(task, type) and issubclass(task, TaskCommand):
        return (task.commandName.decode("ascii"), task, dict(args))
    return (taskName(task), RunTask, list(args))


def childEnvironment(env: dict[str, str]) -> dict[str, str]:
    """
    @param env: variables added to (or replacing some of) a copy of this
        process's environment; C{PYTHONPATH} is set to this process's
        C{sys.path} unless C{env} sets it, so the children import the same
        salttwist.
    @return: the environment to spawn workers with.
    """
    environ = dict(os.environ)
    environ.update(env)
    if "PYTHONPATH" not in env:
        environ["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path)
    environ[PARENT_PID_ENV] = str(os.getpid())
    return environ


class WorkerStartup:
    """
    Spawns workers and takes each through its start-up.

    @ivar idempotent: the names of the idempotent tasks and typed commands,
        as the last worker's L{Hello} said.
    """

    def __init__(
        self,
        reactor: Any,
        clock: Any,
        spawnArgs: Sequence[str],
        initTasks: Sequence[InitStep],
        startTimeout: float,
        processEnded: Callable[[WorkerProcessProtocol, Failure], None],
        ready: Callable[[Worker], None],
        failed: Callable[[Worker, str], None],
    ) -> None:
        """
        @param reactor: provides L{IReactorProcess}.
        @param clock: provides L{IReactorTime}, for the start timeout.
        @param spawnArgs: task modules for the child's command line.
        @param initTasks: the L{InitStep}s every new worker runs.
        @param startTimeout: seconds each start-up step may take.
        @param processEnded: called when a worker's process ends.
        @param ready: called with a worker that finished its start-up.
        @param failed: called with a worker that could not be spawned or
            did not start, and the reason.
        """
        # Logged under the pool's name, as before the start-up had a class.
        self.log = Logger(namespace="salttwist.workers.pool.WorkerPool", source=self)
        self._reactor = reactor
        self._clock = clock
        self._args = [sys.executable, "-m", CHILD_MODULE, *spawnArgs]
        self._initTasks = list(initTasks)
        self._startTimeout = startTimeout
        self._processEnded = processEnded
        self._ready = ready
        self._failed = failed
        self.environ: dict[str, str] = {}
        self.idempotent: frozenset[str] = frozenset()

    def spawn(self, initial: bool) -> Worker | None:
        """
        Spawn a worker process.

        @param initial: one of those the pool's C{start} spawns.
        @return: the worker, or L{None} if it could not be spawned (then
            C{failed} was called).
        """
        protocol = WorkerProcessProtocol(self._processEnded)
        worker = Worker(protocol, initial)
        try:
            self._reactor.spawnProcess(
                protocol, sys.executable, self._args, env=self.environ, childFDs=CHILD_FDS
            )
        except Exception as e:
            self.log.failure("cannot spawn a worker")
            self._failed(worker, f"could not be spawned: {e}")
            return None
        return worker

    def begin(self, worker: Worker) -> None:
        """
        Start C{worker}'s start-up: L{Hello}, then the init tasks.
        """
        self.log.debug("spawned worker {pid}", pid=worker.pid)
        worker.armTimeout(self._clock, self._startTimeout, self._timedOut, worker)
        d = worker.protocol.amp.callRemote(Hello)
        d.addCallbacks(
            self._helloAnswered, self._callFailed, callbackArgs=(worker,), errbackArgs=(worker,)
        )

    def _helloAnswered(self, response: dict[str, Any], worker: Worker) -> None:
        if worker.phase != PHASE_STARTING:
            return
        worker.cancelTimeout()
        try:
            registry = serial.loads(response["tasks"])
            idempotent = frozenset(
                name
                for task, info in registry.items()
                if info.get("idempotent") is True
                # A typed command is retried as its task is.
                for name in (task, info.get("command") or task)
            )
        except (serial.SerialError, AttributeError) as e:
            self._abort(worker, f"sent a malformed task registry ({e})")
            return
        self.idempotent = idempotent
        self._runInitTask(worker, 0)

    def _runInitTask(self, worker: Worker, index: int) -> None:
        if index == len(self._initTasks):
            self._ready(worker)
            return
        name, command, args = self._initTasks[index]
        worker.armTimeout(self._clock, self._startTimeout, self._timedOut, worker)
        try:
            if command is RunTask:
                d = worker.protocol.amp.callRemote(
                    RunTask, task=name, payload=serial.dumps([args, {}])
                )
            else:
                d = worker.protocol.amp.callRemote(command, **args)
        except Exception as e:
            self._abort(worker, f"could not be sent its init task {name} ({e})")
            return
        d.addCallbacks(
            self._initAnswered,
            self._callFailed,
            callbackArgs=(worker, index),
            errbackArgs=(worker,),
        )

    def _initAnswered(self, response: dict[str, Any], worker: Worker, index: int) -> None:
        if worker.phase != PHASE_STARTING:
            return
        worker.cancelTimeout()
        if response.get("errorType") is not None:
            name = self._initTasks[index][0]
            self._abort(
                worker,
                f"failed its init task {name}: {response['errorType']}: "
                f"{response.get('errorMessage')}",
            )
            return
        self._runInitTask(worker, index + 1)

    def _callFailed(self, failure: Failure, worker: Worker) -> None:
        if worker.phase != PHASE_STARTING:
            return None
        if failure.check(ConnectionClosed):
            # The process ended: the pool reports it with its status.
            return None
        self._abort(worker, f"broke the AMP protocol ({failure.getErrorMessage()})")
        return None

    def _timedOut(self, worker: Worker) -> None:
        if worker.phase != PHASE_STARTING:
            return
        self._abort(worker, f"did not finish a start-up step within {seconds(self._startTimeout)}")

    def _abort(self, worker: Worker, reason: str) -> None:
        worker.life.kill()
        self._failed(worker, reason)
