# -*- test-case-name: tests.test_workers_lifecycle,tests.test_workers -*-
"""
The life of one worker process, as an automat machine (built with
L{TypeMachineBuilder}, as Twisted's C{ClientService} is).

States::

    Starting --ready--> Idle --assign--> Busy --release--> Idle
    Stopping --release--> Stopping              (answered while stopping)
    Starting, Idle, Busy --retire--> Stopping   (told to shut down)
    any but Ended --kill--> Killed              (SIGKILL sent)
    any --ended--> Ended                        (the process is gone)

A worker is spawned C{Starting}: it answers L{Hello} and runs the pool's
init tasks. C{Idle} takes a request (C{assign}) and is C{Busy} until it
answers (C{release}). Told to shut down (idle too long, or the pool
stops) it is C{Stopping}; a request it runs is still answered first.
C{kill} sends SIGKILL and gives back the request it ran, if any, for the
pool to settle; C{ended} reports where the worker was when its process
ended.

The pool scans its workers for an idle one on every dispatch, so each
state's transitions write the worker's L{Worker.phase} (one of the
C{PHASE_*} names) and L{Worker.current} (the request it runs) for cheap
reads; only the machine writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from automat import TypeMachineBuilder, pep614
from twisted.internet.interfaces import IDelayedCall

PHASE_STARTING = "starting"
PHASE_IDLE = "idle"
PHASE_BUSY = "busy"
PHASE_STOPPING = "stopping"
PHASE_KILLED = "killed"
PHASE_ENDED = "ended"

#: The phases of a worker that is, or may soon be, able to take work.
LIVE_PHASES = frozenset((PHASE_STARTING, PHASE_IDLE, PHASE_BUSY))


class WorkerLife(Protocol):
    """
    The inputs of one worker's life.
    """

    def ready(self) -> None:
        """
        The worker answered L{Hello} and ran the init tasks: it takes work.
        """

    def assign(self, request: Any) -> None:
        """
        The idle worker is given C{request}.
        """

    def release(self) -> Any:
        """
        The request the worker runs was answered (the caller checked that
        the answer is for L{Worker.current}: a late one is ignored).

        @return: that request, which the worker no longer runs.
        """

    def retire(self) -> bool:
        """
        Tell the worker to shut down.

        @return: whether it was starting, idle or busy: the caller then
            sends it L{Shutdown}; L{False} if it is stopping already, or
            killed.
        """

    def kill(self) -> Any:
        """
        Send the process SIGKILL (once) and cancel the worker's timers.

        @return: the request the worker ran, if any, which it no longer
            runs: the caller settles it.
        """

    def ended(self) -> tuple[str, Any]:
        """
        The process ended.

        @return: the phase the worker was in, and the request it ran (or
            L{None}).
        """


class Worker:
    """
    One worker process, what it is doing and its timers.

    @ivar protocol: its L{salttwist.workers.protocol.WorkerProcessProtocol}.
    @ivar initial: one of those the pool's C{start} spawned, not yet ready.
    @ivar phase: where its life is (a C{PHASE_*} name), written by L{life}.
    @ivar current: the request it runs, written by L{life}.
    @ivar timeoutCall: the pending start-up step, task or shutdown timeout.
    @ivar idleCall: the pending retirement for idleness.
    @ivar life: its L{WorkerLife} machine.
    """

    def __init__(self, protocol: Any, initial: bool) -> None:
        self.protocol = protocol
        self.initial = initial
        self.phase = PHASE_STARTING
        self.current: Any = None
        self.timeoutCall: IDelayedCall | None = None
        self.idleCall: IDelayedCall | None = None
        self.life: WorkerLife = _WorkerLifeMachine(self)

    @property
    def pid(self) -> int | None:
        """
        The process id, once spawned.
        """
        return self.protocol.pid  # type: ignore[no-any-return]

    def armTimeout(self, clock: Any, seconds: float, f: Any, *args: Any) -> None:
        """
        Replace the pending timeout with C{f(*args)} in C{seconds} on
        C{clock}.
        """
        self.cancelTimeout()
        self.timeoutCall = clock.callLater(seconds, f, *args)

    def cancelTimeout(self) -> None:
        """
        Cancel the pending timeout, if any.
        """
        if self.timeoutCall is not None and self.timeoutCall.active():
            self.timeoutCall.cancel()
        self.timeoutCall = None

    def cancelIdle(self) -> None:
        """
        Cancel the pending retirement for idleness, if any.
        """
        if self.idleCall is not None and self.idleCall.active():
            self.idleCall.cancel()
        self.idleCall = None


def _makeLife() -> Callable[[Worker], WorkerLife]:
    machine = TypeMachineBuilder(WorkerLife, Worker)

    Starting = machine.state("Starting")
    Idle = machine.state("Idle")
    Busy = machine.state("Busy")
    Stopping = machine.state("Stopping")
    Killed = machine.state("Killed")
    Ended = machine.state("Ended")

    @pep614(Starting.upon(WorkerLife.ready).to(Idle))
    def ready(life: WorkerLife, worker: Worker) -> None:
        worker.phase = PHASE_IDLE

    @pep614(Idle.upon(WorkerLife.assign).to(Busy))
    def assign(life: WorkerLife, worker: Worker, request: Any) -> None:
        worker.cancelIdle()
        worker.phase = PHASE_BUSY
        worker.current = request

    @pep614(Busy.upon(WorkerLife.release).to(Idle))
    def release(life: WorkerLife, worker: Worker) -> Any:
        worker.cancelTimeout()
        request, worker.current = worker.current, None
        worker.phase = PHASE_IDLE
        return request

    @pep614(Stopping.upon(WorkerLife.release).loop())
    def releaseStopping(life: WorkerLife, worker: Worker) -> Any:
        # Told to shut down while it ran a task: it answered first, and
        # stays stopping.
        worker.cancelTimeout()
        request, worker.current = worker.current, None
        return request

    @pep614(Starting.upon(WorkerLife.retire).to(Stopping))
    @pep614(Idle.upon(WorkerLife.retire).to(Stopping))
    @pep614(Busy.upon(WorkerLife.retire).to(Stopping))
    def retire(life: WorkerLife, worker: Worker) -> bool:
        worker.cancelIdle()
        if worker.phase == PHASE_STARTING:
            # Its start-up step no longer matters: the shutdown grace does.
            worker.cancelTimeout()
        worker.phase = PHASE_STOPPING
        return True

    @pep614(Stopping.upon(WorkerLife.retire).loop())
    @pep614(Killed.upon(WorkerLife.retire).loop())
    @pep614(Ended.upon(WorkerLife.retire).loop())
    def retireAgain(life: WorkerLife, worker: Worker) -> bool:
        worker.cancelIdle()
        return False

    @pep614(Starting.upon(WorkerLife.kill).to(Killed))
    @pep614(Idle.upon(WorkerLife.kill).to(Killed))
    @pep614(Busy.upon(WorkerLife.kill).to(Killed))
    @pep614(Stopping.upon(WorkerLife.kill).to(Killed))
    def kill(life: WorkerLife, worker: Worker) -> Any:
        worker.cancelTimeout()
        worker.cancelIdle()
        worker.phase = PHASE_KILLED
        request, worker.current = worker.current, None
        worker.protocol.kill()
        return request

    @pep614(Killed.upon(WorkerLife.kill).loop())
    @pep614(Ended.upon(WorkerLife.kill).loop())
    def killAgain(life: WorkerLife, worker: Worker) -> Any:
        return None

    @pep614(Starting.upon(WorkerLife.ended).to(Ended))
    @pep614(Idle.upon(WorkerLife.ended).to(Ended))
    @pep614(Busy.upon(WorkerLife.ended).to(Ended))
    @pep614(Stopping.upon(WorkerLife.ended).to(Ended))
    @pep614(Killed.upon(WorkerLife.ended).to(Ended))
    @pep614(Ended.upon(WorkerLife.ended).loop())
    def ended(life: WorkerLife, worker: Worker) -> tuple[str, Any]:
        worker.cancelTimeout()
        worker.cancelIdle()
        phase, worker.phase = worker.phase, PHASE_ENDED
        request, worker.current = worker.current, None
        return phase, request

    return machine.build()


_WorkerLifeMachine = _makeLife()
