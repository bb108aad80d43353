# -*- test-case-name: tests.test_workers,tests.test_workers_real -*-
"""
L{WorkerPool}: worker processes running registered tasks, a fixed number
of them or, with C{minSize} below C{size}, as many as the work needs.

Policy:
  - C{run()} (a task by name, over L{RunTask}) and C{call()} (a typed task
    command) hand a request to an idle worker, or queues it (first in,
    first out) when all are busy; beyond C{maxQueue} waiting requests it
    fails at once with L{QueueFull}.
  - Every task runs under C{taskTimeout}. A worker that exceeds it is killed
    with SIGKILL; a worker that exits while running a task is gone too. Either
    way the request fails with L{WorkerFailed} naming the pid, the task and
    what happened, unless the task is idempotent and has not been retried yet:
    then it goes back to the front of the queue, once. A replacement worker is
    spawned at once.
  - A new worker first answers L{Hello} (its task registry, hence which tasks
    are idempotent), then runs the pool's C{initTasks} (for example loading
    the master key), each step under C{startTimeout}, before it takes work
    (L{salttwist.workers.startup.WorkerStartup}). A worker that fails to
    start, or dies while idle, is replaced after a back-off
    (0.5 s doubling to 30 s, reset when a worker starts); while no worker is
    ready and the last start failed, queued and new requests fail with
    L{WorkerFailed} rather than wait for a worker that may never come.
  - C{stop()} fails queued requests with L{PoolStopped}, sends L{Shutdown}
    to every worker (a running task is answered first), and SIGKILLs what is
    left after C{shutdownGrace} seconds.
  - Elastic pools (C{minSize < size}) grow and shrink as
    L{salttwist.workers.sizing.SizingPolicy} says; a worker told to shut
    down for idleness is SIGKILLed if it has not exited C{shutdownGrace}
    seconds later.
  - Each worker's life (starting, idle, busy, stopping, killed, ended) is
    an automat machine, L{salttwist.workers.lifecycle.WorkerLife}.

Nothing here waits on wall time or the global reactor: the reactor
(L{IReactorProcess}) and clock (L{IReactorTime}) are injected.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectionClosed, ProcessDone, ProcessTerminated
from twisted.internet.interfaces import IDelayedCall
from twisted.logger import Logger
from twisted.protocols import amp
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist import serial
from salttwist.interfaces import IWorkerPool
from salttwist.workers import (
    PayloadTooLarge,
    PoolStopped,
    QueueFull,
    TaskError,
    WorkerFailed,
    tasks,
)
from salttwist.workers.child import answerCommand, executeTask
from salttwist.workers.commands import MAX_PAYLOAD_BYTES, RunTask, Shutdown
from salttwist.workers.lifecycle import (
    LIVE_PHASES,
    PHASE_IDLE,
    PHASE_KILLED,
    PHASE_STARTING,
    PHASE_STOPPING,
    Worker,
)
from salttwist.workers.protocol import WorkerProcessProtocol
from salttwist.workers.sizing import RESTART_BACKOFF_BASE, RESTART_BACKOFF_MAX, SizingPolicy
from salttwist.workers.startup import (
    CHILD_MODULE,
    WorkerStartup,
    childEnvironment,
    initStep,
    seconds,
)
from salttwist.workers.tasks import taskName

__all__ = [
    "RESTART_BACKOFF_BASE",
    "RESTART_BACKOFF_MAX",
    "CHILD_MODULE",
    "InlineWorkerPool",
    "WorkerPool",
    "describeExit",
]


class _Request:
    """
    One C{run()} or C{call()} call.

    @ivar taskName: the task's dotted name, or a typed command's name.
    @ivar payload: for L{RunTask}, the msgpack C{[args, kwargs]}.
    @ivar command: L{RunTask}, or the typed command of a C{call()}.
    @ivar arguments: the keyword arguments of a typed command.
    @ivar settled: the caller's L{Deferred} has fired or was cancelled;
        nothing more may happen to it.
    @ivar attempts: how many workers were given it.
    @ivar firstFailure: why the first attempt failed, once it was retried.
    """

    def __init__(
        self,
        taskName: str,
        payload: bytes,
        command: type[amp.Command] = RunTask,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        self.taskName = taskName
        self.payload = payload
        self.command = command
        self.arguments = arguments
        self.deferred: Deferred[Any] = Deferred()
        self.settled = False
        self.attempts = 0
        self.firstFailure: str | None = None


def describeExit(reason: Failure) -> str:
    """
    @return: how a process ended, in words: C{"exited with code 1"},
        C{"exited with signal 9"}.
    """
    value = reason.value
    if isinstance(value, ProcessTerminated):
        if value.signal is not None:
            return f"exited with signal {value.signal}"
        return f"exited with code {value.exitCode}"
    if isinstance(value, ProcessDone):
        return "exited with code 0"
    return f"ended ({reason.getErrorMessage()})"


@implementer(IWorkerPool)
class WorkerPool:
    """
    A pool of C{size} worker processes, or of C{minSize} to C{size} (see
    the module docstring for the policy).
    """

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        size: int,
        clock: Any = None,
        spawnArgs: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
        taskTimeout: float = 30.0,
        maxQueue: int = 10000,
        initTasks: Iterable[tuple[Any, Sequence[Any]]] = (),
        shutdownGrace: float = 5.0,
        startTimeout: float = 30.0,
        minSize: int | None = None,
        idleTimeout: float = 60.0,
    ) -> None:
        """
        @param reactor: provides L{IReactorProcess} (and L{IReactorTime} when
            C{clock} is not given).
        @param size: the number of workers, at least 1; with C{minSize}, the
            most workers.
        @param clock: the L{IReactorTime} for timeouts (C{reactor} by
            default).
        @param spawnArgs: extra arguments for C{python -m
            salttwist.workers.child}: names of task modules the children
            import besides L{salttwist.workers.tasks}.
        @param env: variables added to (or replacing some of) a copy of this
            process's environment for the children; the environment is never
            emptied. C{PYTHONPATH} is set to this process's C{sys.path} unless
            C{env} sets it, so the children import the same salttwist.
        @param taskTimeout: seconds a task may take before its worker is
            killed.
        @param maxQueue: the most requests that may wait for a worker.
        @param initTasks: C{(task, args)} pairs every new worker runs, in
            order, before it takes work; a failure of one fails that worker's
            start. C{task} is a task (its name or function; C{args} a list)
            or a typed L{salttwist.workers.commands.TaskCommand} (C{args} a
            mapping of its arguments).
        @param shutdownGrace: seconds L{stop} lets workers finish before
            killing them.
        @param startTimeout: seconds each start-up step of a worker (its
            L{Hello}, then each init task) may take before it is killed.
        @param minSize: the workers started by L{start} and kept when idle,
            from 1 to C{size} (C{size} by default: a fixed pool).
        @param idleTimeout: seconds a worker beyond C{minSize} may stay idle
            before it is shut down.
        """
        self._sizing = SizingPolicy(size, minSize, idleTimeout)
        self._reactor = reactor
        self._clock = clock if clock is not None else reactor
        self._env = dict(env or {})
        self._taskTimeout = taskTimeout
        self._maxQueue = maxQueue
        self._shutdownGrace = shutdownGrace
        self._startup = WorkerStartup(
            reactor,
            self._clock,
            list(spawnArgs or ()),
            [initStep(task, args) for task, args in initTasks],
            startTimeout,
            self._processEnded,
            self._workerReady,
            self._startFailed,
        )

        self._state = "new"
        self._workers: list[Worker] = []
        self._byProtocol: dict[WorkerProcessProtocol, Worker] = {}
        self._queue: deque[_Request] = deque()
        self._respawnCalls: list[IDelayedCall] = []
        self._startFailures = 0
        self._lastStartFailure = ""
        self._starting: Deferred[None] | None = None
        self._initialPending = 0
        self._graceCall: IDelayedCall | None = None
        self._stopWaiters: list[Deferred[None]] = []

        self._restarts = 0
        self._completed = 0
        self._failed = 0

    # Starting and replacing workers.

    def start(self) -> Deferred[None]:
        """
        Spawn the workers.

        @return: a L{Deferred} firing once every initial worker has started,
            or failing with L{WorkerFailed} as soon as one could not start
            (the pool keeps trying to replace it).
        @raise RuntimeError: if the pool was already started.
        """
        if self._state != "new":
            raise RuntimeError("a worker pool starts only once")
        self._state = "running"
        self._startup.environ = childEnvironment(self._env)
        self._starting = Deferred()
        starting = self._starting
        self._initialPending = self._sizing.minSize
        for _ in range(self._sizing.minSize):
            self._spawn(initial=True)
        return starting

    def _spawn(self, initial: bool, grown: bool = False) -> None:
        """
        Spawn a worker: one of those L{start} spawns (C{initial}), one more
        for waiting requests (C{grown}), or a replacement.
        """
        if not initial and not grown:
            self._restarts += 1
        worker = self._startup.spawn(initial)
        if worker is None:
            return
        self._workers.append(worker)
        self._byProtocol[worker.protocol] = worker
        self._startup.begin(worker)

    def _workerReady(self, worker: Worker) -> None:
        worker.life.ready()
        self._startFailures = 0
        self.log.debug("worker {pid} ready", pid=worker.pid)
        if worker.initial:
            worker.initial = False
            self._initialPending -= 1
            if self._initialPending == 0 and self._starting is not None:
                starting, self._starting = self._starting, None
                starting.callback(None)
        self._dispatch()

    def _startFailed(self, worker: Worker, reason: str) -> None:
        """
        A worker did not start, or died while idle: report it, and replace
        it after a back-off.
        """
        if self._state != "running":
            return
        pid = worker.pid
        who = f"worker pid {pid}" if pid is not None else "a worker"
        self._lastStartFailure = f"{who} {reason}"
        self._startFailures += 1
        self.log.error("worker start-up failed: {what}", what=self._lastStartFailure)
        if worker.initial and self._starting is not None:
            starting, self._starting = self._starting, None
            starting.errback(WorkerFailed(None, pid, reason))
        if not self._mayServe():
            while self._queue:
                request = self._queue.popleft()
                self._settle(request, failure=self._noWorker(request.taskName))
        delay = self._sizing.restartDelay(self._startFailures)
        call = self._clock.callLater(delay, self._respawnLater)
        self._respawnCalls.append(call)

    def _respawnLater(self) -> None:
        self._respawnCalls = [c for c in self._respawnCalls if c.active()]
        if self._state == "running":
            self._spawn(initial=False)

    def _mayServe(self) -> bool:
        """
        @return: whether some worker is ready, or starting and so may soon be.
        """
        return any(w.phase in LIVE_PHASES for w in self._workers)

    def _noWorker(self, name: str) -> WorkerFailed:
        return WorkerFailed(
            name, None, f"no worker could be started (last failure: {self._lastStartFailure})"
        )

    # Running tasks.

    def run(self, taskOrName: Any, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """
        Run a task on a worker.

        @param taskOrName: the task's dotted name or its decorated function.
        @return: a L{Deferred} with the task's result, or failing with
            L{TaskError}, L{WorkerFailed}, L{QueueFull}, L{PoolStopped},
            L{PayloadTooLarge} or L{serial.SerialError}. Cancelling it drops
            a queued request; a running one runs on and its result is
            discarded.
        """
        try:
            name = taskName(taskOrName)
            if self._state != "running":
                raise PoolStopped(f"the worker pool is not running; {name} refused")
            payload = serial.dumps([list(args), kwargs])
            if len(payload) > MAX_PAYLOAD_BYTES:
                raise PayloadTooLarge(
                    f"arguments of {name} are {len(payload)} bytes, over {MAX_PAYLOAD_BYTES}"
                )
            self._checkRoom(name)
        except Exception as e:
            self._failed += 1
            return fail(e)
        return self._submit(_Request(name, payload))

    def call(self, command: type[amp.Command], **kwargs: Any) -> Deferred[Any]:
        """
        Run the task of a typed command (see
        L{salttwist.workers.commands.TaskCommand}) on a worker, with the same
        queue, timeout and retry as L{run}.

        @param kwargs: the command's arguments.
        @return: a L{Deferred} with the C{result} of the command's answer
            (L{None} if it has none), or failing as L{run}'s does; arguments
            the command cannot serialise fail it with their error.
        """
        name = command.commandName.decode("ascii")
        try:
            if self._state != "running":
                raise PoolStopped(f"the worker pool is not running; {name} refused")
            self._checkRoom(name)
        except Exception as e:
            self._failed += 1
            return fail(e)
        return self._submit(_Request(name, b"", command, kwargs))

    def _checkRoom(self, name: str) -> None:
        """
        @raise WorkerFailed: if no worker can be started.
        @raise QueueFull: if C{maxQueue} requests wait already.
        """
        if self._startFailures and not self._mayServe():
            raise self._noWorker(name)
        if len(self._queue) >= self._maxQueue:
            raise QueueFull(
                f"{len(self._queue)} requests already wait for a worker "
                f"(maxQueue {self._maxQueue}); {name} refused"
            )

    def _submit(self, request: _Request) -> Deferred[Any]:
        """
        Queue C{request} and dispatch.

        @return: its L{Deferred}.
        """

        def cancel(d: Deferred[Any]) -> None:
            if request.settled:
                return
            request.settled = True
            try:
                self._queue.remove(request)
            except ValueError:
                pass

        request.deferred = Deferred(cancel)
        self._queue.append(request)
        self._dispatch()
        return request.deferred

    def _dispatch(self) -> None:
        while self._queue:
            worker = next((w for w in self._workers if w.phase == PHASE_IDLE), None)
            if worker is None:
                break
            request = self._queue.popleft()
            if not request.settled:
                self._assign(worker, request)
        if self._sizing.elastic:
            self._grow()
            self._armIdle()

    def _live(self) -> list[Worker]:
        """
        @return: the workers starting, idle or busy (not those told to stop
            or killed).
        """
        return [w for w in self._workers if w.phase in LIVE_PHASES]

    def _grow(self) -> None:
        """
        Spawn workers for the requests that wait, as many as wait beyond
        those already starting, up to C{size} in all.
        """
        if not self._queue or self._state != "running" or self._startFailures:
            return
        live = self._live()
        starting = sum(1 for w in live if w.phase == PHASE_STARTING)
        for _ in range(self._sizing.toSpawn(len(live), starting, len(self._queue))):
            self.log.debug("{n} requests wait: starting another worker", n=len(self._queue))
            self._spawn(initial=False, grown=True)

    def _armIdle(self) -> None:
        """
        While more than C{minSize} workers are up, give every idle worker
        without one a retirement timer of C{idleTimeout} seconds (see
        L{_retireIdle}).
        """
        if self._state != "running" or not self._sizing.mayRetire(len(self._live())):
            return
        for worker in self._workers:
            if worker.phase == PHASE_IDLE and worker.idleCall is None:
                worker.idleCall = self._clock.callLater(
                    self._sizing.idleTimeout, self._retireIdle, worker
                )

    def _retireIdle(self, worker: Worker) -> None:
        """
        C{worker} has been idle for C{idleTimeout} seconds: tell it to shut
        down if more than C{minSize} workers are up, and kill it if it has
        not exited C{shutdownGrace} seconds later.
        """
        worker.idleCall = None
        if self._state != "running" or worker.phase != PHASE_IDLE:
            return
        if not self._sizing.mayRetire(len(self._live())):
            return
        self.log.debug("worker {pid} idle: shutting it down", pid=worker.pid)
        worker.life.retire()
        worker.armTimeout(self._clock, self._shutdownGrace, self._kill, worker)
        worker.protocol.amp.callRemote(Shutdown).addErrback(lambda f: None)

    def _assign(self, worker: Worker, request: _Request) -> None:
        worker.life.assign(request)
        request.attempts += 1
        worker.armTimeout(self._clock, self._taskTimeout, self._taskTimedOut, worker, request)
        if request.command is RunTask:
            try:
                d = worker.protocol.amp.callRemote(
                    RunTask, task=request.taskName, payload=request.payload
                )
            except Exception:
                d = fail()
        else:
            try:
                d = worker.protocol.amp.callRemote(request.command, **request.arguments)
            except Exception as e:
                # The arguments could not be serialised: nothing was sent,
                # and the worker takes the next request.
                worker.life.release()
                self._settle(request, failure=e)
                return
        d.addCallbacks(
            self._taskAnswered,
            self._taskCallFailed,
            callbackArgs=(worker, request),
            errbackArgs=(worker, request),
        )

    def _taskAnswered(self, response: dict[str, Any], worker: Worker, request: _Request) -> None:
        if worker.current is not request:
            return
        worker.life.release()
        if response.get("errorType") is not None:
            self._settle(
                request,
                failure=TaskError(
                    request.taskName, response["errorType"], response.get("errorMessage") or ""
                ),
            )
        elif request.command is not RunTask:
            self._settle(request, result=response.get("result"))
        else:
            try:
                result = serial.loads(response["result"])
            except (serial.SerialError, KeyError, TypeError) as e:
                self._settle(
                    request,
                    failure=TaskError(
                        request.taskName, "salttwist.serial.SerialError", f"bad result: {e}"
                    ),
                )
            else:
                self._settle(request, result=result)
        self._dispatch()

    def _taskCallFailed(self, failure: Failure, worker: Worker, request: _Request) -> None:
        if worker.current is not request:
            return None
        if failure.check(ConnectionClosed):
            # The process ended: _processEnded settles the request with the
            # exit status.
            return None
        # The answer was not a valid RunTask answer: trust this worker no
        # further. Not retried: the same request would break the same way.
        worker.life.kill()
        self._replace()
        self._settle(
            request,
            failure=WorkerFailed(
                request.taskName,
                worker.pid,
                f"broke the AMP protocol ({failure.getErrorMessage()}) and was killed",
            ),
        )
        self._dispatch()
        return None

    def _taskTimedOut(self, worker: Worker, request: _Request) -> None:
        if worker.current is not request:
            return
        worker.timeoutCall = None
        worker.life.kill()
        # Replace first: settling the request runs the caller's callbacks,
        # which should find the pool in a consistent state.
        self._replace()
        self._lost(
            request,
            worker.pid,
            f"timed out after {seconds(self._taskTimeout)} (killed with SIGKILL)",
        )
        self._dispatch()

    def _lost(self, request: _Request, pid: int | None, reason: str) -> None:
        """
        The worker running C{request} died or hung: retry the request once
        if its task is idempotent, else fail it.
        """
        if request.settled:
            return
        who = f"worker pid {pid}"
        if (
            request.taskName in self._startup.idempotent
            and request.attempts < 2
            and self._state == "running"
        ):
            self.log.warn(
                "{who} {reason} while running {task}; retrying it once",
                who=who,
                reason=reason,
                task=request.taskName,
            )
            request.firstFailure = f"{who} {reason}"
            self._queue.appendleft(request)
            return
        note = ""
        if request.firstFailure is not None:
            note = f" (it had been retried once after {request.firstFailure})"
        self._settle(request, failure=WorkerFailed(request.taskName, pid, reason, note))

    def _settle(
        self, request: _Request, result: Any = None, failure: Exception | None = None
    ) -> None:
        if request.settled:
            return
        request.settled = True
        if failure is not None:
            self._failed += 1
            request.deferred.errback(failure)
        else:
            self._completed += 1
            request.deferred.callback(result)

    def _kill(self, worker: Worker) -> None:
        worker.life.kill()

    def _replace(self) -> None:
        if self._state == "running":
            self._spawn(initial=False)

    def _processEnded(self, protocol: WorkerProcessProtocol, reason: Failure) -> None:
        worker = self._byProtocol.pop(protocol, None)
        if worker is None:
            return
        self._workers.remove(worker)
        phase, request = worker.life.ended()
        what = describeExit(reason)
        if phase == PHASE_KILLED:
            self.log.debug("worker {pid} {what} after being killed", pid=worker.pid, what=what)
        elif phase == PHASE_STOPPING:
            self.log.debug("worker {pid} {what}", pid=worker.pid, what=what)
            if request is not None:
                self._settle(request, failure=WorkerFailed(request.taskName, worker.pid, what))
        else:
            self.log.warn(
                "worker {pid} {what} unexpectedly; last lines of its stderr:\n{tail}",
                pid=worker.pid,
                what=what,
                tail="\n".join(protocol.stderrTail) or "(none)",
            )
            if phase == PHASE_STARTING:
                # Its last stderr line is usually the reason (an ImportError).
                last = f" ({protocol.stderrTail[-1]})" if protocol.stderrTail else ""
                self._startFailed(worker, f"{what} during start-up{last}")
            elif request is not None:
                self._replace()
                self._lost(request, worker.pid, what)
            else:
                # Died while idle: not a task's fault, so replace it with the
                # same back-off as a failed start, in case it is a loop.
                self._startFailed(worker, f"{what} while idle")
        self._dispatch()
        self._maybeStopped()

    # Stopping.

    def stop(self) -> Deferred[None]:
        """
        Stop the workers (see the module docstring).

        @return: a L{Deferred} that fires when every worker process has
            ended.
        """
        if self._state == "new":
            self._state = "stopped"
        if self._state == "stopped":
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._stopWaiters.append(waiter)
        if self._state == "running":
            self._state = "stopping"
            for call in self._respawnCalls:
                if call.active():
                    call.cancel()
            self._respawnCalls = []
            while self._queue:
                request = self._queue.popleft()
                self._settle(
                    request,
                    failure=PoolStopped(
                        f"the worker pool stopped before running {request.taskName}"
                    ),
                )
            for worker in list(self._workers):
                # False when killed, or retired for idleness and told already.
                if worker.life.retire():
                    worker.protocol.amp.callRemote(Shutdown).addErrback(lambda f: None)
            self._graceCall = self._clock.callLater(self._shutdownGrace, self._killRemaining)
            if self._starting is not None:
                starting, self._starting = self._starting, None
                starting.errback(PoolStopped("the worker pool stopped while starting"))
            self._maybeStopped()
        return waiter

    def _killRemaining(self) -> None:
        self._graceCall = None
        for worker in list(self._workers):
            request = worker.life.kill()
            if request is not None:
                self._settle(
                    request,
                    failure=WorkerFailed(
                        request.taskName,
                        worker.pid,
                        f"was still running {seconds(self._shutdownGrace)} after the pool "
                        "was told to stop (killed with SIGKILL)",
                    ),
                )

    def _maybeStopped(self) -> None:
        if self._state != "stopping" or self._workers:
            return
        self._state = "stopped"
        if self._graceCall is not None and self._graceCall.active():
            self._graceCall.cancel()
        self._graceCall = None
        waiters, self._stopWaiters = self._stopWaiters, []
        for waiter in waiters:
            waiter.callback(None)

    # Visibility.

    def stats(self) -> dict[str, int]:
        """
        @return: C{size} (configured; the most workers of an elastic
            pool), C{busy} (workers running a task),
            C{idle} (workers ready for one), C{queued} (requests waiting),
            C{restarts} (replacement workers spawned), C{completed} and
            C{failed} (C{run()} calls that succeeded, and that failed for any
            reason but cancellation).
        """
        return {
            "size": self._sizing.size,
            "busy": sum(1 for w in self._workers if w.current is not None),
            "idle": sum(1 for w in self._workers if w.phase == PHASE_IDLE),
            "queued": len(self._queue),
            "restarts": self._restarts,
            "completed": self._completed,
            "failed": self._failed,
        }

    def pids(self) -> list[int]:
        """
        @return: the pids of the worker processes that have not yet ended.
        """
        return [w.pid for w in self._workers if w.pid is not None]


@implementer(IWorkerPool)
class InlineWorkerPool:
    """
    The L{IWorkerPool} API run in this process, synchronously, for unit tests
    of code that uses a pool: arguments and results still go through msgpack
    and task errors still become L{TaskError}, but there are no processes,
    timeouts or retries.
    """

    def __init__(self, initTasks: Iterable[tuple[Any, Sequence[Any]]] = ()) -> None:
        """
        @param initTasks: C{(task, args)} pairs run by L{start}, as
            L{WorkerPool}'s.
        """
        self._initTasks = [initStep(task, args) for task, args in initTasks]
        self._running = False
        self._completed = 0
        self._failed = 0

    def start(self) -> Deferred[None]:
        """
        Run the init tasks.

        @return: a L{Deferred} firing when they ran, or failing with
            L{TaskError}.
        """
        self._running = True
        for name, command, args in self._initTasks:
            if command is RunTask:
                answer = executeTask(name, serial.dumps([args, {}]), _Discard())
                if answer.get("errorType") is not None:
                    return fail(TaskError(name, answer["errorType"], answer["errorMessage"]))
            else:
                try:
                    self._answer(command, dict(args))
                except Exception as e:
                    return fail(e)
        return succeed(None)

    def run(self, taskOrName: Any, *args: Any, **kwargs: Any) -> Deferred[Any]:
        """
        Run a task now.

        @return: a fired L{Deferred}.
        """
        try:
            name = taskName(taskOrName)
            if not self._running:
                raise PoolStopped(f"the worker pool is not running; {name} refused")
            answer = executeTask(name, serial.dumps([list(args), kwargs]), _Discard())
            if answer.get("errorType") is not None:
                raise TaskError(name, answer["errorType"], answer["errorMessage"])
            result = serial.loads(answer["result"])
        except Exception as e:
            self._failed += 1
            return fail(e)
        self._completed += 1
        return succeed(result)

    def call(self, command: type[amp.Command], **kwargs: Any) -> Deferred[Any]:
        """
        Run the task of a typed command now, its arguments and answer
        going through the command's AMP types as they do to a worker.

        @return: a fired L{Deferred}.
        """
        name = command.commandName.decode("ascii")
        try:
            if not self._running:
                raise PoolStopped(f"the worker pool is not running; {name} refused")
            result = self._answer(command, kwargs)
        except Exception as e:
            self._failed += 1
            return fail(e)
        self._completed += 1
        return succeed(result)

    def _answer(self, command: type[amp.Command], kwargs: dict[str, Any]) -> Any:
        """
        Run the task of C{command} with C{kwargs}, through its AMP types.

        @return: the C{result} of its answer.
        @raise TaskError: if the task raised, or no task answers C{command}.
        """
        name = command.commandName.decode("ascii")
        entry = tasks.commandTask(command.commandName)
        if entry is None:
            raise TaskError(name, "salttwist.workers.UnknownTask", f"no command {name}")
        box = amp.AmpBox(command.makeArguments(kwargs, None))
        answer = command.parseResponse(answerCommand(entry, box, None, _Discard()), None)
        if answer.get("errorType") is not None:
            raise TaskError(entry.name, answer["errorType"], answer.get("errorMessage") or "")
        return answer.get("result")

    def stop(self) -> Deferred[None]:
        """
        Refuse further work.
        """
        self._running = False
        return succeed(None)

    def stats(self) -> dict[str, int]:
        """
        @return: the same keys as L{WorkerPool.stats}.
        """
        return {
            "size": 1,
            "busy": 0,
            "idle": 1 if self._running else 0,
            "queued": 0,
            "restarts": 0,
            "completed": self._completed,
            "failed": self._failed,
        }


class _Discard:
    """
    A text stream that drops what is written (tracebacks of inline tasks are
    not wanted in test output; the L{TaskError} carries the message).
    """

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
