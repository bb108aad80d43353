# -*- test-case-name: tests.test_client_api -*-
"""
The bridge between blocking Python code and the Twisted core: the reactor
runs in one daemon thread, and the synchronous client facades
(L{salttwist.client.LocalClient}, L{salttwist.client.Caller},
L{salttwist.client.RunnerClient}) call into it and wait for the answer.

Why one thread, started on first use, for the whole process:

  - A reactor cannot be restarted: once C{reactor.run()} has returned,
    running it again raises C{ReactorNotRestartable}. A script that calls
    C{LocalClient().cmd(...)} twice therefore cannot run the reactor around
    each call, as the commands do with C{task.react}.
  - There is one global reactor per process, and the Twisted core uses it.
    So it is started once, in a daemon thread, with
    C{installSignalHandlers=False} (signal handlers can only be installed
    from the main thread, and Ctrl-C must stay the program's), and it keeps
    running until the interpreter exits.
  - Without the reactor's C{SIGCHLD} handler, child processes (C{cmd.run}
    run by L{salttwist.client.Caller}) would never be reaped: the bridge
    reaps them on a short timer instead, as crochet does.
  - At exit the reactor is stopped before Python waits for its non-daemon
    threads (the reactor's thread pool would otherwise keep the process
    alive): the stop is registered with C{threading._register_atexit},
    which runs before those threads are joined, unlike L{atexit}.

A program that already runs the reactor (a Twisted program) must use the
L{Deferred}-returning core instead (L{salttwist.client.local.LocalClient},
L{salttwist.client.localcall.LocalCaller}): a blocking call made on the reactor
thread would wait for the reactor it blocks. The bridge refuses such a call
with L{ReactorThreadError}. Other threads of such a program may use the
facades: the bridge then calls into the reactor already running. Once a
program has used the facades, the reactor runs in the bridge's thread, so
the program cannot run it itself any more (C{ReactorAlreadyRunning}).

Calls are made as L{twisted.internet.threads.blockingCallFromThread} makes
them (C{callFromThread}, then wait on a queue), with two additions: a
timeout that cancels the work on the reactor, and a wait that gives up with
L{ReactorThreadError} when the reactor thread has stopped, where
C{blockingCallFromThread} would wait forever.
"""

from __future__ import annotations

import atexit
import queue
import threading
from collections.abc import Callable, Generator
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, maybeDeferred
from twisted.python import threadable
from twisted.python.failure import Failure

#: Seconds between two checks that the reactor is still there while a
#: caller waits (the answer itself is taken as soon as it is put).
_LIVENESS_INTERVAL = 0.5

#: Seconds between two reaps of finished child processes.
REAP_INTERVAL = 0.1

#: Seconds the exit hook waits for the reactor thread to stop.
STOP_TIMEOUT = 10.0


class ReactorThreadError(RuntimeError):
    """
    A blocking call cannot be served: it was made on the reactor thread
    itself, or the reactor has stopped (it cannot be restarted).
    """


_IN_REACTOR_THREAD = (
    "this synchronous salttwist client method was called on the reactor thread, "
    "where it would wait for the reactor it blocks. In a Twisted program use the "
    "Deferred-returning core instead: salttwist.client.local.LocalClient "
    "(run, publish, runner) or salttwist.client.localcall.LocalCaller (call)."
)

_STOPPED = (
    "the reactor has stopped, and a reactor cannot be restarted in the same process: "
    "the synchronous salttwist clients need it running"
)


class ReactorThread:
    """
    Runs a reactor in a daemon thread, started on first use, and calls into
    it from other threads.

    @ivar name: the name of the thread.
    """

    def __init__(
        self,
        reactor: Any = None,
        name: str = "salttwist-reactor",
        reapProcesses: bool = True,
        clock: Any = None,
    ) -> None:
        """
        @param reactor: the reactor to run; the global one (looked up late,
            which installs the default reactor if none is) when L{None}.
        @param reapProcesses: reap finished child processes on a timer
            while this object runs the reactor. The reaping is global to the
            process, so only the bridge of the global reactor should do it.
        @param clock: what times L{callWithTimeout}'s timeouts (used on the
            reactor thread only); the reactor by default.
        """
        self._reactor = reactor
        self._clock = clock
        self.name = name
        self._reapProcesses = reapProcesses
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def reactor(self) -> Any:
        """
        The reactor this bridge calls into.
        """
        if self._reactor is None:
            from twisted.internet import reactor

            self._reactor = reactor
        return self._reactor

    # -- state -------------------------------------------------------------

    def _foreignRunning(self) -> bool:
        """
        Is the reactor running (or starting) in a thread this object did
        not start?
        """
        reactor = self.reactor
        return bool(reactor.running or getattr(reactor, "_started", False))

    def isReactorThread(self) -> bool:
        """
        @return: whether the calling thread runs the reactor.
        """
        thread = self._thread
        if thread is not None:
            return threading.get_ident() == thread.ident
        return self._foreignRunning() and threadable.isInIOThread()

    def _alive(self) -> bool:
        """
        @return: whether the reactor can still answer calls.
        """
        thread = self._thread
        if thread is not None:
            return thread.is_alive()
        return self._foreignRunning()

    def _ensureRunning(self) -> None:
        """
        Start the reactor thread unless the reactor already runs.

        @raise ReactorThreadError: on the reactor thread, or if the reactor
            has stopped.
        """
        if self.isReactorThread():
            raise ReactorThreadError(_IN_REACTOR_THREAD)
        with self._lock:
            if self._thread is not None:
                if not self._thread.is_alive():
                    raise ReactorThreadError(_STOPPED)
                return
            if self._foreignRunning():
                return
            if getattr(self.reactor, "_startedBefore", False):
                raise ReactorThreadError(_STOPPED)
            thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread = thread
            thread.start()
        _registerExitHook(self._stopAtExit)

    def _run(self) -> None:
        """
        The body of the reactor thread.
        """
        reactor = self.reactor
        if self._reapProcesses:
            reactor.callWhenRunning(self._startReaper)
        reactor.run(installSignalHandlers=False)

    def _startReaper(self) -> None:
        """
        Reap finished child processes every L{REAP_INTERVAL} seconds: with
        no C{SIGCHLD} handler nothing else would.
        """
        from twisted.internet.task import LoopingCall
        from twisted.python.runtime import platform

        if not platform.isWindows():
            from twisted.internet.process import reapAllProcesses

            reaper = LoopingCall(reapAllProcesses)
            reaper.clock = self.reactor
            reaper.start(REAP_INTERVAL, now=False)

    # -- calls -------------------------------------------------------------

    def call(self, f: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """
        Call C{f(*args, **kwargs)} on the reactor thread and wait for its
        result; a L{Deferred} or coroutine result is waited for too.

        @return: the result.
        @raise Exception: what C{f} raised or failed with, of its own type.
        @raise ReactorThreadError: on the reactor thread, or if the reactor
            stopped before answering.
        """
        return self.callWithTimeout(None, f, *args, **kwargs)

    def callWithTimeout(
        self, timeout: float | None, f: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any:
        """
        Like L{call}, cancelling the work if it has no result after
        C{timeout} seconds.

        @param timeout: seconds, or L{None} to wait as long as it takes.
        @raise TimeoutError: when the timeout passed (the work was
            cancelled).
        """
        self._ensureRunning()
        answers: queue.Queue[Any] = queue.Queue()
        running: list[Deferred[Any]] = []

        def onReactor() -> None:
            # Nothing may escape: an exception here would be logged by the
            # reactor and the caller would wait forever.
            try:
                d = maybeDeferred(_apply, f, args, kwargs)
                if timeout is not None:
                    clock = self._clock if self._clock is not None else self.reactor
                    d.addTimeout(timeout, clock, onTimeoutCancel=_timedOut)
            except BaseException:
                answers.put(Failure())
                return
            running.append(d)
            d.addBoth(answers.put)

        self.reactor.callFromThread(onReactor)
        try:
            result = self._wait(answers)
        except BaseException:
            # Ctrl-C in the caller, or the reactor went away: the work is
            # cancelled rather than left running for nobody.
            self.reactor.callFromThread(_cancelAll, running)
            raise
        if isinstance(result, Failure):
            result.raiseException()
        return result

    def stream(
        self, f: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Generator[Any, None, Any]:
        """
        Run C{f(emit, *args, **kwargs)} on the reactor thread, and yield
        here each item it passes to C{emit} (which any thread may call), as
        it arrives. The generator returns C{f}'s result (a L{Deferred} or
        coroutine is waited for), or raises its failure.

        Nothing starts before the first item is asked for. Closing the
        generator early cancels C{f}'s L{Deferred}.

        @raise ReactorThreadError: as L{call}.
        """
        self._ensureRunning()
        items: queue.Queue[tuple[bool, Any]] = queue.Queue()
        running: list[Deferred[Any]] = []

        def emit(item: Any) -> None:
            items.put((False, item))

        def start() -> None:
            d = maybeDeferred(_apply, f, (emit, *args), kwargs)
            running.append(d)
            d.addBoth(lambda result: items.put((True, result)))

        self.reactor.callFromThread(start)
        finished = False
        try:
            while True:
                done, value = self._wait(items)
                if done:
                    finished = True
                    if isinstance(value, Failure):
                        value.raiseException()
                    return value
                yield value
        finally:
            if not finished:
                # The consumer stopped early (or the reactor went away):
                # whatever f still waits for is cancelled, in order after
                # start() since the reactor runs thread calls first in,
                # first out.
                self.reactor.callFromThread(_cancelAll, running)

    def _wait(self, answers: queue.Queue[Any]) -> Any:
        """
        @return: the next item of C{answers}.
        @raise ReactorThreadError: if the reactor stops first.
        """
        while True:
            try:
                return answers.get(timeout=_LIVENESS_INTERVAL)
            except queue.Empty:
                if not self._alive():
                    # One last look: the answer may have been put just
                    # before the reactor stopped.
                    try:
                        return answers.get_nowait()
                    except queue.Empty:
                        raise ReactorThreadError(_STOPPED) from None

    # -- stopping ----------------------------------------------------------

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """
        Stop the reactor this object started, and wait for its thread.
        This is final: the reactor cannot be started again. A reactor this
        object did not start is left alone.

        @return: whether the thread has ended.
        @raise ReactorThreadError: on the reactor thread.
        """
        thread = self._thread
        if thread is None:
            return True
        if threading.get_ident() == thread.ident:
            raise ReactorThreadError("the reactor thread cannot wait for itself to stop")
        if thread.is_alive():
            self.reactor.callFromThread(self._stopReactor)
            thread.join(timeout)
        return not thread.is_alive()

    def _stopReactor(self) -> None:
        if self.reactor.running:
            self.reactor.stop()

    def _stopAtExit(self) -> None:
        """
        The interpreter is exiting: stop the reactor so that its thread
        pool ends and no connection is left half-written.
        """
        if threading.get_ident() != getattr(self._thread, "ident", None):
            self.stop()


def _apply(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """
    C{f(*args, **kwargs)}, for L{maybeDeferred}, whose own parameter names
    must not meet the keyword arguments of C{f}.
    """
    return f(*args, **kwargs)


def _cancelAll(running: list[Deferred[Any]]) -> None:
    """
    Cancel the L{Deferred}s of work nobody waits for any more.
    """
    for d in running:
        d.cancel()


def _timedOut(result: Any, timeout: float) -> Any:
    """
    The C{onTimeoutCancel} of L{ReactorThread.callWithTimeout}: the
    cancellation the timeout caused becomes a L{TimeoutError}.
    """
    if isinstance(result, Failure) and result.check(CancelledError):
        raise TimeoutError(f"no result within {timeout:g} seconds")
    return result


def _registerExitHook(hook: Callable[[], None]) -> None:
    """
    Call C{hook} when the interpreter exits, before it joins the
    non-daemon threads (so before L{atexit} handlers) where Python allows.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(hook)
            return
        except RuntimeError:
            # Already shutting down: nothing will wait for the threads.
            return
    atexit.register(hook)


_shared: ReactorThread | None = None
_SHARED_LOCK = threading.Lock()


def getReactorThread() -> ReactorThread:
    """
    @return: the process's bridge to the global reactor, shared by every
        synchronous client.
    """
    global _shared
    with _SHARED_LOCK:
        if _shared is None:
            _shared = ReactorThread()
        return _shared
