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
from collections.abc import Mapping
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
    _guard,
    _pending,
)


@implementer(IAutosignPolicy)
class PolicyExecutablePolicy:
    """
    C{autosign_policy}: always run as a policy executable. A missing or
    non-executable file leaves the key pending.
    """

    name = "policy_executable"

    def __init__(self, path: str, runner: PolicyProcessRunner, runBlocking: RunBlocking) -> None:
        """
        @param path: the executable.
        @param runner: runs it.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        self.path = path
        self._runner = runner
        self._runBlocking = runBlocking

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return _guard(self.name, self._decide(minionId, pem, context))

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        problem = await self._runBlocking(_executableProblem, self.path)
        if problem is not None:
            return _pending(self.name, f"policy executable {self.path} {problem}", True)
        return await self._runner.run(self.path, minionId, pem, context)


def _executableProblem(path: str) -> str | None:
    """
    Why C{path} cannot be run as a policy executable, in a thread.

    @return: a phrase following the path, or L{None} if it can be run.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "does not exist"
    except OSError as e:
        return f"cannot be examined: {e}"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if not os.access(path, os.X_OK):
        return "is not executable by the master's user"
    return None


# -- Policy processes ------------------------------------------------------


class _PolicyProcessProtocol(ProcessProtocol):
    """
    Feeds a policy executable the key on stdin and keeps the start of its
    output.

    @ivar ended: fires with L{None} once C{processEnded} has been called.
    @ivar reason: the reason given to C{processEnded}.
    @ivar output: the kept bytes by child fd (1, 2).
    @ivar dropped: the number of bytes discarded by child fd.
    """

    def __init__(self, pem: bytes, outputMax: int) -> None:
        self._pem = pem
        self._outputMax = outputMax
        self.ended: Deferred[None] = Deferred()
        self.reason: Failure | None = None
        self.output = {1: bytearray(), 2: bytearray()}
        self.dropped = {1: 0, 2: 0}

    def connectionMade(self) -> None:
        self.transport.write(self._pem)
        self.transport.closeStdin()

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        kept = self.output.setdefault(childFD, bytearray())
        room = max(0, self._outputMax - len(kept))
        kept += data[:room]
        self.dropped[childFD] = self.dropped.get(childFD, 0) + max(0, len(data) - room)

    def processEnded(self, reason: Failure) -> None:
        # Fired with None: a Failure given to callback() would errback.
        self.reason = reason
        self.ended.callback(None)


class PolicyProcessRunner:
    """
    Runs policy executables without blocking: at most C{maxConcurrent} at
    once, further requests queued (at most C{maxQueued}), each killed with
    C{SIGKILL} after C{timeout} seconds.

    The executable gets the minion id as its only argument (no shell: an id
    such as C{-rf} is just an argument), the minion's public key PEM on
    stdin, and an environment of exactly L{ENV_ID}, L{ENV_PEER},
    L{ENV_GRAINS} and C{PATH} (the master's, or L{os.defpath}). Exit status
    0 accepts; anything else leaves the key pending. Its stdout and stderr are
    logged at debug level, each cut to C{outputMax} bytes.

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
    ) -> None:
        """
        @param reactor: provides C{IReactorProcess} and C{IReactorTime}.
        @param timeout: seconds before a process is killed.
        @param maxConcurrent: the most processes running at once.
        @param outputMax: the bytes of stdout, and of stderr, kept for the log.
        @param maxQueued: the most requests waiting for a slot.
        @param environ: the master's environment, for C{PATH}; defaults to
            L{os.environ}.
        """
        self._reactor = reactor
        self._timeout = timeout
        self._outputMax = outputMax
        self._maxQueued = maxQueued
        self._environ = os.environ if environ is None else environ
        self._semaphore = DeferredSemaphore(maxConcurrent)

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

    def _spawn(
        self, path: str, minionId: str, pem: bytes, env: dict[str, str]
    ) -> Deferred[AutosignDecision]:
        """
        Start one process and fire with its decision once it has ended.
        """
        proto = _PolicyProcessProtocol(pem, self._outputMax)
        try:
            self._reactor.spawnProcess(
                proto, path, [path, minionId], env=env, childFDs={0: "w", 1: "r", 2: "r"}
            )
        except Exception as e:
            return succeed(
                _pending(self.name, f"policy executable {path} could not start: {e}", True)
            )

        killed: list[bool] = []

        def kill() -> None:
            try:
                proto.transport.signalProcess("KILL")
            except ProcessExitedAlready:
                # It has exited, but a grandchild still holds its output
                # open: its exit status still decides.
                pass
            else:
                killed.append(True)
            # Close our ends of the pipes too: a grandchild that inherited
            # them would otherwise delay processEnded until it exits.
            proto.transport.loseConnection()

        timer = self._reactor.callLater(self._timeout, kill)

        def ended(_: None) -> AutosignDecision:
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
                " and was killed (SIGKILL)",
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
