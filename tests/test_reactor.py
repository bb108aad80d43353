# -*- test-case-name: tests.test_reactor -*-
"""
Tests for L{salttwist.master.reactor}: Salt's reactor on the master's event
bus, with a real L{Master} whose blocking work runs synchronously and a
L{Clock}.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver, MemoryReactorClock
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.cluster.fanout import CLUSTER_ORIGIN
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.master.reactor import (
    ERROR_TAG,
    REACTOR_USER,
    Reactor,
    buildReactor,
)
from salttwist.master.service import MasterService
from salttwist.pki.keystore import ACCEPTED, InMemoryKeyStore
from salttwist.runners import RunnerContext

MASTER_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINIONS = ("web1", "web2", "db1")


def _echo(context: RunnerContext, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


class _ManualRunner:
    """
    A C{runBlocking} whose work runs only when the test says so, to hold
    reactions in flight.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[Deferred[Any], Any, tuple[Any, ...]]] = []

    def __call__(self, f: Any, *args: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.calls.append((d, f, args))
        return d

    def runNext(self) -> None:
        """
        Run the oldest waiting call.
        """
        d, f, args = self.calls.pop(0)
        d.callback(f(*args))


class ReactorTestCase(SynchronousTestCase):
    """
    A master with three accepted minions, a recording bus, and a directory
    for reaction files.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        os.makedirs(self.root)
        config = loadMasterConfig(self.root, overrides={"root_dir": self.root})
        self.bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        keyStore = InMemoryKeyStore()
        for minionId in MINIONS:
            keyStore.putKey(ACCEPTED, minionId, MINION_PEM)
        self.clock = Clock()
        self.master = Master(
            config,
            MasterKeys(MASTER_KEY, crypt.publicKeyToPem(MASTER_KEY.public_key()), b"r" * 32),
            keyStore,
            self.bus,
            runSynchronously,
            self.clock,
        )
        self.master.runners["test.echo"] = _echo

    def writeFile(self, name: str, text: str) -> str:
        """
        Write a reaction file in the test directory.

        @return: its absolute path.
        """
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def startReactor(self, reactorMap: list[dict[str, list[str]]], **kwargs: Any) -> Reactor:
        """
        Build and start a reactor for C{reactorMap}, relative files taken
        from the test directory; stopped at the end of the test.
        """
        reactor = Reactor(self.master, reactorMap, self.root, **kwargs)
        reactor.startService()
        self.addCleanup(reactor.stopService)
        return reactor

    def fire(self, tag: str, data: dict[str, Any] | None = None) -> None:
        """
        Fire one event, then let the reactor run its turn.
        """
        self.bus.fire(tag, data if data is not None else {})
        self.clock.advance(0)

    def tagged(self, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        """
        @return: the events seen whose tag starts with C{prefix}.
        """
        return [(tag, data) for tag, data in self.events if tag.startswith(prefix)]

    def errors(self) -> list[dict[str, Any]]:
        """
        @return: the data of the C{salt/reactor/error} events seen.
        """
        return [data for tag, data in self.events if tag == ERROR_TAG]


class RenderingTests(ReactorTestCase):
    """
    Reaction files are Jinja2 templates rendered with the event's C{tag} and
    C{data}, then read as YAML.
    """

    def test_tagAndData(self) -> None:
        """
        C{tag} and C{data} are the event's; the rendered file's C{event.send}
        fires the rendered tag and data on the master's bus.
        """
        self.writeFile(
            "start.sls",
            "tell:\n"
            "  event.send:\n"
            "    - tag: seen/{{ data['id'] }}\n"
            "    - data: {original: '{{ tag }}', n: {{ data['n'] + 1 }}}\n",
        )
        self.startReactor([{"salt/minion/*/start": ["start.sls"]}])
        self.fire("salt/minion/web1/start", {"id": "web1", "n": 1})
        ((tag, data),) = self.tagged("seen/")
        self.assertEqual(tag, "seen/web1")
        self.assertEqual((data["original"], data["n"]), ("salt/minion/web1/start", 2))
        self.assertEqual(self.errors(), [])

    def test_conditionalRendersNothing(self) -> None:
        """
        A file whose C{{% if %}} is false renders to nothing: no action, and
        no error.
        """
        self.writeFile(
            "only-web.sls",
            "{% if data['id'].startswith('web') %}\n"
            "tell:\n  event.send:\n    - tag: web/{{ data['id'] }}\n"
            "{% endif %}\n",
        )
        reactor = self.startReactor([{"salt/minion/*/start": ["only-web.sls"]}])
        self.fire("salt/minion/db1/start", {"id": "db1"})
        self.fire("salt/minion/web2/start", {"id": "web2"})
        self.assertEqual([tag for tag, _ in self.tagged("web/")], ["web/web2"])
        self.assertEqual((reactor.reacted, reactor.failed, self.errors()), (2, 0, []))

    def test_strictUndefined(self) -> None:
        """
        An undefined name is an error, not an empty string: the reaction
        does nothing, logs the failure and fires C{salt/reactor/error} with
        the event's tag, the file and the error.
        """
        path = self.writeFile(
            "bad.sls",
            "tell:\n  event.send:\n    - tag: seen/{{ data['no_such_key'] }}\n",
        )
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        reactor = self.startReactor([{"salt/minion/*/start": ["bad.sls"]}])
        self.fire("salt/minion/web1/start", {"id": "web1"})
        self.assertEqual(self.tagged("seen/"), [])
        (error,) = self.errors()
        self.assertEqual((error["tag"], error["file"]), ("salt/minion/web1/start", path))
        self.assertIn("no_such_key", error["error"])
        self.assertEqual(reactor.failed, 1)
        logged = [e for e in observer if e.get("log_level") == LogLevel.error]
        self.assertEqual(len(logged), 1)

    def test_templateSyntaxError(self) -> None:
        """
        A template that does not parse is reported with its line.
        """
        self.writeFile("bad.sls", "a:\n  event.send:\n    - tag: {% if %}\n")
        self.startReactor([{"x": ["bad.sls"]}])
        self.fire("x")
        (error,) = self.errors()
        self.assertIn("template error at line 3", error["error"])

    def test_sandboxed(self) -> None:
        """
        Templates run sandboxed: they cannot reach Python internals, nor
        change the event data other subscribers share.
        """
        self.writeFile("internals.sls", "{{ data.__class__.__subclasses__() }}\n")
        self.writeFile("mutate.sls", "{{ data.update({'id': 'evil'}) }}\n")
        self.startReactor([{"x": ["internals.sls", "mutate.sls"]}])
        event = {"id": "web1"}
        self.fire("x", event)
        self.assertEqual(len(self.errors()), 2)
        self.assertEqual(self.events[0][1]["id"], "web1")

    def test_badYaml(self) -> None:
        """
        A file that renders to invalid YAML, or to something other than a
        mapping of state ids, fails with an error event.
        """
        self.writeFile("broken.sls", "a: [unclosed\n")
        self.writeFile("list.sls", "- a\n- b\n")
        self.startReactor([{"x": ["broken.sls", "list.sls"]}])
        self.fire("x")
        first, second = self.errors()
        self.assertIn("invalid YAML", first["error"])
        self.assertIn("mapping of state ids", second["error"])

    def test_editedFileTakesEffect(self) -> None:
        """
        Files are read at every event, so an edited file is used at once
        (the compiled template is not kept past an edit).
        """
        self.writeFile("r.sls", "a:\n  event.send:\n    - tag: one\n")
        self.startReactor([{"x": ["r.sls"]}])
        self.fire("x")
        self.writeFile("r.sls", "a:\n  event.send:\n    - tag: two\n")
        self.fire("x")
        self.assertEqual([tag for tag, _ in self.events if tag in ("one", "two")], ["one", "two"])

    def test_missingFile(self) -> None:
        """
        A reaction file that cannot be read is an error event naming it.
        """
        self.startReactor([{"x": ["nope.sls", "glob-*.sls"]}])
        self.fire("x")
        first, second = self.errors()
        self.assertIn("cannot read", first["error"])
        self.assertEqual(first["file"], "nope.sls")
        self.assertIn("no reaction file matches", second["error"])

    def test_globbedFiles(self) -> None:
        """
        A file path with glob characters reads every matching file, in
        sorted order; a relative path is taken from the config directory.
        """
        for name in ("b", "a"):
            self.writeFile(
                f"reactions/{name}.sls", f"{name}:\n  event.send:\n    - tag: got/{name}\n"
            )
        self.startReactor([{"x": ["reactions/*.sls"]}])
        self.fire("x")
        self.assertEqual([tag for tag, _ in self.tagged("got/")], ["got/a", "got/b"])


class MatchingTests(ReactorTestCase):
    """
    Tags are matched with shell-style globs, and every matching event
    reacts.
    """

    def setUp(self) -> None:
        super().setUp()
        self.writeFile("echo.sls", "echo:\n  event.send:\n    - tag: re/{{ tag }}\n")

    def reactedTo(self) -> list[str]:
        """
        @return: the tags the echo reaction answered, in order.
        """
        return [tag[len("re/") :] for tag, _ in self.tagged("re/")]

    def test_globs(self) -> None:
        """
        C{*} matches across C{/}; matching is case-sensitive; a tag that no
        glob matches does not react.
        """
        self.startReactor(
            [{"salt/minion/*/start": ["echo.sls"]}, {"salt/job/*/ret/web?": ["echo.sls"]}]
        )
        for tag in (
            "salt/minion/web1/start",
            "salt/minion/a/b/start",
            "salt/minion/web1/stop",
            "SALT/minion/web1/start",
            "salt/job/1/ret/web1",
            "salt/job/1/ret/db1",
        ):
            self.fire(tag)
        self.assertEqual(
            self.reactedTo(),
            ["salt/minion/web1/start", "salt/minion/a/b/start", "salt/job/1/ret/web1"],
        )

    def test_everyGlobAndFile(self) -> None:
        """
        Every file of every matching glob reacts to an event, in config
        order; a C{*} glob sees every event.
        """
        # The '*' glob also sees the events this file sends: it must not
        # answer them, or it would loop (as it would in Salt).
        self.writeFile(
            "other.sls",
            "{% if tag[:2] in ('a/', 'b/') %}\n"
            "other:\n  event.send:\n    - tag: other/{{ tag }}\n{% endif %}\n",
        )
        self.startReactor([{"a/*": ["echo.sls", "other.sls"]}, {"*": ["other.sls"]}])
        self.fire("a/1")
        self.fire("b/1")
        self.assertEqual(self.reactedTo(), ["a/1"])
        self.assertEqual(
            [tag for tag, _ in self.tagged("other/")], ["other/a/1", "other/a/1", "other/b/1"]
        )

    def test_twentyStartEventsAtOnce(self) -> None:
        """
        Twenty C{salt/minion/<id>/start} events fired back to back (twenty
        minions starting at once) each react: none is lost behind another
        (the Salt bug where only one of several start events reacted).
        """
        self.startReactor([{"salt/minion/*/start": ["echo.sls"]}])
        ids = [f"m{i:02d}" for i in range(20)]
        for minionId in ids:
            self.bus.fire(f"salt/minion/{minionId}/start", {"id": minionId})
        self.clock.advance(0)
        self.assertEqual(self.reactedTo(), [f"salt/minion/{m}/start" for m in ids])

    def test_notInsideFire(self) -> None:
        """
        Nothing of a reaction runs inside the bus's C{fire}: it starts on
        the next reactor turn.
        """
        self.startReactor([{"x": ["echo.sls"]}])
        self.bus.fire("x", {})
        self.assertEqual(self.reactedTo(), [])
        self.clock.advance(0)
        self.assertEqual(self.reactedTo(), ["x"])

    def test_reactorsOwnJobEventsIgnored(self) -> None:
        """
        Events carrying C{user: Reactor} (the new-job and runner events of
        what reactions start) do not react, as in Salt; other events a
        reaction causes do.
        """
        self.startReactor([{"salt/*": ["echo.sls"]}])
        self.fire("salt/job/1/new", {"user": REACTOR_USER})
        self.assertEqual(self.reactedTo(), [])
        self.fire("salt/job/1/new", {"user": "root"})
        self.assertEqual(self.reactedTo(), ["salt/job/1/new"])

    def test_otherMastersEventsIgnored(self) -> None:
        """
        An event another master of the cluster forwarded (it carries
        C{_cluster_origin}: a return, a minion's event, a C{salt/key} or a
        start that happened there) does not react here, so a reactor on
        every master acts once per event; this master's own events react.
        """
        self.startReactor([{"salt/*": ["echo.sls"]}])
        self.fire("salt/key", {"act": "pend", "id": "m1", CLUSTER_ORIGIN: "master-b"})
        self.fire("salt/job/1/ret/m1", {"return": True, CLUSTER_ORIGIN: "master-b"})
        self.assertEqual(self.reactedTo(), [])
        self.fire("salt/key", {"act": "pend", "id": "m2"})
        self.assertEqual(self.reactedTo(), ["salt/key"])

    def test_clusterEventsOption(self) -> None:
        """
        With C{clusterEvents} (C{reactor_cluster_events: True}) the other
        masters' events react too.
        """
        self.startReactor([{"salt/*": ["echo.sls"]}], clusterEvents=True)
        self.fire("salt/key", {"act": "pend", "id": "m1", CLUSTER_ORIGIN: "master-b"})
        self.fire("salt/key", {"act": "pend", "id": "m2"})
        self.assertEqual(self.reactedTo(), ["salt/key", "salt/key"])

    def test_stopped(self) -> None:
        """
        A stopped reactor no longer reacts, and drops what was waiting.
        """
        reactor = self.startReactor([{"x": ["echo.sls"]}])
        self.bus.fire("x", {})
        reactor.stopService()
        self.clock.advance(0)
        self.fire("x")
        self.assertEqual(self.reactedTo(), [])


class BoundsTests(ReactorTestCase):
    """
    At most C{reactor_worker_threads} reactions run at once and at most
    C{reactor_worker_hwm} wait; past that, reactions are dropped loudly.
    """

    def setUp(self) -> None:
        super().setUp()
        self.writeFile("echo.sls", "echo:\n  event.send:\n    - tag: re/{{ data['n'] }}\n")
        self.runner = _ManualRunner()
        self.master.runBlocking = self.runner

    def test_bounded(self) -> None:
        """
        With two workers and room for three waiting, six events start two
        reactions, keep three waiting and drop one with a
        C{salt/reactor/error} event; as reactions finish, waiting ones
        start, and the five kept all react.
        """
        reactor = self.startReactor([{"x": ["echo.sls"]}], workers=2, highWaterMark=3)
        for n in range(6):
            self.bus.fire("x", {"n": n})
        self.clock.advance(0)
        self.assertEqual(len(self.runner.calls), 2)
        (error,) = self.errors()
        self.assertIn("reactor queue full", error["error"])
        self.assertEqual((error["tag"], reactor.dropped), ("x", 1))
        while self.runner.calls:
            self.runner.runNext()
            self.clock.advance(0)
            self.assertLessEqual(len(self.runner.calls), 2)
        self.assertEqual(
            sorted(tag for tag, _ in self.tagged("re/")), [f"re/{n}" for n in range(5)]
        )
        self.assertEqual(reactor.reacted, 5)

    def test_renderedInAThread(self) -> None:
        """
        A reaction file is read, then rendered, through C{runBlocking}
        (threads in the master): rendering an event's data is not done on
        the reactor thread.
        """
        self.startReactor([{"x": ["echo.sls"]}])
        self.bus.fire("x", {"n": 1})
        self.clock.advance(0)
        self.runner.runNext()  # the file read
        [(_, function, _)] = self.runner.calls
        self.assertEqual(function.__name__, "render")
        self.runner.runNext()
        self.clock.advance(0)
        self.assertEqual([tag for tag, _ in self.tagged("re/")], ["re/1"])

    def test_errorEventsDoNotLoop(self) -> None:
        """
        A reaction to C{salt/reactor/error} that fails, or is dropped, is
        only logged: it fires no further error event.
        """
        self.master.runBlocking = runSynchronously
        self.writeFile("bad.sls", "{{ nope }}\n")
        reactor = self.startReactor([{"salt/reactor/*": ["bad.sls"]}, {"x": ["bad.sls"]}])
        self.fire("x")
        self.clock.advance(0)
        self.assertEqual(len(self.errors()), 1)
        self.assertEqual(reactor.failed, 2)


class ActionTests(ReactorTestCase):
    """
    The actions of a reaction file: C{local.*} publishes a job, C{runner.*}
    runs a runner, C{event.send} fires an event; each failure is isolated
    and reported.
    """

    def jobs(self) -> list[dict[str, Any]]:
        """
        @return: the data of the C{salt/job/<jid>/new} events seen.
        """
        return [data for tag, data in self.events if tag.startswith("salt/job/")]

    def test_localPublishesRenderedTarget(self) -> None:
        """
        C{local.<fun>} publishes a job through the master's publish path to
        the rendered target, with C{arg} and C{kwarg} in Salt's wire form,
        as user C{Reactor}.
        """
        self.writeFile(
            "start.sls",
            "greet:\n"
            "  local.test.arg:\n"
            "    - tgt: {{ data['id'] }}\n"
            "    - arg: [hello, 2]\n"
            "    - kwarg: {who: {{ data['id'] }}}\n",
        )
        self.startReactor([{"salt/minion/*/start": ["start.sls"]}])
        self.fire("salt/minion/web2/start", {"id": "web2"})
        (job,) = self.jobs()
        self.assertEqual(
            {k: job[k] for k in ("fun", "tgt", "tgt_type", "arg", "minions", "user")},
            {
                "fun": "test.arg",
                "tgt": "web2",
                "tgt_type": "glob",
                "arg": ["hello", 2, {"who": "web2", "__kwarg__": True}],
                "minions": ["web2"],
                "user": REACTOR_USER,
            },
        )
        self.assertEqual(self.master.jobs.get(job["jid"]).minions, {"web2"})
        self.assertEqual(self.errors(), [])

    def test_localSaltForms(self) -> None:
        """
        Salt's other spellings work: the C{cmd.} alias, the old
        C{expr_form}, a single C{arg} value, and Salt 3000+'s C{args} form
        (keyword arguments only).
        """
        self.writeFile(
            "forms.sls",
            "a:\n  cmd.test.echo:\n    - tgt: 'web1,db1'\n    - expr_form: list\n"
            "    - arg: hi\n"
            "b:\n  local.state.single:\n    - tgt: 'web*'\n    - tgt_type: glob\n"
            "    - args:\n      - fun: pkg.installed\n      - name: zsh\n",
        )
        self.startReactor([{"x": ["forms.sls"]}])
        self.fire("x")
        first, second = self.jobs()
        self.assertEqual(
            (first["fun"], first["tgt_type"], first["arg"], sorted(first["minions"])),
            ("test.echo", "list", ["hi"], ["db1", "web1"]),
        )
        self.assertEqual(
            (second["fun"], second["arg"], sorted(second["minions"])),
            (
                "state.single",
                [{"fun": "pkg.installed", "name": "zsh", "__kwarg__": True}],
                ["web1", "web2"],
            ),
        )

    def test_runner(self) -> None:
        """
        C{runner.<fun>} runs the master's runner with C{arg}/C{kwarg}, with
        Salt's C{args} form, or with the old form where other keys are
        keyword arguments; it runs as user C{Reactor}.
        """
        self.writeFile(
            "run.sls",
            "a:\n  runner.test.echo:\n    - arg: [1]\n    - kwarg: {k: {{ data['v'] }}}\n"
            "b:\n  runner.test.echo:\n    - args:\n      - k: 2\n"
            "c:\n  runner.test.echo:\n    - k: 3\n"
            "d:\n  runner.test.echo: []\n",
        )
        self.startReactor([{"x": ["run.sls"]}])
        self.fire("x", {"v": 1})
        returns = [data for tag, data in self.tagged("salt/run/") if tag.endswith("/ret")]
        self.assertEqual(
            [r["return"] for r in returns],
            [
                {"args": [1], "kwargs": {"k": 1}},
                {"args": [], "kwargs": {"k": 2}},
                {"args": [], "kwargs": {"k": 3}},
                {"args": [], "kwargs": {}},
            ],
        )
        self.assertEqual({r["user"] for r in returns}, {REACTOR_USER})

    def test_eventSendSpellings(self) -> None:
        """
        C{runner.event.send} (Salt's runner) fires on the master's bus like
        C{event.send}, with C{tag}/C{data} or the C{args} form.
        """
        self.writeFile(
            "send.sls",
            "a:\n  runner.event.send:\n    - args:\n      - tag: one\n      - data: {x: 1}\n"
            "b:\n  event.send:\n    - tag: two\n",
        )
        self.startReactor([{"x": ["send.sls"]}])
        self.fire("x")
        sent = [(tag, data.get("x")) for tag, data in self.events if tag in ("one", "two")]
        self.assertEqual(sent, [("one", 1), ("two", None)])

    def test_failuresIsolated(self) -> None:
        """
        An action that fails when run (a bad target, a failing runner) is
        reported with its state id and function; the file's other actions
        still run.
        """
        self.master.runners["test.boom"] = lambda context: 1 / 0
        self.writeFile(
            "mixed.sls",
            "bad_target:\n  local.test.ping:\n    - tgt: 'web['\n    - tgt_type: pcre\n"
            "boom:\n  runner.test.boom: []\n"
            "fine:\n  event.send:\n    - tag: still/ran\n",
        )
        reactor = self.startReactor([{"x": ["mixed.sls"]}])
        self.fire("x")
        self.assertEqual(len(self.tagged("still/ran")), 1)
        errors = sorted(self.errors(), key=lambda e: e["id"])
        self.assertEqual(
            [(e["id"], e["fun"]) for e in errors],
            [("bad_target", "local.test.ping"), ("boom", "runner.test.boom")],
        )
        self.assertIn("invalid target", errors[0]["error"])
        self.assertIn("ZeroDivisionError", errors[1]["error"])
        self.assertEqual(reactor.failed, 1)

    def test_malformedFileRunsNothing(self) -> None:
        """
        A file with an unknown action, an unknown runner, an unsupported
        parameter, a missing target, mixed argument forms or a value that
        cannot be sent (YAML reads an unquoted date as a date) runs none of
        its actions, and says what is wrong.
        """
        cases = {
            "wheel.key.accept: []": "unknown action",
            "runner.no.such: []": "'no.such' is not available.",
            "local.test.ping:\n    - tgt: '*'\n    - ret: syslog": "unsupported parameter(s) ret",
            "local.test.ping:\n    - arg: [1]": "needs a 'tgt'",
            "runner.test.echo:\n    - args: [{a: 1}]\n    - arg: [1]": "either 'args'",
            "event.send:\n    - data: {}": "'tag' must be",
            "local.test.ping: {tgt: '*'}": "list of '- key: value' items",
            "event.send:\n    - tag: t\n    - data: {when: 2026-01-02}": "cannot serialise",
        }
        for number, spec in enumerate(cases):
            self.writeFile(
                f"f{number}.sls",
                f"first:\n  event.send:\n    - tag: ran\nsecond:\n  {spec}\n",
            )
        self.startReactor([{"x": [f"f{number}.sls" for number in range(len(cases))]}])
        self.fire("x")
        self.assertEqual(self.tagged("ran"), [])
        errors = self.errors()
        self.assertEqual(len(errors), len(cases))
        for error, expected in zip(errors, cases.values(), strict=True):
            self.assertIn(expected, error["error"])

    def test_noMinionMatched(self) -> None:
        """
        A target that matches no accepted minion publishes nothing and is
        not an error (Salt's reactor does not report it either).
        """
        self.writeFile("none.sls", "a:\n  local.test.ping:\n    - tgt: nobody\n")
        reactor = self.startReactor([{"x": ["none.sls"]}])
        self.fire("x")
        self.assertEqual((self.jobs(), self.errors(), reactor.reacted), ([], [], 1))


class ConfigTests(SynchronousTestCase):
    """
    The C{reactor}, C{reactor_worker_threads} and C{reactor_worker_hwm}
    master options.
    """

    def load(self, **overrides: Any) -> dict[str, Any]:
        """
        Load a master config with C{overrides}.
        """
        root = os.path.abspath(self.mktemp())
        return loadMasterConfig(root, overrides={"root_dir": root, **overrides})

    def test_defaults(self) -> None:
        """
        No reactor by default; Salt's defaults for the bounds.
        """
        config = self.load()
        self.assertEqual(
            (config["reactor"], config["reactor_worker_threads"], config["reactor_worker_hwm"]),
            ([], 10, 10000),
        )

    def test_normalized(self) -> None:
        """
        A single file is accepted for a glob (as in Salt) and stored as a
        list.
        """
        config = self.load(reactor=[{"a/*": "one.sls"}, {"b": ["x.sls", "y.sls"]}])
        self.assertEqual(config["reactor"], [{"a/*": ["one.sls"]}, {"b": ["x.sls", "y.sls"]}])

    def test_invalid(self) -> None:
        """
        Malformed values fail at load, naming the option and what is wrong.
        """
        cases = [
            ({"a": "b"}, "a list of single-key mappings"),
            ([{"a": "x", "b": "y"}], "entry 1 is not a single-key mapping"),
            (["a"], "entry 1 is not a single-key mapping"),
            ([{"a": []}], "has no reaction file"),
            ([{"a": [3]}], "every file must be a non-empty string"),
        ]
        for value, expected in cases:
            error = self.assertRaises(ConfigError, self.load, reactor=value)
            self.assertIn("'reactor'", str(error))
            self.assertIn(expected, str(error))
        self.assertRaises(ConfigError, self.load, reactor_worker_threads=0)
        self.assertRaises(ConfigError, self.load, reactor_worker_hwm="10")


class WiringTests(SynchronousTestCase):
    """
    The master service runs a reactor only when C{reactor} is set.
    """

    def makeService(self, **overrides: Any) -> MasterService:
        """
        A master service under a short temporary root.
        """
        root = tempfile.mkdtemp(prefix="str-")
        self.addCleanup(shutil.rmtree, root, True)
        config = loadMasterConfig(
            root, overrides={"root_dir": root, "interface": "127.0.0.1", **overrides}
        )
        return MasterService(
            config,
            MemoryReactorClock(),
            runBlocking=runSynchronously,
            jobCache=_NullJobCache(),
            useWorkers=False,
        )

    def test_builtWhenConfigured(self) -> None:
        """
        With C{reactor} set, the master service has a reactor child service
        with the configured bounds, subscribed to the master's bus while
        running; without it, none.
        """
        service = self.makeService(
            reactor=[{"salt/minion/*/start": ["r.sls"]}], reactor_worker_threads=3
        )
        reactor = service.getServiceNamed("reactor")
        self.assertIs(reactor, service.reactorService)
        self.assertIs(reactor.master, service.master)
        self.assertEqual((reactor.workers, reactor.highWaterMark), (3, 10000))
        self.assertFalse(reactor.clusterEvents)
        service.startService()
        self.assertTrue(reactor.running)
        self.assertEqual(reactor.filesFor("salt/minion/m/start"), ["r.sls"])
        service.stopService()
        self.assertFalse(reactor.running)
        self.assertIsNone(self.makeService().reactorService)
        self.assertIsNone(buildReactor({"reactor": []}, service.master))

    def test_clusterEventsOption(self) -> None:
        """
        C{reactor_cluster_events: True} makes the reactor react to the
        other masters' events too.
        """
        service = self.makeService(reactor=[{"x": ["r.sls"]}], reactor_cluster_events=True)
        self.assertTrue(service.reactorService.clusterEvents)


class _NullJobCache:
    """
    A job cache that keeps nothing.
    """

    def startPruning(self) -> None:
        pass

    def close(self) -> Deferred[None]:
        return succeed(None)

    def storeJob(self, *args: Any) -> Deferred[None]:
        return succeed(None)

    def storeReturn(self, *args: Any) -> Deferred[None]:
        return succeed(None)
