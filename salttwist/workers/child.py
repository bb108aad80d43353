# -*- test-case-name: tests.test_workers -*-
"""
The worker process: C{python -m salttwist.workers.child [taskModule ...]}.

It imports L{salttwist.workers.tasks} and the task modules named on its
command line or, comma-separated, in C{SALTTWIST_WORKER_TASKS}, then speaks
AMP on fds 3 (from the parent) and 4 (to the parent), as
C{twisted.trial._dist.workertrial} does; stdout and stderr are left for logs,
which the parent logs at debug level.

There is no reactor here: the child reads fd 3 in a blocking loop and runs
each task synchronously in L{ChildAMP}'s responder, so a worker runs one task
at a time and a task may block as long as it likes (the parent's timeout
kills it). The child exits when it has answered L{Shutdown}, when fd 3 reaches
end of file or fd 4 breaks (the parent closed them or died), and, on Linux,
when the parent process dies even in the middle of a task
(C{PR_SET_PDEATHSIG}).
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import IO, Any

if __name__ == "__main__" and "twisted.protocols.amp" not in sys.modules:
    from salttwist._startup import deferStartupImports, holdGarbageCollection
    from salttwist.workers.lean import importLean

    # As the commands start (see salttwist._startup): http.cookiejar put off,
    # asyncio without ssl (if a task module wants it), and no garbage
    # collection until main has imported the task modules. AMP comes without
    # pyOpenSSL and asyncio (see salttwist.workers.lean).
    deferStartupImports()
    holdGarbageCollection()
    importLean("twisted.protocols.amp")

from twisted.internet.defer import succeed  # noqa: E402
from twisted.internet.interfaces import IAddress, ITransport  # noqa: E402
from twisted.protocols import amp  # noqa: E402
from zope.interface import implementer

from salttwist import serial
from salttwist.workers import PayloadTooLarge, tasks
from salttwist.workers.commands import MAX_PAYLOAD_BYTES, Hello, RunTask, Shutdown

AMP_IN_FD = 3
"""
The child reads AMP from this fd (the parent writes to it).
"""

AMP_OUT_FD = 4
"""
The child writes AMP to this fd (the parent reads it).
"""

PARENT_PID_ENV = "SALTTWIST_WORKER_PARENT_PID"


class ChildAMP(amp.AMP):
    """
    The child's side of the connection: answers L{Hello}, L{RunTask} and
    L{Shutdown}.

    @ivar shutdownRequested: set once L{Shutdown} has been answered.
    """

    def __init__(self, errorStream: IO[str] | None = None) -> None:
        """
        @param errorStream: where tracebacks of failed tasks are written
            (C{sys.stderr} by default).
        """
        super().__init__()
        self._errorStream = errorStream
        self.shutdownRequested = False

    @Hello.responder
    def hello(self) -> dict[str, Any]:
        """
        @return: this process's pid and its task registry (each task's
            C{idempotent} flag, and the name of its typed C{command} if it
            has one).
        """
        registry: dict[str, dict[str, Any]] = {}
        for name, entry in tasks.registered().items():
            registry[name] = {"idempotent": entry.idempotent}
            if entry.command is not None:
                registry[name]["command"] = entry.command.commandName.decode("ascii")
        return {"pid": os.getpid(), "tasks": serial.dumps(registry)}

    def locateResponder(self, name: bytes) -> Any:
        """
        Find the responder of C{name}: L{Hello}, L{RunTask} and L{Shutdown}
        are this class's; a typed task command
        (L{salttwist.workers.commands.TaskCommand}) is answered by the task
        registered for it.
        """
        responder = super().locateResponder(name)
        if responder is None:
            entry = tasks.commandTask(name)
            if entry is not None:
                return lambda box: succeed(answerCommand(entry, box, self, self._errorStream))
        return responder

    @RunTask.responder
    def runTask(self, task: str, payload: bytes) -> dict[str, Any]:
        """
        Run one task (see L{executeTask}); log a failure's traceback.
        """
        return executeTask(task, payload, self._errorStream)

    @Shutdown.responder
    def shutdown(self) -> dict[str, Any]:
        """
        Answer, then let L{main}'s loop end.
        """
        self.shutdownRequested = True
        return {}


def executeTask(task: str, payload: bytes, errorStream: IO[str] | None = None) -> dict[str, Any]:
    """
    Run the task registered as C{task} with the msgpack C{[args, kwargs]} in
    C{payload}.

    @param errorStream: where the traceback of a failure is written
        (C{sys.stderr} by default).
    @return: the L{RunTask} answer: C{{"result": msgpack bytes}}, or
        C{{"errorType": ..., "errorMessage": ...}} if the task is unknown,
        the payload malformed, the task raised, or its result cannot be
        serialised.
    """
    try:
        entry = tasks.lookup(task)
        args, kwargs = _decodeArguments(payload)
        result = entry.function(*args, **kwargs)
        if hasattr(result, "__await__") or hasattr(result, "addCallback"):
            raise TypeError(f"task {task} returned {type(result).__name__}: tasks are synchronous")
        encoded = serial.dumps(result)
        if len(encoded) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLarge(
                f"result of {task} is {len(encoded)} bytes, over {MAX_PAYLOAD_BYTES}"
            )
    except Exception as e:
        return tasks.failureAnswer(e, f"task {task}", errorStream)
    return {"result": encoded}


def answerCommand(
    entry: tasks.Task, box: Any, proto: Any, errorStream: IO[str] | None = None
) -> Any:
    """
    Run the task of a typed command with the arguments in C{box}.

    @return: the answer box: C{result} (when the command has one), or
        C{errorType} and C{errorMessage} if the arguments could not be
        read, the task raised, or its result does not fit the command.
    """
    command = entry.command
    try:
        kwargs = command.parseArguments(box, proto)
        result = entry.function(**kwargs)
        if hasattr(result, "__await__") or hasattr(result, "addCallback"):
            raise TypeError(
                f"task {entry.name} returned {type(result).__name__}: tasks are synchronous"
            )
        answer = {"result": result} if b"result" in dict(command.response) else {}
        return command.makeResponse(answer, proto)
    except Exception as e:
        return command.makeResponse(
            tasks.failureAnswer(e, f"task {entry.name}", errorStream), proto
        )


def _decodeArguments(payload: bytes) -> tuple[list[Any], dict[str, Any]]:
    decoded = serial.loads(payload)
    if (
        not isinstance(decoded, list)
        or len(decoded) != 2
        or not isinstance(decoded[0], list)
        or not isinstance(decoded[1], dict)
        or not all(isinstance(k, str) for k in decoded[1])
    ):
        raise serial.SerialError("payload is not [args, kwargs]")
    return decoded[0], decoded[1]


@implementer(IAddress)
class _PipeAddress:
    """
    The address of either end of the parent-child pipes.
    """


#: The collector's thresholds in a worker (C{gc.set_threshold}), the
#: master's (L{salttwist._startup.MASTER_GC_THRESHOLDS}): a task such as a
#: pillar compile makes thousands of short-lived containers (a 200-key
#: pillar, Jinja's contexts), which Python's defaults (700, 10, 10) chase
#: with a collection every few hundred; with a younger generation of 50,000
#: a minion's compile costs some 3% less, the garbage left for later is a
#: few MB at most.
WORKER_GC_THRESHOLDS = (50_000, 20, 10)


@implementer(ITransport)
class FdTransport:
    """
    A blocking transport writing to one file descriptor.

    Writes complete before returning: the child has nothing else to do while
    its answer drains. If the parent has gone, the child exits at once.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.disconnecting = False

    def write(self, data: bytes) -> None:
        """
        Write all of C{data}, exiting the process if the parent has gone.
        """
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.EBADF):
                    _exitNow(0)
                raise
            view = view[written:]

    def writeSequence(self, data: Sequence[bytes]) -> None:
        """
        Write each of C{data}.
        """
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        """
        AMP gave up on the connection (a malformed box): exit.
        """
        self.disconnecting = True
        _exitNow(1)

    def getPeer(self) -> _PipeAddress:
        """
        @return: a placeholder address.
        """
        return _PipeAddress()

    def getHost(self) -> _PipeAddress:
        """
        @return: a placeholder address.
        """
        return _PipeAddress()


def _exitNow(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _dieWithParent(environ: dict[str, str]) -> None:
    """
    On Linux, ask the kernel to SIGKILL this process when the parent dies,
    so a child busy in a long task does not outlive a dead master. Best
    effort: elsewhere the child exits when it next reads end of file on fd 3.

    The kernel sends the signal when the parent I{thread} that spawned the
    child exits, so spawn workers from the reactor thread (as L{WorkerPool}
    does when used from it), never from a short-lived thread.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        prctlSetPdeathsig = 1
        libc.prctl(prctlSetPdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except Exception:
        return
    # The parent may have died before prctl: then we were reparented already.
    expected = environ.get(PARENT_PID_ENV)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        _exitNow(0)


def taskModules(argv: Sequence[str], environ: dict[str, str]) -> list[str]:
    """
    @return: the modules to import: L{salttwist.workers.tasks}, then those in
        C{SALTTWIST_WORKER_TASKS}, then those in C{argv}, without duplicates.
    """
    names = ["salttwist.workers.tasks"]
    names += [n.strip() for n in environ.get(tasks.TASK_MODULES_ENV, "").split(",")]
    names += list(argv)
    seen: list[str] = []
    for name in names:
        if name and name not in seen:
            seen.append(name)
    return seen


def main(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> int:
    """
    Import the task modules and serve AMP on fds 3 and 4 until told to stop
    or disconnected.

    @return: the process exit status: 0, or 2 if a task module failed to
        import.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = dict(os.environ if environ is None else environ)
    _dieWithParent(environ)
    import signal

    # Ctrl-C in a terminal reaches the whole process group; the parent
    # decides when its workers stop (Shutdown, then SIGKILL).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        pass
    for name in taskModules(argv, environ):
        try:
            importlib.import_module(name)
        except Exception:
            sys.stderr.write(f"salttwist worker {os.getpid()}: cannot import task module {name}:\n")
            traceback.print_exc()
            sys.stderr.flush()
            return 2

    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        globalLogBeginner,
        textFileLogObserver,
    )

    # AMP reports its own trouble through twisted.logger; without an observer
    # those events would sit in the start-up buffer and never be seen. Its
    # info-level chatter ("connection established") is not worth a line.
    globalLogBeginner.beginLoggingTo(
        [
            FilteringLogObserver(
                textFileLogObserver(sys.stderr),
                [LogLevelFilterPredicate(defaultLogLevel=LogLevel.warn)],
            )
        ],
        discardBuffer=False,
        redirectStandardIO=False,
    )
    from salttwist._startup import releaseGarbageCollection

    releaseGarbageCollection(WORKER_GC_THRESHOLDS)
    protocol = ChildAMP()
    protocol.makeConnection(FdTransport(AMP_OUT_FD))
    while not protocol.shutdownRequested:
        try:
            data = os.read(AMP_IN_FD, 1 << 20)
        except InterruptedError:
            continue
        if not data:
            break
        protocol.dataReceived(data)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    # Once main returns the worker's work is over: the pool stops a worker
    # only when it is idle, after any closing task (the job cache closes its
    # database first; what SQLite committed is on disk either way). End it at
    # once rather than tearing every module down, which made a stopping
    # master wait a tenth of a second or more for each worker.
    _exitNow(main())
