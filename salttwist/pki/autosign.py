# -*- test-case-name: tests.test_autosign -*-
"""
Autosign policies: which new minion keys the master accepts (or rejects)
without an admin.

Puppet's kinds of autosigning, in Salt's configuration language, plus two of
Salt's own (grains) and one beyond both (HTTP). Each kind is a small class
providing L{IAutosignPolicy}; L{buildAutosignPolicy} composes them from the
master's configuration in a fixed order:

 1. C{autosign: false}: nothing is autosigned, nothing else is consulted
    (L{AutosignDisabledPolicy}).
 2. C{autoreject_file}: a match rejects (L{AutorejectFilePolicy}).
 3. C{auto_accept}: everything is accepted (L{AutoAcceptPolicy}).
 4. C{autosign_file} (a whitelist, or a policy executable if the file is
    executable: L{AutosignFilePolicy}), C{autosign_policy}
    (L{PolicyExecutablePolicy}), C{autosign_grains_dir} (L{GrainsPolicy}),
    C{autosign_url} (L{URLPolicy}), in that order; the first accept wins.
 5. Otherwise the key stays pending.

A decision is an L{AutosignDecision}. C{decide} never fails: any error
becomes a C{"pending"} decision whose reason says what went wrong.
User documentation: C{docs/autosign.md}.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import signal
import stat
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from twisted.internet.defer import CancelledError, Deferred, DeferredSemaphore, succeed
from twisted.internet.error import ProcessDone, ProcessExitedAlready, ProcessTerminated
from twisted.internet.protocol import ProcessProtocol, Protocol
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist.interfaces import IAutosignPolicy

__all__ = [
    "ACCEPT",
    "PENDING",
    "REJECT",
    "ENV_GRAINS",
    "ENV_ID",
    "ENV_PEER",
    "MAX_GRAINS_JSON",
    "MAX_QUEUED",
    "AutoAcceptPolicy",
    "AutorejectFilePolicy",
    "AutosignDecision",
    "AutosignDisabledPolicy",
    "AutosignFilePolicy",
    "CompositeAutosignPolicy",
    "GrainsPolicy",
    "PolicyExecutablePolicy",
    "PolicyProcessRunner",
    "URLPolicy",
    "Whitelist",
    "buildAutosignPolicy",
    "matchesPattern",
    "parseWhitelist",
    "threadRunner",
]

ACCEPT = "accept"
REJECT = "reject"
PENDING = "pending"
_VERDICTS = (ACCEPT, REJECT, PENDING)

ENV_ID = "SALTTWIST_AUTOSIGN_ID"
"""The environment variable holding the minion id, for policy executables."""
ENV_PEER = "SALTTWIST_AUTOSIGN_PEER"
"""The environment variable holding the minion's C{host:port}."""
ENV_GRAINS = "SALTTWIST_AUTOSIGN_GRAINS"
"""The environment variable holding the minion's autosign grains as JSON."""

MAX_QUEUED = 1000
"""The most decisions that may wait for a policy-process slot; beyond, a
decision is C{"pending"} at once."""

MAX_GRAINS_JSON = 65536
"""The largest autosign grains, as JSON bytes, passed to a policy executable
or URL. Larger grains leave the key pending rather than being cut."""

_DISCARD_BODY_MAX = 1 << 20

# A label of a host name, as Puppet's domain globs accept it: ASCII letters,
# digits, "-" and "_" (Puppet's \w).
_LABEL = re.compile(r"[A-Za-z0-9_-]+\Z")

_log = Logger()

RunBlocking = Callable[..., Deferred]


@dataclass(frozen=True)
class AutosignDecision:
    """
    What an autosign policy decided about one key.

    @ivar verdict: C{"accept"}, C{"reject"} or C{"pending"}.
    @ivar policy: the name of the policy that decided: C{"autosign_file"},
        C{"autoreject_file"}, C{"policy_executable"}, C{"autosign_grains"},
        C{"autosign_url"}, C{"auto_accept"}, C{"autosign_disabled"} or
        C{"none"} (no policy accepted).
    @ivar reason: a sentence for logs and events.
    @ivar failed: L{True} when the policy could not reach a verdict (an
        unreadable file, a timeout, an HTTP error...); the verdict is then
        C{"pending"}. A failed reject policy stops the composite policy, so a
        broken rejection list never lets a key be accepted.
    """

    verdict: str
    policy: str
    reason: str
    failed: bool = False

    def __post_init__(self) -> None:
        if self.verdict not in _VERDICTS:
            raise ValueError(f"verdict must be one of {_VERDICTS}, not {self.verdict!r}")


def _pending(policy: str, reason: str, failed: bool = False) -> AutosignDecision:
    return AutosignDecision(PENDING, policy, reason, failed)


def _guard(
    name: str, coroutine: Coroutine[Any, Any, AutosignDecision]
) -> Deferred[AutosignDecision]:
    """
    Run a policy's decision coroutine so that it never fails.

    @param name: the policy's name, for the decision made of an error.
    @param coroutine: the decision.
    @return: a L{Deferred} that fires with the decision, or with a failed
        C{"pending"} one if the coroutine raised. Cancelling it (the caller
        no longer wants the answer) fails it with L{CancelledError}, as usual.
    """

    def failed(failure: Failure) -> AutosignDecision:
        if failure.check(CancelledError):
            return failure  # type: ignore[return-value]
        _log.failure("autosign policy {policy} failed", failure, policy=name)
        return _pending(name, f"internal error: {failure.getErrorMessage()}", failed=True)

    return Deferred.fromCoroutine(coroutine).addErrback(failed)


def _contextGrains(context: Mapping[str, Any]) -> dict[str, Any]:
    """
    The minion's autosign grains from a decision's context: a dict with
    string keys, or C{{}} for anything else (the minion may send garbage).
    """
    grains = context.get("autosign_grains") if isinstance(context, Mapping) else None
    if not isinstance(grains, dict):
        return {}
    return {key: value for key, value in grains.items() if isinstance(key, str)}


def _contextPeer(context: Mapping[str, Any]) -> str:
    """
    The minion's address from a decision's context, or C{""}.
    """
    peer = context.get("peer") if isinstance(context, Mapping) else None
    if not isinstance(peer, str) or "\0" in peer:
        return ""
    return peer


def _jsonDefault(value: Any) -> Any:
    """
    Make msgpack values JSON can not encode representable: bytes as text
    (undecodable bytes replaced), anything else as its repr.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def _grainsJSON(grains: Mapping[str, Any]) -> str | None:
    """
    Encode autosign grains for a policy executable or URL.

    @return: the JSON text, or L{None} if the grains cannot be encoded (for
        example nested maps with keys of mixed types) or their encoding is
        larger than L{MAX_GRAINS_JSON}.
    """
    try:
        text = json.dumps(
            dict(grains),
            sort_keys=True,
            skipkeys=True,
            allow_nan=False,
            ensure_ascii=True,
            default=_jsonDefault,
        )
    except (TypeError, ValueError, RecursionError):
        return None
    if len(text) > MAX_GRAINS_JSON:
        return None
    return text


def threadRunner(reactor: Any) -> RunBlocking:
    """
    @return: a C{runBlocking} that runs work in C{reactor}'s thread pool.
    """

    def run(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred:
        return deferToThreadPool(reactor, reactor.getThreadPool(), f, *args, **kwargs)

    return run


# -- Whitelists ------------------------------------------------------------


@dataclass(frozen=True)
class Whitelist:
    """
    A parsed whitelist (C{autosign_file} or C{autoreject_file}).

    @ivar patterns: the usable lines, in file order.
    @ivar problems: a message for each line that was ignored because it can
        never match (a malformed domain glob, whitespace inside).
    """

    patterns: tuple[str, ...]
    problems: tuple[str, ...] = ()

    def match(self, minionId: str) -> str | None:
        """
        @return: the first pattern matching C{minionId}, or L{None}.
        """
        for pattern in self.patterns:
            if matchesPattern(pattern, minionId):
                return pattern
        return None


def parseWhitelist(text: str) -> Whitelist:
    """
    Parse a whitelist: one id or glob per line; surrounding whitespace is
    stripped; blank lines and lines starting with C{#} are ignored.

    A line starting with C{*.} is a Puppet domain glob: the rest must be a
    domain name (labels of ASCII letters, digits, C{-} and C{_}), else the
    line is ignored as a problem. Lines with whitespace inside can never
    match an id and are ignored as problems too.

    @param text: the file's content.
    @return: the whitelist.
    """
    patterns: list[str] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if any(char.isspace() for char in line):
            problems.append(f"line {number}: {line!r} contains whitespace and never matches")
            continue
        if line.startswith("*.") and not _isDomain(line[2:]):
            problems.append(
                f"line {number}: {line!r} is not a domain glob (*. then a domain name)"
                " and never matches"
            )
            continue
        patterns.append(line)
    return Whitelist(tuple(patterns), tuple(problems))


def _isDomain(text: str) -> bool:
    """
    Is C{text} a domain name made of L{_LABEL} labels?
    """
    return bool(text) and all(_LABEL.match(label) for label in text.split("."))


def matchesPattern(pattern: str, minionId: str) -> bool:
    """
    Does one whitelist line match a minion id?

    A C{*.DOMAIN} line matches ids that are one or more host-name labels
    followed by C{.DOMAIN}, comparing the domain without regard to ASCII case
    (domain names are case-insensitive): C{*.example.com} matches
    C{a.example.com}, C{a.b.example.com} and C{A.Example.COM}, never
    C{example.com}, C{evilexample.com} or C{a.example.com.evil.net}. Any other
    line is a Salt glob, matched case-sensitively with
    L{fnmatch.fnmatchcase}, as minion ids are case-sensitive.
    """
    if pattern.startswith("*."):
        suffix = pattern[1:]  # ".example.com"
        if len(minionId) <= len(suffix):
            return False
        head, tail = minionId[: -len(suffix)], minionId[-len(suffix) :]
        # isascii first: str.lower maps some non-ASCII letters (the Kelvin
        # sign) onto ASCII ones.
        if not tail.isascii() or tail.lower() != suffix.lower():
            return False
        return _isDomain(head)
    return fnmatch.fnmatchcase(minionId, pattern)


def _inspectFile(path: str, allowExecutable: bool) -> tuple[str, str | None]:
    """
    Look at a policy file, in a thread.

    @param path: the file.
    @param allowExecutable: if true, a regular file executable by this
        process is reported as C{"executable"} and not read.
    @return: C{("missing", None)}, C{("executable", None)} or C{("list",
        text)}.
    @raise OSError: the file exists but cannot be read.
    @raise UnicodeDecodeError: the file is not UTF-8.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return ("missing", None)
    if allowExecutable and stat.S_ISREG(info.st_mode) and os.access(path, os.X_OK):
        return ("executable", None)
    with open(path, "rb") as f:
        data = f.read()
    return ("list", data.decode("utf-8"))


@implementer(IAutosignPolicy)
class _ListFilePolicy:
    """
    Shared code of the whitelist policies.

    @cvar name: the policy's name.
    @cvar verdict: the verdict when a line matches.
    """

    name = ""
    verdict = PENDING
    log = Logger()

    def __init__(self, path: str, runBlocking: RunBlocking) -> None:
        """
        @param path: the whitelist file; re-read at every decision.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        self.path = path
        self._runBlocking = runBlocking

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return _guard(self.name, self._decide(minionId, pem, context))

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        try:
            kind, text = await self._runBlocking(_inspectFile, self.path, self._allowExecutable())
        except (OSError, UnicodeDecodeError) as e:
            return _pending(self.name, f"{self.name} {self.path} cannot be read: {e}", True)
        if kind == "missing":
            return _pending(self.name, f"{self.name} {self.path} does not exist")
        if kind == "executable":
            return await self._runExecutable(minionId, pem, context)
        return self._matchList(minionId, parseWhitelist(text or ""))

    def _allowExecutable(self) -> bool:
        return False

    async def _runExecutable(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> AutosignDecision:
        raise NotImplementedError()  # pragma: no cover

    def _matchList(self, minionId: str, whitelist: Whitelist) -> AutosignDecision:
        for problem in whitelist.problems:
            self.log.warn(
                "{policy} {path}: {problem}", policy=self.name, path=self.path, problem=problem
            )
        pattern = whitelist.match(minionId)
        if pattern is None:
            return _pending(self.name, f"no line of {self.name} {self.path} matches {minionId!r}")
        return AutosignDecision(
            self.verdict, self.name, f"{minionId!r} matches {pattern!r} in {self.path}"
        )


class AutorejectFilePolicy(_ListFilePolicy):
    """
    C{autoreject_file}: a key whose id matches a line is rejected.

    The file is always read as a list, even if it is executable. A missing
    file rejects nothing; an unreadable one is a failure.
    """

    name = "autoreject_file"
    verdict = REJECT


class AutosignFilePolicy(_ListFilePolicy):
    """
    C{autosign_file}: a key whose id matches a line is accepted; or, if the
    file is a regular file executable by the master's user, it is run as a
    policy executable, as Puppet does.
    """

    name = "autosign_file"
    verdict = ACCEPT

    def __init__(self, path: str, runner: PolicyProcessRunner, runBlocking: RunBlocking) -> None:
        """
        @param path: the file; re-inspected at every decision.
        @param runner: runs the file when it is executable.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        super().__init__(path, runBlocking)
        self._runner = runner

    def _allowExecutable(self) -> bool:
        return True

    async def _runExecutable(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> AutosignDecision:
        return await self._runner.run(self.path, minionId, pem, context)


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


# -- Grains ----------------------------------------------------------------


def _grainText(value: Any) -> str | None:
    """
    A grain value as the text it must equal in a grain file: strings as they
    are, booleans as C{true}/C{false}, finite numbers with L{str}. Other
    values (lists, maps, null) never match.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(value)
    return None


def _readGrainsDir(directory: str) -> dict[str, frozenset[str]] | None:
    """
    Read every grain file of C{autosign_grains_dir}, in a thread.

    Files whose names start with C{.} and entries that are not regular files
    are skipped. Each file lists allowed values, one per line, with
    surrounding whitespace stripped; blank lines and C{#} lines are ignored.

    @return: the allowed values by grain name, or L{None} if the directory
        does not exist.
    @raise OSError: the directory or a file cannot be read.
    @raise UnicodeDecodeError: a file is not UTF-8.
    """
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return None
    allowed: dict[str, frozenset[str]] = {}
    for name in names:
        if name.startswith("."):
            continue
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        values = (line.strip() for line in text.splitlines())
        allowed[name] = frozenset(v for v in values if v and not v.startswith("#"))
    return allowed


@implementer(IAutosignPolicy)
class GrainsPolicy:
    """
    C{autosign_grains_dir}: accept when, for EVERY grain file in the
    directory, the minion's value of that grain is listed in the file.

    Paths are only ever built from the directory's own listing: a grain name
    sent by the minion that is not a file there (C{../../etc/passwd}) is
    simply never looked at.
    """

    name = "autosign_grains"

    def __init__(self, directory: str, runBlocking: RunBlocking) -> None:
        """
        @param directory: the grains directory; re-read at every decision.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        self.directory = directory
        self._runBlocking = runBlocking

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return _guard(self.name, self._decide(minionId, context))

    async def _decide(self, minionId: str, context: dict[str, Any]) -> AutosignDecision:
        try:
            allowed = await self._runBlocking(_readGrainsDir, self.directory)
        except (OSError, UnicodeDecodeError) as e:
            return _pending(self.name, f"autosign_grains_dir {self.directory}: {e}", True)
        if allowed is None:
            return _pending(self.name, f"autosign_grains_dir {self.directory} does not exist")
        if not allowed:
            return _pending(self.name, f"autosign_grains_dir {self.directory} has no grain files")
        grains = _contextGrains(context)
        for name, values in allowed.items():
            if name not in grains:
                return _pending(self.name, f"{minionId!r} did not send the grain {name!r}")
            text = _grainText(grains[name])
            if text is None or text not in values:
                return _pending(
                    self.name, f"the grain {name!r} of {minionId!r} is not listed in its file"
                )
        names = ", ".join(sorted(allowed))
        return AutosignDecision(
            ACCEPT, self.name, f"{minionId!r} matches every grain file ({names})"
        )


# -- HTTP ------------------------------------------------------------------


class _DiscardBody(Protocol):
    """
    Reads and drops a response body, giving up after L{_DISCARD_BODY_MAX}
    bytes so an endless body cannot hold the connection.
    """

    def __init__(self) -> None:
        self._seen = 0

    def dataReceived(self, data: bytes) -> None:
        self._seen += len(data)
        if self._seen > _DISCARD_BODY_MAX and self.transport is not None:
            self.transport.stopProducing()


def _defaultHTTPClient(reactor: Any) -> Any:
    """
    A treq L{HTTPClient} with non-persistent connections.
    """
    from treq.client import HTTPClient
    from twisted.web.client import Agent, HTTPConnectionPool

    return HTTPClient(Agent(reactor, pool=HTTPConnectionPool(reactor, persistent=False)))


def _displayURL(url: str) -> str:
    """
    A URL as shown in reasons and logs: without user info, query or
    fragment, where a careless admin may have put a secret.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<the configured URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@implementer(IAutosignPolicy)
class URLPolicy:
    """
    C{autosign_url}: POST the request as JSON (C{id}, C{pem}, C{peer},
    C{grains}); a 2xx answer accepts. Any other status (redirects are not
    followed), an error or no answer within the timeout leaves the key
    pending.
    """

    name = "autosign_url"

    def __init__(self, url: str, httpClient: Any, clock: Any, timeout: float) -> None:
        """
        @param url: the URL.
        @param httpClient: a treq L{HTTPClient} or L{treq.testing.StubTreq}.
        @param clock: provides C{IReactorTime}, for the timeout.
        @param timeout: seconds to wait for the status line and headers.
        """
        self.url = url
        self._shownURL = _displayURL(url)
        self._client = httpClient
        self._clock = clock
        self._timeout = timeout

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return _guard(self.name, self._decide(minionId, pem, context))

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        grains = _grainsJSON(_contextGrains(context))
        if grains is None:
            return _pending(
                self.name,
                f"the autosign grains of {minionId!r} cannot be sent (not encodable as JSON,"
                f" or larger than {MAX_GRAINS_JSON} bytes)",
                True,
            )
        request = {
            "id": minionId,
            "pem": pem.decode("ascii", "replace"),
            "peer": _contextPeer(context),
            # Round-tripped through JSON: plain JSON values only from here on.
            "grains": json.loads(grains),
        }
        body = json.dumps(request, sort_keys=True).encode("ascii")
        d = self._client.post(
            self.url,
            data=body,
            headers={b"Content-Type": [b"application/json"]},
            allow_redirects=False,
            unbuffered=True,
        )
        # Not Deferred.addTimeout: the agent reports a cancelled request as
        # ResponseNeverReceived, which addTimeout does not recognise.
        timedOut: list[bool] = []

        def expire() -> None:
            timedOut.append(True)
            d.cancel()

        timer = self._clock.callLater(self._timeout, expire)
        try:
            response = await d
        except Exception as e:
            if timedOut:
                why = f"did not answer within {self._timeout:g} s"
            else:
                why = f"could not be reached: {Failure(e).getErrorMessage()}"
            return _pending(self.name, f"autosign_url {self._shownURL} {why}", True)
        finally:
            if timer.active():
                timer.cancel()
        code = response.code
        response.deliverBody(_DiscardBody())
        if 200 <= code < 300:
            return AutosignDecision(
                ACCEPT, self.name, f"autosign_url {self._shownURL} answered {code}"
            )
        return _pending(self.name, f"autosign_url {self._shownURL} answered {code}")


# -- Fixed policies and the composite ---------------------------------------


def _logDecision(decision: AutosignDecision, minionId: str) -> AutosignDecision:
    """
    Log a final decision at info level, with the decision in the event.

    @return: C{decision}.
    """
    _log.info(
        "autosign: {verdict} {id} by {policy}: {reason}",
        verdict=decision.verdict,
        id=minionId,
        policy=decision.policy,
        reason=decision.reason,
        decision=decision,
    )
    return decision


@implementer(IAutosignPolicy)
class AutoAcceptPolicy:
    """
    C{auto_accept: true}: naive autosigning, every key is accepted.
    """

    name = "auto_accept"

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        return succeed(
            AutosignDecision(ACCEPT, self.name, "auto_accept is true: every key is accepted")
        )


@implementer(IAutosignPolicy)
class AutosignDisabledPolicy:
    """
    C{autosign: false}: nothing is ever autosigned. Each decision is
    logged, as the composite policy's are.
    """

    name = "autosign_disabled"

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        decision = _pending(
            self.name, "autosign is false: no key is autosigned, whatever is configured"
        )
        return succeed(_logDecision(decision, minionId))


@implementer(IAutosignPolicy)
class CompositeAutosignPolicy:
    """
    Consults reject policies, then accept policies, in order, one at a time.

    The first C{"reject"} from a reject policy rejects. A reject policy that
    fails leaves the key pending and stops there: a rejection list that
    cannot be read must not let a key through. Then the first C{"accept"}
    (or C{"reject"}) of an accept policy decides; a failed accept policy is
    passed over. If none decides, the key stays pending with the policy
    C{"none"} and every reason heard.

    Every final decision is logged.
    """

    name = "composite"

    def __init__(
        self, rejecters: Sequence[IAutosignPolicy], accepters: Sequence[IAutosignPolicy]
    ) -> None:
        """
        @param rejecters: the policies that may reject, in order.
        @param accepters: the policies that may accept, in order.
        """
        self.rejecters = tuple(rejecters)
        self.accepters = tuple(accepters)

    def decide(
        self, minionId: str, pem: bytes, context: dict[str, Any]
    ) -> Deferred[AutosignDecision]:
        """
        See L{IAutosignPolicy.decide}.
        """
        d = _guard(self.name, self._decide(minionId, pem, context))
        return d.addCallback(_logDecision, minionId)

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        if not isinstance(context, Mapping):
            context = {}
        for policy in self.rejecters:
            decision = await policy.decide(minionId, pem, context)
            if decision.verdict == REJECT:
                return decision
            if decision.failed:
                return _pending(
                    decision.policy,
                    f"{decision.reason}; no other policy was consulted, so that a rejection"
                    " list that cannot be checked lets no key in",
                    True,
                )
        heard = []
        for policy in self.accepters:
            decision = await policy.decide(minionId, pem, context)
            if decision.verdict != PENDING:
                return decision
            heard.append(f"{decision.policy}: {decision.reason}")
        if not heard:
            return _pending("none", "no autosign policy is configured")
        return _pending("none", "no policy accepted the key (" + "; ".join(heard) + ")")


def buildAutosignPolicy(
    config: Mapping[str, Any],
    reactor: Any,
    runBlocking: RunBlocking | None = None,
    httpClient: Any = None,
    environ: Mapping[str, str] | None = None,
) -> IAutosignPolicy:
    """
    Build the master's autosign policy from its configuration.

    @param config: the master config (L{salttwist.config.loadMasterConfig});
        missing options take their defaults.
    @param reactor: provides C{IReactorProcess}, C{IReactorTime} and (unless
        C{runBlocking} is given) C{IReactorThreads}.
    @param runBlocking: runs blocking file reads; defaults to the reactor's
        thread pool.
    @param httpClient: the client for C{autosign_url}; defaults to a treq
        L{HTTPClient} on C{reactor}.
    @param environ: the master's environment, for the executables' C{PATH}.
    @return: L{AutosignDisabledPolicy} if C{autosign} is false, else a
        L{CompositeAutosignPolicy}.
    """
    if config.get("autosign") is False:
        return AutosignDisabledPolicy()
    if runBlocking is None:
        runBlocking = threadRunner(reactor)
    timeout = config.get("autosign_timeout", 10)
    rejecters: list[IAutosignPolicy] = []
    accepters: list[IAutosignPolicy] = []
    if config.get("autoreject_file"):
        rejecters.append(AutorejectFilePolicy(config["autoreject_file"], runBlocking))
    if config.get("auto_accept"):
        accepters.append(AutoAcceptPolicy())
    if config.get("autosign_file") or config.get("autosign_policy"):
        runner = PolicyProcessRunner(
            reactor,
            timeout,
            config.get("autosign_max_concurrent", 4),
            config.get("autosign_output_max", 65536),
            environ=environ,
        )
        if config.get("autosign_file"):
            accepters.append(AutosignFilePolicy(config["autosign_file"], runner, runBlocking))
        if config.get("autosign_policy"):
            accepters.append(PolicyExecutablePolicy(config["autosign_policy"], runner, runBlocking))
    if config.get("autosign_grains_dir"):
        accepters.append(GrainsPolicy(config["autosign_grains_dir"], runBlocking))
    if config.get("autosign_url"):
        client = httpClient if httpClient is not None else _defaultHTTPClient(reactor)
        accepters.append(URLPolicy(config["autosign_url"], client, reactor, timeout))
    if config.get("autosign") is True and not accepters:
        _log.warn(
            "autosign is true but no autosign policy is configured: nothing is autosigned."
            " Unlike Puppet, autosign: true does not accept everything; auto_accept does."
        )
    return CompositeAutosignPolicy(rejecters, accepters)
