# -*- test-case-name: tests.test_autosign -*-
"""
Policy executables (C{autosign_policy}, and an executable
C{autosign_file}): run one per key, without blocking, a bounded number at
once.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred, DeferredSemaphore, succeed
from twisted.internet.error import ProcessDone, ProcessExitedAlready, ProcessTerminated
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist.blocking import RunBlocking
from salttwist.interfaces import IAutosignPolicy
from salttwist.pki.autosign.base import (
    ACCEPT,
    ENV_GRAINS,
    ENV_ID,
    ENV_PEER,
    MAX_GRAINS_JSON,
    MAX_QUEUED,
    AutosignDecision,
    _contextGrains,
    _contextPeer,
    _grainsJSON,
    _GuardedPolicy,
    _pending,
)
from salttwist.pki.autosign.hygiene import UntrustedPathError, checkTrusted


@implementer(IAutosignPolicy)
class PolicyExecutablePolicy(_GuardedPolicy):
    """
    C{autosign_policy}: always run as a policy executable. A missing or
    non-executable file leaves the key pending.
    """

    name = "policy_executable"
    log = Logger()

    def __init__(self, path: str, runner: PolicyProcessRunner, runBlocking: RunBlocking) -> None:
        """
        @param path: the executable.
        @param runner: runs it.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        self.path = path
        self._runner = runner
        self._runBlocking = runBlocking

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        try:
            problem = await self._runBlocking(_executableProblem, self.path)
        except UntrustedPathError as e:
            self.log.error("autosign: {problem}", problem=str(e))
            return _pending(self.name, str(e), True)
        if problem is not None:
            return _pending(self.name, f"policy executable {self.path} {problem}", True)
        return await self._runner.run(self.path, minionId, pem, context)


def _executableProblem(path: str) -> str | None:
    """
    Why C{path} cannot be run as a policy executable, in a thread.

    @return: a phrase following the path, or L{None} if it can be run.
    @raise UntrustedPathError: someone but root and the master's user could
        change it (L{checkTrusted}).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "does not exist"
    except OSError as e:
        return f"cannot be examined: {e}"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    try:
        checkTrusted(path, "autosign_policy")
    except FileNotFoundError:
        return "does not exist"
    if not os.access(path, os.X_OK):
        return "is not executable by the master's user"
    return None


# -- Policy processes ------------------------------------------------------

_TRAMPOLINE = (
    "import os, sys\n"
    "os.setsid()\n"
    "try:\n"
    "    os.execv(sys.argv[1], sys.argv[1:])\n"
    "except OSError as e:\n"
    "    sys.stderr.write('salttwist: cannot run %s: %s\\n' % (sys.argv[1], e))\n"
    "    os._exit(127)\n"
)
"""
Run in the master's Python (C{-I -S -c}) between the spawn and the policy
executable: it makes the process the leader of a new session and process
group (its pid is the group's id), then C{exec}s the executable with argv
C{[path, id]}. Twisted's C{spawnProcess} has no hook to do this itself.
"""


class _PolicyProcessProtocol(ProcessProtocol):
    """
    Feeds a policy executable the key on stdin and keeps the start of its
    output.

    @ivar ended: fires with L{None} once C{processEnded} has been called.
    @ivar reason: the reason given to C{processEnded}.
    @ivar leaderExited: whether the process itself (the group's leader) has
        exited and been reaped (C{processExited}).
    @ivar pid: the process's pid, which is also its process group's id.
    @ivar output: the kept bytes by child fd (1, 2).
    @ivar dropped: the number of bytes discarded by child fd.
    """

    def __init__(self, pem: bytes, outputMax: int, onExit: Any) -> None:
        self._pem = pem
        self._outputMax = outputMax
        self._onExit = onExit
        self.ended: Deferred[None] = Deferred()
        self.reason: Failure | None = None
        self.leaderExited = False
        self.pid: int | None = None
        self.output = {1: bytearray(), 2: bytearray()}
        self.dropped = {1: 0, 2: 0}

    def connectionMade(self) -> None:
        self.pid = self.transport.pid
        self.transport.write(self._pem)
        self.transport.closeStdin()

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        # Read on to the end, keeping only the start: a policy blocked on a
        # full pipe would hold its slot until the timeout.
        kept = self.output.setdefault(childFD, bytearray())
        room = max(0, self._outputMax - len(kept))
        kept += data[:room]
        self.dropped[childFD] = self.dropped.get(childFD, 0) + max(0, len(data) - room)

    def processExited(self, reason: Failure) -> None:
        self.leaderExited = True
        self._onExit(self)

    def processEnded(self, reason: Failure) -> None:
        # Fired with None: a Failure given to callback() would errback.
        self.reason = reason
        self.leaderExited = True
        self.ended.callback(None)


class PolicyProcessRunner:
    """
    Runs policy executables without blocking: at most C{maxConcurrent} at
    once, further requests queued (at most C{maxQueued}), each in a session
    and process group of its own, the whole group killed with C{SIGKILL}
    after C{timeout} seconds.

    The executable gets the minion id as its only argument (no shell: an id
    such as C{-rf} is just an argument), the minion's public key PEM on
    stdin, and an environment of exactly L{ENV_ID}, L{ENV_PEER},
    L{ENV_GRAINS} and C{PATH} (the master's, or L{os.defpath}). Exit status
    0 accepts; anything else leaves the key pending. Its stdout and stderr are
    read to their end but only the first C{outputMax} bytes of each are kept
    (and logged at debug level); the rest is counted and dropped.

    Processes the executable started are killed with it: on the timeout, as
    soon as the executable itself exits (nothing it left behind outlives
    it), and when the runner is L{stopped <stop>} (the master stops). Only a
    process that leaves the group on purpose (C{setsid}) escapes.

    Must be used from the reactor thread.
    """

    name = "policy_executable"
    log = Logger()

    def __init__(
        self,
        reactor: Any,
        timeout: float,
        maxConcurrent: int,
        outputMax: int,
        maxQueued: int = MAX_QUEUED,
        environ: Mapping[str, str] | None = None,
        killGroup: Callable[[int, int], None] | None = None,
        python: str | None = None,
    ) -> None:
        """
        @param reactor: provides C{IReactorProcess} and C{IReactorTime}.
        @param timeout: seconds before a process is killed.
        @param maxConcurrent: the most processes running at once
            (C{autosign_max_concurrent}).
        @param outputMax: the bytes of stdout, and of stderr, kept for the
            log (C{autosign_output_max}).
        @param maxQueued: the most requests waiting for a slot.
        @param environ: the master's environment, for C{PATH}; defaults to
            L{os.environ}.
        @param killGroup: sends a signal to a process group; defaults to
            L{os.killpg}.
        @param python: the Python running L{_TRAMPOLINE}; defaults to
            L{sys.executable}.
        """
        self._reactor = reactor
        self._timeout = timeout
        self._outputMax = outputMax
        self._maxQueued = maxQueued
        self._environ = os.environ if environ is None else environ
        self._semaphore = DeferredSemaphore(maxConcurrent)
        self._killpg = os.killpg if killGroup is None else killGroup
        self._python = python or sys.executable
        self._processes: set[_PolicyProcessProtocol] = set()
        self._stopped = False

    @property
    def running(self) -> int:
        """
        The number of policy processes running now.
        """
        return self._semaphore.limit - self._semaphore.tokens

    @property
    def queued(self) -> int:
        """
        The number of requests waiting for a slot.
        """
        return len(self._semaphore.waiting)

    def stop(self) -> None:
        """
        The master stops: kill every running policy process's group and
        close its pipes (their keys stay pending), and run no more (queued
        and later requests are left pending at once).
        """
        self._stopped = True
        for proto in list(self._processes):
            self._killGroup(proto)
            proto.transport.loseConnection()

    def run(
        self, path: str, minionId: str, pem: bytes, context: Mapping[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        Run the policy executable C{path} for one key.

        @return: a L{Deferred} that fires with the decision (never fails).
        """
        grains = _grainsJSON(_contextGrains(context))
        if grains is None:
            return succeed(
                _pending(
                    self.name,
                    f"the autosign grains of {minionId!r} cannot be passed to {path}"
                    f" (not encodable as JSON, or larger than {MAX_GRAINS_JSON} bytes)",
                    True,
                )
            )
        if self.queued >= self._maxQueued:
            return succeed(
                _pending(
                    self.name,
                    f"{self.queued} autosign requests already wait for a policy process;"
                    f" {path} was not run for {minionId!r}",
                    True,
                )
            )
        env = {
            ENV_ID: minionId,
            ENV_PEER: _contextPeer(context),
            ENV_GRAINS: grains,
            "PATH": self._environ.get("PATH", os.defpath),
        }
        d = self._semaphore.run(self._spawn, path, minionId, pem, env)

        def failed(failure: Failure) -> AutosignDecision:
            self.log.failure("autosign policy executable {path} failed", failure, path=path)
            return _pending(self.name, f"internal error: {failure.getErrorMessage()}", True)

        d.addErrback(failed)
        # The caller gets its own Deferred: cancelling it must not cancel the
        # process's, which would free the slot while the process still runs.
        result: Deferred[AutosignDecision] = Deferred()

        def deliver(decision: AutosignDecision) -> None:
            if not result.called:
                result.callback(decision)

        d.addCallback(deliver)
        return result

    def _killGroup(self, proto: _PolicyProcessProtocol) -> None:
        """
        Send C{SIGKILL} to a policy process's whole process group; if the
        group does not exist yet (L{_TRAMPOLINE} has not called C{setsid}),
        to the process alone.
        """
        try:
            if proto.pid is not None:
                self._killpg(proto.pid, signal.SIGKILL)
                return
        except ProcessLookupError:
            pass
        except OSError as e:
            self.log.error(
                "autosign: cannot kill the process group {pgid} of a policy executable: {error}",
                pgid=proto.pid,
                error=str(e),
            )
        if not proto.leaderExited:
            try:
                proto.transport.signalProcess("KILL")
            except ProcessExitedAlready:
                pass

    def _leaderExited(self, proto: _PolicyProcessProtocol) -> None:
        """
        The policy executable has exited (and been reaped): kill what it
        left running in its group, so that nothing outlives it. The group's
        id cannot have been reused while one of its members lives.
        """
        if proto.pid is None:
            return
        try:
            self._killpg(proto.pid, signal.SIGKILL)
        except OSError:
            pass

    def _spawn(
        self, path: str, minionId: str, pem: bytes, env: dict[str, str]
    ) -> Deferred[AutosignDecision]:
        """
        Start one process and fire with its decision once it has ended.
        """
        if self._stopped:
            return succeed(
                _pending(
                    self.name, f"the master is stopping: {path} was not run for {minionId!r}", True
                )
            )
        proto = _PolicyProcessProtocol(pem, self._outputMax, self._leaderExited)
        args = [self._python, "-I", "-S", "-c", _TRAMPOLINE, path, minionId]
        try:
            self._reactor.spawnProcess(
                proto, self._python, args, env=env, childFDs={0: "w", 1: "r", 2: "r"}
            )
        except Exception as e:
            return succeed(
                _pending(self.name, f"policy executable {path} could not start: {e}", True)
            )
        self._processes.add(proto)

        killed: list[bool] = []

        def kill() -> None:
            if not proto.leaderExited:
                killed.append(True)
            # The whole group: a child of the executable (a "sleep" of a
            # shell script) dies too. If the executable has already exited
            # and a child still holds its output open, its exit status still
            # decides.
            self._killGroup(proto)
            # Close our ends of the pipes too: a process that left the group
            # but inherited them would otherwise delay processEnded.
            proto.transport.loseConnection()

        timer = self._reactor.callLater(self._timeout, kill)

        def ended(_: None) -> AutosignDecision:
            self._processes.discard(proto)
            if timer.active():
                timer.cancel()
            self._logOutput(path, minionId, proto)
            assert proto.reason is not None
            return self._verdict(path, proto.reason, bool(killed))

        return proto.ended.addCallback(ended)

    def _verdict(self, path: str, reason: Failure, killed: bool) -> AutosignDecision:
        """
        Turn a process's end into a decision.
        """
        value = reason.value
        if killed:
            return _pending(
                self.name,
                f"policy executable {path} did not finish within {self._timeout:g} s"
                " and was killed with its process group (SIGKILL)",
                True,
            )
        if isinstance(value, ProcessDone) or (
            isinstance(value, ProcessTerminated) and value.exitCode == 0 and not value.signal
        ):
            return AutosignDecision(ACCEPT, self.name, f"policy executable {path} exited with 0")
        if isinstance(value, ProcessTerminated) and value.signal:
            return _pending(
                self.name,
                f"policy executable {path} was killed by signal {_signalName(value.signal)}",
            )
        if isinstance(value, ProcessTerminated) and value.exitCode is not None:
            return _pending(
                self.name, f"policy executable {path} exited with status {value.exitCode}"
            )
        return _pending(self.name, f"policy executable {path} ended: {reason.getErrorMessage()}")

    def _logOutput(self, path: str, minionId: str, proto: _PolicyProcessProtocol) -> None:
        """
        Log what the process wrote, at debug level, saying how much was cut.
        """
        for fd, stream in ((1, "stdout"), (2, "stderr")):
            kept = bytes(proto.output.get(fd, b""))
            dropped = proto.dropped.get(fd, 0)
            if not kept and not dropped:
                continue
            self.log.debug(
                "autosign policy {path} for {id} {stream}: {text}{note}",
                path=path,
                id=minionId,
                stream=stream,
                text=kept.decode("utf-8", "replace"),
                note=f" ({dropped} more bytes dropped)" if dropped else "",
                dropped=dropped,
            )


def _signalName(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
