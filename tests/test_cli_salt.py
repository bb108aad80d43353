# -*- test-case-name: tests.test_cli_salt -*-
"""
Tests for L{salttwist.cli.salt}, the C{salttwist} command.

L{main} runs its job under L{task.react}, which runs and then stops the
global reactor and uses real UNIX sockets. Neither is allowed in a unit test
(and stopping the global reactor under trial would break every later
asynchronous test), so these tests replace L{task.react} with a stand-in
that drives the job on a L{MemoryReactorClock} and fail the event-bus
connection the way the operating system does when no master is running.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

import salttwist
from salttwist.cli import salt
from salttwist.cli.salt import TARGET_FLAGS, batchSize, buildParser, parseCliArgs, runJob
from salttwist.client import local
from salttwist.client.local import JobResult
from salttwist.config import loadMasterConfig
from salttwist.master.service import EVENT_PUB_SOCKET
from salttwist.transport.reqclient import RequestError


class ParseCliArgsTests(SynchronousTestCase):
    """
    L{parseCliArgs} turns command-line words into Salt's wire arguments.
    """

    def test_positionalAndKeyword(self) -> None:
        """
        C{key=value} words become one trailing C{__kwarg__} map; other words
        stay positional, in order.
        """
        self.assertEqual(
            parseCliArgs(["hello", "n=1", "flag=true", "text=a b"]),
            ["hello", {"n": 1, "flag": True, "text": "a b", "__kwarg__": True}],
        )

    def test_noKeywords(self) -> None:
        """
        Without C{key=value} words there is no C{__kwarg__} map.
        """
        self.assertEqual(parseCliArgs(["a", "2"]), ["a", 2])
        self.assertEqual(parseCliArgs([]), [])

    def test_numbers(self) -> None:
        """
        Numeric words become integers and floats.
        """
        self.assertEqual(parseCliArgs(["1", "-5", "2.5", "0x10"]), [1, -5, 2.5, 16])

    def test_booleans(self) -> None:
        """
        YAML booleans become L{bool}.
        """
        self.assertEqual(parseCliArgs(["true", "False", "yes", "off"]), [True, False, True, False])

    def test_strings(self) -> None:
        """
        Plain words stay strings, including ones with spaces, colons and
        slashes.
        """
        words = ["hello", "a b", "a:b", "/etc/hosts", "web*", "ls -l /tmp"]
        self.assertEqual(parseCliArgs(words), words)

    def test_none(self) -> None:
        """
        C{None} and the YAML nulls C{null}, C{Null}, C{~} become L{None}, as
        in Salt's C{yamlify_arg}.
        """
        self.assertEqual(parseCliArgs(["None", "null", "Null", "~"]), [None] * 4)
        self.assertEqual(parseCliArgs(["x=None"]), [{"x": None, "__kwarg__": True}])

    def test_noneLookalikes(self) -> None:
        """
        Words that YAML would read as nothing stay as typed: the empty
        string, blanks, document markers, C{!} and C{|}, and C{none}.
        """
        words = ["", "  ", "---", "...", "!", "|", "none"]
        self.assertEqual(parseCliArgs(words), words)

    def test_flowCollections(self) -> None:
        """
        Lists and maps written in flow style (C{[...]}, C{{...}}) are parsed.
        """
        self.assertEqual(
            parseCliArgs(["[1, a]", "{a: 1, b: [x]}"]), [[1, "a"], {"a": 1, "b": ["x"]}]
        )

    def test_nonStringKeysStayStrings(self) -> None:
        """
        A flow map with non-string keys, which the master's decoder refuses,
        stays the typed word instead of costing the connection.
        """
        self.assertEqual(parseCliArgs(["{1: a}"]), ["{1: a}"])

    def test_blockCollectionsStayStrings(self) -> None:
        """
        Words YAML reads as a map or list without braces or brackets stay
        strings, as in Salt (C{test.echo 'key: value'} echoes the text).
        """
        self.assertEqual(parseCliArgs(["key: value", "- item"]), ["key: value", "- item"])

    def test_underscoreDigits(self) -> None:
        """
        Digits with underscores stay a string rather than becoming an
        integer, as in Salt.
        """
        self.assertEqual(
            parseCliArgs(["1_000", "n=1_0"]), ["1_000", {"n": "1_0", "__kwarg__": True}]
        )

    def test_comments(self) -> None:
        """
        A C{#} is kept in words that would otherwise lose their comment; a
        value that parses to a number despite a comment is taken.
        """
        self.assertEqual(parseCliArgs(["#", "a #b", "echo #x"]), ["#", "a #b", "echo #x"])
        self.assertEqual(parseCliArgs(["1 # one"]), [1])

    def test_quotedStrings(self) -> None:
        """
        YAML quotes are removed, as Salt does: C{'"a b"'} is C{a b}, and a
        quoted number is a string.
        """
        self.assertEqual(parseCliArgs(['"a b"', "'1'"]), ["a b", "1"])

    def test_controlWhitespace(self) -> None:
        """
        Words holding a tab or newline are kept exactly.
        """
        self.assertEqual(parseCliArgs(["a\tb", "1\n"]), ["a\tb", "1\n"])

    def test_datesStayStrings(self) -> None:
        """
        Dates (which msgpack cannot carry) stay strings.
        """
        self.assertEqual(
            parseCliArgs(["2024-01-01", "[2024-01-01]"]), ["2024-01-01", "[2024-01-01]"]
        )

    def test_invalidYaml(self) -> None:
        """
        Words that are not valid YAML stay strings.
        """
        words = ["[unclosed", "{a: 1", "a: b: c", "!!python/name:os.system"]
        self.assertEqual(parseCliArgs(words), words)

    def test_keywordNames(self) -> None:
        """
        Keyword names follow Salt's rule: a word character first (not a
        digit), then word characters, C{.} or C{-}; C{a==b} and C{=x} stay
        positional; only the first C{=} splits.
        """
        self.assertEqual(
            parseCliArgs(["a==b", "1a=2", "=x", "foo-bar=1", "x.y=2", "k=a=b"]),
            ["a==b", "1a=2", "=x", {"foo-bar": 1, "x.y": 2, "k": "a=b", "__kwarg__": True}],
        )

    def test_laterKeywordWins(self) -> None:
        """
        A keyword given twice takes the later value.
        """
        self.assertEqual(parseCliArgs(["n=1", "n=2"]), [{"n": 2, "__kwarg__": True}])


class BuildParserTests(SynchronousTestCase):
    """
    L{buildParser} has Salt's flags.
    """

    def setUp(self) -> None:
        """
        Capture standard output and error, where C{argparse} writes.
        """
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)

    def test_defaults(self) -> None:
        """
        A bare command line parses the target, function and arguments with
        the default options.
        """
        options = buildParser().parse_args(["web*", "test.echo", "hi", "n=1"])
        self.assertEqual(options.target, "web*")
        self.assertEqual(options.function, "test.echo")
        self.assertEqual(options.arg, ["hi", "n=1"])
        self.assertIsNone(options.tgt_type)
        self.assertEqual(options.config_dir, "/etc/salttwist")
        self.assertIsNone(options.timeout)
        self.assertEqual(options.out, "nested")

    def test_targetFlags(self) -> None:
        """
        Each target-type flag, short or long, sets C{tgt_type}.
        """
        for short, long, kind, _ in TARGET_FLAGS:
            for flag in (short, long):
                options = buildParser().parse_args([flag, "x", "test.ping"])
                self.assertEqual(options.tgt_type, kind, flag)
        self.assertEqual(buildParser().parse_args(["-L", "a,b", "test.ping"]).tgt_type, "list")

    def test_pillarAndIpcidrFlags(self) -> None:
        """
        Salt's pillar and ipcidr flags: C{-I}/C{--pillar},
        C{-J}/C{--pillar-pcre} and C{-S}/C{--ipcidr}, and they exclude the
        other target flags.
        """
        cases = {
            ("-I", "--pillar"): "pillar",
            ("-J", "--pillar-pcre"): "pillar_pcre",
            ("-S", "--ipcidr"): "ipcidr",
        }
        for flags, kind in cases.items():
            for flag in flags:
                options = buildParser().parse_args([flag, "role:web", "test.ping"])
                self.assertEqual((options.tgt_type, options.target), (kind, "role:web"), flag)
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["-I", "-S", "x", "test.ping"])
        self.assertEqual(e.code, 2)

    def test_targetFlagsExclusive(self) -> None:
        """
        Two target-type flags together are a usage error.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["-L", "-E", "x", "test.ping"])
        self.assertEqual(e.code, 2)
        self.assertIn("not allowed with argument", self.stderr.getvalue())

    def test_version(self) -> None:
        """
        C{--version} prints the version and exits 0.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["--version"])
        self.assertEqual(e.code, 0)
        self.assertEqual(self.stdout.getvalue(), f"salttwist {salttwist.__version__}\n")

    def test_missingFunction(self) -> None:
        """
        A target without a function is a usage error.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["*"])
        self.assertEqual(e.code, 2)

    def test_missingFunctionNamesOnlyIt(self) -> None:
        """
        The usage error of a target without a function names the function
        alone: the function's arguments are optional.
        """
        self.assertRaises(SystemExit, buildParser().parse_args, ["*"])
        self.assertTrue(
            self.stderr.getvalue().endswith(
                "error: the following arguments are required: function\n"
            ),
            self.stderr.getvalue(),
        )

    def test_missingTargetAndFunction(self) -> None:
        """
        A bare command names the target and the function as missing, not
        the arguments.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, [])
        self.assertEqual(e.code, 2)
        self.assertIn(
            "error: the following arguments are required: target, function\n",
            self.stderr.getvalue(),
        )

    def test_noArguments(self) -> None:
        """
        A function without arguments parses to an empty argument list.
        """
        self.assertEqual(buildParser().parse_args(["*", "test.ping"]).arg, [])


class FakeReact:
    """
    A stand-in for L{task.react} that runs C{main} on a L{MemoryReactorClock}
    and, like the real one, ends with L{SystemExit}.

    @ivar failConnections: whether to fail every UNIX connection attempt, as
        the system does when nothing listens on the socket.
    """

    def __init__(self, testCase: SynchronousTestCase) -> None:
        self.testCase = testCase
        self.reactor = MemoryReactorClock()
        self.calls = 0

    def __call__(self, main: Callable[[Any], Deferred[Any]], argv: Any = ()) -> None:
        """
        Run C{main}, fail its UNIX connection attempts, and exit as
        L{task.react} does when C{main}'s L{Deferred} succeeds.
        """
        self.calls += 1
        d = main(self.reactor)
        failUnixConnections(self.reactor)
        self.testCase.successResultOf(d)
        raise SystemExit(0)


def failUnixConnections(reactor: MemoryReactorClock) -> None:
    """
    Fail every pending UNIX connection attempt on C{reactor} with "no such
    file", as connecting to a socket nobody listens on does.
    """
    while reactor.unixClients:
        _, factory, _, _ = reactor.unixClients.pop(0)
        factory.clientConnectionFailed(None, Failure(ConnectError("No such file or directory")))


class MainTests(SynchronousTestCase):
    """
    L{salt.main} with no master running.
    """

    def setUp(self) -> None:
        """
        Capture output, make an empty config directory and stand in for
        L{task.react}.
        """
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        self.configDir = self.mktemp()
        os.makedirs(self.configDir)
        self.react = FakeReact(self)
        self.patch(task, "react", self.react)

    def assertNoMasterError(self) -> None:
        """
        Standard error says the event bus socket cannot be reached, and
        nothing is printed on standard output.
        """
        err = self.stderr.getvalue()
        self.assertTrue(err.startswith("Error: "), err)
        self.assertIn("event bus", err)
        config = loadMasterConfig(self.configDir)
        self.assertIn(os.path.join(config["sock_dir"], EVENT_PUB_SOCKET), err)
        self.assertEqual(self.stdout.getvalue(), "")

    def test_noMaster(self) -> None:
        """
        With no master running, L{salt.main} returns 2 and writes an error
        naming the event bus socket to standard error. On the C{tcp}
        transport that is the direct client's doing: no reactor runs.
        """
        code = salt.main(["-c", self.configDir, "*", "test.ping"])
        self.assertEqual(code, 2)
        self.assertEqual(self.react.calls, 0)
        self.assertNoMasterError()

    def test_noMasterBatch(self) -> None:
        """
        A batch runs on the reactor (it waits on its clock): with no master
        running, the same error and exit code.
        """
        code = salt.main(["-c", self.configDir, "-b", "2", "*", "test.ping"])
        self.assertEqual(code, 2)
        self.assertEqual(self.react.calls, 1)
        self.assertNoMasterError()

    def test_noMasterTls(self) -> None:
        """
        On the C{tls} transport the job runs on the reactor.
        """
        with open(os.path.join(self.configDir, "master"), "w") as f:
            f.write("transport: tls\n")
        code = salt.main(["-c", self.configDir, "*", "test.ping"])
        self.assertEqual(code, 2)
        self.assertEqual(self.react.calls, 1)
        self.assertNoMasterError()

    def test_badConfig(self) -> None:
        """
        An unreadable config is reported on standard error with exit code 2,
        without starting the reactor.
        """
        with open(os.path.join(self.configDir, "master"), "w") as f:
            f.write("timeout: [not, a, number]\n")
        code = salt.main(["-c", self.configDir, "*", "test.ping"])
        self.assertEqual(code, 2)
        self.assertEqual(self.react.calls, 0)
        self.assertIn("Error: ", self.stderr.getvalue())


class _RunJobBase(SynchronousTestCase):
    """
    L{runJob} turns the client's outcome into output and an exit code.
    """

    def setUp(self) -> None:
        """
        Capture output and load a config rooted in a temporary directory.
        """
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        root = self.mktemp()
        os.makedirs(root)
        self.config = loadMasterConfig(root, overrides={"root_dir": root})
        self.reactor = MemoryReactorClock()

    def runJob(self, argv: list[str]) -> Deferred[int]:
        """
        @return: the L{Deferred} of L{runJob} for command line C{argv}.
        """
        options = buildParser().parse_args(argv)
        return Deferred.fromCoroutine(runJob(self.reactor, options, self.config))

    def fakeRun(self, result: JobResult | Exception) -> list[tuple[Any, ...]]:
        """
        Make L{local.LocalClient.run} return C{result} (or raise it).

        @return: a list that records the arguments of each call.
        """
        calls: list[tuple[Any, ...]] = []
        self.gatherJobTimeouts: list[float] = []

        async def run(
            client: Any,
            tgt: Any,
            fun: str,
            arg: list[Any],
            tgtType: str = "glob",
            timeout: float = 5.0,
            onPublished: Any = None,
            onReturn: Any = None,
            gatherJobTimeout: float = 10.0,
        ) -> JobResult:
            calls.append((tgt, fun, arg, tgtType, timeout))
            self.gatherJobTimeouts.append(gatherJobTimeout)
            if isinstance(result, Exception):
                raise result
            onPublished(result.jid, result.minions)
            for minionId, data in result.returns.items():
                onReturn(minionId, data)
            return result

        self.patch(local.LocalClient, "run", run)
        return calls


class RunJobTests(_RunJobBase):
    """
    L{runJob} publishes, prints and chooses the exit code.
    """

    def test_connectFails(self) -> None:
        """
        When the client cannot reach the event bus, L{runJob} returns 2 and
        names the event bus socket on standard error.
        """
        d = self.runJob(["*", "test.ping"])
        self.assertNoResult(d)
        failUnixConnections(self.reactor)
        self.assertEqual(self.successResultOf(d), 2)
        err = self.stderr.getvalue()
        self.assertIn("event bus", err)
        self.assertIn(os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET), err)

    def test_arguments(self) -> None:
        """
        The target, function, parsed arguments, target type and the
        master's default timeout are passed to the client.
        """
        calls = self.fakeRun(JobResult("1" * 20, []))
        self.successResultOf(self.runJob(["-L", "a,b", "test.arg", "1", "k=v"]))
        self.assertEqual(
            calls, [("a,b", "test.arg", [1, {"k": "v", "__kwarg__": True}], "list", 5.0)]
        )

    def test_timeoutFlag(self) -> None:
        """
        C{-t} overrides the master's timeout; the target type defaults to
        C{glob}.
        """
        calls = self.fakeRun(JobResult("1" * 20, []))
        self.successResultOf(self.runJob(["-t", "1.5", "*", "test.ping"]))
        self.assertEqual(calls[0][3:], ("glob", 1.5))

    def test_noMatch(self) -> None:
        """
        When no minion matched, L{runJob} returns 2 and says so.
        """
        self.fakeRun(JobResult("1" * 20, []))
        self.assertEqual(self.successResultOf(self.runJob(["nope*", "test.ping"])), 2)
        self.assertIn("No minions matched the target", self.stderr.getvalue())

    def test_refused(self) -> None:
        """
        When the master refuses the job, L{runJob} returns 2 with its reason.
        """
        self.fakeRun(RequestError("bad target"))
        self.assertEqual(self.successResultOf(self.runJob(["*", "test.ping"])), 2)
        self.assertIn("refused the job: bad target", self.stderr.getvalue())

    def test_allReturned(self) -> None:
        """
        When every minion returned retcode 0, L{runJob} prints the returns
        and returns 0.
        """
        result = JobResult("1" * 20, ["web1"], returns={"web1": {"return": True, "retcode": 0}})
        self.fakeRun(result)
        self.assertEqual(self.successResultOf(self.runJob(["*", "test.ping"])), 0)
        self.assertIn("web1", self.stdout.getvalue())

    def test_missingMinion(self) -> None:
        """
        A minion that did not return is printed as such and makes the exit
        code 1.
        """
        result = JobResult(
            "1" * 20,
            ["web1", "web2"],
            returns={"web1": {"return": True, "retcode": 0}},
            missing=["web2"],
        )
        self.fakeRun(result)
        self.assertEqual(self.successResultOf(self.runJob(["*", "test.ping"])), 1)
        self.assertIn("Minion did not return. [No response]", self.stdout.getvalue())

    def test_notConnectedMinion(self) -> None:
        """
        A minion that was not connected is reported C{[Not connected]}.
        """
        result = JobResult(
            "1" * 20,
            ["web1", "web2"],
            returns={"web1": {"return": True, "retcode": 0}},
            notConnected=["web2"],
        )
        self.fakeRun(result)
        self.assertEqual(self.successResultOf(self.runJob(["*", "test.ping"])), 1)
        self.assertIn("web2:\n    Minion did not return. [Not connected]", self.stdout.getvalue())

    def test_hideTimeoutAndSummary(self) -> None:
        """
        C{--hide-timeout} leaves out minions that did not return;
        C{--summary} counts targeted, returned, missing and failed minions.
        """
        result = JobResult(
            "1" * 20,
            ["a", "b", "c"],
            returns={"a": {"return": True, "retcode": 0}, "b": {"return": "x", "retcode": 2}},
            missing=["c"],
        )
        self.fakeRun(result)
        self.successResultOf(self.runJob(["--hide-timeout", "--summary", "*", "test.ping"]))
        out = self.stdout.getvalue()
        self.assertNotIn("did not return", out.split("Summary")[0])
        self.assertIn("# of minions targeted: 3\n", out)
        self.assertIn("# of minions returned: 2\n", out)
        self.assertIn("# of minions that did not return: 1\n", out)
        self.assertIn("# of minions with errors: 1\n", out)

    def test_quietAndOutFile(self) -> None:
        """
        C{--out quiet} prints nothing; C{--out-file} writes the output to a
        file instead of standard output.
        """
        result = JobResult("1" * 20, ["a"], returns={"a": {"return": True, "retcode": 0}})
        self.fakeRun(result)
        self.successResultOf(self.runJob(["--out", "quiet", "*", "test.ping"]))
        self.assertEqual(self.stdout.getvalue(), "")
        path = os.path.abspath(self.mktemp())
        self.successResultOf(
            self.runJob(["--out", "json", "--static", "--out-file", path, "*", "test.ping"])
        )
        self.assertEqual(self.stdout.getvalue(), "")
        with open(path) as f:
            self.assertEqual(json.loads(f.read()), {"a": True})

    def test_gatherJobTimeout(self) -> None:
        """
        C{--gather-job-timeout} is passed on; the default is the master's
        C{gather_job_timeout}.
        """
        result = JobResult("1" * 20, ["a"], returns={"a": {"return": True, "retcode": 0}})
        self.fakeRun(result)
        self.successResultOf(self.runJob(["*", "test.ping"]))
        self.successResultOf(self.runJob(["--gather-job-timeout", "3", "*", "test.ping"]))
        self.assertEqual(self.gatherJobTimeouts, [10.0, 3.0])

    def test_async(self) -> None:
        """
        C{--async} publishes and prints Salt's line with the jid, without
        waiting for returns.
        """

        async def publish(client: Any, tgt: Any, fun: str, arg: Any, tgtType: str = "glob") -> Any:
            return {"jid": "2" * 20, "minions": ["a"], "connected": ["a"]}

        self.patch(local.LocalClient, "publish", publish)
        self.assertEqual(self.successResultOf(self.runJob(["--async", "*", "test.ping"])), 0)
        self.assertEqual(self.stdout.getvalue(), f"Executed command with job ID: {'2' * 20}\n")

    def test_failedMinion(self) -> None:
        """
        A minion returning a non-zero retcode makes the exit code 1.
        """
        result = JobResult("1" * 20, ["web1"], returns={"web1": {"return": "nope", "retcode": 254}})
        self.fakeRun(result)
        self.assertEqual(self.successResultOf(self.runJob(["*", "nope.fun"])), 1)

    def test_verbose(self) -> None:
        """
        C{-v} prints the jid once the job is published.
        """
        result = JobResult("1" * 20, ["web1"], returns={"web1": {"return": True, "retcode": 0}})
        self.fakeRun(result)
        self.successResultOf(self.runJob(["-v", "*", "test.ping"]))
        self.assertIn("Executing job with jid " + "1" * 20, self.stdout.getvalue())


class ProgressTests(_RunJobBase):
    """
    C{--progress} draws a bar of the returns on standard error.
    """

    def test_progressBar(self) -> None:
        """
        The bar is redrawn once the job is published and after each return,
        ends with the full count and a newline, and stays off standard
        output, which holds the returns as usual.
        """
        result = JobResult(
            "1" * 20,
            ["web1", "web2"],
            returns={"web1": {"return": True, "retcode": 0}, "web2": {"return": True}},
        )
        self.fakeRun(result)
        code = self.successResultOf(self.runJob(["--progress", "--out", "json", "*", "test.ping"]))
        self.assertEqual(code, 0)
        err = self.stderr.getvalue()
        draws = err.split("\r")[1:]
        self.assertEqual(
            [draw.split("] ")[1].strip() for draw in draws],
            ["0/2 returns (0%)", "1/2 returns (50%)", "2/2 returns (100%)"],
        )
        self.assertTrue(err.endswith("\n"))
        self.assertIn("[" + "#" * 30 + "]", draws[-1])
        self.assertNotIn("Progress", self.stdout.getvalue())
        self.assertIn('"web2"', self.stdout.getvalue())

    def test_noProgressByDefault(self) -> None:
        """
        Without C{--progress} nothing is drawn.
        """
        self.fakeRun(JobResult("1" * 20, ["web1"], returns={"web1": {"return": True}}))
        self.successResultOf(self.runJob(["*", "test.ping"]))
        self.assertNotIn("Progress", self.stderr.getvalue())


class FakeTerminal(io.StringIO):
    """
    A stream that says it is a terminal, such as the one standard output
    and standard error share in an interactive shell.
    """

    def isatty(self) -> bool:
        """
        @return: C{True}.
        """
        return True


def screen(text: str) -> list[str]:
    """
    The lines a terminal shows after receiving C{text}: C{\\r} returns to
    the start of the line, which later characters overwrite, and C{ESC [K}
    erases from the cursor to the end of the line.
    """
    lines = [""]
    column = 0
    i = 0
    while i < len(text):
        if text.startswith("\x1b[K", i):
            lines[-1] = lines[-1][:column]
            i += 3
            continue
        char = text[i]
        if char == "\r":
            column = 0
        elif char == "\n":
            lines.append("")
            column = 0
        else:
            line = lines[-1]
            lines[-1] = line[:column] + char + line[column + 1 :]
            column += 1
        i += 1
    return lines


class ProgressOutputTests(_RunJobBase):
    """
    C{--progress} takes its bar off the line before anything else is
    printed, and draws it again below, so a return never shares the bar's
    line.
    """

    def bar(self, done: int, total: int) -> str:
        """
        @return: the bar's text at C{done} of C{total} returns.
        """
        filled = 30 * done // total
        return (
            f"Progress: [{'#' * filled}{'.' * (30 - filled)}] {done}/{total} returns"
            f" ({100 * done // total}%)"
        )

    def twoReturns(self) -> None:
        """
        Make the job return from C{db1} and C{db2}.
        """
        self.fakeRun(
            JobResult(
                "1" * 20,
                ["db1", "db2"],
                returns={"db1": {"return": True, "retcode": 0}, "db2": {"return": True}},
            )
        )

    def test_terminalErasesBar(self) -> None:
        """
        On a terminal that standard output and standard error share, the
        bar's line is erased (C{\\r}, C{ESC [K}) before each return is
        printed and the bar is drawn again under it: the screen ends with
        the returns, then the full bar.
        """
        terminal = FakeTerminal()
        self.patch(sys, "stdout", terminal)
        self.patch(sys, "stderr", terminal)
        self.twoReturns()
        code = self.successResultOf(self.runJob(["--progress", "--out", "json", "*", "test.ping"]))
        self.assertEqual(code, 0)
        self.assertEqual(
            screen(terminal.getvalue()),
            ['{"db1": true}', '{"db2": true}', self.bar(2, 2), ""],
        )
        self.assertIn("\r\x1b[K{", terminal.getvalue())

    def test_notTerminalEndsBarLine(self) -> None:
        """
        Off a terminal nothing can be erased: the bar's line is ended
        before a return is printed, so no return lands on it.
        """
        shared = io.StringIO()
        self.patch(sys, "stdout", shared)
        self.patch(sys, "stderr", shared)
        self.twoReturns()
        self.successResultOf(self.runJob(["--progress", "--out", "json", "*", "test.ping"]))
        self.assertEqual(
            screen(shared.getvalue()),
            [self.bar(0, 2), '{"db1": true}', self.bar(1, 2), '{"db2": true}', self.bar(2, 2), ""],
        )
        self.assertNotIn("\x1b", shared.getvalue())

    def test_missingMinionsAfterBar(self) -> None:
        """
        Minions that did not return are listed under the finished bar, not
        on its line.
        """
        terminal = FakeTerminal()
        self.patch(sys, "stdout", terminal)
        self.patch(sys, "stderr", terminal)
        self.fakeRun(
            JobResult("1" * 20, ["db1", "db2"], returns={"db1": {"return": True}}, missing=["db2"])
        )
        self.successResultOf(self.runJob(["--progress", "--out", "json", "*", "test.ping"]))
        lines = screen(terminal.getvalue())
        self.assertEqual(lines[:2], ['{"db1": true}', self.bar(1, 2)])
        self.assertTrue(lines[2].startswith('{"db2": '), lines)

    def test_errorAfterBar(self) -> None:
        """
        An error after the bar was drawn (the master went away) is printed
        on a line of its own.
        """
        from salttwist.client.base import MasterUnavailable

        terminal = FakeTerminal()
        self.patch(sys, "stdout", terminal)
        self.patch(sys, "stderr", terminal)

        async def run(client: Any, *args: Any, onPublished: Any = None, **kw: Any) -> JobResult:
            onPublished("1" * 20, ["db1"])
            raise MasterUnavailable("the master went away")

        self.patch(local.LocalClient, "run", run)
        code = self.successResultOf(self.runJob(["--progress", "*", "test.ping"]))
        self.assertEqual(code, 2)
        self.assertEqual(
            screen(terminal.getvalue()), [self.bar(0, 1), "Error: the master went away", ""]
        )


class BatchTests(_RunJobBase):
    """
    C{-b}: run on a few minions at a time.
    """

    def scriptRuns(self, failing: set[str] = frozenset()) -> list[tuple[Any, str, str]]:  # type: ignore[assignment]
        """
        Make L{local.LocalClient.run} answer C{test.ping} from five minions
        (web1..web5) and any other job from the listed minions, failing for
        C{failing}.

        @return: the (tgt, fun, tgt_type) of each call.
        """
        calls: list[tuple[Any, str, str]] = []
        minions = [f"web{i}" for i in range(1, 6)]

        async def run(
            client: Any,
            tgt: Any,
            fun: str,
            arg: Any,
            tgtType: str = "glob",
            timeout: float = 5.0,
            onPublished: Any = None,
            onReturn: Any = None,
            gatherJobTimeout: float = 10.0,
        ) -> JobResult:
            calls.append((tgt, fun, tgtType))
            if fun == "test.ping":
                return JobResult(
                    "1" * 20, minions, returns={m: {"return": True, "retcode": 0} for m in minions}
                )
            returns = {m: {"return": "x", "retcode": 1 if m in failing else 0} for m in tgt}
            for m, data in returns.items():
                onReturn(m, data)
            return JobResult("2" * 20, list(tgt), returns=returns)

        self.patch(local.LocalClient, "run", run)
        return calls

    def test_batchSizes(self) -> None:
        """
        C{-b 2} runs the job on the answering minions two at a time, with
        list targets, announcing each batch; all returns are printed.
        """
        calls = self.scriptRuns()
        self.assertEqual(self.successResultOf(self.runJob(["-b", "2", "web*", "cmd.run", "ls"])), 0)
        self.assertEqual(
            calls[1:],
            [
                (["web1", "web2"], "cmd.run", "list"),
                (["web3", "web4"], "cmd.run", "list"),
                (["web5"], "cmd.run", "list"),
            ],
        )
        self.assertIn("Executing run on ['web1', 'web2']", self.stdout.getvalue())

    def test_percent(self) -> None:
        """
        C{-b 40%} of five minions is two per batch.
        """
        calls = self.scriptRuns()
        self.successResultOf(self.runJob(["-b", "40%", "web*", "test.echo", "x"]))
        self.assertEqual(len(calls), 4)

    def test_failhard(self) -> None:
        """
        With C{--failhard}, no batch starts after one in which a minion
        failed; the exit code is 1.
        """
        calls = self.scriptRuns(failing={"web2"})
        self.assertEqual(
            self.successResultOf(
                self.runJob(["-b", "2", "--failhard", "web*", "cmd.run", "false"])
            ),
            1,
        )
        self.assertEqual(len(calls), 2)

    def test_progressOnTerminal(self) -> None:
        """
        With C{--progress} on a terminal, neither the announcement of a
        batch nor the C{--failhard} message is printed on the bar's line:
        the screen ends with one bar, the last.
        """
        terminal = FakeTerminal()
        self.patch(sys, "stdout", terminal)
        self.patch(sys, "stderr", terminal)
        self.scriptRuns(failing={"web2"})
        self.successResultOf(
            self.runJob(
                ["--progress", "-b", "2", "--failhard", "--out", "json", "web*", "cmd.run", "ls"]
            )
        )
        lines = screen(terminal.getvalue())
        self.assertIn("Executing run on ['web1', 'web2']", lines)
        self.assertIn("A minion failed: --failhard stopped the batch run.", lines)
        self.assertEqual(
            [line for line in lines if "Progress" in line],
            ["Progress: [" + "#" * 12 + "." * 18 + "] 2/5 returns (40%)"],
        )

    def test_badBatchSize(self) -> None:
        """
        A batch size that is not a positive number or percentage is a usage
        error.
        """
        for bad in ("0", "x", "150%", "-1"):
            self.assertRaises(SystemExit, buildParser().parse_args, ["-b", bad, "*", "test.ping"])
        self.assertEqual(batchSize((3, False), 10), 3)
        self.assertEqual(batchSize((25, True), 10), 3)
        self.assertEqual(batchSize((1, True), 5), 1)


class JsonLinesTests(_RunJobBase):
    """
    Without C{--static}, C{--out json} prints one JSON object per line.
    """

    def test_jsonLines(self) -> None:
        """
        Each return is one line holding one valid JSON object.
        """
        result = JobResult(
            "1" * 20,
            ["a", "b"],
            returns={"a": {"return": {"x": 1}, "retcode": 0}, "b": {"return": True, "retcode": 0}},
        )
        self.fakeRun(result)
        self.successResultOf(self.runJob(["--out", "json", "*", "test.ping"]))
        lines = self.stdout.getvalue().splitlines()
        self.assertEqual([json.loads(line) for line in lines], [{"a": {"x": 1}}, {"b": True}])
