# -*- test-case-name: tests.test_workers -*-
"""
Tests for L{salttwist.workers}: the pool driven by a fake process reactor and
a L{Clock}, with each "child" an in-process L{ChildAMP} whose bytes the test
pumps by hand, so a test decides when a worker answers, hangs or dies.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ProcessDone, ProcessExitedAlready, ProcessTerminated
from twisted.internet.interfaces import IReactorProcess
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver, MemoryReactorClock, StringTransport
from twisted.logger import LogLevel, globalLogPublisher
from twisted.protocols import amp
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from salttwist import serial
from salttwist.workers import (
    IWorkerPool,
    PayloadTooLarge,
    PoolStopped,
    QueueFull,
    TaskError,
    UnknownTask,
    WorkerFailed,
    tasks,
)
from salttwist.workers.batch import BUSY_PATIENCE, TaskBatcher, runEach
from salttwist.workers.child import PARENT_PID_ENV, ChildAMP, executeTask, taskModules
from salttwist.workers.commands import BigBytes, Echo, RaiseError, RunTask
from salttwist.workers.pool import (
    RESTART_BACKOFF_BASE,
    InlineWorkerPool,
    WorkerPool,
    describeExit,
)
from salttwist.workers.protocol import CHILD_FDS, WorkerProcessProtocol
from tests._pools import RecordingPool

ECHO = "salttwist.workers.tasks.echo"
SLEEP = "salttwist.workers.tasks.sleep"

INIT_CALLS: list[Any] = []


@tasks.task
def recordInit(value: Any) -> str:
    """
    A test init task: records C{value} in L{INIT_CALLS}.
    """
    INIT_CALLS.append(value)
    return "ok"


@tasks.task
def failInit() -> None:
    """
    A test init task that always fails.
    """
    raise OSError("no such key file")


@tasks.task
def returnsUnserialisable() -> Any:
    """
    A test task whose result msgpack cannot encode.
    """
    return object()


@tasks.task
async def returnsCoroutine() -> None:
    """
    A test task that is (wrongly) asynchronous.
    """


class FakeProcess:
    """
    The L{IProcessTransport} of a fake worker, with an in-process
    L{ChildAMP} as the child.

    @ivar toChild: bytes the parent wrote to fd 3 and the child has not read.
    @ivar signals: signals sent with C{signalProcess}.
    @ivar ended: whether C{processEnded} was delivered.
    @ivar childErrors: what the child wrote as tracebacks.
    """

    def __init__(self, pid: int, protocol: Any, args: list[str], env: Any, childFDs: Any) -> None:
        self.pid = pid
        self.protocol = protocol
        self.args = args
        self.env = env
        self.childFDs = childFDs
        self.toChild = b""
        self.signals: list[Any] = []
        self.ended = False
        self.lostConnection = False
        self.childErrors = io.StringIO()
        self.child = ChildAMP(errorStream=self.childErrors)
        self.childTransport = StringTransport()
        self.child.makeConnection(self.childTransport)

    def writeToChild(self, childFD: int, data: bytes) -> None:
        """
        Buffer what the parent writes to fd 3.
        """
        assert childFD == 3, childFD
        self.toChild += data

    def closeChildFD(self, childFD: int) -> None:
        """
        Not used by the pool.
        """

    def loseConnection(self) -> None:
        """
        Record that the parent closed the pipes.
        """
        self.lostConnection = True

    def signalProcess(self, signalID: Any) -> None:
        """
        Record a signal (the process does not die until L{end}).
        """
        if self.ended:
            raise ProcessExitedAlready()
        self.signals.append(signalID)

    def pump(self, rounds: int = 100) -> None:
        """
        Deliver bytes both ways until neither side has anything to say (or
        for C{rounds} exchanges); end the process with status 0 once the
        child answered C{Shutdown}.
        """
        for _ in range(rounds):
            if self.ended:
                return
            toChild, self.toChild = self.toChild, b""
            if toChild:
                self.child.dataReceived(toChild)
            toParent = self.childTransport.value()
            self.childTransport.clear()
            if toParent:
                self.protocol.childDataReceived(4, toParent)
            if self.child.shutdownRequested and not self.toChild:
                self.end(0)
                return
            if not toChild and not toParent:
                return

    def end(self, exitCode: int | None = 0, signal: int | None = None) -> None:
        """
        End the process as the reactor does: C{processEnded} with
        L{ProcessDone} for status 0, else L{ProcessTerminated}.
        """
        self.ended = True
        if exitCode == 0 and signal is None:
            reason = Failure(ProcessDone(0))
        else:
            reason = Failure(ProcessTerminated(None if signal else exitCode, signal))
        self.protocol.processEnded(reason)


@implementer(IReactorProcess)
class FakeProcessReactor(MemoryReactorClock):
    """
    A L{MemoryReactorClock} whose C{spawnProcess} records the call and
    connects the protocol to a L{FakeProcess}.

    @ivar spawnError: if set, C{spawnProcess} raises it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.processes: list[FakeProcess] = []
        self.spawnError: Exception | None = None

    def spawnProcess(
        self,
        processProtocol: Any,
        executable: Any,
        args: Any = (),
        env: Any = None,
        path: Any = None,
        uid: Any = None,
        gid: Any = None,
        usePTY: bool = False,
        childFDs: Any = None,
    ) -> FakeProcess:
        """
        Record the spawn and connect C{processProtocol} to a new process.
        """
        if self.spawnError is not None:
            raise self.spawnError
        process = FakeProcess(
            1000 + len(self.processes), processProtocol, list(args), env, childFDs
        )
        process.executable = executable
        self.processes.append(process)
        processProtocol.makeConnection(process)
        return process

    def live(self) -> list[FakeProcess]:
        """
        @return: the processes that have not ended.
        """
        return [p for p in self.processes if not p.ended]

    def pumpAll(self) -> None:
        """
        Pump every live process until all are quiet.
        """
        for _ in range(20):
            before = [(p.toChild, p.childTransport.value(), p.ended) for p in self.processes]
            for process in list(self.processes):
                process.pump()
            after = [(p.toChild, p.childTransport.value(), p.ended) for p in self.processes]
            if before == after and not any(p.toChild for p in self.live()):
                return


class PoolTestsMixin:
    """
    Builds a L{WorkerPool} on a L{FakeProcessReactor}.
    """

    def makePool(self, size: int = 1, start: bool = True, **kwargs: Any) -> WorkerPool:
        """
        @return: a pool of C{size} workers, started and ready if C{start}.
        """
        self.reactor = FakeProcessReactor()
        self.pool = WorkerPool(self.reactor, size, **kwargs)
        if start:
            self.started = self.pool.start()
            self.reactor.pumpAll()
            self.assertIsNone(self.successResultOf(self.started))
        return self.pool

    def assertFailsWith(self, d: Deferred[Any], exceptionType: type, *fragments: str) -> Any:
        """
        Assert C{d} failed with C{exceptionType} whose message holds each of
        C{fragments}.

        @return: the exception.
        """
        error = self.failureResultOf(d, exceptionType).value
        for fragment in fragments:
            self.assertIn(fragment, str(error))
        return error


class StartTests(PoolTestsMixin, SynchronousTestCase):
    """
    Spawning workers and their start-up.
    """

    def test_interface(self) -> None:
        """
        L{WorkerPool} and L{InlineWorkerPool} provide L{IWorkerPool}.
        """
        verifyObject(IWorkerPool, WorkerPool(FakeProcessReactor(), 1))
        verifyObject(IWorkerPool, InlineWorkerPool())

    def test_sizeAtLeastOne(self) -> None:
        """
        A pool of no workers is refused.
        """
        self.assertRaises(ValueError, WorkerPool, FakeProcessReactor(), 0)

    def test_spawnArguments(self) -> None:
        """
        C{start()} spawns C{size} children of C{sys.executable -m
        salttwist.workers.child} plus C{spawnArgs}, with AMP on fds 3 and 4
        and stdout and stderr readable.
        """
        self.makePool(size=3, start=False, spawnArgs=["my.tasks"])
        self.pool.start()
        self.assertEqual(len(self.reactor.processes), 3)
        for process in self.reactor.processes:
            self.assertEqual(process.executable, sys.executable)
            self.assertEqual(
                process.args, [sys.executable, "-m", "salttwist.workers.child", "my.tasks"]
            )
            self.assertEqual(process.childFDs, {0: "w", 1: "r", 2: "r", 3: "w", 4: "r"})
        self.assertEqual(CHILD_FDS, {0: "w", 1: "r", 2: "r", 3: "w", 4: "r"})

    def test_environmentKept(self) -> None:
        """
        Children get a copy of this process's environment (C{PATH} kept, not
        ampoule's empty one), C{env} on top of it, C{PYTHONPATH} set to this
        process's C{sys.path}, and this process's pid.
        """
        self.patch(os, "environ", {"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C"})
        self.makePool(start=False, env={"LANG": "C.UTF-8", "EXTRA": "1"})
        self.pool.start()
        env = self.reactor.processes[0].env
        self.assertEqual(env["PATH"], "/usr/bin:/bin")
        self.assertEqual(env["HOME"], "/root")
        self.assertEqual(env["LANG"], "C.UTF-8")
        self.assertEqual(env["EXTRA"], "1")
        self.assertEqual(env["PYTHONPATH"].split(os.pathsep)[-1], os.path.abspath(sys.path[-1]))
        self.assertEqual(env[PARENT_PID_ENV], str(os.getpid()))

    def test_explicitPythonPath(self) -> None:
        """
        A C{PYTHONPATH} given in C{env} is used as it is.
        """
        self.makePool(start=False, env={"PYTHONPATH": "/opt/lib"})
        self.pool.start()
        self.assertEqual(self.reactor.processes[0].env["PYTHONPATH"], "/opt/lib")

    def test_startWaitsForHello(self) -> None:
        """
        The C{start()} L{Deferred} fires only once every worker has answered
        C{Hello}; requests made before wait in the queue and then run.
        """
        self.makePool(size=2, start=False)
        started = self.pool.start()
        d = self.pool.run(ECHO, 1)
        self.assertNoResult(started)
        self.assertEqual(self.pool.stats()["queued"], 1)
        self.reactor.processes[0].pump()
        self.assertNoResult(started)
        self.reactor.pumpAll()
        self.assertIsNone(self.successResultOf(started))
        self.assertEqual(self.successResultOf(d), 1)

    def test_startTwice(self) -> None:
        """
        A pool starts only once.
        """
        self.makePool()
        self.assertRaises(RuntimeError, self.pool.start)

    def test_initTasks(self) -> None:
        """
        Every new worker runs C{initTasks}, in order, before it takes work,
        and replacements run them too.
        """
        del INIT_CALLS[:]
        self.makePool(
            start=False,
            initTasks=[(recordInit, ["first"]), (recordInit.taskName, ["second"])],
        )
        started = self.pool.start()
        self.reactor.pumpAll()
        self.successResultOf(started)
        self.assertEqual(INIT_CALLS, ["first", "second"])

        d = self.pool.run(SLEEP, 0)
        self.reactor.processes[0].end(signal=9)
        self.failureResultOf(d, WorkerFailed)
        replacement = self.reactor.processes[1]
        d = self.pool.run(ECHO, "after")
        self.assertEqual(self.pool.stats()["queued"], 1)
        replacement.pump()
        self.assertEqual(INIT_CALLS, ["first", "second", "first", "second"])
        self.assertEqual(self.successResultOf(d), "after")

    def test_typedInitTasks(self) -> None:
        """
        An init task may be a typed command with its arguments; one that
        fails fails the worker's start as a task by name does.
        """
        self.makePool(start=False, initTasks=[(Echo, {"value": 1})])
        started = self.pool.start()
        self.reactor.pumpAll()
        self.assertIsNone(self.successResultOf(started))

        self.makePool(start=False, initTasks=[(RaiseError, {"message": "no key"})])
        started = self.pool.start()
        self.reactor.pumpAll()
        self.assertFailsWith(
            started, WorkerFailed, "failed its init task RaiseError", "ValueError: no key"
        )

    def test_initTaskFails(self) -> None:
        """
        A worker whose init task fails is killed, C{start()} fails with
        L{WorkerFailed} naming the task and the error, queued requests fail
        rather than wait, and a replacement is spawned after the back-off.
        """
        self.makePool(start=False, initTasks=[(failInit, [])])
        started = self.pool.start()
        d = self.pool.run(ECHO, 1)
        process = self.reactor.processes[0]
        process.pump()
        self.assertEqual(process.signals, ["KILL"])
        self.assertFailsWith(
            started,
            WorkerFailed,
            "worker pid 1000 failed its init task tests.test_workers.failInit",
            "OSError: no such key file",
        )
        self.assertFailsWith(d, WorkerFailed, "cannot run salttwist.workers.tasks.echo")
        self.assertFailsWith(
            self.pool.run(ECHO, 2), WorkerFailed, "no worker could be started", "failInit"
        )
        process.end(signal=9)
        self.assertEqual(len(self.reactor.processes), 1)
        self.reactor.advance(RESTART_BACKOFF_BASE)
        self.assertEqual(len(self.reactor.processes), 2)

    def test_diesDuringStart(self) -> None:
        """
        A worker that exits before answering C{Hello} fails C{start()}, with
        its last stderr line, and is replaced after a back-off that doubles with each consecutive
        failure and resets once a worker starts.
        """
        self.makePool(start=False)
        started = self.pool.start()
        process = self.reactor.processes[0]
        process.protocol.childDataReceived(2, b"ModuleNotFoundError: No module named 'x'\n")
        process.end(exitCode=2)
        error = self.assertFailsWith(started, WorkerFailed)
        self.assertEqual(
            str(error),
            "worker pid 1000 exited with code 2 during start-up "
            "(ModuleNotFoundError: No module named 'x')",
        )
        self.reactor.advance(RESTART_BACKOFF_BASE - 0.01)
        self.assertEqual(len(self.reactor.processes), 1)
        self.reactor.advance(0.01)
        self.assertEqual(len(self.reactor.processes), 2)
        self.reactor.processes[1].end(exitCode=2)
        self.reactor.advance(RESTART_BACKOFF_BASE * 2 - 0.01)
        self.assertEqual(len(self.reactor.processes), 2)
        self.reactor.advance(0.01)
        self.assertEqual(len(self.reactor.processes), 3)
        self.reactor.processes[2].pump()
        self.assertEqual(self.pool.stats()["idle"], 1)
        self.assertEqual(self.pool.stats()["restarts"], 2)
        self.reactor.processes[2].end(exitCode=1)
        self.reactor.advance(RESTART_BACKOFF_BASE)
        self.assertEqual(len(self.reactor.processes), 4)

    def test_startTimeout(self) -> None:
        """
        A worker that does not answer C{Hello} within C{startTimeout} is
        killed and its start fails.
        """
        self.makePool(start=False, startTimeout=10.0)
        started = self.pool.start()
        self.reactor.advance(9.9)
        self.assertNoResult(started)
        self.reactor.advance(0.1)
        self.assertEqual(self.reactor.processes[0].signals, ["KILL"])
        self.assertFailsWith(started, WorkerFailed, "did not finish a start-up step within 10 s")

    def test_spawnFails(self) -> None:
        """
        If C{spawnProcess} raises, C{start()} fails with the error and the
        pool tries again after the back-off.
        """
        self.makePool(start=False)
        self.reactor.spawnError = OSError("no such file")
        started = self.pool.start()
        self.assertFailsWith(started, WorkerFailed, "could not be spawned: no such file")
        self.flushLoggedErrors(OSError)
        self.reactor.spawnError = None
        self.reactor.advance(RESTART_BACKOFF_BASE)
        self.assertEqual(len(self.reactor.processes), 1)
        self.reactor.pumpAll()
        self.assertEqual(self.pool.stats()["idle"], 1)

    def test_diesWhileIdle(self) -> None:
        """
        A worker that exits while idle is replaced after the back-off, and
        its last stderr lines are logged.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.makePool()
        process = self.reactor.processes[0]
        process.protocol.childDataReceived(2, b"Segmentation fault\n")
        process.end(signal=11)
        warnings = [e for e in observer if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1)
        self.assertIn("Segmentation fault", warnings[0]["tail"])
        self.assertEqual(len(self.reactor.processes), 1)
        self.reactor.advance(RESTART_BACKOFF_BASE)
        self.assertEqual(len(self.reactor.processes), 2)


class RunTests(PoolTestsMixin, SynchronousTestCase):
    """
    Running tasks, queueing, and task errors.
    """

    def test_echo(self) -> None:
        """
        A task's arguments and result cross the AMP connection intact.
        """
        self.makePool()
        value = {"a": [1, 2.5, None, True], "b": b"\x00\xff", "c": "\u00e9"}
        d = self.pool.run(ECHO, value)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), value)
        self.assertEqual(self.pool.stats()["completed"], 1)

    def test_keywordArgumentsAndFunction(self) -> None:
        """
        C{run} takes the decorated function as well as its name, and passes
        keyword arguments.
        """
        self.makePool()
        d = self.pool.run(tasks.echo, value="kw")
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), "kw")

    def test_bigPayloadsBothWays(self) -> None:
        """
        A 5 MB argument and a 5 MB result, far over AMP's 65,535-byte value
        limit, cross intact.
        """
        self.makePool()
        blob = os.urandom(5 * 1024 * 1024)
        d = self.pool.run(ECHO, blob)
        sent = self.reactor.processes[0].toChild
        self.assertGreater(len(sent), len(blob))
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), blob)

    def test_taskError(self) -> None:
        """
        An exception raised by the task fails the request with L{TaskError}
        carrying the exception's type name and message; the child logs the
        traceback, and the worker stays in service.
        """
        self.makePool()
        d = self.pool.run(tasks.raiseError, "bad input")
        self.reactor.pumpAll()
        error = self.assertFailsWith(
            d, TaskError, "salttwist.workers.tasks.raiseError raised ValueError: bad input"
        )
        self.assertEqual(error.typeName, "ValueError")
        self.assertEqual(error.message, "bad input")
        self.assertEqual(error.taskName, "salttwist.workers.tasks.raiseError")
        errors = self.reactor.processes[0].childErrors.getvalue()
        self.assertIn("Traceback", errors)
        self.assertIn("ValueError: bad input", errors)
        self.assertEqual(self.pool.stats(), dict(self.pool.stats(), idle=1, failed=1))
        d = self.pool.run(ECHO, 1)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), 1)

    def test_unknownTask(self) -> None:
        """
        A name no module registered fails with L{TaskError} of type
        C{UnknownTask}: the worker runs nothing it did not import.
        """
        self.makePool()
        d = self.pool.run("os.system", "true")
        self.reactor.pumpAll()
        error = self.assertFailsWith(d, TaskError, "no task named 'os.system'")
        self.assertEqual(error.typeName, "salttwist.workers.UnknownTask")

    def test_notATask(self) -> None:
        """
        C{run} refuses a plain function: only names go to the worker.
        """
        self.makePool()
        self.failureResultOf(self.pool.run(len, "x"), TypeError)

    def test_unserialisableArguments(self) -> None:
        """
        Arguments msgpack cannot encode fail at once with L{SerialError}.
        """
        self.makePool()
        self.failureResultOf(self.pool.run(ECHO, object()), serial.SerialError)
        self.assertEqual(self.reactor.processes[0].toChild, b"")

    def test_payloadTooLarge(self) -> None:
        """
        Arguments over the payload limit fail at once with
        L{PayloadTooLarge}.
        """
        self.makePool()
        self.patch(sys.modules["salttwist.workers.pool"], "MAX_PAYLOAD_BYTES", 100)
        self.failureResultOf(self.pool.run(ECHO, b"x" * 200), PayloadTooLarge)

    def test_queueWhenBusy(self) -> None:
        """
        With every worker busy, requests wait in order and run as workers
        free up; C{stats()} shows busy, idle and queued counts.
        """
        self.makePool(size=2)
        self.assertEqual(
            self.pool.stats(),
            {
                "size": 2,
                "busy": 0,
                "idle": 2,
                "queued": 0,
                "restarts": 0,
                "completed": 0,
                "failed": 0,
            },
        )
        ds = [self.pool.run(ECHO, i) for i in range(5)]
        stats = self.pool.stats()
        self.assertEqual((stats["busy"], stats["idle"], stats["queued"]), (2, 0, 3))
        self.reactor.processes[0].pump(rounds=1)
        self.assertEqual(self.successResultOf(ds[0]), 0)
        self.assertEqual(self.pool.stats()["queued"], 2)
        self.reactor.pumpAll()
        self.assertEqual([self.successResultOf(d) for d in ds[1:]], [1, 2, 3, 4])
        self.assertEqual(self.pool.stats()["completed"], 5)
        self.assertEqual(self.pool.stats()["idle"], 2)

    def test_boundedQueue(self) -> None:
        """
        Beyond C{maxQueue} waiting requests, C{run} fails at once with
        L{QueueFull}; once the queue drains, requests are accepted again.
        """
        self.makePool(maxQueue=2)
        ds = [self.pool.run(ECHO, i) for i in range(3)]
        refused = self.pool.run(ECHO, "refused")
        self.assertFailsWith(
            refused,
            QueueFull,
            "2 requests already wait for a worker (maxQueue 2); "
            "salttwist.workers.tasks.echo refused",
        )
        self.assertEqual(self.pool.stats()["failed"], 1)
        self.reactor.pumpAll()
        self.assertEqual([self.successResultOf(d) for d in ds], [0, 1, 2])
        d = self.pool.run(ECHO, "later")
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), "later")

    def test_cancelQueued(self) -> None:
        """
        Cancelling a queued request removes it from the queue.
        """
        self.makePool()
        first = self.pool.run(ECHO, 1)
        second = self.pool.run(ECHO, 2)
        second.cancel()
        self.failureResultOf(second, CancelledError)
        self.assertEqual(self.pool.stats()["queued"], 0)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(first), 1)
        self.assertEqual(self.pool.stats()["completed"], 1)

    def test_cancelRunning(self) -> None:
        """
        Cancelling a running request discards its result; the worker takes
        the next request when it answers.
        """
        self.makePool()
        first = self.pool.run(ECHO, 1)
        second = self.pool.run(ECHO, 2)
        first.cancel()
        self.failureResultOf(first, CancelledError)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(second), 2)

    def test_unserialisableResult(self) -> None:
        """
        A result msgpack cannot encode fails with L{TaskError} of type
        L{serial.SerialError}.
        """
        self.makePool()
        d = self.pool.run(returnsUnserialisable)
        self.reactor.pumpAll()
        error = self.assertFailsWith(d, TaskError, "cannot serialise")
        self.assertEqual(error.typeName, "salttwist.serial.SerialError")

    def test_asynchronousTask(self) -> None:
        """
        A task returning a coroutine fails with L{TaskError}: tasks are
        synchronous.
        """
        self.makePool()
        d = self.pool.run(returnsCoroutine)
        self.reactor.pumpAll()
        self.assertFailsWith(d, TaskError, "tasks are synchronous")

    def test_protocolError(self) -> None:
        """
        A worker whose answer is not a valid answer (here an AMP error box)
        is killed and replaced, and the request fails with L{WorkerFailed}.
        """
        self.makePool()
        d = self.pool.run(ECHO, 1)
        process = self.reactor.processes[0]
        process.toChild = b""
        box = amp.AmpBox(
            _error=b"2", _error_code=b"UNHANDLED", _error_description=b"boom"
        ).serialize()
        process.protocol.childDataReceived(4, box)
        self.assertFailsWith(d, WorkerFailed, "worker pid 1000 broke the AMP protocol")
        self.assertEqual(process.signals, ["KILL"])
        self.assertEqual(len(self.reactor.processes), 2)
        self.flushLoggedErrors()


class FailureTests(PoolTestsMixin, SynchronousTestCase):
    """
    Workers that crash or hang.
    """

    def test_crashFailsRequest(self) -> None:
        """
        A worker that exits while running a non-idempotent task fails the
        request with L{WorkerFailed} naming the pid, the signal and the task,
        and is replaced at once; the replacement takes the next request.
        """
        self.makePool()
        d = self.pool.run(SLEEP, 10)
        self.reactor.processes[0].end(signal=9)
        error = self.assertFailsWith(d, WorkerFailed)
        self.assertEqual(
            str(error),
            "worker pid 1000 exited with signal 9 while running salttwist.workers.tasks.sleep",
        )
        self.assertEqual((error.pid, error.taskName), (1000, SLEEP))
        self.assertEqual(len(self.reactor.processes), 2)
        stats = self.pool.stats()
        self.assertEqual((stats["restarts"], stats["failed"]), (1, 1))
        d = self.pool.run(ECHO, "next")
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), "next")

    def test_exitCode(self) -> None:
        """
        An exit status is reported as such.
        """
        self.makePool()
        d = self.pool.run(SLEEP, 10)
        self.reactor.processes[0].end(exitCode=70)
        self.assertFailsWith(d, WorkerFailed, "worker pid 1000 exited with code 70 while running")

    def test_hangTimesOut(self) -> None:
        """
        A task running past C{taskTimeout} gets its worker SIGKILLed and
        replaced at once, and the request fails with L{WorkerFailed} saying
        so; the killed worker's later exit changes nothing.
        """
        self.makePool(taskTimeout=30.0)
        d = self.pool.run(SLEEP, 3600)
        process = self.reactor.processes[0]
        self.reactor.advance(29.9)
        self.assertNoResult(d)
        self.reactor.advance(0.1)
        self.assertEqual(process.signals, ["KILL"])
        error = self.assertFailsWith(d, WorkerFailed)
        self.assertEqual(
            str(error),
            "worker pid 1000 timed out after 30 s (killed with SIGKILL) "
            "while running salttwist.workers.tasks.sleep",
        )
        self.assertEqual(len(self.reactor.processes), 2)
        process.end(signal=9)
        self.assertEqual(len(self.reactor.processes), 2)
        self.assertEqual(self.pool.stats()["failed"], 1)
        self.reactor.processes[1].pump()
        self.assertEqual(self.pool.stats()["idle"], 1)

    def test_lateAnswerIgnored(self) -> None:
        """
        If a timed-out worker still answers before it dies, the answer is
        ignored: the request already failed.
        """
        self.makePool(taskTimeout=5.0)
        d = self.pool.run(SLEEP, 0)
        self.reactor.advance(5)
        self.failureResultOf(d, WorkerFailed)
        self.reactor.processes[0].pump()
        self.assertEqual(self.pool.stats()["completed"], 0)

    def test_timerCancelledOnAnswer(self) -> None:
        """
        A task that answers in time leaves no timer behind.
        """
        self.makePool(taskTimeout=5.0)
        d = self.pool.run(ECHO, 1)
        self.reactor.pumpAll()
        self.successResultOf(d)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_idempotentRetriedAfterCrash(self) -> None:
        """
        An idempotent task whose worker dies runs again on another worker,
        and the caller sees only the result.
        """
        self.makePool(size=2)
        d = self.pool.run(ECHO, "again")
        self.reactor.processes[0].end(signal=9)
        self.assertNoResult(d)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), "again")
        stats = self.pool.stats()
        self.assertEqual((stats["completed"], stats["failed"], stats["restarts"]), (1, 0, 1))

    def test_idempotentRetriedAfterTimeout(self) -> None:
        """
        An idempotent task whose worker hangs runs again, once.
        """
        self.makePool(taskTimeout=5.0)
        d = self.pool.run(ECHO, "slow")
        self.reactor.advance(5)
        self.assertNoResult(d)
        self.reactor.processes[0].end(signal=9)
        self.reactor.processes[1].pump()
        self.assertEqual(self.successResultOf(d), "slow")

    def test_idempotentRetriedOnce(self) -> None:
        """
        An idempotent task is retried only once: if the second worker dies
        too, the request fails and the error names both failures.
        """
        self.makePool()
        d = self.pool.run(ECHO, "doomed")
        self.reactor.processes[0].end(signal=9)
        second = self.reactor.processes[1]
        second.pump(rounds=1)
        self.assertIn(b"RunTask", second.toChild)
        self.assertNoResult(d)
        second.end(exitCode=1)
        error = self.assertFailsWith(d, WorkerFailed)
        self.assertEqual(
            str(error),
            "worker pid 1001 exited with code 1 while running salttwist.workers.tasks.echo "
            "(it had been retried once after worker pid 1000 exited with signal 9)",
        )

    def test_requestsFailWhenReplacementCannotStart(self) -> None:
        """
        Requests waiting for the replacement of a crashed worker fail when
        the replacement cannot start, rather than wait for ever.
        """
        self.makePool()
        first = self.pool.run(SLEEP, 10)
        second = self.pool.run(ECHO, 2)
        self.reactor.processes[0].end(signal=9)
        self.failureResultOf(first, WorkerFailed)
        self.assertNoResult(second)
        self.reactor.processes[1].end(exitCode=2)
        self.assertFailsWith(
            second,
            WorkerFailed,
            "cannot run salttwist.workers.tasks.echo: no worker could be started "
            "(last failure: worker pid 1001 exited with code 2 during start-up)",
        )


class StopTests(PoolTestsMixin, SynchronousTestCase):
    """
    Stopping the pool.
    """

    def test_stopIdle(self) -> None:
        """
        C{stop()} sends C{Shutdown} to each worker and fires once all have
        exited; no worker is replaced.
        """
        self.makePool(size=2)
        d = self.pool.stop()
        self.assertNoResult(d)
        self.reactor.pumpAll()
        self.assertIsNone(self.successResultOf(d))
        self.assertEqual(self.reactor.live(), [])
        self.assertEqual(len(self.reactor.processes), 2)
        self.assertEqual(self.pool.pids(), [])
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_stopFailsQueued(self) -> None:
        """
        Queued requests fail with L{PoolStopped}; the running one finishes
        first; later C{run} calls fail with L{PoolStopped}.
        """
        self.makePool()
        running = self.pool.run(ECHO, 1)
        queued = self.pool.run(ECHO, 2)
        d = self.pool.stop()
        self.assertFailsWith(queued, PoolStopped, "stopped before running")
        self.failureResultOf(self.pool.run(ECHO, 3), PoolStopped)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(running), 1)
        self.successResultOf(d)

    def test_stopKillsAfterGrace(self) -> None:
        """
        A worker still busy C{shutdownGrace} seconds after C{stop()} is
        SIGKILLed and its request fails with L{WorkerFailed}.
        """
        self.makePool(shutdownGrace=5.0, taskTimeout=60.0)
        running = self.pool.run(SLEEP, 3600)
        process = self.reactor.processes[0]
        d = self.pool.stop()
        self.reactor.advance(4.9)
        self.assertEqual(process.signals, [])
        self.reactor.advance(0.1)
        self.assertEqual(process.signals, ["KILL"])
        self.assertFailsWith(running, WorkerFailed, "after the pool was told to stop")
        self.assertNoResult(d)
        process.end(signal=9)
        self.successResultOf(d)
        self.assertEqual(len(self.reactor.processes), 1)

    def test_stopWhileStarting(self) -> None:
        """
        Stopping a pool whose workers are starting fails C{start()} with
        L{PoolStopped} and stops them.
        """
        self.makePool(start=False)
        started = self.pool.start()
        d = self.pool.stop()
        self.failureResultOf(started, PoolStopped)
        self.reactor.pumpAll()
        self.successResultOf(d)

    def test_stopCancelsRespawn(self) -> None:
        """
        A replacement waiting for its back-off is not spawned after
        C{stop()}.
        """
        self.makePool()
        self.reactor.processes[0].end(exitCode=1)
        d = self.pool.stop()
        self.successResultOf(d)
        self.reactor.advance(60)
        self.assertEqual(len(self.reactor.processes), 1)

    def test_stopUnstarted(self) -> None:
        """
        Stopping a pool that never started succeeds at once, and it can then
        not run tasks.
        """
        pool = WorkerPool(FakeProcessReactor(), 1)
        self.successResultOf(pool.stop())
        self.failureResultOf(pool.run(ECHO, 1), PoolStopped)

    def test_stopTwice(self) -> None:
        """
        Every C{stop()} call's L{Deferred} fires when the workers have
        exited.
        """
        self.makePool()
        first = self.pool.stop()
        second = self.pool.stop()
        self.reactor.pumpAll()
        self.successResultOf(first)
        self.successResultOf(second)
        self.successResultOf(self.pool.stop())


class ProtocolTests(SynchronousTestCase):
    """
    L{WorkerProcessProtocol}: AMP over fds 3 and 4, logs from 1 and 2.
    """

    def setUp(self) -> None:
        """
        A protocol connected to a L{FakeProcess}.
        """
        self.ended: list[Any] = []
        self.protocol = WorkerProcessProtocol(lambda p, reason: self.ended.append(reason))
        self.process = FakeProcess(42, self.protocol, [], {}, CHILD_FDS)
        self.protocol.makeConnection(self.process)

    def test_ampOverFds(self) -> None:
        """
        AMP writes go to the child's fd 3, and fd 4 is fed to AMP.
        """
        d = self.protocol.amp.callRemote(RunTask, task=ECHO, payload=serial.dumps([[5], {}]))
        self.assertIn(b"RunTask", self.process.toChild)
        self.process.pump()
        self.assertEqual(serial.loads(self.successResultOf(d)["result"]), 5)
        self.assertEqual(self.protocol.pid, 42)

    def test_logsOutput(self) -> None:
        """
        Complete lines of stdout and stderr are logged at debug level with
        the pid; a partial line waits for its end or for the process to end;
        stderr's last lines are kept.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.protocol.childDataReceived(1, b"hello\npart")
        self.protocol.childDataReceived(2, b"oops\n")
        self.assertEqual(
            [(e["stream"], e["line"], e["pid"], e["log_level"]) for e in observer],
            [("stdout", "hello", 42, LogLevel.debug), ("stderr", "oops", 42, LogLevel.debug)],
        )
        self.protocol.childDataReceived(1, b"ial")
        self.process.end(0)
        self.assertEqual([e["line"] for e in observer if "line" in e][-1], "partial")
        self.assertEqual(list(self.protocol.stderrTail), ["oops"])

    def test_processEnded(self) -> None:
        """
        When the process ends, outstanding AMP calls fail with the reason,
        then the callback is told.
        """
        d = self.protocol.amp.callRemote(RunTask, task=ECHO, payload=serial.dumps([[5], {}]))
        self.process.end(signal=9)
        self.failureResultOf(d, ProcessTerminated)
        self.assertEqual(len(self.ended), 1)
        self.assertEqual(describeExit(self.ended[0]), "exited with signal 9")

    def test_killOnce(self) -> None:
        """
        C{kill()} SIGKILLs a running process and does nothing once it ended.
        """
        self.protocol.kill()
        self.assertEqual(self.process.signals, ["KILL"])
        self.process.end(signal=9)
        self.protocol.kill()
        self.assertEqual(self.process.signals, ["KILL"])

    def test_loseConnection(self) -> None:
        """
        AMP closing its transport closes the child's pipes.
        """
        self.protocol.amp.transport.loseConnection()
        self.assertTrue(self.process.lostConnection)


class BigBytesTests(SynchronousTestCase):
    """
    L{BigBytes} spreads one value over several keys of one box.
    """

    def roundTrip(self, value: bytes) -> tuple[dict[bytes, bytes], bytes]:
        """
        @return: the box C{value} is encoded to, and the value decoded back.
        """
        argument = BigBytes()
        strings: dict[bytes, bytes] = {}
        argument.toBox(b"payload", strings, {"payload": value}, None)
        box = dict(strings)
        objects: dict[str, Any] = {}
        argument.fromBox(b"payload", strings, objects, None)
        self.assertEqual(strings, {})
        return box, objects["payload"]

    def test_sizes(self) -> None:
        """
        Values of 0, 1, 65,535, 65,536 and 5 MB bytes round-trip, and no key
        holds more than 65,535 bytes.
        """
        for size in (0, 1, 65535, 65536, 5 * 1024 * 1024):
            value = os.urandom(size)
            box, decoded = self.roundTrip(value)
            self.assertEqual(decoded, value)
            self.assertTrue(all(len(v) <= amp.MAX_VALUE_LENGTH for v in box.values()))
        self.assertEqual(sorted(self.roundTrip(b"x" * 65536)[0]), [b"payload", b"payload.1"])

    def test_boxSerialises(self) -> None:
        """
        A box holding a 5 MB L{BigBytes} value serialises, which a single
        value of that size cannot.
        """
        box = amp.AmpBox()
        BigBytes().toBox(b"payload", box, {"payload": b"y" * (5 * 1024 * 1024)}, None)
        self.assertGreater(len(box.serialize()), 5 * 1024 * 1024)
        self.assertRaises(
            amp.TooLong, amp.AmpBox(payload=b"y" * (amp.MAX_VALUE_LENGTH + 1)).serialize
        )

    def test_piecesAreViews(self) -> None:
        """
        A value over one key's size is spread as views of it, not copies:
        the box's wire bytes are the only other copy made.
        """
        value = os.urandom(3 * amp.MAX_VALUE_LENGTH + 1)
        box = amp.AmpBox()
        BigBytes().toBox(b"payload", box, {"payload": value}, None)
        self.assertEqual(len(box), 4)
        self.assertTrue(all(isinstance(v, memoryview) and v.obj is value for v in box.values()))
        wire = box.serialize()
        self.assertIsInstance(wire, bytes)
        strings = amp.parseString(wire)[0]
        objects: dict[str, Any] = {}
        BigBytes().fromBox(b"payload", strings, objects, None)
        self.assertEqual(objects["payload"], value)

    def test_optionalAbsent(self) -> None:
        """
        An optional L{BigBytes} may be absent.
        """
        strings: dict[bytes, bytes] = {}
        BigBytes(optional=True).toBox(b"result", strings, {}, None)
        self.assertEqual(strings, {})
        objects: dict[str, Any] = {}
        BigBytes(optional=True).fromBox(b"result", strings, objects, None)
        self.assertEqual(objects, {"result": None})

    def test_tooLarge(self) -> None:
        """
        Values over the limit are refused on both sides.
        """
        commands = sys.modules["salttwist.workers.commands"]
        self.patch(commands, "MAX_PAYLOAD_BYTES", 70000)
        self.assertRaises(PayloadTooLarge, BigBytes().toBox, b"p", {}, {"p": b"x" * 70001}, None)
        strings = {b"p": b"x" * 65535, b"p.1": b"x" * 65535, b"p.2": b"x"}
        self.assertRaises(PayloadTooLarge, BigBytes().fromBox, b"p", strings, {}, None)


class TaskRegistryTests(SynchronousTestCase):
    """
    L{salttwist.workers.tasks}: registration and look-up.
    """

    def test_registeredByDottedName(self) -> None:
        """
        A decorated function is registered under C{module.name}, keeps
        working as a function, and carries C{taskName}.
        """
        entry = tasks.lookup("tests.test_workers.recordInit")
        self.assertIs(entry.function, recordInit)
        self.assertFalse(entry.idempotent)
        self.assertEqual(recordInit.taskName, "tests.test_workers.recordInit")
        self.assertEqual(tasks.taskName(recordInit), "tests.test_workers.recordInit")
        self.assertEqual(tasks.taskName("a.b"), "a.b")
        self.assertRaises(TypeError, tasks.taskName, 3)

    def test_builtinTasks(self) -> None:
        """
        The built-in tasks exist, and only those safe to repeat are marked
        idempotent.
        """
        flags = {
            name.rsplit(".", 1)[1]: entry.idempotent
            for name, entry in tasks.registered().items()
            if name.startswith("salttwist.workers.tasks.")
        }
        self.assertEqual(
            flags,
            {
                "loadKey": True,
                "sign": True,
                "echo": True,
                "sleep": False,
                "crash": False,
                "raiseError": False,
            },
        )

    def test_moduleLevelOnly(self) -> None:
        """
        A nested function cannot be a task.
        """

        def nested() -> None:
            pass

        self.assertRaises(ValueError, tasks.task, nested)

    def test_unknown(self) -> None:
        """
        Looking up an unregistered name raises L{UnknownTask}.
        """
        self.assertRaises(UnknownTask, tasks.lookup, "salttwist.workers.tasks.nope")

    def test_signWithoutKey(self) -> None:
        """
        C{sign} before C{loadKey} fails with a clear error.
        """
        self.patch(tasks, "_loaded", {})
        answer = executeTask(tasks.sign.taskName, serial.dumps([[b"m"], {}]), io.StringIO())
        self.assertEqual(answer["errorType"], "salttwist.workers.tasks.KeyNotLoaded")

    def test_taskModules(self) -> None:
        """
        The child imports L{salttwist.workers.tasks}, then the modules in
        C{SALTTWIST_WORKER_TASKS}, then those on its command line, once each.
        """
        self.assertEqual(
            taskModules(["b.tasks", "a.tasks"], {"SALTTWIST_WORKER_TASKS": "a.tasks, c.tasks"}),
            ["salttwist.workers.tasks", "a.tasks", "c.tasks", "b.tasks"],
        )

    def test_malformedPayload(self) -> None:
        """
        A payload that is not C{[args, kwargs]} is an error answer.
        """
        answer = executeTask(ECHO, serial.dumps({"x": 1}), io.StringIO())
        self.assertEqual(answer["errorType"], "salttwist.serial.SerialError")


class InlineWorkerPoolTests(SynchronousTestCase):
    """
    L{InlineWorkerPool} runs tasks in-process with the pool's semantics.
    """

    def test_run(self) -> None:
        """
        Results go through msgpack (tuples come back as lists), errors become
        L{TaskError}, init tasks run at start, and C{stats()} counts.
        """
        del INIT_CALLS[:]
        pool = InlineWorkerPool(initTasks=[(recordInit, ["init"])])
        self.failureResultOf(pool.run(ECHO, 1), PoolStopped)
        self.successResultOf(pool.start())
        self.assertEqual(INIT_CALLS, ["init"])
        self.assertEqual(self.successResultOf(pool.run(ECHO, (1, 2))), [1, 2])
        error = self.failureResultOf(pool.run(tasks.raiseError, "no"), TaskError).value
        self.assertEqual(error.typeName, "ValueError")
        self.failureResultOf(pool.run("nope.nope"), TaskError)
        self.assertEqual(
            pool.stats(),
            {
                "size": 1,
                "busy": 0,
                "idle": 1,
                "queued": 0,
                "restarts": 0,
                "completed": 1,
                "failed": 3,
            },
        )
        self.successResultOf(pool.stop())
        self.failureResultOf(pool.run(ECHO, 1), PoolStopped)

    def test_typedInitTasks(self) -> None:
        """
        L{InlineWorkerPool} runs typed init tasks too, and fails its start
        with L{TaskError} when one raises.
        """
        self.assertIsNone(
            self.successResultOf(InlineWorkerPool(initTasks=[(Echo, {"value": 1})]).start())
        )
        pool = InlineWorkerPool(initTasks=[(RaiseError, {"message": "no key"})])
        error = self.failureResultOf(pool.start(), TaskError).value
        self.assertEqual((error.typeName, error.message), ("ValueError", "no key"))

    def test_initFails(self) -> None:
        """
        A failing init task fails C{start()}.
        """
        self.failureResultOf(InlineWorkerPool(initTasks=[(failInit, [])]).start(), TaskError)


@tasks.task
def doubleEach(items: list[list[Any]], offset: int = 0) -> list[dict[str, Any]]:
    """
    A test batch task: each item C{[n]} is answered C{2 * n + offset}; an
    item that is not a number fails alone.
    """
    return runEach(lambda n: 2 * n + offset, items, errorStream=io.StringIO())


class FakePool(RecordingPool):
    """
    A L{RecordingPool} whose calls the test answers as L{doubleEach} would.
    """

    def answer(self, index: int) -> None:
        """
        Answer call C{index} as L{doubleEach} would.
        """
        _, args, d = self.calls[index]
        d.callback(doubleEach(*args))


class TaskBatcherTests(SynchronousTestCase):
    """
    L{TaskBatcher} sends requests that wait for a busy pool together, in
    one call of a batch task, and hands each its own answer.
    """

    def test_loneRequestAtOnce(self) -> None:
        """
        A request that finds no call in flight is sent at once, alone, with
        the extra arguments as they are then.
        """
        pool = FakePool()
        offset = [10]
        batcher = TaskBatcher(pool, doubleEach, lambda: (offset[0],))
        d = batcher.run(1)
        self.assertEqual(len(pool.calls), 1)
        self.assertEqual(pool.calls[0][:2], (doubleEach.taskName, ([[1]], 10)))
        pool.answer(0)
        self.assertEqual(self.successResultOf(d), 12)
        self.assertEqual(batcher.inFlight, 0)

    def test_waitingRequestsGoTogether(self) -> None:
        """
        At most one call per worker is in flight; requests that arrive
        meanwhile go together, in order, in the next call (at most
        C{maxBatch} per call), and each gets its own answer.
        """
        pool = FakePool(size=2)
        batcher = TaskBatcher(pool, doubleEach, maxBatch=3)
        results = [batcher.run(n) for n in range(7)]
        self.assertEqual([c[1][0] for c in pool.calls], [[[0]], [[1]]])
        pool.answer(1)
        self.assertEqual([c[1][0] for c in pool.calls[2:]], [[[2], [3], [4]]])
        pool.answer(0)
        pool.answer(2)
        self.assertEqual([c[1][0] for c in pool.calls[3:]], [[[5], [6]]])
        pool.answer(3)
        self.assertEqual([self.successResultOf(d) for d in results], [0, 2, 4, 6, 8, 10, 12])
        self.assertEqual(batcher.inFlight, 0)

    def test_itemFailsAlone(self) -> None:
        """
        An item the batch task answers with an error fails alone, with
        L{TaskError} naming the error.
        """
        pool = FakePool(size=1)
        batcher = TaskBatcher(pool, doubleEach)
        first = batcher.run(1)
        bad, good = batcher.run(None), batcher.run(3)
        pool.answer(0)
        pool.answer(1)
        self.assertEqual(self.successResultOf(first), 2)
        error = self.failureResultOf(bad, TaskError).value
        self.assertEqual(error.typeName, "TypeError")
        self.assertEqual(error.taskName, doubleEach.taskName)
        self.assertEqual(self.successResultOf(good), 6)

    def test_callFailsEveryItem(self) -> None:
        """
        A failure of the whole call fails every item of that batch, and the
        next requests are still sent.
        """
        pool = FakePool(size=1)
        batcher = TaskBatcher(pool, doubleEach)
        first = batcher.run(1)
        waiting = [batcher.run(2), batcher.run(3)]
        pool.calls[0][2].errback(WorkerFailed(doubleEach.taskName, 12, "exited with signal 9"))
        self.failureResultOf(first, WorkerFailed)
        self.assertEqual(len(pool.calls), 2)
        pool.calls[1][2].callback([{"result": 1}])
        for d in waiting:
            error = self.failureResultOf(d, TaskError).value
            self.assertIn("expected 2 answers", error.message)
        self.assertEqual(batcher.inFlight, 0)
        later = batcher.run(4)
        pool.answer(2)
        self.assertEqual(self.successResultOf(later), 8)

    def test_cancelWaiting(self) -> None:
        """
        A request cancelled while it waits is not sent; one cancelled after
        it was sent ignores its answer.
        """
        pool = FakePool(size=1)
        batcher = TaskBatcher(pool, doubleEach)
        sent = batcher.run(1)
        dropped, kept = batcher.run(2), batcher.run(3)
        dropped.cancel()
        sent.cancel()
        pool.answer(0)
        self.assertEqual(pool.calls[1][1][0], [[3]])
        pool.answer(1)
        self.failureResultOf(dropped, CancelledError)
        self.failureResultOf(sent, CancelledError)
        self.assertEqual(self.successResultOf(kept), 6)

    def test_holdFor(self) -> None:
        """
        With C{holdFor}, a request that finds a call in flight waits for it
        to come back even though a worker is free, unless a full batch
        waits; after L{BUSY_PATIENCE} times C{holdFor} it goes to another
        worker.
        """
        clock = Clock()
        pool = FakePool(size=2)
        batcher = TaskBatcher(pool, doubleEach, maxBatch=3, clock=clock, holdFor=0.25)
        results = [batcher.run(0)]
        self.assertEqual(len(pool.calls), 1)
        results += [batcher.run(1), batcher.run(2)]
        clock.advance(0.25)
        self.assertEqual(len(pool.calls), 1)
        pool.answer(0)
        self.assertEqual(pool.calls[1][1][0], [[1], [2]])
        # A full batch goes to the free worker at once.
        results += [batcher.run(n) for n in (3, 4, 5)]
        self.assertEqual(pool.calls[2][1][0], [[3], [4], [5]])
        pool.answer(2)
        # The call of 1 and 2 hangs: 6 goes to the free worker in the end.
        results.append(batcher.run(6))
        clock.advance(0.25 * BUSY_PATIENCE - 0.125)
        self.assertEqual(len(pool.calls), 3)
        clock.advance(0.125)
        self.assertEqual(pool.calls[3][1][0], [[6]])
        pool.answer(1)
        pool.answer(3)
        self.assertEqual([self.successResultOf(d) for d in results], [0, 2, 4, 6, 8, 10, 12])
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_holdForSteadyStream(self) -> None:
        """
        With C{holdFor}, requests that keep coming go at most one call every
        C{holdFor} seconds, even with no call in flight; a request after a
        quiet spell of C{holdFor} goes at once.
        """
        clock = Clock()
        pool = FakePool(size=2)
        batcher = TaskBatcher(pool, doubleEach, clock=clock, holdFor=0.05)
        first = batcher.run(1)
        pool.answer(0)
        self.assertEqual(self.successResultOf(first), 2)
        clock.advance(0.01)
        stream = [batcher.run(2)]
        clock.advance(0.02)
        stream.append(batcher.run(3))
        self.assertEqual(len(pool.calls), 1)
        clock.advance(0.02)
        self.assertEqual(pool.calls[1][1][0], [[2], [3]])
        pool.answer(1)
        self.assertEqual([self.successResultOf(d) for d in stream], [4, 6])
        clock.advance(0.05)
        late = batcher.run(4)
        self.assertEqual(pool.calls[2][1][0], [[4]])
        pool.answer(2)
        self.assertEqual(self.successResultOf(late), 8)
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_holdForMovingClock(self) -> None:
        """
        With a clock that moves at each reading, as the reactor's does, no
        delay asked of it is negative, and every request is answered.
        """

        class MovingClock(Clock):
            def seconds(self) -> float:
                self.rightNow += 0.001
                return self.rightNow

            def callLater(self, delay: float, *args: Any, **kw: Any) -> Any:
                assert delay >= 0, delay
                return super().callLater(delay, *args, **kw)

        clock = MovingClock()
        pool = FakePool(size=2)
        batcher = TaskBatcher(pool, doubleEach, clock=clock, holdFor=0.0025)
        results = []
        for n in range(20):
            results.append(batcher.run(n))
            clock.advance(0.0003)
            while len(pool.calls) > sum(d.called for _, _, d in pool.calls):
                pool.answer(next(i for i, c in enumerate(pool.calls) if not c[2].called))
        clock.advance(1)
        while len(pool.calls) > sum(d.called for _, _, d in pool.calls):
            pool.answer(next(i for i, c in enumerate(pool.calls) if not c[2].called))
        self.assertEqual([self.successResultOf(d) for d in results], [2 * n for n in range(20)])

    def test_inlinePool(self) -> None:
        """
        With a pool that answers at once (L{InlineWorkerPool}), each request
        is answered at once, through the real task.
        """
        pool = InlineWorkerPool()
        self.successResultOf(pool.start())
        batcher = TaskBatcher(pool, doubleEach, lambda: (1,))
        self.assertEqual([self.successResultOf(batcher.run(n)) for n in (1, 2)], [3, 5])
        self.failureResultOf(batcher.run("x"), TaskError)

    def test_poolRefuses(self) -> None:
        """
        A pool that refuses the call fails the batch's requests with its
        error.
        """
        pool = InlineWorkerPool()
        batcher = TaskBatcher(pool, doubleEach)
        self.failureResultOf(batcher.run(1), PoolStopped)
        self.assertEqual(batcher.inFlight, 0)
