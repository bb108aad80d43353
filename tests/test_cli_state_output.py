# -*- test-case-name: tests.test_cli_state_output -*-
"""
Tests for how the commands show state returns: the C{highstate} outputter
by default for the state functions that run states, C{--state-output},
C{--state-verbose} and C{--output-diff} on C{salttwist}, C{salttwist-call}
and C{salttwist-run}, C{salttwist --progress} counting states from the
state events, C{salttwist-run}'s runner envelopes and exit codes, and
C{salttwist-call}'s exit codes for a state run.

As in L{tests.test_cli_salt}, C{salttwist}'s client is replaced so that a
job returns what a test says; C{salttwist-call} runs for real in a child
process, masterless, on test states in a temporary file root.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.testing import MemoryReactorClock
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.cli import call, run, salt
from salttwist.cli.highstate import HighstateOptions
from salttwist.cli.output import render
from salttwist.client import local
from salttwist.client.base import JobResult
from salttwist.config import loadMasterConfig
from tests.test_cli_salt import FakeTerminal, screen
from tests.test_output_highstate import ORCHESTRATION, RUN, RUN_TEST
from tests.test_runners_jobs import RunnerTestCase

#: A minion's state return (RUN's, a real one), and the job's return event.
STATES = RUN["local"]
RETURN = {"return": STATES, "retcode": 2}


def _highstate(data: Any, color: bool = False, **options: Any) -> str:
    """
    @return: C{data} as the highstate outputter shows it with C{options}.
    """
    return render("highstate", data, color, stateOptions=HighstateOptions(**options))


class ParserTests(SynchronousTestCase):
    """
    The three commands take Salt's options of the highstate outputter.
    """

    def setUp(self) -> None:
        """
        Capture standard error, where C{argparse} writes.
        """
        self.stderr = io.StringIO()
        self.patch(sys, "stderr", self.stderr)

    def test_stateOutput(self) -> None:
        """
        C{--state-output} and C{--state_output} take Salt's modes, C{_id}
        forms included; none given leaves the config's.
        """
        for parser in (salt.buildParser(), call.buildParser(), run.buildParser()):
            extra = ["*"] if parser.prog == "salttwist" else []
            self.assertIsNone(parser.parse_args([*extra, "state.apply"]).state_output)
            options = parser.parse_args(["--state-output", "terse", *extra, "state.apply"])
            self.assertEqual(options.state_output, "terse")
            options = parser.parse_args(["--state_output=filter_id", *extra, "state.apply"])
            self.assertEqual(options.state_output, "filter_id")

    def test_badStateOutput(self) -> None:
        """
        An unknown mode is a usage error naming the valid ones.
        """
        e = self.assertRaises(
            SystemExit, salt.buildParser().parse_args, ["--state-output", "loud", "*", "f"]
        )
        self.assertEqual(e.code, 2)
        self.assertIn("invalid choice: 'loud'", self.stderr.getvalue())
        self.assertIn("'changes_id'", self.stderr.getvalue())

    def test_stateVerbose(self) -> None:
        """
        C{--state-verbose} and C{--state_verbose} take True or False in any
        case.
        """
        parser = call.buildParser()
        self.assertIs(parser.parse_args(["--state-verbose", "False", "f"]).state_verbose, False)
        self.assertIs(parser.parse_args(["--state_verbose=true", "f"]).state_verbose, True)
        self.assertIsNone(parser.parse_args(["f"]).state_verbose)

    def test_badStateVerbose(self) -> None:
        """
        Anything else is a usage error that says what is expected.
        """
        e = self.assertRaises(
            SystemExit, run.buildParser().parse_args, ["--state-verbose", "maybe", "f"]
        )
        self.assertEqual(e.code, 2)
        self.assertIn("expected True or False, not 'maybe'", self.stderr.getvalue())

    def test_outputDiff(self) -> None:
        """
        C{--output-diff} is on C{salttwist} and C{salttwist-call}, as in
        Salt; not on C{salttwist-run}.
        """
        self.assertTrue(
            salt.buildParser().parse_args(["--output-diff", "*", "f"]).state_output_diff
        )
        self.assertTrue(call.buildParser().parse_args(["--output-diff", "f"]).state_output_diff)
        self.assertRaises(SystemExit, run.buildParser().parse_args, ["--output-diff", "f"])

    def test_outGiven(self) -> None:
        """
        The parsers tell C{--out nested} from no C{--out}.
        """
        parser = salt.buildParser()
        self.assertFalse(parser.parse_args(["*", "f"]).out_given)
        options = parser.parse_args(["--out", "nested", "*", "f"])
        self.assertEqual((options.out, options.out_given), ("nested", True))


class _SaltJobBase(SynchronousTestCase):
    """
    Runs L{salt.runJob} against a replaced L{local.LocalClient.run}.
    """

    def setUp(self) -> None:
        """
        Capture the output; a master config rooted in a temporary directory.
        """
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        root = self.mktemp()
        os.makedirs(root)
        self.config = loadMasterConfig(root, overrides={"root_dir": root})
        self.reactor = MemoryReactorClock()
        self.calls: list[tuple[Any, ...]] = []

    def runJob(self, argv: list[str]) -> int:
        """
        @return: the exit code of L{salt.runJob} for C{argv}, once the
            state events its returns imply came or the command stopped
            waiting for them (L{salt.LATE_EVENTS_WAIT}: the fake returns
            here name more states than their events).
        """
        options = salt.buildParser().parse_args(argv)
        d = Deferred.fromCoroutine(salt.runJob(self.reactor, options, self.config))
        self.reactor.advance(salt.LATE_EVENTS_WAIT)
        return self.successResultOf(d)

    def fakeRun(self, result: JobResult, events: list[tuple[str, Any]] = ()) -> None:
        """
        Make the client return C{result}: publish, then C{events} on the
        state event listener (if one was opened), then the returns.
        """
        testCase = self

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
            testCase.calls.append((tgt, fun, arg))
            onPublished(result.jid, result.minions)
            for tag, data in events:
                testCase.onEvent(tag, data)
            for minionId, data in result.returns.items():
                onReturn(minionId, data)
            return result

        self.patch(local.LocalClient, "run", run)


class SaltOutputTests(_SaltJobBase):
    """
    C{salttwist} prints a state run's returns with the highstate outputter.
    """

    def test_default(self) -> None:
        """
        Without C{--out}, C{state.apply}'s return prints as highstate, and
        a failed state (retcode 2) makes the exit code 1, as Salt's.
        """
        self.fakeRun(JobResult("1" * 20, ["web1"], returns={"web1": RETURN}))
        self.assertEqual(self.runJob(["web1", "state.apply"]), 1)
        self.assertEqual(self.stdout.getvalue(), _highstate({"web1": STATES}))

    def test_outNested(self) -> None:
        """
        C{--out nested} wins: the return prints nested (red: retcode 2).
        """
        self.fakeRun(JobResult("1" * 20, ["web1"], returns={"web1": RETURN}))
        self.runJob(["--out", "nested", "--force-color", "web1", "state.apply"])
        self.assertEqual(
            self.stdout.getvalue(), render("nested", {"web1": STATES}, True, retcode=2)
        )

    def test_otherFunctions(self) -> None:
        """
        Other functions, C{state.show_*} among them, print nested.
        """
        self.fakeRun(JobResult("1" * 20, ["web1"], returns={"web1": {"return": {"a": 1}}}))
        self.runJob(["web1", "state.show_sls", "web"])
        self.assertEqual(self.stdout.getvalue(), "web1:\n    ----------\n    a:\n        1\n")

    def test_flags(self) -> None:
        """
        C{--state-output}, C{--state-verbose} and C{--output-diff} shape
        the output; C{--force-color} colours it.
        """
        self.fakeRun(JobResult("1" * 20, ["web1"], returns={"web1": RETURN}))
        self.runJob(["--state-output=mixed_id", "--state-verbose=False", "web1", "state.sls", "x"])
        expected = _highstate({"web1": STATES}, stateOutput="mixed_id", stateVerbose=False)
        self.assertEqual(self.stdout.getvalue(), expected)
        self.stdout.truncate(0)
        self.stdout.seek(0)
        self.runJob(["--output-diff", "--force-color", "web1", "state.highstate"])
        self.assertEqual(
            self.stdout.getvalue(), _highstate({"web1": STATES}, True, stateOutputDiff=True)
        )

    def test_config(self) -> None:
        """
        The master config's C{state_output} and C{state_verbose} apply; the
        command line overrides them.
        """
        self.config.update(state_output="terse", state_verbose=False)
        self.fakeRun(JobResult("1" * 20, ["web1"], returns={"web1": RETURN}))
        self.runJob(["web1", "state.apply"])
        self.assertEqual(
            self.stdout.getvalue(),
            _highstate({"web1": STATES}, stateOutput="terse", stateVerbose=False),
        )
        self.stdout.truncate(0)
        self.stdout.seek(0)
        self.runJob(["--state-output", "full", "web1", "state.apply"])
        self.assertEqual(self.stdout.getvalue(), _highstate({"web1": STATES}, stateVerbose=False))

    def test_filterArguments(self) -> None:
        """
        With C{filter}, the job's C{exclude=} and C{terse=} arguments say
        what is left out and what is terse, as in Salt.
        """
        self.fakeRun(JobResult("1" * 20, ["web1"], returns={"web1": RETURN}))
        self.runJob(
            ["--state-output", "filter", "web1", "state.apply", "exclude=True,", "terse=False"]
        )
        expected = _highstate(
            {"web1": STATES}, stateOutput="filter", exclude=("True", ""), terse=("False",)
        )
        self.assertEqual(self.stdout.getvalue(), expected)
        self.assertNotIn("ok_state", expected)
        self.assertIn("  Name: failed_state - Function: test.fail_without_changes", expected)

    def test_compileErrors(self) -> None:
        """
        Compile errors (a list of strings, retcode 1) print as Salt's.
        """
        errors = ["Rendering SLS 'base:web' failed: bad"]
        self.fakeRun(
            JobResult("1" * 20, ["web1"], returns={"web1": {"return": errors, "retcode": 1}})
        )
        self.assertEqual(self.runJob(["web1", "state.apply"]), 1)
        self.assertEqual(
            self.stdout.getvalue(),
            "web1:\n    Data failed to compile:\n----------\n"
            "    Rendering SLS 'base:web' failed: bad\n",
        )

    def test_missingAndStatic(self) -> None:
        """
        A minion that did not return is shown as C{nested} shows it (Salt's
        C{no_return}); with C{--static} all returns print together.
        """
        result = JobResult(
            "1" * 20, ["web1", "web2"], returns={"web1": {"return": STATES}}, missing=["web2"]
        )
        self.fakeRun(result)
        self.assertEqual(self.runJob(["--static", "web*", "state.apply"]), 1)
        self.assertEqual(
            self.stdout.getvalue(),
            _highstate({"web1": STATES, "web2": salt.NO_RESPONSE}),
        )
        self.stdout.truncate(0)
        self.stdout.seek(0)
        self.runJob(["web*", "state.apply"])
        self.assertEqual(
            self.stdout.getvalue(),
            _highstate({"web1": STATES}) + f"web2:\n    {salt.NO_RESPONSE}\n",
        )


class NoReturnTests(_SaltJobBase):
    """
    Minions that did not return are shown as Salt's C{no_return}
    outputter shows them, unless C{--out} names another outputter.
    """

    def test_colours(self) -> None:
        """
        The id in cyan, the text in red (Salt 3008.5 printed these bytes for
        the same minion and text).
        """
        result = JobResult("1" * 20, ["web2"], missing=["web2"])
        self.fakeRun(result)
        self.runJob(["--force-color", "web2", "state.apply"])
        self.assertEqual(
            self.stdout.getvalue(),
            "\x1b[0;36mweb2\x1b[0;0m:\n\x1b[0;31m    Minion did not return. [No response]"
            "\x1b[0;0m\n",
        )

    def test_outGiven(self) -> None:
        """
        With C{--out nested} the text prints nested (green); with C{--out
        highstate}, which Salt ignores there, as C{no_return}.
        """
        self.fakeRun(JobResult("1" * 20, ["web2"], missing=["web2"]))
        self.runJob(["--force-color", "--out", "nested", "web2", "test.ping"])
        self.assertEqual(
            self.stdout.getvalue(),
            render("nested", {"web2": salt.NO_RESPONSE}, True),
        )
        self.stdout.truncate(0)
        self.stdout.seek(0)
        self.runJob(["--force-color", "--out", "highstate", "web2", "test.ping"])
        self.assertIn("\x1b[0;31m    Minion did not return.", self.stdout.getvalue())


def _prog(jid: str, minionId: str, runNumber: int, total: int, **extra: Any) -> tuple[str, Any]:
    """
    @return: the tag and data of a state progress event as the master's
        bus carries it.
    """
    data = {
        "id": minionId,
        "tag": f"salt/job/{jid}/prog/{minionId}/{runNumber}",
        "data": {"ret": {"__run_num__": runNumber, "result": True}, "len": total},
        "cmd": "_minion_event",
    }
    data.update(extra)
    return data["tag"], data


class StateProgressTests(_SaltJobBase):
    """
    C{--progress} on a state run counts each minion's states.
    """

    JID = "2" * 20

    def setUp(self) -> None:
        """
        Replace the bus listener: record the subscriber.
        """
        super().setUp()
        self.listened: list[Any] = []
        self.closed: list[bool] = []
        testCase = self

        class Transport:
            def loseConnection(self) -> None:
                testCase.closed.append(True)

        class Listener:
            transport = Transport()

        async def listen(reactor: Any, config: dict[str, Any], onEvent: Any) -> Any:
            self.listened.append(config)
            self.onEvent = onEvent
            return Listener()

        self.patch(salt, "listenStateEvents", listen)

    def events(self) -> list[tuple[str, Any]]:
        """
        @return: web1's three states and web2's first, with an event of
            another job and a forged one in between.
        """
        return [
            _prog(self.JID, "web1", 0, 3),
            _prog("9" * 20, "web1", 1, 3),
            _prog(self.JID, "web2", 0, 2),
            _prog(self.JID, "web1", 1, 3),
            _prog(self.JID, "web2", 1, 2, id="web1"),
            _prog(self.JID, "web1", 2, 3),
        ]

    def result(self) -> JobResult:
        """
        @return: both minions return their states.
        """
        return JobResult(
            self.JID,
            ["web1", "web2"],
            returns={"web1": {"return": STATES}, "web2": {"return": STATES}},
        )

    def test_notTerminal(self) -> None:
        """
        Elsewhere than on a terminal, each update is a line of its own on
        standard error: the returns counted, each state done per minion;
        events of other jobs, and events whose sender is not the minion
        the tag names, are left out. The job asks the minions for state
        events and the listener is closed after it.
        """
        self.fakeRun(self.result(), self.events())
        self.runJob(["--progress", "web*", "state.apply", "web", "test=True"])
        self.assertEqual(
            self.stderr.getvalue(),
            "Progress: 0/2 returns\n"
            "web1: 1/3 states\n"
            "web2: 1/2 states\n"
            "web1: 2/3 states\n"
            "web1: 3/3 states\n"
            "Progress: 1/2 returns\n"
            "Progress: 2/2 returns\n",
        )
        self.assertEqual(
            self.calls,
            [
                (
                    "web*",
                    "state.apply",
                    ["web", {"test": True, "state_events": True, "__kwarg__": True}],
                )
            ],
        )
        self.assertEqual(self.closed, [True])
        self.assertEqual(
            self.stdout.getvalue(), _highstate({"web1": STATES}) + _highstate({"web2": STATES})
        )

    def test_terminal(self) -> None:
        """
        On a terminal, one live line names the minions still running with
        their counts; the returns print above it and it ends with the
        final count.
        """
        terminal = FakeTerminal()
        self.patch(sys, "stdout", terminal)
        self.patch(sys, "stderr", terminal)
        self.fakeRun(self.result(), self.events())
        self.runJob(["--progress", "--out", "json", "web*", "state.sls", "web"])
        text = terminal.getvalue()
        self.assertIn(
            "\rProgress: 0/2 returns; states: web1 3/3, web2 1/2", text.replace("\x1b[K", "")
        )
        lines = screen(text)
        self.assertEqual(len(lines), 4)
        self.assertEqual(json.loads(lines[0]), {"web1": STATES})
        self.assertEqual(lines[2:], ["Progress: 2/2 returns", ""])

    def test_earlyEvents(self) -> None:
        """
        Events that come before the master's reply names the jid are kept
        and shown once it does.
        """
        router = salt._StateEvents(salt.StateProgress(io.StringIO()))
        router.onEvent(*_prog(self.JID, "web1", 0, 2))
        router.onEvent(*_prog("9" * 20, "web1", 0, 2))
        router.progress.expect(1)
        router.published(self.JID)
        self.assertEqual(router.progress.states, {"web1": ({0}, 2)})
        self.assertEqual(router.early, [])

    def test_listenerFails(self) -> None:
        """
        A bus that cannot be reached is a warning; the job runs.
        """

        async def listen(reactor: Any, config: dict[str, Any], onEvent: Any) -> Any:
            raise ConnectionRefusedError("no bus")

        self.patch(salt, "listenStateEvents", listen)
        self.onEvent = lambda tag, data: None
        self.fakeRun(self.result())
        self.runJob(["--progress", "web*", "state.apply"])
        self.assertIn(
            "Warning: the states' progress cannot be shown: no bus", self.stderr.getvalue()
        )
        self.assertEqual(
            self.stdout.getvalue(), _highstate({"web1": STATES}) + _highstate({"web2": STATES})
        )

    def test_otherFunctions(self) -> None:
        """
        Other functions keep the bar of returns, and get no state_events;
        they may run on the direct client, a state run with C{--progress}
        may not.
        """
        self.onEvent = lambda tag, data: None
        self.fakeRun(JobResult(self.JID, ["web1"], returns={"web1": {"return": True}}))
        self.runJob(["--progress", "web1", "test.ping"])
        self.assertEqual(self.calls[0][2], [])
        self.assertIn("Progress: [", self.stderr.getvalue())
        self.assertEqual(self.listened, [])
        config = dict(self.config, transport="tcp")
        parse = salt.buildParser().parse_args
        self.assertTrue(salt.canRunDirect(parse(["--progress", "*", "test.ping"]), config))
        self.assertTrue(salt.canRunDirect(parse(["*", "state.apply"]), config))
        self.assertFalse(salt.canRunDirect(parse(["--progress", "*", "state.apply"]), config))

    def test_stateEvent(self) -> None:
        """
        L{salt.stateEvent} reads the jid, minion, run number and total of a
        progress event, and nothing else.
        """
        tag, data = _prog("1" * 20, "web1", 4, 9)
        self.assertEqual(salt.stateEvent(tag, data), ("1" * 20, "web1", 4, 9))
        self.assertEqual(salt.stateEvent(tag, data["data"]), ("1" * 20, "web1", 4, 9))
        self.assertIsNone(salt.stateEvent(f"salt/job/{'1' * 20}/ret/web1", data))
        self.assertIsNone(salt.stateEvent(tag.replace("/4", "/four"), data))
        self.assertIsNone(salt.stateEvent(tag, dict(data, id="web2")))
        self.assertIsNone(salt.stateEvent(tag, {"data": {"len": "9"}}))
        self.assertIsNone(salt.stateEvent(tag, None))

    def test_withStateEvents(self) -> None:
        """
        L{salt.withStateEvents} adds the keyword to the keywords there are,
        or adds keywords.
        """
        self.assertEqual(salt.withStateEvents([]), [{"state_events": True, "__kwarg__": True}])
        self.assertEqual(
            salt.withStateEvents(["web", {"test": True, "__kwarg__": True}]),
            ["web", {"test": True, "state_events": True, "__kwarg__": True}],
        )


class RunTests(SynchronousTestCase):
    """
    C{salttwist-run} prints runner envelopes with their outputter and exits
    with their retcode.
    """

    def setUp(self) -> None:
        """
        Capture the output; a master config in a temporary directory.
        """
        self.stdout = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        root = self.mktemp()
        os.makedirs(root)
        self.config = loadMasterConfig(root, overrides={"root_dir": root})

    def runRunner(self, argv: list[str], ret: Any) -> int:
        """
        @return: the exit code of L{run.runRunner} for C{argv}, the runner
            returning C{ret}.
        """

        async def runner(client: Any, fun: str, arg: list[Any]) -> dict[str, Any]:
            return {"jid": "1" * 20, "return": ret}

        self.patch(local.LocalClient, "runner", runner)
        options = run.buildParser().parse_args(argv)
        return self.successResultOf(
            Deferred.fromCoroutine(run.runRunner(MemoryReactorClock(), options, self.config))
        )

    def test_orchestrate(self) -> None:
        """
        C{state.orchestrate}'s return (data, outputter, retcode) prints as
        highstate and its retcode is the exit code, as C{salt-run}'s.
        """
        ret = {"data": ORCHESTRATION, "outputter": "highstate", "retcode": 1}
        self.assertEqual(self.runRunner(["state.orchestrate", "orch"], ret), 1)
        self.assertEqual(self.stdout.getvalue(), _highstate(ORCHESTRATION))

    def test_stateOutputFlags(self) -> None:
        """
        C{--state-output} and C{--state-verbose} shape it.
        """
        ret = {"data": ORCHESTRATION, "outputter": "highstate", "retcode": 0}
        argv = ["--state-output", "terse", "--state-verbose", "false", "state.orch", "o"]
        self.assertEqual(self.runRunner(argv, ret), 0)
        expected = _highstate(ORCHESTRATION, stateOutput="terse", stateVerbose=False)
        self.assertEqual(self.stdout.getvalue(), expected)

    def test_lookupJid(self) -> None:
        """
        A C{{data, outputter}} envelope (C{jobs.lookup_jid} of a state run)
        prints its data with that outputter; C{--out json} prints the data.
        """
        ret = {"data": RUN_TEST, "outputter": "highstate"}
        self.assertEqual(self.runRunner(["jobs.lookup_jid", "1" * 20], ret), 0)
        self.assertEqual(self.stdout.getvalue(), _highstate(RUN_TEST))
        self.stdout.truncate(0)
        self.stdout.seek(0)
        self.runRunner(["--out", "json", "jobs.lookup_jid", "1" * 20], ret)
        self.assertEqual(json.loads(self.stdout.getvalue()), RUN_TEST)

    def test_retcodes(self) -> None:
        """
        L{run.runnerRetcode}: the return's C{retcode}, at its top or in its
        C{data}, else 0.
        """
        self.assertEqual(run.runnerRetcode({"retcode": 3}), 3)
        self.assertEqual(run.runnerRetcode({"data": {"retcode": 2}}), 2)
        self.assertEqual(run.runnerRetcode({"retcode": True}), 1)
        self.assertEqual(run.runnerRetcode({"up": []}), 0)
        self.assertEqual(run.runnerRetcode(["retcode"]), 0)


#: Test states for salttwist-call: one changes, one fails, one requires it.
SLS = """\
changed_state:
  test.succeed_with_changes:
    - name: some name
failed_state:
  test.fail_without_changes
dependent:
  test.nop:
    - require:
      - test: failed_state
"""

#: The times, which change from run to run, with the padding before them:
#: C{Total run time}'s is right-aligned, so its width follows how long the
#: run took.
_TIMES = re.compile(r"(Started:|Duration:|Total run time:) +[0-9.:]+")


class CallTests(TestCase):
    """
    C{salttwist-call --local} prints a state run with the highstate
    outputter and exits as C{salt-call} does.
    """

    def setUp(self) -> None:
        """
        A masterless minion config with a file root holding C{web.sls}.
        """
        self.configDir = os.path.abspath(self.mktemp())
        roots = os.path.join(self.configDir, "roots")
        os.makedirs(roots)
        with open(os.path.join(roots, "web.sls"), "w") as f:
            f.write(SLS)
        with open(os.path.join(self.configDir, "minion"), "w") as f:
            f.write(
                f"root_dir: {self.configDir}\nid: caller1\nfile_client: local\n"
                f"file_roots:\n  base:\n    - {roots}\n"
            )

    async def call(self, *args: str) -> tuple[str, str, int]:
        """
        Run C{salttwist-call -c DIR ARGS}.
        """
        out, err, code = await getProcessOutputAndValue(
            sys.executable,
            ["-m", "salttwist.cli.call", "-c", self.configDir, *args],
            env=dict(os.environ),
        )
        return out.decode(), err.decode(), code

    async def test_stateApply(self) -> None:
        """
        C{state.apply} prints as highstate: the same text as the highstate
        outputter gives for the run's JSON return (times aside). A failed
        state exits 1, or 2 with C{--retcode-passthrough}.
        """
        out, err, code = await self.call("state.apply", "web")
        self.assertEqual(code, 1, err)
        data, _, _ = await self.call("--out", "json", "state.apply", "web")
        expected = _highstate(json.loads(data))
        self.assertEqual(_TIMES.sub(r"\1 T", out), _TIMES.sub(r"\1 T", expected))
        self.assertIn("Failed:    2", out)
        _, _, code = await self.call("--retcode-passthrough", "state.apply", "web")
        self.assertEqual(code, 2)

    async def test_flags(self) -> None:
        """
        C{--state-output terse} prints one line per state; C{--out nested}
        prints nested.
        """
        out, err, _ = await self.call("--state-output", "terse", "state.sls", "web")
        self.assertIn(
            "  Name: failed_state - Function: test.fail_without_changes - Result: Failed", out
        )
        self.assertNotIn("Comment:", out)
        out, err, _ = await self.call("--out", "nested", "state.sls", "web")
        self.assertIn("    test_|-dependent_|-dependent_|-nop:\n", out)


class LookupJidEnvelopeTests(RunnerTestCase):
    """
    C{jobs.lookup_jid} of a state run names the highstate outputter, as
    Salt's does for returns that carry C{out: highstate}.
    """

    def test_stateRun(self) -> None:
        """
        The returns of a C{state.apply} job come in Salt's envelope.
        """
        jid = self.publish("state.apply", tgt="minion1")
        self.returnFrom("minion1", jid, STATES)
        self.assertEqual(
            self.run_("jobs.lookup_jid", jid),
            {"outputter": "highstate", "data": {"minion1": STATES}},
        )

    def test_otherFunctions(self) -> None:
        """
        Other jobs, C{state.show_sls} among them, give the returns alone.
        """
        jid = self.publish("state.show_sls", tgt="minion1")
        self.returnFrom("minion1", jid, {"a": {}})
        self.assertEqual(self.run_("jobs.lookup_jid", jid), {"minion1": {"a": {}}})

    def test_noReturns(self) -> None:
        """
        A state run no minion returned from gives an empty map, as before.
        """
        jid = self.publish("state.apply", tgt="minion1")
        self.assertEqual(self.run_("jobs.lookup_jid", jid), {})
