# -*- test-case-name: tests.test_cli_run -*-
"""
Tests for L{salttwist.cli.run}, the C{salttwist-run} command.

As in L{tests.test_cli_salt}, L{task.react} is replaced by a stand-in that
drives the command on a L{MemoryReactorClock}. Runner calls are answered by
a replaced L{LocalClient.runner}; C{state.event} connects to the event bus
through the memory reactor, and the tests play the bus's side of that
connection on a L{StringTransport}.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
from collections.abc import Callable
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

import salttwist
from salttwist import serial
from salttwist.cli import run
from salttwist.cli.run import (
    buildParser,
    formatEvent,
    runRunner,
    streamEvents,
    tagMatches,
    tagPrefix,
)
from salttwist.client import local
from salttwist.client.local import MasterUnavailable
from salttwist.config import loadMasterConfig
from salttwist.master.service import EVENT_PUB_SOCKET
from salttwist.transport.reqclient import RequestError
from tests.test_cli_salt import FakeReact, failUnixConnections


def frame(message: dict[str, Any]) -> bytes:
    """
    One frame of the event bus protocol.
    """
    body = serial.dumps(message)
    return struct.pack("!I", len(body)) + body


def frames(data: bytes) -> list[Any]:
    """
    Decode the frames in C{data}.
    """
    messages = []
    while data:
        (length,) = struct.unpack("!I", data[:4])
        messages.append(serial.loads(data[4 : 4 + length]))
        data = data[4 + length :]
    return messages


class OutputTestCase(SynchronousTestCase):
    """
    Captures standard output and error; loads a config rooted in a
    temporary directory.
    """

    def setUp(self) -> None:
        """
        Capture the output, make the config and a memory reactor.
        """
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)
        self.config = loadMasterConfig(self.root, overrides={"root_dir": self.root})
        self.reactor = MemoryReactorClock()


class BuildParserTests(OutputTestCase):
    """
    L{buildParser} has C{salt-run}'s flags.
    """

    def test_defaults(self) -> None:
        """
        The function and its arguments, with the default options.
        """
        options = buildParser().parse_args(["jobs.lookup_jid", "1", "missing=True"])
        self.assertEqual(options.function, "jobs.lookup_jid")
        self.assertEqual(options.arg, ["1", "missing=True"])
        self.assertEqual(options.config_dir, "/etc/salttwist")
        self.assertIsNone(options.timeout)
        self.assertEqual(options.out, "nested")

    def test_options(self) -> None:
        """
        C{-c}, C{-t}, C{--out} and C{--out-indent} are read.
        """
        options = buildParser().parse_args(
            ["-c", "/x", "-t", "2.5", "--out", "json", "--out-indent", "-1", "manage.up"]
        )
        self.assertEqual(
            (options.config_dir, options.timeout, options.out, options.out_indent),
            ("/x", 2.5, "json", -1),
        )

    def test_version(self) -> None:
        """
        C{--version} prints the version and exits 0.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["--version"])
        self.assertEqual(e.code, 0)
        self.assertEqual(self.stdout.getvalue(), f"salttwist {salttwist.__version__}\n")

    def test_noFunction(self) -> None:
        """
        A command line without a function is a usage error.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, [])
        self.assertEqual(e.code, 2)

    def test_noFunctionNamesOnlyIt(self) -> None:
        """
        The usage error names the function alone: its arguments are
        optional, and without them the list is empty.
        """
        self.assertRaises(SystemExit, buildParser().parse_args, [])
        self.assertTrue(
            self.stderr.getvalue().endswith(
                "error: the following arguments are required: function\n"
            ),
            self.stderr.getvalue(),
        )
        self.assertEqual(buildParser().parse_args(["manage.up"]).arg, [])

    def test_badOutputter(self) -> None:
        """
        Only the known outputters are taken.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["--out", "pony", "manage.up"])
        self.assertEqual(e.code, 2)


class RunRunnerTests(OutputTestCase):
    """
    L{runRunner} calls the runner and prints its return.
    """

    def runRunner(self, argv: list[str]) -> Deferred[int]:
        """
        @return: the L{Deferred} of L{runRunner} for command line C{argv}.
        """
        options = buildParser().parse_args(argv)
        return Deferred.fromCoroutine(runRunner(self.reactor, options, self.config))

    def fakeRunner(self, outcome: Any) -> list[tuple[str, list[Any]]]:
        """
        Make L{local.LocalClient.runner} return C{{"return": outcome}}, raise
        C{outcome} if it is an exception, or wait on it if it is a
        L{Deferred}.

        @return: the calls, as C{(fun, arg)}.
        """
        calls: list[tuple[str, list[Any]]] = []

        async def runner(client: Any, fun: str, arg: list[Any]) -> dict[str, Any]:
            calls.append((fun, arg))
            if isinstance(outcome, Exception):
                raise outcome
            if isinstance(outcome, Deferred):
                return await outcome
            return {"jid": "1" * 20, "return": outcome}

        self.patch(local.LocalClient, "runner", runner)
        return calls

    def test_arguments(self) -> None:
        """
        The function and the arguments, parsed as C{salttwist} parses them
        (C{key=value} is a keyword, YAML scalars are typed; a jid is too
        large a number for the wire and stays text), go to the master.
        """
        calls = self.fakeRunner({})
        self.successResultOf(
            self.runRunner(["jobs.lookup_jid", "20261122010203456789", "missing=yes"])
        )
        self.assertEqual(
            calls,
            [("jobs.lookup_jid", ["20261122010203456789", {"missing": True, "__kwarg__": True}])],
        )

    def test_printsReturn(self) -> None:
        """
        The return itself is printed, not keyed by minion id: C{nested} by
        default, C{json} on request; the exit code is 0.
        """
        self.fakeRunner({"up": ["minion1"], "down": []})
        self.assertEqual(self.successResultOf(self.runRunner(["manage.status"])), 0)
        self.assertEqual(self.stdout.getvalue(), "down:\nup:\n    - minion1\n")
        self.stdout.truncate(0)
        self.stdout.seek(0)
        self.successResultOf(self.runRunner(["--out", "json", "manage.status"]))
        self.assertEqual(json.loads(self.stdout.getvalue()), {"up": ["minion1"], "down": []})

    def test_color(self) -> None:
        """
        C{--force-color} colours the nested output.
        """
        self.fakeRunner(["minion1"])
        self.successResultOf(self.runRunner(["--force-color", "manage.up"]))
        self.assertIn("\x1b[", self.stdout.getvalue())

    def test_emptyReturn(self) -> None:
        """
        An empty return prints nothing, as C{salt-run} does.
        """
        self.fakeRunner([])
        self.assertEqual(self.successResultOf(self.runRunner(["manage.down"])), 0)
        self.assertEqual(self.stdout.getvalue(), "")

    def test_runnerFailed(self) -> None:
        """
        A refused or failed runner prints the master's message and exits 1.
        """
        self.fakeRunner(RequestError("'nope.nope' is not available."))
        self.assertEqual(self.successResultOf(self.runRunner(["nope.nope"])), 1)
        self.assertEqual(self.stderr.getvalue(), "Error: 'nope.nope' is not available.\n")
        self.assertEqual(self.stdout.getvalue(), "")

    def test_masterUnavailable(self) -> None:
        """
        An unreachable master exits 2 with the reason.
        """
        self.fakeRunner(MasterUnavailable("the salttwist master is not running"))
        self.assertEqual(self.successResultOf(self.runRunner(["manage.up"])), 2)
        self.assertIn("not running", self.stderr.getvalue())

    def test_connectionLost(self) -> None:
        """
        A master that goes away during the call exits 2.
        """
        self.fakeRunner(ConnectionError("connection to the master lost"))
        self.assertEqual(self.successResultOf(self.runRunner(["manage.up"])), 2)
        self.assertIn("lost the connection", self.stderr.getvalue())

    def test_timeout(self) -> None:
        """
        With C{-t}, a runner that has not returned in time is given up on:
        exit 1 and a message, and the call is cancelled.
        """
        cancelled: list[Deferred[Any]] = []
        pending: Deferred[Any] = Deferred(cancelled.append)
        self.fakeRunner(pending)
        d = self.runRunner(["-t", "1.5", "jobs.active"])
        self.reactor.advance(1.4)
        self.assertNoResult(d)
        self.reactor.advance(0.1)
        self.assertEqual(self.successResultOf(d), 1)
        self.assertEqual(
            self.stderr.getvalue(), "Error: jobs.active did not return within 1.5 seconds\n"
        )
        self.assertEqual(cancelled, [pending])

    def test_noTimeoutByDefault(self) -> None:
        """
        Without C{-t} the command waits for the runner as long as it takes.
        """
        pending: Deferred[Any] = Deferred()
        self.fakeRunner(pending)
        d = self.runRunner(["jobs.active"])
        self.reactor.advance(3600)
        self.assertNoResult(d)
        pending.callback({"return": {}})
        self.assertEqual(self.successResultOf(d), 0)

    def test_realClientNoMaster(self) -> None:
        """
        With the real client and no master, the event bus cannot be reached:
        exit 2, naming its socket.
        """
        d = self.runRunner(["manage.up"])
        failUnixConnections(self.reactor)
        self.assertEqual(self.successResultOf(d), 2)
        self.assertIn(
            os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET), self.stderr.getvalue()
        )


class TagTests(SynchronousTestCase):
    """
    L{tagMatches} is Salt's C{expr_match}; L{tagPrefix} the literal start of
    the tags a C{tagmatch} can match.
    """

    def test_glob(self) -> None:
        """
        A glob matches the whole tag.
        """
        self.assertTrue(tagMatches("salt/job/1/ret/m1", "salt/job/*"))
        self.assertTrue(tagMatches("salt/job/1/ret/m1", "*"))
        self.assertTrue(tagMatches("salt/key", "salt/key"))
        self.assertFalse(tagMatches("salt/job/1/new", "salt/job"))
        self.assertFalse(tagMatches("Salt/key", "salt/key"))

    def test_regex(self) -> None:
        """
        Failing the glob, a regular expression matching the whole tag.
        """
        self.assertTrue(tagMatches("salt/job/1/ret/m1", r"salt/job/\d+/ret/.*"))
        self.assertTrue(tagMatches("salt/run/1/new", "salt/(job|run)/.*"))
        self.assertTrue(tagMatches("salt/run/1/new", "salt/job/.*|salt/run/.*"))
        self.assertFalse(tagMatches("salt/job/1/new/x", r"salt/job/\d+/new"))

    def test_badRegex(self) -> None:
        """
        A pattern that is no regular expression matches as a glob only.
        """
        self.assertFalse(tagMatches("salt/job", "salt/(job"))
        self.assertTrue(tagMatches("salt/(job", "salt/(job"))

    def test_prefix(self) -> None:
        """
        The prefix stops before the first pattern character, and one
        earlier before a quantifier; an alternation has none.
        """
        cases = {
            "salt/job/*": "salt/job",
            "salt/job/*/ret/*": "salt/job",
            "salt/key": "salt/key",
            "*": "",
            "salt/jobs?": "salt/job",
            r"salt/job/\d+": "salt/job/",
            "salt/[jr]": "salt/",
            "salt/job/.*": "salt/job/",
            "salt/job|salt/run": "",
            "": "",
        }
        for tagmatch, prefix in cases.items():
            self.assertEqual(tagPrefix(tagmatch), prefix, tagmatch)
            for tag in ("salt/job/1/ret/m1", "salt/jobs", "salt/job", "salt/key", "salt/run/1"):
                if tagMatches(tag, tagmatch):
                    self.assertTrue(tag.startswith(prefix), (tag, tagmatch))

    def test_formatEvent(self) -> None:
        """
        One line: the tag, a tab and compact JSON in the data's order; with
        C{pretty}, sorted keys indented by 4. Bytes print as text.
        """
        data = {"id": "m1", "b": b"raw", "a": [1, None]}
        self.assertEqual(
            formatEvent("salt/x", data, False),
            'salt/x\t{"id": "m1", "b": "raw", "a": [1, null]}\n',
        )
        self.assertEqual(
            formatEvent("salt/x", {"b": 1, "a": 2}, True),
            'salt/x\t{\n    "a": 2,\n    "b": 1\n}\n',
        )


class StreamEventsTests(OutputTestCase):
    """
    L{streamEvents} runs C{state.event}: it subscribes to the bus and prints
    the matching events.
    """

    def stream(self, *words: str) -> Deferred[int]:
        """
        @return: the L{Deferred} of C{salttwist-run state.event WORDS}.
        """
        options = buildParser().parse_args(["state.event", *words])
        return Deferred.fromCoroutine(streamEvents(self.reactor, options, self.config))

    def connect(self) -> tuple[Any, StringTransport]:
        """
        Accept the command's connection to the bus and confirm its
        subscription, as the master does.

        @return: the protocol and the transport it writes to.
        """
        path, factory, _, _ = self.reactor.unixClients.pop(0)
        self.path = path
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(frame({"subscribed": True}))
        return proto, transport

    def fire(self, proto: Any, tag: str, data: dict[str, Any] | None = None) -> None:
        """
        Deliver one event to the command.
        """
        proto.dataReceived(frame({"tag": tag, "data": data or {}}))

    def test_streams(self) -> None:
        """
        Matching events print as C{tag<TAB>json} in order; the others are
        skipped; the subscription asks only for the tags' literal prefix.
        """
        d = self.stream("tagmatch=salt/job/*")
        proto, transport = self.connect()
        self.assertEqual(frames(transport.value()), [{"subscribe": ["salt/job"]}])
        self.assertEqual(self.path, os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET))
        self.fire(proto, "salt/job/1/new", {"fun": "test.ping"})
        self.fire(proto, "salt/jobs", {"x": 1})
        self.fire(proto, "salt/job/1/ret/m1", {"return": True})
        self.assertNoResult(d)
        self.assertEqual(
            self.stdout.getvalue(),
            'salt/job/1/new\t{"fun": "test.ping"}\nsalt/job/1/ret/m1\t{"return": true}\n',
        )

    def test_count(self) -> None:
        """
        With C{count=N} the command ends, exit 0, after N matching events
        and closes its connection.
        """
        d = self.stream("count=2", "tagmatch=salt/job/*/ret/*")
        proto, transport = self.connect()
        self.fire(proto, "salt/job/1/new")
        self.fire(proto, "salt/job/1/ret/m1")
        self.assertNoResult(d)
        self.fire(proto, "salt/job/1/ret/m2")
        self.assertEqual(self.successResultOf(d), 0)
        self.assertTrue(transport.disconnecting)
        self.fire(proto, "salt/job/1/ret/m3")
        self.assertEqual(self.stdout.getvalue().count("\n"), 2)

    def test_positional(self) -> None:
        """
        Arguments may be positional, in Salt's order (tagmatch, count).
        """
        d = self.stream("salt/key", "1")
        proto, _ = self.connect()
        self.fire(proto, "salt/key", {"act": "accept"})
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(self.stdout.getvalue(), 'salt/key\t{"act": "accept"}\n')

    def test_everything(self) -> None:
        """
        The default C{tagmatch} is C{*}: every event, all subscribed.
        """
        d = self.stream("count=1")
        proto, transport = self.connect()
        self.assertEqual(frames(transport.value()), [{"subscribe": [""]}])
        self.fire(proto, "anything/at/all")
        self.assertEqual(self.successResultOf(d), 0)

    def test_pretty(self) -> None:
        """
        C{pretty=True} indents the JSON and sorts its keys.
        """
        d = self.stream("pretty=True", "count=1")
        proto, _ = self.connect()
        self.fire(proto, "salt/x", {"b": 1, "a": 2})
        self.successResultOf(d)
        self.assertEqual(self.stdout.getvalue(), 'salt/x\t{\n    "a": 2,\n    "b": 1\n}\n')

    def test_quiet(self) -> None:
        """
        C{quiet=True} prints nothing but still counts.
        """
        d = self.stream("quiet=True", "count=1")
        proto, _ = self.connect()
        self.fire(proto, "salt/x")
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(self.stdout.getvalue(), "")

    def test_sockDir(self) -> None:
        """
        C{sock_dir} points at another master's sockets.
        """
        self.stream("sock_dir=/elsewhere")
        self.connect()
        self.assertEqual(self.path, os.path.join("/elsewhere", EVENT_PUB_SOCKET))

    def test_busClosed(self) -> None:
        """
        When the master closes the bus, the command says so and exits 2.
        """
        d = self.stream()
        proto, _ = self.connect()
        proto.connectionLost(Failure(ConnectionError("gone")))
        self.assertEqual(self.successResultOf(d), 2)
        self.assertIn("closed the event bus", self.stderr.getvalue())

    def test_shutdown(self) -> None:
        """
        When the reactor shuts down (Ctrl-C) and closes the connection, that
        is no error: nothing is printed and the command's own result never
        comes (L{run.main} exits 0).
        """
        d = self.stream()
        proto, _ = self.connect()
        for trigger, args, kwargs in self.reactor.triggers["before"]["shutdown"]:
            trigger(*args, **kwargs)
        proto.connectionLost(Failure(ConnectionError("closed")))
        self.assertNoResult(d)
        self.assertEqual(self.stderr.getvalue(), "")

    def test_noMaster(self) -> None:
        """
        Without a master the command exits 2, naming the socket.
        """
        d = self.stream()
        failUnixConnections(self.reactor)
        self.assertEqual(self.successResultOf(d), 2)
        self.assertIn(
            os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET), self.stderr.getvalue()
        )

    def test_badArguments(self) -> None:
        """
        Arguments C{state.event} does not take, a count that is not a
        number and another node than the master's exit 1 without
        connecting.
        """
        for words, message in [
            (("nope=1",), "Passed invalid arguments to state.event"),
            (("a", "1", "no", "/x", "no", "master", "extra"), "Passed invalid arguments"),
            (("count=many",), "count must be a whole number"),
            (("node=minion",), "node=master"),
        ]:
            self.assertEqual(self.successResultOf(self.stream(*words)), 1, words)
            self.assertIn(message, self.stderr.getvalue(), words)
        self.assertEqual(self.reactor.unixClients, [])


class InterruptedReact:
    """
    A stand-in for L{task.react} whose reactor is stopped (Ctrl-C) before
    C{main}'s L{Deferred} fires: it exits with code 0, as the real one does.
    """

    def __init__(self, exception: BaseException | None = None) -> None:
        self.reactor = MemoryReactorClock()
        self.exception = exception if exception is not None else SystemExit(0)

    def __call__(self, main: Callable[[Any], Deferred[Any]], argv: Any = ()) -> None:
        """
        Start C{main}, then stop.
        """
        main(self.reactor)
        raise self.exception


class MainTests(OutputTestCase):
    """
    L{run.main}, with L{task.react} replaced.
    """

    def setUp(self) -> None:
        """
        An empty config directory.
        """
        super().setUp()
        self.configDir = self.root

    def test_noMaster(self) -> None:
        """
        With no master running, a runner call exits 2 with an error naming
        the event bus.
        """
        react = FakeReact(self)
        self.patch(task, "react", react)
        self.assertEqual(run.main(["-c", self.configDir, "manage.up"]), 2)
        self.assertEqual(react.calls, 1)
        self.assertIn("event bus", self.stderr.getvalue())

    def test_stateEventNoMaster(self) -> None:
        """
        C{state.event} with no master running exits 2 too.
        """
        self.patch(task, "react", FakeReact(self))
        self.assertEqual(run.main(["-c", self.configDir, "state.event"]), 2)
        self.assertIn("event bus", self.stderr.getvalue())

    def test_success(self) -> None:
        """
        The runner's return is printed and the exit code is 0.
        """

        async def runner(client: Any, fun: str, arg: list[Any]) -> dict[str, Any]:
            return {"jid": "1" * 20, "return": ["minion1"]}

        self.patch(local.LocalClient, "runner", runner)
        self.patch(task, "react", FakeReact(self))
        self.assertEqual(run.main(["-c", self.configDir, "manage.up"]), 0)
        self.assertEqual(self.stdout.getvalue(), "- minion1\n")

    def test_badConfig(self) -> None:
        """
        An unreadable config exits 2 without starting the reactor.
        """
        react = FakeReact(self)
        self.patch(task, "react", react)
        with open(os.path.join(self.configDir, "master"), "w") as f:
            f.write("timeout: [not, a, number]\n")
        self.assertEqual(run.main(["-c", self.configDir, "manage.up"]), 2)
        self.assertEqual(react.calls, 0)
        self.assertIn("Error: ", self.stderr.getvalue())

    def test_interruptedStateEvent(self) -> None:
        """
        Ctrl-C ends C{state.event}, its normal way to end: exit 0, whether
        the reactor was stopped or Python raised L{KeyboardInterrupt}.
        """
        self.patch(task, "react", InterruptedReact())
        self.assertEqual(run.main(["-c", self.configDir, "state.event"]), 0)
        self.patch(task, "react", InterruptedReact(KeyboardInterrupt()))
        self.assertEqual(run.main(["-c", self.configDir, "state.event"]), 0)

    def test_interruptedRunner(self) -> None:
        """
        Ctrl-C before a runner returned exits 1.
        """
        pending: Deferred[Any] = Deferred()

        async def runner(client: Any, fun: str, arg: list[Any]) -> dict[str, Any]:
            return await pending

        self.patch(local.LocalClient, "runner", runner)
        self.patch(task, "react", InterruptedReact())
        self.assertEqual(run.main(["-c", self.configDir, "jobs.active"]), 1)
