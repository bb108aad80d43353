# -*- test-case-name: tests.test_runners_state -*-
"""
Tests for L{salttwist.runners.state} (C{state.orchestrate}): orchestration
SLS files in a real file server's C{file_roots}, compiled and run in a
thread, their C{salt.*} states publishing through a master whose minions
answer on a real bus; and Salt's reactor starting an orchestration.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import reactor, task
from twisted.internet.defer import Deferred, inlineCallbacks, maybeDeferred
from twisted.trial.unittest import TestCase

from salttwist.fileserver.server import FileServer
from salttwist.master.reactor import REACTOR_USER, Reactor
from salttwist.runners import RunnerContext, loadRunners
from salttwist.runners import state as staterunner
from tests.test_states_saltmod import PublishingMaster, stateResult

ORCH = """\
ping:
  salt.function:
    - name: test.ping
    - tgt: 'web*'

deploy:
  salt.state:
    - tgt: 'web*'
    - sls: app
    - require:
      - salt: ping
"""


class OrchestratingMaster(PublishingMaster):
    """
    A L{PublishingMaster} with a file server over temporary C{file_roots},
    its runners, and the runner path the reactor uses.
    """

    def __init__(self, roots: str, minions: list[str]) -> None:
        config = {
            "file_roots": {"base": [roots]},
            "fileserver_backend": ["roots"],
            "id": "testmaster_master",
            "state_auto_order": True,
        }
        super().__init__(minions, config)
        self.fileServer = FileServer.fromConfig(config)
        self.runners = loadRunners()
        self.runnerReturns: list[Any] = []
        self.blockingCalls: list[str] = []

    def runBlocking(self, f: Any, *args: Any, **kwargs: Any) -> Any:
        self.blockingCalls.append(f.__name__)
        return super().runBlocking(f, *args, **kwargs)

    def clientRunner(self, proto: Any, load: dict[str, Any]) -> Deferred[Any]:
        from salttwist.args import parseArgs

        args, kwargs = parseArgs(load.get("arg", []))
        function = self.runners[load["fun"]]
        d = maybeDeferred(function, RunnerContext(self, load.get("user", "root")), *args, **kwargs)
        d.addCallback(lambda value: self.runnerReturns.append(value) or value)
        return d


class OrchestrateTests(TestCase):
    """
    C{state.orchestrate} over a temporary state tree.
    """

    def setUp(self) -> None:
        self.roots = os.path.abspath(self.mktemp())
        os.makedirs(self.roots)
        self.master = OrchestratingMaster(self.roots, ["web1", "web2", "db1"])
        self.master.responder = lambda m, load: (
            (stateResult(), 0) if load["fun"] == "state.sls" else (True, 0)
        )

    def writeSls(self, name: str, text: str) -> None:
        path = os.path.join(self.roots, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def orchestrate(self, *args: Any, **kwargs: Any) -> Deferred[Any]:
        return Deferred.fromCoroutine(
            staterunner.orchestrate(RunnerContext(self.master, "alice"), *args, **kwargs)
        )

    @inlineCallbacks
    def test_orchestrate(self) -> Any:
        """
        The SLS runs on the master: salt.function, then salt.state (which
        requires it); Salt's return shape with the master's id, retcode 0.
        """
        self.writeSls("orch/deploy.sls", ORCH)
        ret = yield self.orchestrate("orch.deploy")
        self.assertEqual(set(ret), {"data", "outputter", "retcode"})
        self.assertEqual((ret["outputter"], ret["retcode"]), ("highstate", 0))
        self.assertEqual(list(ret["data"]), ["testmaster_master"])
        data = ret["data"]["testmaster_master"]
        ping = data["salt_|-ping_|-test.ping_|-function"]
        deploy = data["salt_|-deploy_|-deploy_|-state"]
        self.assertEqual((ping["result"], ping["__run_num__"]), (True, 0))
        self.assertEqual((deploy["result"], deploy["__run_num__"]), (True, 1))
        self.assertEqual(deploy["comment"], "States ran successfully. Updating web1, web2.")
        self.assertEqual(
            [(load["fun"], load["user"]) for load in self.master.published],
            [("test.ping", "alice"), ("state.sls", "alice")],
        )
        # The run, which waits for minions, holds no thread of the pool.
        self.assertEqual(self.master.blockingCalls, ["_prepare"])

    @inlineCallbacks
    def test_requisiteFailure(self) -> Any:
        """
        A failed salt.function stops the salt.state requiring it; retcode 1.
        """
        self.writeSls("orch.sls", ORCH)
        self.master.responder = lambda m, load: (False, 1)
        ret = yield self.orchestrate("orch")
        self.assertEqual(ret["retcode"], 1)
        data = ret["data"]["testmaster_master"]
        self.assertEqual(data["salt_|-ping_|-test.ping_|-function"]["result"], False)
        deploy = data["salt_|-deploy_|-deploy_|-state"]
        self.assertEqual(deploy["result"], False)
        self.assertIn("One or more requisite failed", deploy["comment"])
        self.assertEqual([load["fun"] for load in self.master.published], ["test.ping"])

    @inlineCallbacks
    def test_testMode(self) -> Any:
        """
        C{test=True}: functions are not run; the minions' runs are dry.
        """
        self.writeSls("orch.sls", ORCH)
        ret = yield self.orchestrate("orch", test=True)
        data = ret["data"]["testmaster_master"]
        self.assertIsNone(data["salt_|-ping_|-test.ping_|-function"]["result"])
        self.assertEqual([load["fun"] for load in self.master.published], ["state.sls"])
        self.assertTrue(self.master.published[0]["arg"][1]["test"])

    @inlineCallbacks
    def test_pillarAndJinja(self) -> Any:
        """
        The SLS is rendered with the C{pillar} given to the runner.
        """
        self.writeSls(
            "p.sls",
            "run_it:\n  salt.function:\n    - name: {{ pillar['fun'] }}\n    - tgt: db1\n",
        )
        ret = yield self.orchestrate("p", pillar={"fun": "test.version"})
        self.assertEqual(ret["retcode"], 0, ret)
        self.assertEqual(self.master.published[0]["fun"], "test.version")

    @inlineCallbacks
    def test_masterPillar(self) -> Any:
        """
        The SLS see the master's own pillar (its C{pillar_roots} top for
        the master's id), with the runner's C{pillar} merged over it; a
        pillar that fails to render fails the orchestration with Salt's
        words.
        """
        pillarRoot = os.path.abspath(self.mktemp())
        os.makedirs(pillarRoot)
        with open(os.path.join(pillarRoot, "top.sls"), "w") as f:
            f.write("base:\n  'testmaster_master':\n    - orch\n")
        with open(os.path.join(pillarRoot, "orch.sls"), "w") as f:
            f.write("fun: test.ping\ntgt: db1\n")
        self.master.config["pillar_roots"] = {"base": [pillarRoot]}
        self.writeSls(
            "p.sls",
            "run_it:\n  salt.function:\n    - name: {{ pillar['fun'] }}\n"
            "    - tgt: {{ pillar['tgt'] }}\n",
        )
        ret = yield self.orchestrate("p", pillar={"fun": "test.version"})
        self.assertEqual(ret["retcode"], 0, ret)
        self.assertEqual(
            [(load["fun"], load["tgt"]) for load in self.master.published],
            [("test.version", "db1")],
        )
        with open(os.path.join(pillarRoot, "orch.sls"), "w") as f:
            f.write("fun: [unclosed\n")
        ret = yield self.orchestrate("p")
        self.assertEqual(ret["retcode"], 1)
        errors = ret["data"]["testmaster_master"]
        self.assertEqual(errors[0], "Pillar failed to render with the following messages:")
        self.assertEqual(len(self.master.published), 1)

    @inlineCallbacks
    def test_compileError(self) -> Any:
        """
        An SLS that does not compile: its errors as the data, retcode 1,
        nothing published.
        """
        ret = yield self.orchestrate("missing")
        self.assertEqual(ret["retcode"], 1)
        errors = ret["data"]["testmaster_master"]
        self.assertIsInstance(errors, list)
        self.assertIn("missing", " ".join(errors))
        self.assertEqual(self.master.published, [])

    def test_badPillar(self) -> None:
        """
        A pillar that is not a dictionary is refused with Salt's words.
        """
        d = self.orchestrate("orch", pillar="x")
        failure = self.failureResultOf(d, ValueError)
        self.assertEqual(str(failure.value), "Pillar data must be formatted as a dictionary")

    def test_names(self) -> None:
        """
        The runners load under Salt's names, aliases included.
        """
        runners = loadRunners()
        for name in ("state.orchestrate", "state.orch", "state.sls", "state.orchestrate_single"):
            self.assertIn(name, runners)

    @inlineCallbacks
    def test_orchestrateSingle(self) -> Any:
        """
        C{state.orchestrate_single} runs one orchestration state.
        """
        ret = yield Deferred.fromCoroutine(
            staterunner.orchestrate_single(
                RunnerContext(self.master),
                fun="salt.function",
                name="test.ping",
                tgt="db1",
            )
        )
        self.assertEqual(ret["retcode"], 0)
        (entry,) = ret["data"]["testmaster_master"].values()
        self.assertEqual(entry["changes"], {"ret": {"db1": True}})


class ReactorOrchestrationTests(TestCase):
    """
    Salt's reactor starts an orchestration with C{runner.state.orchestrate}.
    """

    @inlineCallbacks
    def test_reactionOrchestrates(self) -> Any:
        """
        An event runs a reaction whose runner action orchestrates, as the
        reactor's user, with the event's data in its pillar.
        """
        roots = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(roots, "orch"))
        with open(os.path.join(roots, "orch", "new.sls"), "w") as f:
            f.write(
                "greet:\n  salt.function:\n    - name: test.ping\n"
                "    - tgt: {{ pillar['minion'] }}\n"
            )
        master = OrchestratingMaster(roots, ["web1", "web2"])
        reactionDir = os.path.abspath(self.mktemp())
        os.makedirs(reactionDir)
        with open(os.path.join(reactionDir, "start.sls"), "w") as f:
            f.write(
                "orchestrate_new:\n"
                "  runner.state.orchestrate:\n"
                "    - args:\n"
                "      - mods: orch.new\n"
                "      - pillar:\n"
                "          minion: {{ data['id'] }}\n"
            )
        service = Reactor(master, [{"salt/minion/*/start": ["start.sls"]}], reactionDir)
        service.startService()
        self.addCleanup(service.stopService)
        done: Deferred[None] = Deferred()
        master.bus.subscribe(["salt/reactor/error"], lambda tag, data: done.errback(
            AssertionError(f"reaction failed: {data}")
        ))  # fmt: skip
        master.bus.fire("salt/minion/web2/start", {"id": "web2"})
        for _ in range(200):
            if master.runnerReturns:
                break
            yield deferLater(0.05)
        self.assertEqual(len(master.runnerReturns), 1, "the orchestration did not finish")
        (ret,) = master.runnerReturns
        self.assertEqual(ret["retcode"], 0, ret)
        self.assertEqual(
            [(load["fun"], load["tgt"], load["user"]) for load in master.published],
            [("test.ping", "web2", REACTOR_USER)],
        )
        self.assertFalse(done.called)


def deferLater(seconds: float) -> Deferred[None]:
    """
    @return: a L{Deferred} firing after C{seconds} on the global reactor.
    """
    return task.deferLater(reactor, seconds, lambda: None)
