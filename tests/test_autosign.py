# -*- test-case-name: tests.test_autosign -*-
"""
Tests for L{salttwist.pki.autosign}.

Most tests run policy executables against a fake process reactor and read
files through a synchronous C{runBlocking}; L{RealProcessTests} runs a few
small shell scripts with the real reactor.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from dataclasses import dataclass, field
from typing import Any

from treq.testing import StubTreq
from twisted.internet.defer import CancelledError, Deferred, fail, succeed
from twisted.internet.error import (
    ConnectionRefusedError,
    ProcessDone,
    ProcessExitedAlready,
    ProcessTerminated,
)
from twisted.internet.interfaces import IProcessTransport
from twisted.internet.task import Clock, deferLater
from twisted.internet.testing import EventLoggingObserver, MemoryReactorClock, StringTransport
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.python import log
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET
from zope.interface import implementer
from zope.interface.verify import verifyObject

from salttwist import blocking
from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.interfaces import IAutosignPolicy
from salttwist.pki import autosign
from salttwist.pki.autosign import (
    ACCEPT,
    ENV_GRAINS,
    ENV_ID,
    ENV_PEER,
    MAX_GRAINS_JSON,
    PENDING,
    REJECT,
    AutoAcceptPolicy,
    AutorejectFilePolicy,
    AutosignDecision,
    AutosignDisabledPolicy,
    AutosignFilePolicy,
    CompositeAutosignPolicy,
    GrainsPolicy,
    PolicyExecutablePolicy,
    PolicyProcessRunner,
    URLPolicy,
    buildAutosignPolicy,
    executable,
    matchesPattern,
    parseWhitelist,
    threadRunner,
)

PEM = (
    b"-----BEGIN PUBLIC KEY-----\n"
    b"MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
    b"-----END PUBLIC KEY-----\n"
)
CONTEXT: dict[str, Any] = {"peer": "192.0.2.7:51234", "autosign_grains": {"role": "web"}}


# -- Fakes -------------------------------------------------------------------


@implementer(IProcessTransport)
class FakeProcessTransport(StringTransport):
    """
    A process transport that records what the parent does to the child.

    @ivar stdinClosed: whether C{closeStdin} was called.
    @ivar signals: the signals sent, in order.
    @ivar lost: whether C{loseConnection} was called.
    @ivar exited: if true, C{signalProcess} raises L{ProcessExitedAlready}.
    @ivar pid: L{None} unless a test sets it (with a fake C{killGroup}, so
        that no real process group is ever signalled).
    """

    pid: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.stdinClosed = False
        self.signals: list[str | int] = []
        self.lost = False
        self.exited = False

    def closeStdin(self) -> None:
        self.stdinClosed = True

    def closeStdout(self) -> None:
        pass

    def closeStderr(self) -> None:
        pass

    def closeChildFD(self, descriptor: int) -> None:
        pass

    def writeToChild(self, childFD: int, data: bytes) -> None:
        self.write(data)

    def loseConnection(self) -> None:
        self.lost = True

    def signalProcess(self, signalID: str | int) -> None:
        if self.exited:
            raise ProcessExitedAlready()
        self.signals.append(signalID)


@dataclass
class Spawn:
    """
    One recorded C{spawnProcess} call.
    """

    protocol: Any
    executable: str
    args: list[str]
    env: dict[str, str]
    path: Any
    childFDs: Any
    transport: FakeProcessTransport = field(default_factory=FakeProcessTransport)

    def end(self, exitCode: int = 0, signal: int | None = None) -> None:
        """
        End the process as the reactor would: C{processExited}, then
        C{processEnded}, with L{ProcessDone} for a 0 exit status, else
        L{ProcessTerminated}.
        """
        self.transport.exited = True
        if exitCode == 0 and signal is None:
            reason = Failure(ProcessDone(0))
        else:
            reason = Failure(ProcessTerminated(exitCode if signal is None else None, signal))
        if not self.protocol.leaderExited:
            self.protocol.processExited(reason)
        self.protocol.processEnded(reason)

    @property
    def policyArgs(self) -> list[str]:
        """
        The argv the policy executable gets once the trampoline has run.
        """
        return self.args[5:]


class ProcessReactor(MemoryReactorClock):
    """
    A L{MemoryReactorClock} that records C{spawnProcess} calls and connects
    each protocol to a L{FakeProcessTransport}.

    @ivar spawnError: if set, C{spawnProcess} raises it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.spawns: list[Spawn] = []
        self.spawnError: Exception | None = None

    def spawnProcess(
        self,
        processProtocol: Any,
        executable: str,
        args: Any = (),
        env: Any = None,
        path: Any = None,
        uid: Any = None,
        gid: Any = None,
        usePTY: bool = False,
        childFDs: Any = None,
    ) -> FakeProcessTransport:
        if self.spawnError is not None:
            raise self.spawnError
        spawn = Spawn(processProtocol, executable, list(args), dict(env), path, childFDs)
        self.spawns.append(spawn)
        processProtocol.makeConnection(spawn.transport)
        return spawn.transport


class SynchronousThreadPool:
    """
    A thread pool that runs work at once, on the calling thread.
    """

    def callInThreadWithCallback(self, onResult: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        try:
            result = f(*args, **kwargs)
        except BaseException:
            onResult(False, Failure())
        else:
            onResult(True, result)


class ThreadedProcessReactor(ProcessReactor):
    """
    A L{ProcessReactor} with a synchronous thread pool, to test the default
    C{runBlocking}.
    """

    def __init__(self) -> None:
        super().__init__()
        self.pool = SynchronousThreadPool()
        self.threadCalls = 0

    def getThreadPool(self) -> SynchronousThreadPool:
        self.threadCalls += 1
        return self.pool

    def callFromThread(self, f: Any, *args: Any, **kwargs: Any) -> None:
        f(*args, **kwargs)


# -- Helpers -----------------------------------------------------------------


class _FilesMixin:
    """
    Write whitelists, scripts and grain files into a fresh directory.
    """

    def makeDir(self) -> str:
        """
        @return: a new empty directory.
        """
        path = os.path.abspath(self.mktemp())  # type: ignore[attr-defined]
        os.makedirs(path)
        return path

    def writeFile(self, text: str | bytes, name: str = "file", executable: bool = False) -> str:
        """
        Write a file in a new directory.

        @param text: the content.
        @param name: the file's name.
        @param executable: make it executable (mode 0700) rather than 0600.
        @return: its absolute path.
        """
        path = os.path.join(self.makeDir(), name)
        with open(path, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.chmod(path, stat.S_IRWXU if executable else stat.S_IRUSR | stat.S_IWUSR)
        return path


def decided(testCase: SynchronousTestCase, d: Deferred) -> AutosignDecision:
    """
    @return: the decision C{d} has already fired with.
    """
    decision = testCase.successResultOf(d)
    testCase.assertIsInstance(decision, AutosignDecision)
    return decision


# -- Contract tests, run against every policy ---------------------------------


class _PolicyContractMixin:
    """
    What every L{IAutosignPolicy} provider must do. Subclasses define
    C{makePolicy}.
    """

    def makePolicy(self) -> Any:
        """
        @return: the policy under test, ready to decide synchronously.
        """
        raise NotImplementedError()

    def test_providesInterface(self) -> None:
        """
        The policy provides L{IAutosignPolicy}.
        """
        self.assertTrue(verifyObject(IAutosignPolicy, self.makePolicy()))  # type: ignore

    def test_decisionShape(self) -> None:
        """
        C{decide} fires with an L{AutosignDecision} whose verdict is one of
        the three and whose reason is a non-empty string.
        """
        decision = decided(self, self.makePolicy().decide("web1", PEM, dict(CONTEXT)))  # type: ignore
        self.assertIn(decision.verdict, (ACCEPT, REJECT, PENDING))  # type: ignore
        self.assertIsInstance(decision.reason, str)  # type: ignore
        self.assertTrue(decision.reason)  # type: ignore

    def test_garbageContext(self) -> None:
        """
        C{decide} does not fail when the grains are not a dict, or when the
        context lacks its keys.
        """
        policy = self.makePolicy()
        for context in ({"peer": 3, "autosign_grains": ["x"]}, {}, {"autosign_grains": None}):
            decided(self, policy.decide("web1", PEM, context))  # type: ignore


class AutoAcceptContractTests(_PolicyContractMixin, SynchronousTestCase):
    """
    L{AutoAcceptPolicy} meets the policy contract.
    """

    def makePolicy(self) -> Any:
        return AutoAcceptPolicy()


class DisabledContractTests(_PolicyContractMixin, SynchronousTestCase):
    """
    L{AutosignDisabledPolicy} meets the policy contract.
    """

    def makePolicy(self) -> Any:
        return AutosignDisabledPolicy()


class AutosignFileContractTests(_FilesMixin, _PolicyContractMixin, SynchronousTestCase):
    """
    L{AutosignFilePolicy} meets the policy contract.
    """

    def makePolicy(self) -> Any:
        runner = PolicyProcessRunner(ProcessReactor(), 10, 4, 65536)
        return AutosignFilePolicy(self.writeFile("web*\n"), runner, runSynchronously)


class AutorejectFileContractTests(_FilesMixin, _PolicyContractMixin, SynchronousTestCase):
    """
    L{AutorejectFilePolicy} meets the policy contract.
    """

    def makePolicy(self) -> Any:
        return AutorejectFilePolicy(self.writeFile("web*\n"), runSynchronously)


class PolicyExecutableContractTests(_FilesMixin, _PolicyContractMixin, SynchronousTestCase):
    """
    L{PolicyExecutablePolicy} meets the policy contract (with a missing
    executable, so that it decides at once).
    """

    def makePolicy(self) -> Any:
        runner = PolicyProcessRunner(ProcessReactor(), 10, 4, 65536)
        missing = os.path.join(self.makeDir(), "missing")
        return PolicyExecutablePolicy(missing, runner, runSynchronously)


class GrainsContractTests(_FilesMixin, _PolicyContractMixin, SynchronousTestCase):
    """
    L{GrainsPolicy} meets the policy contract.
    """

    def makePolicy(self) -> Any:
        return GrainsPolicy(os.path.dirname(self.writeFile("web\n", "role")), runSynchronously)


class URLContractTests(_PolicyContractMixin, SynchronousTestCase):
    """
    L{URLPolicy} meets the policy contract.
    """

    def makePolicy(self) -> Any:
        return URLPolicy("http://ca.example/sign", StubTreq(_StatusResource(200)), Clock(), 10)


class CompositeContractTests(_FilesMixin, _PolicyContractMixin, SynchronousTestCase):
    """
    L{CompositeAutosignPolicy} meets the policy contract.
    """

    def makePolicy(self) -> Any:
        return CompositeAutosignPolicy(
            [AutorejectFilePolicy(self.writeFile("db*\n"), runSynchronously)],
            [AutoAcceptPolicy()],
        )


# -- Whitelists ----------------------------------------------------------------


class DomainGlobTests(SynchronousTestCase):
    """
    Lines starting with C{*.} have Puppet's domain-glob semantics.
    """

    def test_subdomains(self) -> None:
        """
        C{*.example.com} matches one or more labels in front of
        C{.example.com}.
        """
        for minionId in ("a.example.com", "a.b.example.com", "web-1.db_2.example.com"):
            self.assertTrue(matchesPattern("*.example.com", minionId), minionId)

    def test_notTheDomainItself(self) -> None:
        """
        C{*.example.com} never matches C{example.com}.
        """
        self.assertFalse(matchesPattern("*.example.com", "example.com"))
        self.assertFalse(matchesPattern("*.example.com", ".example.com"))

    def test_notALongerLabel(self) -> None:
        """
        C{*.example.com} never matches C{evilexample.com}: the match is on a
        label boundary.
        """
        self.assertFalse(matchesPattern("*.example.com", "evilexample.com"))
        self.assertFalse(matchesPattern("*.example.com", "a.evilexample.com"))

    def test_notInTheMiddle(self) -> None:
        """
        C{*.example.com} never matches C{a.example.com.evil.net}: the domain
        must end the id.
        """
        self.assertFalse(matchesPattern("*.example.com", "a.example.com.evil.net"))
        self.assertFalse(matchesPattern("*.example.com", "a.example.comx"))

    def test_caseInsensitive(self) -> None:
        """
        Domain globs compare without regard to ASCII case, as domain names
        do: C{*.example.com} matches C{A.EXAMPLE.com}, and C{*.Example.COM}
        matches C{a.example.com}.
        """
        self.assertTrue(matchesPattern("*.example.com", "A.EXAMPLE.com"))
        self.assertTrue(matchesPattern("*.Example.COM", "a.example.com"))

    def test_noUnicodeCaseFolding(self) -> None:
        """
        Case-insensitivity is ASCII only: the Kelvin sign (which lowercases
        to C{k}) does not match C{k}.
        """
        self.assertFalse(matchesPattern("*.kexample.com", "a.\u212aexample.com"))

    def test_labelsMustBeHostLabels(self) -> None:
        """
        The part the asterisk stands for must be host-name labels: empty
        labels and glob characters do not match.
        """
        for minionId in ("a..example.com", "a*b.example.com", "a?.example.com", "é.example.com"):
            self.assertFalse(matchesPattern("*.example.com", minionId), minionId)

    def test_restIsLiteral(self) -> None:
        """
        After C{*.}, the domain is literal: C{*.example.com} does not treat
        C{.} as a wildcard.
        """
        self.assertFalse(matchesPattern("*.example.com", "a.exampleXcom"))


class SaltGlobTests(SynchronousTestCase):
    """
    Other lines are Salt globs, without regard to ASCII case.
    """

    def test_exactId(self) -> None:
        """
        A line without glob characters matches exactly that id.
        """
        self.assertTrue(matchesPattern("web1", "web1"))
        self.assertFalse(matchesPattern("web1", "web10"))

    def test_globs(self) -> None:
        """
        C{*}, C{?} and C{[...]} work as in L{fnmatch}.
        """
        self.assertTrue(matchesPattern("web*", "web17"))
        self.assertTrue(matchesPattern("web?", "web7"))
        self.assertFalse(matchesPattern("web?", "web17"))
        self.assertTrue(matchesPattern("db[12]", "db2"))
        self.assertFalse(matchesPattern("db[12]", "db3"))

    def test_asciiCaseInsensitive(self) -> None:
        """
        Salt globs ignore ASCII case, as the id rules do (ids are unique
        regardless of ASCII case) and as DNS compares host names: C{web*}
        matches C{Web1}, C{DB[12]} matches C{db2}, C{web1} matches C{WEB1}.
        """
        self.assertTrue(matchesPattern("web*", "Web1"))
        self.assertTrue(matchesPattern("DB[12]", "db2"))
        self.assertTrue(matchesPattern("web1", "WEB1"))
        self.assertFalse(matchesPattern("web?", "WEB17"))

    def test_noUnicodeCaseFolding(self) -> None:
        """
        Only ASCII letters are folded: the Kelvin sign (which L{str.lower}
        maps onto C{k}) does not match C{k}, nor C{K}.
        """
        self.assertFalse(matchesPattern("k*", "\u212aeep"))
        self.assertFalse(matchesPattern("\u212a*", "keep"))

    def test_starWithoutDotIsPlain(self) -> None:
        """
        C{*example.com} (no dot after the asterisk) is a plain Salt glob and
        so does match C{evilexample.com}: only C{*.} lines are domain globs.
        """
        self.assertTrue(matchesPattern("*example.com", "evilexample.com"))


class ParseWhitelistTests(SynchronousTestCase):
    """
    L{parseWhitelist} reads one id or glob per line.
    """

    def test_commentsBlanksWhitespace(self) -> None:
        """
        Blank lines and C{#} lines (after leading whitespace) are ignored,
        and surrounding whitespace (including a CR) is stripped.
        """
        whitelist = parseWhitelist("  web1  \r\n# web2\n\n   # db*\n\t*.example.com\t\n")
        self.assertEqual(whitelist.patterns, ("web1", "*.example.com"))
        self.assertEqual(whitelist.problems, ())
        self.assertEqual(whitelist.match("web1"), "web1")
        self.assertIsNone(whitelist.match("web2"))
        self.assertIsNone(whitelist.match("db1"))

    def test_firstMatchReported(self) -> None:
        """
        L{Whitelist.match} returns the first matching line.
        """
        whitelist = parseWhitelist("db*\nweb*\n*\n")
        self.assertEqual(whitelist.match("web3"), "web*")

    def test_badLinesAreProblems(self) -> None:
        """
        Malformed domain globs and lines with whitespace inside are ignored
        and reported with their line number.
        """
        whitelist = parseWhitelist("*.\n*.*.example.com\nweb 1\n*.exa mple.com\nok\n")
        self.assertEqual(whitelist.patterns, ("ok",))
        self.assertEqual(len(whitelist.problems), 4)
        self.assertIn("line 1", whitelist.problems[0])
        self.assertIn("line 3", whitelist.problems[2])
        self.assertIsNone(whitelist.match("a.b.example.com"))


class AutosignFilePolicyTests(_FilesMixin, SynchronousTestCase):
    """
    L{AutosignFilePolicy} as a whitelist.
    """

    def makePolicy(self, path: str) -> AutosignFilePolicy:
        """
        @return: a policy on C{path} with a fake process reactor.
        """
        self.reactor = ProcessReactor()
        runner = PolicyProcessRunner(self.reactor, 10, 4, 65536)
        return AutosignFilePolicy(path, runner, runSynchronously)

    def test_matchAccepts(self) -> None:
        """
        An id matching a line is accepted by C{autosign_file}, and the
        reason names the line and the file.
        """
        path = self.writeFile("# web servers\n*.web.example.com\n")
        decision = decided(self, self.makePolicy(path).decide("a.web.example.com", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.policy), (ACCEPT, "autosign_file"))
        self.assertIn("'*.web.example.com'", decision.reason)
        self.assertIn(path, decision.reason)
        self.assertFalse(decision.failed)

    def test_noMatchPending(self) -> None:
        """
        An id matching no line is left pending, without a failure.
        """
        path = self.writeFile("*.example.com\n")
        decision = decided(self, self.makePolicy(path).decide("example.com", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, False))

    def test_missingFile(self) -> None:
        """
        A missing file accepts nothing (as Puppet's default autosign.conf)
        and is not a failure.
        """
        path = os.path.join(self.makeDir(), "autosign.conf")
        decision = decided(self, self.makePolicy(path).decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, False))
        self.assertIn("does not exist", decision.reason)

    def test_rereadEachDecision(self) -> None:
        """
        The file is read again at each decision.
        """
        path = self.writeFile("db*\n")
        policy = self.makePolicy(path)
        self.assertEqual(decided(self, policy.decide("web1", PEM, CONTEXT)).verdict, PENDING)
        with open(path, "w") as f:
            f.write("web*\n")
        self.assertEqual(decided(self, policy.decide("web1", PEM, CONTEXT)).verdict, ACCEPT)

    def test_unreadableFile(self) -> None:
        """
        A path that cannot be read (here a directory) leaves the key pending
        as a failure naming the path.
        """
        path = self.makeDir()
        decision = decided(self, self.makePolicy(path).decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn(path, decision.reason)
        self.assertEqual(self.reactor.spawns, [])

    def test_notUTF8(self) -> None:
        """
        A file that is not UTF-8 is a failure.
        """
        path = self.writeFile(b"web\xff\n")
        decision = decided(self, self.makePolicy(path).decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))

    def test_problemsLogged(self) -> None:
        """
        Ignored lines are logged as warnings naming the file.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        path = self.writeFile("*.\nweb1\n")
        decided(self, self.makePolicy(path).decide("web1", PEM, CONTEXT))
        [warning] = [e for e in observer if e["log_level"] == LogLevel.warn]
        self.assertIn(path, formatEvent(warning))
        self.assertIn("line 1", formatEvent(warning))

    def test_executableFileIsRun(self) -> None:
        """
        An C{autosign_file} executable by the master's user is run as a
        policy executable, as Puppet does, and not read as a list.
        """
        path = self.writeFile("web1\n", executable=True)
        policy = self.makePolicy(path)
        d = policy.decide("web1", PEM, CONTEXT)
        self.assertNoResult(d)
        [spawn] = self.reactor.spawns
        self.assertEqual(spawn.policyArgs, [path, "web1"])
        spawn.end(0)
        decision = decided(self, d)
        self.assertEqual((decision.verdict, decision.policy), (ACCEPT, "policy_executable"))


class AutorejectFilePolicyTests(_FilesMixin, SynchronousTestCase):
    """
    L{AutorejectFilePolicy}.
    """

    def test_matchRejects(self) -> None:
        """
        An id matching a line is rejected by C{autoreject_file}.
        """
        path = self.writeFile("*.evil.net\n")
        policy = AutorejectFilePolicy(path, runSynchronously)
        decision = decided(self, policy.decide("a.evil.net", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.policy), (REJECT, "autoreject_file"))

    def test_noMatchPending(self) -> None:
        """
        An id matching no line is left pending.
        """
        policy = AutorejectFilePolicy(self.writeFile("*.evil.net\n"), runSynchronously)
        self.assertEqual(decided(self, policy.decide("evil.net", PEM, CONTEXT)).verdict, PENDING)

    def test_missingFileRejectsNothing(self) -> None:
        """
        A missing reject file rejects nothing, without a failure.
        """
        path = os.path.join(self.makeDir(), "reject.conf")
        decision = decided(self, AutorejectFilePolicy(path, runSynchronously).decide("a", PEM, {}))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, False))

    def test_executableStillAList(self) -> None:
        """
        An executable reject file is still read as a list, never run.
        """
        path = self.writeFile("web1\n", executable=True)
        decision = decided(
            self, AutorejectFilePolicy(path, runSynchronously).decide("web1", PEM, {})
        )
        self.assertEqual(decision.verdict, REJECT)


# -- Policy executables, fake reactor -----------------------------------------


class PolicyExecutableTests(_FilesMixin, SynchronousTestCase):
    """
    L{PolicyExecutablePolicy} and L{PolicyProcessRunner} with a fake process
    reactor.
    """

    def setUp(self) -> None:
        self.reactor = ProcessReactor()
        self.script = self.writeFile("#!/bin/sh\nexit 0\n", "policy", executable=True)
        self.killed: list[tuple[int, int]] = []
        self.groupMissing = False

    def killGroup(self, pgid: int, signalNumber: int) -> None:
        """
        A fake L{os.killpg}, recording what it was asked.
        """
        if self.groupMissing:
            raise ProcessLookupError(3, "No such process")
        self.killed.append((pgid, signalNumber))

    def makePolicy(
        self,
        timeout: float = 10,
        maxConcurrent: int = 4,
        outputMax: int = 65536,
        maxQueued: int = 1000,
        environ: dict[str, str] | None = None,
        path: str | None = None,
    ) -> PolicyExecutablePolicy:
        """
        @return: a policy running C{self.script} (or C{path}) on the fake reactor.
        """
        if environ is None:
            environ = {"PATH": "/usr/bin:/bin", "HOME": "/root", "SECRET": "x"}
        FakeProcessTransport.pid = 4242
        self.addCleanup(setattr, FakeProcessTransport, "pid", None)
        self.runner = runner = PolicyProcessRunner(
            self.reactor,
            timeout,
            maxConcurrent,
            outputMax,
            maxQueued=maxQueued,
            environ=environ,
            killGroup=self.killGroup,
        )
        return PolicyExecutablePolicy(path or self.script, runner, runSynchronously)

    def test_exitZeroAccepts(self) -> None:
        """
        Exit status 0 accepts, with the policy C{policy_executable}.
        """
        d = self.makePolicy().decide("web1", PEM, CONTEXT)
        self.assertNoResult(d)
        self.reactor.spawns[0].end(0)
        decision = decided(self, d)
        self.assertEqual((decision.verdict, decision.policy), (ACCEPT, "policy_executable"))
        self.assertIn("exited with 0", decision.reason)

    def test_exitNonZeroPending(self) -> None:
        """
        Any other exit status leaves the key pending (not a failure), and the
        reason gives the status.
        """
        d = self.makePolicy().decide("web1", PEM, CONTEXT)
        self.reactor.spawns[0].end(1)
        decision = decided(self, d)
        self.assertEqual((decision.verdict, decision.failed), (PENDING, False))
        self.assertIn("status 1", decision.reason)

    def test_killedBySignalPending(self) -> None:
        """
        A process killed by a signal (not ours) leaves the key pending, and
        the reason names the signal.
        """
        d = self.makePolicy().decide("web1", PEM, CONTEXT)
        self.reactor.spawns[0].end(signal=15)
        decision = decided(self, d)
        self.assertEqual(decision.verdict, PENDING)
        self.assertIn("SIGTERM", decision.reason)

    def test_argvIsPathAndId(self) -> None:
        """
        The executable is run without a shell, through the trampoline (the
        master's Python, isolated, which starts a new session and C{exec}s
        it) with argv C{[path, id]}: an id such as C{-rf} is the only
        argument, with no C{--}, and comes after C{-c}, which ends Python's
        options.
        """
        self.makePolicy().decide("-rf", PEM, CONTEXT)
        [spawn] = self.reactor.spawns
        self.assertEqual(spawn.executable, sys.executable)
        self.assertEqual(
            spawn.args,
            [sys.executable, "-I", "-S", "-c", executable._TRAMPOLINE, self.script, "-rf"],
        )
        self.assertIn("os.setsid()", executable._TRAMPOLINE)
        self.assertEqual(spawn.childFDs, {0: "w", 1: "r", 2: "r"})

    def test_pemOnStdin(self) -> None:
        """
        The public key PEM is written to stdin, which is then closed.
        """
        self.makePolicy().decide("web1", PEM, CONTEXT)
        transport = self.reactor.spawns[0].transport
        self.assertEqual(transport.value(), PEM)
        self.assertTrue(transport.stdinClosed)

    def test_environmentExactly(self) -> None:
        """
        The environment holds exactly the id, the peer, the grains as JSON
        and the master's C{PATH}: nothing else of the master's environment.
        """
        context = {"peer": "192.0.2.7:51234", "autosign_grains": {"role": "web", "n": 3}}
        self.makePolicy().decide("web1", PEM, context)
        env = self.reactor.spawns[0].env
        self.assertEqual(
            env,
            {
                ENV_ID: "web1",
                ENV_PEER: "192.0.2.7:51234",
                ENV_GRAINS: '{"n": 3, "role": "web"}',
                "PATH": "/usr/bin:/bin",
            },
        )

    def test_defaultPath(self) -> None:
        """
        Without a C{PATH} in the master's environment, L{os.defpath} is used.
        """
        self.makePolicy(environ={}).decide("web1", PEM, CONTEXT)
        self.assertEqual(self.reactor.spawns[0].env["PATH"], os.defpath)

    def test_garbageGrains(self) -> None:
        """
        Grains that are not a dict are passed as C{{}}; non-string keys are
        dropped and bytes values become text; a missing peer is C{""}.
        """
        policy = self.makePolicy()
        policy.decide("web1", PEM, {"autosign_grains": ["not", "a", "dict"]})
        policy.decide("web2", PEM, {"autosign_grains": {1: "x", "raw": b"ab\xff"}})
        first, second = self.reactor.spawns
        self.assertEqual(first.env[ENV_GRAINS], "{}")
        self.assertEqual(first.env[ENV_PEER], "")
        self.assertEqual(json.loads(second.env[ENV_GRAINS]), {"raw": "ab\ufffd"})

    def test_hugeGrainsNotRun(self) -> None:
        """
        Grains whose JSON exceeds L{MAX_GRAINS_JSON} bytes are not passed:
        the key stays pending and nothing is spawned.
        """
        grains = {"blob": "x" * MAX_GRAINS_JSON}
        d = self.makePolicy().decide("web1", PEM, {"autosign_grains": grains})
        decision = decided(self, d)
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertEqual(self.reactor.spawns, [])

    def test_timeoutKills(self) -> None:
        """
        After C{autosign_timeout} seconds the process's whole group (its
        pid) is sent C{SIGKILL} and our ends of its pipes are closed; once it
        has ended the key stays pending, and the reason says it was killed.
        """
        d = self.makePolicy(timeout=2.5).decide("web1", PEM, CONTEXT)
        spawn = self.reactor.spawns[0]
        self.reactor.advance(2.4)
        self.assertEqual(self.killed, [])
        self.reactor.advance(0.1)
        self.assertEqual(self.killed, [(4242, signal.SIGKILL)])
        self.assertEqual(spawn.transport.signals, [])
        self.assertTrue(spawn.transport.lost)
        self.assertNoResult(d)
        spawn.end(signal=9)
        decision = decided(self, d)
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("2.5 s", decision.reason)
        self.assertIn("killed with its process group (SIGKILL)", decision.reason)

    def test_timeoutBeforeSetsidKillsTheProcess(self) -> None:
        """
        If the group does not exist yet (the trampoline has not called
        C{setsid}), the process itself is sent C{SIGKILL}.
        """
        self.makePolicy(timeout=1).decide("web1", PEM, CONTEXT)
        self.groupMissing = True
        self.reactor.advance(1)
        self.assertEqual(self.reactor.spawns[0].transport.signals, ["KILL"])

    def test_leftoversKilledOnExit(self) -> None:
        """
        As soon as the executable itself has exited, what it left running in
        its group is killed: nothing it started outlives it.
        """
        self.makePolicy().decide("web1", PEM, CONTEXT)
        spawn = self.reactor.spawns[0]
        self.assertEqual(self.killed, [])
        spawn.protocol.processExited(Failure(ProcessDone(0)))
        self.assertEqual(self.killed, [(4242, signal.SIGKILL)])

    def test_timeoutAfterExitKeepsStatus(self) -> None:
        """
        If the process has already exited when the timeout comes (something
        that left its group still holds its output open), the group is
        killed again, the pipes are closed, and the exit status decides.
        """
        d = self.makePolicy(timeout=1).decide("web1", PEM, CONTEXT)
        spawn = self.reactor.spawns[0]
        spawn.protocol.processExited(Failure(ProcessDone(0)))
        spawn.transport.exited = True
        self.reactor.advance(1)
        self.assertTrue(spawn.transport.lost)
        self.assertEqual(spawn.transport.signals, [])
        spawn.end(0)
        self.assertEqual(decided(self, d).verdict, ACCEPT)

    def test_stopKillsEveryGroup(self) -> None:
        """
        L{PolicyProcessRunner.stop} (the master stops) kills every running
        process's group and closes its pipes; queued and later requests are
        left pending without running anything.
        """
        policy = self.makePolicy(maxConcurrent=1)
        d1 = policy.decide("web1", PEM, CONTEXT)
        d2 = policy.decide("web2", PEM, CONTEXT)
        self.runner.stop()
        self.assertEqual(self.killed, [(4242, signal.SIGKILL)])
        self.assertTrue(self.reactor.spawns[0].transport.lost)
        self.reactor.spawns[0].end(signal=9)
        self.assertEqual(decided(self, d1).verdict, PENDING)
        decision = decided(self, d2)
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("stopping", decision.reason)
        self.assertEqual(decided(self, policy.decide("web3", PEM, CONTEXT)).verdict, PENDING)
        self.assertEqual(len(self.reactor.spawns), 1)

    def test_timerCancelled(self) -> None:
        """
        A process that ends in time leaves no timer behind.
        """
        d = self.makePolicy().decide("web1", PEM, CONTEXT)
        self.reactor.spawns[0].end(0)
        decided(self, d)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_outputLoggedAtDebug(self) -> None:
        """
        stdout and stderr are logged at debug level, naming the stream.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        d = self.makePolicy().decide("web1", PEM, CONTEXT)
        spawn = self.reactor.spawns[0]
        spawn.protocol.childDataReceived(1, b"looked up ")
        spawn.protocol.childDataReceived(1, b"the CMDB")
        spawn.protocol.childDataReceived(2, b"warning: slow")
        spawn.end(1)
        decided(self, d)
        lines = [formatEvent(e) for e in observer if e["log_level"] == LogLevel.debug]
        self.assertEqual(len(lines), 2)
        self.assertIn("stdout: looked up the CMDB", lines[0])
        self.assertIn("stderr: warning: slow", lines[1])
        self.assertNotIn("dropped", lines[0])

    def test_hugeOutputCapped(self) -> None:
        """
        Only C{autosign_output_max} bytes of each stream are kept; the rest
        is discarded and counted, and the log line says how much was dropped.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        d = self.makePolicy(outputMax=10).decide("web1", PEM, CONTEXT)
        spawn = self.reactor.spawns[0]
        for _ in range(1000):
            spawn.protocol.childDataReceived(1, b"0123456789abcdef")
        self.assertEqual(bytes(spawn.protocol.output[1]), b"0123456789")
        spawn.end(0)
        decided(self, d)
        [line] = [formatEvent(e) for e in observer if e["log_level"] == LogLevel.debug]
        self.assertIn("stdout: 0123456789 (15990 more bytes dropped)", line)

    def test_missingExecutable(self) -> None:
        """
        A missing C{autosign_policy} leaves the key pending with a reason
        saying so, and nothing is spawned.
        """
        missing = os.path.join(self.makeDir(), "nope")
        decision = decided(self, self.makePolicy(path=missing).decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn(f"{missing} does not exist", decision.reason)
        self.assertEqual(self.reactor.spawns, [])

    def test_notExecutable(self) -> None:
        """
        A C{autosign_policy} that is not executable by the master's user
        leaves the key pending with a reason saying so.
        """
        path = self.writeFile("#!/bin/sh\nexit 0\n")
        decision = decided(self, self.makePolicy(path=path).decide("web1", PEM, CONTEXT))
        self.assertEqual(decision.verdict, PENDING)
        self.assertIn("not executable by the master's user", decision.reason)
        self.assertEqual(self.reactor.spawns, [])

    def test_directory(self) -> None:
        """
        A directory named as C{autosign_policy} is not run.
        """
        decision = decided(self, self.makePolicy(path=self.makeDir()).decide("web1", PEM, {}))
        self.assertIn("not a regular file", decision.reason)
        self.assertEqual(self.reactor.spawns, [])

    def test_spawnFails(self) -> None:
        """
        If C{spawnProcess} raises, the key stays pending with the error.
        """
        self.reactor.spawnError = OSError(7, "Argument list too long")
        decision = decided(self, self.makePolicy().decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("could not start", decision.reason)
        self.assertIn("Argument list too long", decision.reason)

    def test_concurrencyBound(self) -> None:
        """
        With C{autosign_max_concurrent} 2, a third decision spawns nothing
        until one of the first two processes has ended.
        """
        policy = self.makePolicy(maxConcurrent=2)
        d1 = policy.decide("web1", PEM, CONTEXT)
        d2 = policy.decide("web2", PEM, CONTEXT)
        d3 = policy.decide("web3", PEM, CONTEXT)
        self.assertEqual([s.policyArgs[1] for s in self.reactor.spawns], ["web1", "web2"])
        self.assertNoResult(d3)
        self.reactor.spawns[1].end(0)
        self.assertEqual(decided(self, d2).verdict, ACCEPT)
        self.assertEqual([s.policyArgs[1] for s in self.reactor.spawns], ["web1", "web2", "web3"])
        self.reactor.spawns[2].end(1)
        self.reactor.spawns[0].end(0)
        self.assertEqual(decided(self, d3).verdict, PENDING)
        self.assertEqual(decided(self, d1).verdict, ACCEPT)

    def test_slotFreedAfterSpawnFailure(self) -> None:
        """
        A spawn that fails frees its slot: the next decision runs.
        """
        policy = self.makePolicy(maxConcurrent=1)
        self.reactor.spawnError = OSError("boom")
        decided(self, policy.decide("web1", PEM, CONTEXT))
        self.reactor.spawnError = None
        policy.decide("web2", PEM, CONTEXT)
        self.assertEqual(len(self.reactor.spawns), 1)

    def test_cancelKeepsSlotUntilEnd(self) -> None:
        """
        Cancelling a decision while its process runs fails it with
        L{CancelledError}; the process keeps its slot until it ends.
        """
        policy = self.makePolicy(maxConcurrent=1)
        d1 = policy.decide("web1", PEM, CONTEXT)
        d2 = policy.decide("web2", PEM, CONTEXT)
        d1.cancel()
        self.failureResultOf(d1, CancelledError)
        self.assertEqual(len(self.reactor.spawns), 1)
        self.reactor.spawns[0].end(0)
        self.assertEqual(len(self.reactor.spawns), 2)
        self.reactor.spawns[1].end(1)
        self.assertEqual(decided(self, d2).verdict, PENDING)

    def test_queueBound(self) -> None:
        """
        When the queue of decisions waiting for a slot is full, a further
        decision is pending at once, saying why.
        """
        policy = self.makePolicy(maxConcurrent=1, maxQueued=2)
        ds = [policy.decide(f"web{i}", PEM, CONTEXT) for i in range(3)]
        for d in ds:
            self.assertNoResult(d)
        decision = decided(self, policy.decide("web9", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("already wait", decision.reason)
        self.assertEqual(len(self.reactor.spawns), 1)


class ThreadRunnerTests(_FilesMixin, SynchronousTestCase):
    """
    Without an injected C{runBlocking}, files are read in the reactor's
    thread pool.
    """

    def test_defaultRunsInThreadPool(self) -> None:
        """
        L{buildAutosignPolicy} without C{runBlocking} reads the whitelist
        through the reactor's thread pool.
        """
        reactor = ThreadedProcessReactor()
        policy = buildAutosignPolicy({"autosign_file": self.writeFile("web*\n")}, reactor)
        self.assertEqual(reactor.threadCalls, 1)  # the start-time check
        self.assertEqual(decided(self, policy.decide("web1", PEM, CONTEXT)).verdict, ACCEPT)
        self.assertEqual(reactor.threadCalls, 2)

    def test_threadRunnerPassesArguments(self) -> None:
        """
        L{threadRunner} calls the function with its arguments in the pool.
        """
        run = threadRunner(ThreadedProcessReactor())
        self.assertEqual(self.successResultOf(run(lambda a, b=0: a + b, 2, b=3)), 5)

    def test_threadRunnerIsBlockings(self) -> None:
        """
        The package's L{threadRunner} is L{salttwist.blocking.threadRunner},
        not a copy.
        """
        self.assertIs(threadRunner, blocking.threadRunner)


class PackageTests(SynchronousTestCase):
    """
    L{salttwist.pki.autosign} is a package of a module per kind of policy,
    seen from outside as the one module it was.
    """

    def test_classesLiveInThePackage(self) -> None:
        """
        Every public class says it belongs to the package, and the class
        loggers are named as before the split, so log lines do not change.
        """
        for name in autosign.__all__:
            value = getattr(autosign, name)
            if isinstance(value, type):
                self.assertEqual(value.__module__, "salttwist.pki.autosign", name)
        self.assertEqual(
            AutosignFilePolicy.log.namespace, "salttwist.pki.autosign.AutosignFilePolicy"
        )
        self.assertEqual(
            PolicyProcessRunner.log.namespace, "salttwist.pki.autosign.PolicyProcessRunner"
        )

    def test_decisionLoggedUnderPackageName(self) -> None:
        """
        A final decision is logged in the namespace C{salttwist.pki.autosign}.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        decided(self, AutosignDisabledPolicy().decide("web1", PEM, CONTEXT))
        self.assertEqual([e["log_namespace"] for e in events], ["salttwist.pki.autosign"])


# -- Grains --------------------------------------------------------------------


class GrainsPolicyTests(_FilesMixin, SynchronousTestCase):
    """
    L{GrainsPolicy}: every grain file must match.
    """

    def makeGrainsDir(self, **files: str) -> str:
        """
        @param files: grain name to file content.
        @return: a new grains directory holding them.
        """
        directory = self.makeDir()
        for name, text in files.items():
            with open(os.path.join(directory, name), "w") as f:
                f.write(text)
        return directory

    def decide(self, directory: str, grains: Any) -> AutosignDecision:
        """
        @return: the decision for C{web1} sending C{grains}.
        """
        policy = GrainsPolicy(directory, runSynchronously)
        return decided(self, policy.decide("web1", PEM, {"autosign_grains": grains}))

    def test_allMatchAccepts(self) -> None:
        """
        When every grain file lists the minion's value, the key is accepted
        by C{autosign_grains}.
        """
        directory = self.makeGrainsDir(role="web\ndb\n", datacenter="# DCs\n  paris  \n")
        decision = self.decide(directory, {"role": "db", "datacenter": "paris", "x": 1})
        self.assertEqual((decision.verdict, decision.policy), (ACCEPT, "autosign_grains"))
        self.assertIn("datacenter, role", decision.reason)

    def test_oneOfTwoIsNotEnough(self) -> None:
        """
        Matching one grain file of two is not enough (Salt's any-match is a
        known hole).
        """
        directory = self.makeGrainsDir(role="web\n", datacenter="paris\n")
        decision = self.decide(directory, {"role": "web", "datacenter": "berlin"})
        self.assertEqual(decision.verdict, PENDING)
        self.assertIn("'datacenter'", decision.reason)

    def test_missingGrain(self) -> None:
        """
        A configured grain the minion did not send leaves the key pending.
        """
        directory = self.makeGrainsDir(role="web\n", datacenter="paris\n")
        decision = self.decide(directory, {"role": "web"})
        self.assertEqual(decision.verdict, PENDING)
        self.assertIn("did not send", decision.reason)

    def test_nonDictGrains(self) -> None:
        """
        Grains that are not a dict count as no grains.
        """
        directory = self.makeGrainsDir(role="web\n")
        for grains in (None, "role=web", ["web"], 7):
            self.assertEqual(self.decide(directory, grains).verdict, PENDING)

    def test_commentedValueDoesNotMatch(self) -> None:
        """
        A C{#} line in a grain file is a comment, not a value.
        """
        directory = self.makeGrainsDir(role="#web\n")
        self.assertEqual(self.decide(directory, {"role": "#web"}).verdict, PENDING)

    def test_stringifiedValues(self) -> None:
        """
        Numbers are compared as their text, booleans as C{true}/C{false};
        lists, maps and null never match.
        """
        directory = self.makeGrainsDir(rack="12\n", virtual="true\n")
        self.assertEqual(self.decide(directory, {"rack": 12, "virtual": True}).verdict, ACCEPT)
        self.assertEqual(self.decide(directory, {"rack": [12], "virtual": True}).verdict, PENDING)
        self.assertEqual(self.decide(directory, {"rack": "12", "virtual": None}).verdict, PENDING)

    def test_traversalNamesIgnored(self) -> None:
        """
        Grain names that are not file names of the directory are never used
        to build a path: a file outside the directory listing the value does
        not make C{../allowed} match, and it is ignored next to good grains.
        """
        parent = self.makeDir()
        with open(os.path.join(parent, "allowed"), "w") as f:
            f.write("yes\n")
        directory = os.path.join(parent, "grains")
        os.makedirs(directory)
        decision = self.decide(directory, {"../allowed": "yes", "/etc/passwd": "root"})
        self.assertEqual(decision.verdict, PENDING)
        self.assertIn("no grain files", decision.reason)
        with open(os.path.join(directory, "role"), "w") as f:
            f.write("web\n")
        decision = self.decide(directory, {"../allowed": "yes", "role": "web"})
        self.assertEqual(decision.verdict, ACCEPT)

    def test_hiddenFilesAndDirectoriesSkipped(self) -> None:
        """
        Files whose names start with C{.} (editor leftovers) and
        subdirectories are not grain files.
        """
        directory = self.makeGrainsDir(role="web\n", **{".role.swp": "x\n"})
        os.makedirs(os.path.join(directory, "sub"))
        self.assertEqual(self.decide(directory, {"role": "web"}).verdict, ACCEPT)

    def test_noFilesDoesNotAccept(self) -> None:
        """
        An empty grains directory accepts nothing.
        """
        decision = self.decide(self.makeDir(), {"role": "web"})
        self.assertEqual((decision.verdict, decision.failed), (PENDING, False))

    def test_missingDirectory(self) -> None:
        """
        A missing grains directory accepts nothing, without a failure.
        """
        decision = self.decide(os.path.join(self.makeDir(), "nope"), {"role": "web"})
        self.assertEqual((decision.verdict, decision.failed), (PENDING, False))
        self.assertIn("does not exist", decision.reason)

    def test_unreadable(self) -> None:
        """
        A grain file that is not UTF-8 is a failure.
        """
        directory = self.makeGrainsDir()
        with open(os.path.join(directory, "role"), "wb") as f:
            f.write(b"\xff\n")
        decision = self.decide(directory, {"role": "web"})
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))


# -- HTTP ----------------------------------------------------------------------


class _StatusResource(Resource):
    """
    Answers every POST with a fixed status and records the requests.

    @ivar requests: C{(headers, body)} of each request.
    """

    isLeaf = True

    def __init__(self, code: int, hang: bool = False) -> None:
        super().__init__()
        self.code = code
        self.hang = hang
        self.requests: list[tuple[Any, bytes]] = []

    def render_POST(self, request: Any) -> Any:
        self.requests.append((request.requestHeaders, request.content.read()))
        if self.hang:
            return NOT_DONE_YET
        request.setResponseCode(self.code)
        if 300 <= self.code < 400:
            request.setHeader(b"location", b"http://elsewhere.example/")
        return b"body"


class URLPolicyTests(SynchronousTestCase):
    """
    L{URLPolicy} with L{StubTreq}.
    """

    def decide(
        self, code: int, hang: bool = False, clock: Clock | None = None
    ) -> tuple[Deferred, _StatusResource, StubTreq]:
        """
        Ask a stub server answering C{code} about C{web1}.

        @return: the decision's L{Deferred}, the resource and the client.
        """
        resource = _StatusResource(code, hang)
        client = StubTreq(resource)
        policy = URLPolicy("http://ca.example/sign", client, clock or Clock(), 10)
        d = policy.decide("web1", PEM, CONTEXT)
        client.flush()
        return d, resource, client

    def test_2xxAccepts(self) -> None:
        """
        A 200 or 204 answer accepts, with the policy C{autosign_url}.
        """
        for code in (200, 204):
            decision = decided(self, self.decide(code)[0])
            self.assertEqual((decision.verdict, decision.policy), (ACCEPT, "autosign_url"))
            self.assertIn(str(code), decision.reason)

    def test_403Pending(self) -> None:
        """
        A 403 answer leaves the key pending.
        """
        decision = decided(self, self.decide(403)[0])
        self.assertEqual((decision.verdict, decision.failed), (PENDING, False))
        self.assertIn("403", decision.reason)

    def test_redirectNotFollowed(self) -> None:
        """
        A redirect is not followed and leaves the key pending.
        """
        d, resource, _ = self.decide(302)
        self.assertEqual(decided(self, d).verdict, PENDING)
        self.assertEqual(len(resource.requests), 1)

    def test_requestBody(self) -> None:
        """
        The request is a JSON POST of the id, the PEM, the peer and the
        grains.
        """
        _, resource, _ = self.decide(200)
        [(headers, body)] = resource.requests
        self.assertEqual(headers.getRawHeaders(b"content-type"), [b"application/json"])
        self.assertEqual(
            json.loads(body),
            {
                "id": "web1",
                "pem": PEM.decode("ascii"),
                "peer": "192.0.2.7:51234",
                "grains": {"role": "web"},
            },
        )

    def test_timeout(self) -> None:
        """
        No answer within C{autosign_timeout} seconds leaves the key pending,
        as a failure saying so.
        """
        clock = Clock()
        d, _, _ = self.decide(200, hang=True, clock=clock)
        self.assertNoResult(d)
        clock.advance(10)
        decision = decided(self, d)
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("did not answer within 10 s", decision.reason)

    def test_timerCancelled(self) -> None:
        """
        An answer in time leaves no timer behind.
        """
        clock = Clock()
        decided(self, self.decide(200, clock=clock)[0])
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_secretsNotInReason(self) -> None:
        """
        The reason shows the URL without its user info or query, where a
        secret may have been put.
        """
        client = StubTreq(_StatusResource(403))
        url = "https://user:hunter2@ca.example:8443/sign?token=s3cret#x"
        d = URLPolicy(url, client, Clock(), 10).decide("web1", PEM, CONTEXT)
        client.flush()
        reason = decided(self, d).reason
        self.assertIn("https://ca.example:8443/sign", reason)
        for secret in ("hunter2", "user", "s3cret", "token"):
            self.assertNotIn(secret, reason)

    def test_connectionError(self) -> None:
        """
        A request that fails leaves the key pending, as a failure.
        """

        class Refusing:
            def post(self, url: str, **kwargs: Any) -> Deferred:
                return fail(ConnectionRefusedError("nobody home"))

        policy = URLPolicy("http://ca.example/sign", Refusing(), Clock(), 10)
        decision = decided(self, policy.decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("could not be reached", decision.reason)


# -- Composition -----------------------------------------------------------------


@implementer(IAutosignPolicy)
class _Recording:
    """
    A policy that answers a fixed decision and counts its calls.
    """

    def __init__(self, name: str, verdict: str, failed: bool = False, raises: bool = False):
        self.name = name
        self.verdict = verdict
        self.failed = failed
        self.raises = raises
        self.calls = 0

    def decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> Deferred:
        self.calls += 1
        if self.raises:
            raise RuntimeError("policy bug")
        return succeed(
            AutosignDecision(self.verdict, self.name, f"{self.name} said so", self.failed)
        )


class CompositeTests(SynchronousTestCase):
    """
    L{CompositeAutosignPolicy} consults its policies in order.
    """

    def test_rejectWins(self) -> None:
        """
        A reject decides before any accept policy is consulted.
        """
        accepter = _Recording("auto_accept", ACCEPT)
        policy = CompositeAutosignPolicy([_Recording("autoreject_file", REJECT)], [accepter])
        self.assertEqual(decided(self, policy.decide("web1", PEM, {})).verdict, REJECT)
        self.assertEqual(accepter.calls, 0)

    def test_failedRejecterStops(self) -> None:
        """
        A reject policy that fails leaves the key pending, and no accept
        policy is consulted.
        """
        accepter = _Recording("auto_accept", ACCEPT)
        rejecter = _Recording("autoreject_file", PENDING, failed=True)
        decision = decided(
            self, CompositeAutosignPolicy([rejecter], [accepter]).decide("a", PEM, {})
        )
        self.assertEqual((decision.verdict, decision.policy), (PENDING, "autoreject_file"))
        self.assertIn("no other policy was consulted", decision.reason)
        self.assertEqual(accepter.calls, 0)

    def test_firstAcceptWins(self) -> None:
        """
        The first accept decides; later policies are not consulted.
        """
        first = _Recording("autosign_file", PENDING)
        second = _Recording("autosign_grains", ACCEPT)
        third = _Recording("autosign_url", ACCEPT)
        decision = decided(
            self, CompositeAutosignPolicy([], [first, second, third]).decide("a", PEM, {})
        )
        self.assertEqual(decision.policy, "autosign_grains")
        self.assertEqual((first.calls, second.calls, third.calls), (1, 1, 0))

    def test_failedAccepterPassedOver(self) -> None:
        """
        A failed accept policy does not stop the next one from accepting.
        """
        broken = _Recording("policy_executable", PENDING, failed=True)
        good = _Recording("autosign_grains", ACCEPT)
        decision = decided(self, CompositeAutosignPolicy([], [broken, good]).decide("a", PEM, {}))
        self.assertEqual(decision.verdict, ACCEPT)

    def test_noneAccepted(self) -> None:
        """
        When no policy accepts, the key is pending with the policy C{none}
        and every reason heard.
        """
        policy = CompositeAutosignPolicy(
            [], [_Recording("autosign_file", PENDING), _Recording("autosign_url", PENDING)]
        )
        decision = decided(self, policy.decide("a", PEM, {}))
        self.assertEqual((decision.verdict, decision.policy), (PENDING, "none"))
        self.assertIn("autosign_file: autosign_file said so", decision.reason)
        self.assertIn("autosign_url: autosign_url said so", decision.reason)

    def test_nothingConfigured(self) -> None:
        """
        With no policies, the key is pending with the policy C{none}.
        """
        decision = decided(self, CompositeAutosignPolicy([], []).decide("a", PEM, {}))
        self.assertEqual((decision.verdict, decision.policy), (PENDING, "none"))
        self.assertIn("no autosign policy is configured", decision.reason)

    def test_neverFails(self) -> None:
        """
        A policy that raises makes the decision pending, as a failure; the
        L{Deferred} does not fail, and the error is logged.
        """
        policy = CompositeAutosignPolicy([], [_Recording("buggy", ACCEPT, raises=True)])
        decision = decided(self, policy.decide("a", PEM, {}))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("policy bug", decision.reason)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_nonDictContext(self) -> None:
        """
        A context that is not a mapping is treated as empty.
        """
        policy = CompositeAutosignPolicy([], [AutoAcceptPolicy()])
        self.assertEqual(decided(self, policy.decide("a", PEM, None)).verdict, ACCEPT)  # type: ignore

    def test_decisionLogged(self) -> None:
        """
        Every final decision is logged with its verdict, id, policy and
        reason, and carries the decision itself.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        decision = decided(
            self, CompositeAutosignPolicy([], [AutoAcceptPolicy()]).decide("web1", PEM, {})
        )
        [event] = [e for e in observer if e.get("decision") is not None]
        self.assertEqual(event["decision"], decision)
        text = formatEvent(event)
        for part in ("accept", "web1", "auto_accept"):
            self.assertIn(part, text)


class BuildAutosignPolicyTests(_FilesMixin, SynchronousTestCase):
    """
    L{buildAutosignPolicy} composes policies from the master config.
    """

    def build(self, **config: Any) -> Any:
        """
        @return: the policy for C{config}, with a fake reactor in
            C{self.reactor} and file reads counted in C{self.reads}.
        """
        self.reactor = ProcessReactor()
        self.reads = 0

        def counting(f: Any, *args: Any, **kwargs: Any) -> Deferred:
            self.reads += 1
            return runSynchronously(f, *args, **kwargs)

        self.client = StubTreq(_StatusResource(200))
        policy = buildAutosignPolicy(
            config, self.reactor, runBlocking=counting, httpClient=self.client, environ={}
        )
        # The start-time hygiene check reads once; count decisions' reads.
        self.reads = 0
        return policy

    def test_autosignFalseWinsOverEverything(self) -> None:
        """
        C{autosign: false} leaves every key pending with the policy
        C{autosign_disabled}, even with C{auto_accept} and matching files;
        no file is read and nothing is run.
        """
        policy = self.build(
            autosign=False,
            auto_accept=True,
            autosign_file=self.writeFile("*\n"),
            autosign_policy=self.writeFile("#!/bin/sh\n", executable=True),
            autosign_grains_dir=self.makeDir(),
            autosign_url="http://ca.example/",
        )
        self.assertIsInstance(policy, AutosignDisabledPolicy)
        decision = decided(self, policy.decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.policy), (PENDING, "autosign_disabled"))
        self.assertEqual((self.reads, self.reactor.spawns), (0, []))

    def test_disabledDecisionLogged(self) -> None:
        """
        With C{autosign: false} each decision is still logged.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        decision = decided(self, self.build(autosign=False).decide("web1", PEM, CONTEXT))
        [event] = [e for e in observer if e.get("decision") is not None]
        self.assertEqual(event["decision"], decision)
        self.assertIn("autosign_disabled", formatEvent(event))

    def test_rejectWinsOverSignAndAutoAccept(self) -> None:
        """
        An id in both C{autoreject_file} and C{autosign_file}, with
        C{auto_accept} on, is rejected.
        """
        policy = self.build(
            auto_accept=True,
            autosign_file=self.writeFile("web*\n"),
            autoreject_file=self.writeFile("web1\n"),
        )
        decision = decided(self, policy.decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.policy), (REJECT, "autoreject_file"))
        self.assertEqual(decided(self, policy.decide("web2", PEM, CONTEXT)).verdict, ACCEPT)

    def test_autoAcceptBeforeFiles(self) -> None:
        """
        C{auto_accept} accepts before C{autosign_file} is read.
        """
        policy = self.build(auto_accept=True, autosign_file=self.writeFile("db*\n"))
        decision = decided(self, policy.decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.policy), (ACCEPT, "auto_accept"))
        self.assertEqual(self.reads, 0)

    def test_whitelistBeforeExecutable(self) -> None:
        """
        A C{autosign_file} match accepts without running C{autosign_policy}.
        """
        policy = self.build(
            autosign_file=self.writeFile("web*\n"),
            autosign_policy=self.writeFile("#!/bin/sh\n", executable=True),
        )
        decision = decided(self, policy.decide("web1", PEM, CONTEXT))
        self.assertEqual(decision.policy, "autosign_file")
        self.assertEqual(self.reactor.spawns, [])

    def test_order(self) -> None:
        """
        Accept policies are consulted in the order C{autosign_file},
        C{autosign_policy}, C{autosign_grains_dir}, C{autosign_url}.
        """
        grainsDir = os.path.dirname(self.writeFile("db\n", "role"))
        policy = self.build(
            autoreject_file=self.writeFile("nobody\n"),
            autosign_file=self.writeFile("db*\n"),
            autosign_policy=self.writeFile("#!/bin/sh\n", executable=True),
            autosign_grains_dir=grainsDir,
            autosign_url="http://ca.example/sign",
        )
        self.assertEqual(
            [p.name for p in policy.accepters],
            ["autosign_file", "policy_executable", "autosign_grains", "autosign_url"],
        )
        self.assertEqual([p.name for p in policy.rejecters], ["autoreject_file"])
        d = policy.decide("web1", PEM, CONTEXT)
        self.reactor.spawns[0].end(1)
        decision = decided(self, d)
        self.assertEqual((decision.verdict, decision.policy), (ACCEPT, "autosign_url"))

    def test_sharedConcurrencyBound(self) -> None:
        """
        An executable C{autosign_file} and C{autosign_policy} share the
        C{autosign_max_concurrent} bound.
        """
        policy = self.build(
            autosign_file=self.writeFile("#!/bin/sh\n", executable=True),
            autosign_policy=self.writeFile("#!/bin/sh\n", executable=True),
            autosign_max_concurrent=1,
        )
        d = policy.decide("web1", PEM, CONTEXT)
        self.assertEqual(len(self.reactor.spawns), 1)
        self.reactor.spawns[0].end(1)
        self.assertEqual(len(self.reactor.spawns), 2)
        self.reactor.spawns[1].end(0)
        self.assertEqual(decided(self, d).verdict, ACCEPT)

    def test_configOptionsUsed(self) -> None:
        """
        C{autosign_timeout} and C{autosign_output_max} reach the runner.
        """
        policy = self.build(
            autosign_policy=self.writeFile("#!/bin/sh\n", executable=True),
            autosign_timeout=3,
            autosign_output_max=4,
        )
        d = policy.decide("web1", PEM, CONTEXT)
        spawn = self.reactor.spawns[0]
        spawn.protocol.childDataReceived(1, b"123456")
        self.assertEqual(bytes(spawn.protocol.output[1]), b"1234")
        self.reactor.advance(3)
        self.assertEqual(spawn.transport.signals, ["KILL"])
        spawn.end(signal=9)
        self.assertIn("3 s", decided(self, d).reason)

    def test_fromLoadedConfig(self) -> None:
        """
        A config from L{loadMasterConfig} with default options builds a
        policy that leaves keys pending.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(self.makeDir(), {"root_dir": root})
        decision = decided(self, self.build(**config).decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.policy), (PENDING, "none"))

    def test_autosignTrueIsNotNaive(self) -> None:
        """
        C{autosign: true} does not accept everything (unlike Puppet): with no
        policy configured, keys stay pending and a warning says so.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        decision = decided(self, self.build(autosign=True).decide("web1", PEM, CONTEXT))
        self.assertEqual(decision.verdict, PENDING)
        [warning] = [e for e in observer if e["log_level"] == LogLevel.warn]
        self.assertIn("auto_accept", formatEvent(warning))


# -- Real processes ----------------------------------------------------------------

#: Seconds the processes of L{RealProcessTests} would live if not killed:
#: more than L{RealProcessTests.timeout}.
LINGER = 300


class RealProcessTests(_FilesMixin, TestCase):
    """
    Policy executables run as real processes by the real reactor.

    The processes these tests leave behind would run for L{LINGER} seconds,
    longer than a test may take: a policy runner that waited for them
    makes the test fail on its timeout. How long each run took is logged.
    """

    timeout = 60

    def setUp(self) -> None:
        if sys.platform == "win32":  # pragma: no cover
            self.skipTest("policy executables need a POSIX shell")
        from twisted.internet import reactor

        self.reactor = reactor

    def runPolicy(self, script: str, minionId: str = "web1", timeout: float = 5) -> Deferred:
        """
        Run C{script} (shell text) as the policy for C{minionId}.
        """
        path = self.writeFile("#!/bin/sh\n" + script, "policy", executable=True)
        runner = PolicyProcessRunner(self.reactor, timeout, 2, 65536)
        policy = PolicyExecutablePolicy(path, runner, runSynchronously)
        return policy.decide(minionId, PEM, CONTEXT)

    async def test_acceptWithArgumentsStdinAndEnvironment(self) -> None:
        """
        A script that checks it got exactly one argument (C{-rf}, not taken
        as an option), the PEM on stdin and the documented variables, and
        exits 0, accepts.
        """
        script = (
            '[ "$#" = 1 ] || exit 11\n'
            '[ "$1" = "-rf" ] || exit 12\n'
            '[ "$SALTTWIST_AUTOSIGN_ID" = "-rf" ] || exit 13\n'
            '[ "$SALTTWIST_AUTOSIGN_PEER" = "192.0.2.7:51234" ] || exit 14\n'
            '[ "$SALTTWIST_AUTOSIGN_GRAINS" = \'{"role": "web"}\' ] || exit 15\n'
            'grep -q "BEGIN PUBLIC KEY" || exit 16\n'
            "exit 0\n"
        )
        decision = await self.runPolicy(script, minionId="-rf")
        self.assertEqual(decision.verdict, ACCEPT, decision.reason)

    async def test_exitOnePending(self) -> None:
        """
        A script exiting 1 leaves the key pending.
        """
        decision = await self.runPolicy("exit 1\n")
        self.assertEqual(decision.verdict, PENDING)
        self.assertIn("status 1", decision.reason)

    async def test_timeoutKills(self) -> None:
        """
        A script still running after the timeout is killed promptly, even
        when a child of it holds its output open, and the key stays pending.
        """
        start = self.reactor.seconds()
        decision = await self.runPolicy(f"sleep {LINGER}\n", timeout=0.5)
        log.msg(f"policy killed after {self.reactor.seconds() - start:.2f} s")
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("killed with its process group (SIGKILL)", decision.reason)

    def pidsScript(self, directory: str, end: str) -> str:
        """
        Shell text that writes its own pid and that of a background
        C{sleep LINGER} into C{directory}, then runs C{end}.
        """
        return (
            f"echo $$ > {directory}/script.pid\n"
            f"sleep {LINGER} &\n"
            f"echo $! > {directory}/sleep.tmp\n"
            f"mv {directory}/sleep.tmp {directory}/sleep.pid\n"
            f"{end}\n"
        )

    def readPids(self, directory: str) -> list[int]:
        """
        The pids L{pidsScript} wrote.
        """
        pids = []
        for name in ("script.pid", "sleep.pid"):
            with open(os.path.join(directory, name)) as f:
                pids.append(int(f.read()))
        return pids

    async def assertAllGone(self, pids: list[int]) -> None:
        """
        Each of C{pids} is gone (or a zombie: dead, not yet reaped by
        init) within 5 seconds, polling on the reactor.
        """
        for _ in range(100):
            alive = [pid for pid in pids if _alive(pid)]
            if not alive:
                return
            await deferLater(self.reactor, 0.05, lambda: None)
        self.fail(f"processes still alive: {alive}")

    async def test_timeoutKillsTheWholeGroup(self) -> None:
        """
        On the timeout the script's whole process group is killed: neither
        the script nor the C{sleep} it started in the background survives
        (checked by pid).
        """
        directory = self.makeDir()
        decision = await self.runPolicy(self.pidsScript(directory, "wait"), timeout=0.5)
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        pids = self.readPids(directory)
        self.addCleanup(_killQuietly, pids)
        await self.assertAllGone(pids)

    async def test_leftoversKilledWhenThePolicyExits(self) -> None:
        """
        A script that exits 0 leaving a C{sleep} behind (holding its output
        open) is accepted at once, and its C{sleep} is killed.
        """
        directory = self.makeDir()
        start = self.reactor.seconds()
        decision = await self.runPolicy(self.pidsScript(directory, "exit 0"), timeout=10)
        log.msg(f"policy decided after {self.reactor.seconds() - start:.2f} s")
        self.assertEqual(decision.verdict, ACCEPT, decision.reason)
        pids = self.readPids(directory)
        self.addCleanup(_killQuietly, pids)
        await self.assertAllGone(pids)

    async def test_stopKillsTheWholeGroup(self) -> None:
        """
        L{PolicyProcessRunner.stop} (the master stops) kills a running
        script and the C{sleep} it started; its key stays pending.
        """
        directory = self.makeDir()
        path = self.writeFile(
            "#!/bin/sh\n" + self.pidsScript(directory, "wait"), "policy", executable=True
        )
        runner = PolicyProcessRunner(self.reactor, 30, 2, 65536)
        d = PolicyExecutablePolicy(path, runner, runSynchronously).decide("web1", PEM, CONTEXT)
        for _ in range(200):
            if os.path.exists(os.path.join(directory, "sleep.pid")):
                break
            await deferLater(self.reactor, 0.05, lambda: None)
        pids = self.readPids(directory)
        self.addCleanup(_killQuietly, pids)
        runner.stop()
        decision = await d
        self.assertEqual(decision.verdict, PENDING)
        await self.assertAllGone(pids)

    def test_shutdownTriggerStopsTheRunner(self) -> None:
        """
        L{buildAutosignPolicy} has the reactor stop the runner before it
        shuts down (the master stops).
        """
        reactor = ProcessReactor()
        buildAutosignPolicy(
            {"autosign_policy": "/nonexistent/policy"}, reactor, runBlocking=runSynchronously
        )
        [trigger] = reactor.triggers["before"]["shutdown"]
        self.assertEqual(trigger[0].__name__, "stop")
        self.assertIsInstance(trigger[0].__self__, PolicyProcessRunner)


def _alive(pid: int) -> bool:
    """
    Is C{pid} a live process (not gone, not a zombie)?
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def _killQuietly(pids: list[int]) -> None:
    """
    Kill what a failed test left running.
    """
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
