# -*- test-case-name: tests.test_states_saltmod -*-
"""
Tests for L{salttwist.states.saltmod} (Salt's C{salt.state},
C{salt.function}, C{salt.runner}, C{salt.wait_for_event}), run in a
thread as a state run runs them, against a master whose publish answers
with real events on a real in-memory bus (the minions' returns), and
custom runners loaded from a real extension modules directory.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.events.bus import LocalEventBus
from salttwist.jid import JidGenerator
from salttwist.modules import loadFunctions
from salttwist.states import StateContext, loadStates, saltmod
from tests._statectx import runState

Responder = Callable[[str, dict[str, Any]], tuple[Any, int] | None]


class PublishingMaster:
    """
    A master for orchestration states: C{clientPublish} targets the known
    minions by glob and, for each connected one, fires its return on the
    bus shortly after, as the master does when a minion returns.

    @ivar responder: C{(minion, load) -> (return, retcode)}, or L{None}
        for a minion that never returns.
    """

    def __init__(self, minions: list[str], config: dict[str, Any] | None = None) -> None:
        self.bus = LocalEventBus()
        self.clock = reactor
        self.minions = minions
        self.subscribers: dict[str, object] = {m: object() for m in minions}
        self.config = config or {}
        self.published: list[dict[str, Any]] = []
        self.responder: Responder = lambda minion, load: (True, 0)
        self.jids = JidGenerator()

    def clientPublish(self, proto: Any, load: dict[str, Any]) -> dict[str, Any]:
        self.published.append(load)
        jid = self.jids.next()
        targeted = [m for m in self.minions if fnmatch.fnmatch(m, str(load["tgt"]))]
        connected = [m for m in targeted if m in self.subscribers]
        for minion in connected:
            answer = self.responder(minion, load)
            if answer is None:
                continue
            value, retcode = answer
            event = {
                "id": minion,
                "jid": jid,
                "fun": load["fun"],
                "return": value,
                "retcode": retcode,
                "success": retcode == 0,
            }
            self.clock.callLater(0.01, self.bus.fire, f"salt/job/{jid}/ret/{minion}", event)
        return {"jid": jid, "minions": targeted, "connected": connected}

    def runBlocking(self, f: Any, *args: Any, **kwargs: Any) -> Any:
        return deferToThread(f, *args, **kwargs)


def stateResult(changes: bool = True, result: bool = True) -> dict[str, Any]:
    return {
        "file_|-f_|-/x_|-managed": {
            "name": "/x",
            "result": result,
            "comment": "done",
            "changes": {"diff": "new"} if changes else {},
            "__run_num__": 0,
        }
    }


class OrchestrationStateTests(TestCase):
    """
    The C{salt.*} states with a L{PublishingMaster}.
    """

    def setUp(self) -> None:
        self.master = PublishingMaster(["web1", "web2", "db1"])

    def ctx(self, test: bool = False, master: Any = "default") -> StateContext:
        return StateContext(
            salt=loadFunctions(),
            opts={},
            test=test,
            states=loadStates(),
            reactor=reactor,
            master=self.master if master == "default" else master,
            user="alice",
        )

    def runSalt(self, fun: str, test: bool = False, **kwargs: Any) -> Any:
        return runState(f"salt.{fun}", ctx=self.ctx(test), **kwargs)

    @inlineCallbacks
    def test_functionSuccess(self) -> Any:
        """
        C{salt.function} publishes the function with its arguments, as the
        orchestration's user, and reports each minion's return.
        """
        ret = yield self.runSalt("function", name="test.arg", tgt="web*", arg=["a"], kwarg={"k": 1})
        self.assertEqual(ret["result"], True)
        self.assertEqual(ret["changes"], {"ret": {"web1": True, "web2": True}})
        self.assertEqual(
            ret["comment"], "Function ran successfully. Function test.arg ran on web1, web2."
        )
        self.assertEqual(
            self.master.published,
            [
                {
                    "fun": "test.arg",
                    "arg": ["a", {"k": 1, "__kwarg__": True}],
                    "tgt": "web*",
                    "tgt_type": "glob",
                    "user": "alice",
                }
            ],
        )

    @inlineCallbacks
    def test_functionRetcode(self) -> Any:
        """
        A minion whose job failed (retcode) fails the state, named.
        """
        self.master.responder = lambda m, load: ("boom", 1 if m == "web2" else 0)
        ret = yield self.runSalt("function", name="cmd.run", tgt="web*", arg=["false"])
        self.assertEqual(ret["result"], False)
        # Salt joins the two sentences without a full stop.
        self.assertEqual(
            ret["comment"],
            "Running function cmd.run failed on minions: web2 Function cmd.run ran on web1, web2.",
        )

    @inlineCallbacks
    def test_functionFailFunction(self) -> Any:
        """
        C{fail_function} judges each return (here C{test.echo}: an empty
        return fails); C{fail_minions} are excused.
        """
        self.master.responder = lambda m, load: ("ok" if m == "web1" else "", 0)
        ret = yield self.runSalt(
            "function", name="test.ping", tgt="web*", fail_function="test.echo"
        )
        self.assertEqual(ret["result"], False)
        self.assertIn("failed on minions: web2 ", ret["comment"])
        ret = yield self.runSalt("function", name="test.ping", tgt="web*", fail_minions="web2")
        self.assertEqual(ret["result"], True)

    @inlineCallbacks
    def test_functionNoMinions(self) -> Any:
        """
        No minion answering is Salt's C{No minions responded}.
        """
        ret = yield self.runSalt("function", name="test.ping", tgt="nomatch*")
        self.assertEqual((ret["result"], ret["comment"]), (False, "No minions responded"))

    @inlineCallbacks
    def test_functionTestMode(self) -> Any:
        """
        In test mode nothing is published.
        """
        ret = yield self.runSalt("function", test=True, name="test.ping", tgt="*")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (None, "Function test.ping would be executed on target *"),
        )
        self.assertEqual(self.master.published, [])

    @inlineCallbacks
    def test_stateSuccess(self) -> Any:
        """
        C{salt.state} runs C{state.sls} with its arguments; changes by
        minion, Salt's comment.
        """
        self.master.responder = lambda m, load: (stateResult(changes=m == "web1"), 0)
        ret = yield self.runSalt(
            "state", name="deploy", tgt="web*", sls=["app", "web"], pillar={"v": 2}
        )
        self.assertEqual(ret["result"], True)
        self.assertEqual(
            ret["comment"], "States ran successfully. Updating web1. No changes made to web2."
        )
        self.assertEqual(ret["changes"], {"out": "highstate", "ret": {"web1": stateResult()}})
        load = self.master.published[0]
        self.assertEqual(load["fun"], "state.sls")
        self.assertEqual(
            load["arg"],
            [
                "app,web",
                {"pillar": {"v": 2}, "queue": False, "concurrent": False, "__kwarg__": True},
            ],
        )

    @inlineCallbacks
    def test_stateHighstateTest(self) -> Any:
        """
        C{highstate=True} in test mode: the minions run with C{test=True}
        and predicted changes make the result None.
        """
        self.master.responder = lambda m, load: (stateResult(), 0)
        ret = yield self.runSalt("state", test=True, name="all", tgt="db1", highstate=True)
        self.assertIsNone(ret["result"])
        load = self.master.published[0]
        self.assertEqual(load["fun"], "state.highstate")
        self.assertTrue(load["arg"][0]["test"])

    @inlineCallbacks
    def test_stateFailure(self) -> Any:
        """
        A failed state, or compile errors, fail the minion, with Salt's
        details; C{allow_fail} tolerates some.
        """
        self.master.responder = lambda m, load: (
            (stateResult(result=False), 2) if m == "web1" else (["Rendering SLS failed"], 1)
        )
        ret = yield self.runSalt("state", name="deploy", tgt="web*", sls="app")
        self.assertEqual(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            "Run failed on minions: web1, web2\nMinion web2 returned errors: Rendering SLS failed",
        )
        ret = yield self.runSalt("state", name="deploy", tgt="web*", sls="app", allow_fail=2)
        self.assertEqual(ret["result"], True)

    @inlineCallbacks
    def test_stateNotConnected(self) -> Any:
        """
        A targeted minion that is not connected did not return.
        """
        del self.master.subscribers["db1"]
        self.master.responder = lambda m, load: (stateResult(), 0)
        ret = yield self.runSalt("state", name="deploy", tgt="*", sls="app")
        self.assertEqual(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            "Run failed on minions: db1\n"
            "Minion db1 returned 'Minion did not return. [Not connected]' instead of a "
            "state result.",
        )

    @inlineCallbacks
    def test_stateTimeout(self) -> Any:
        """
        A minion that does not return within C{timeout} failed.
        """
        self.master.responder = lambda m, load: None if m == "web2" else (stateResult(), 0)
        ret = yield self.runSalt("state", name="deploy", tgt="web*", sls="app", timeout=0.3)
        self.assertEqual(ret["result"], False)
        self.assertIn("Minion did not return. [No response]", ret["comment"])

    @inlineCallbacks
    def test_stateMinionDisconnects(self) -> Any:
        """
        Without a timeout, a minion that disconnects is not waited for.
        """
        self.patch(saltmod, "PRESENCE_CHECK_INTERVAL", 0.05)
        self.master.responder = lambda m, load: None if m == "web2" else (stateResult(), 0)
        reactor.callLater(0.2, self.master.subscribers.pop, "web2")
        ret = yield self.runSalt("state", name="deploy", tgt="web*", sls="app")
        self.assertEqual(ret["result"], False)
        self.assertIn(
            "Minion web2 returned 'Minion did not return. [Not connected]'", ret["comment"]
        )

    @inlineCallbacks
    def test_stateNothing(self) -> Any:
        """
        Neither C{sls} nor C{highstate}: Salt's comment, nothing published.
        """
        ret = yield self.runSalt("state", name="x", tgt="*")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "No highstate or sls specified, no execution made"),
        )
        self.assertEqual(self.master.published, [])

    @inlineCallbacks
    def test_runner(self) -> Any:
        """
        C{salt.runner} runs a runner (here a custom one synced to the
        master) with the state's arguments; an C{Error} return or an
        exception fails it.
        """
        ext = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(ext, "runners"))
        with open(os.path.join(ext, "runners", "orchtest.py"), "w") as f:
            f.write(
                "def add(a, b=1):\n    return a + b\n\n"
                "def err():\n    return {'Error': 'bad'}\n\n"
                "def boom():\n    raise RuntimeError('kaput')\n"
            )
        self.master.config = {"extension_modules": ext}
        ret = yield self.runSalt("runner", name="orchtest.add", a=2, b=3, require=[{"x": "y"}])
        self.assertEqual(
            ret,
            {
                "name": "orchtest.add",
                "result": True,
                "changes": {"return": 5},
                "comment": "Runner function 'orchtest.add' executed.",
            },
        )
        ret = yield self.runSalt("runner", name="orchtest.err")
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, "Runner function 'orchtest.err' failed.")
        )
        ret = yield self.runSalt("runner", name="orchtest.boom")
        self.assertEqual(ret["result"], False)
        self.assertIn("kaput", ret["changes"]["return"])
        ret = yield self.runSalt("runner", name="nosuch.runner")
        self.assertEqual(ret["changes"], {"return": "'nosuch.runner' is not available."})
        ret = yield self.runSalt("runner", test=True, name="orchtest.add", a=1)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (None, "Runner function 'orchtest.add' would be executed."),
        )

    @inlineCallbacks
    def test_waitForEvent(self) -> Any:
        """
        C{salt.wait_for_event} waits for an event per id (in the data or
        the data's C{data}); events not matching the glob are ignored.
        """
        bus = self.master.bus
        reactor.callLater(0.1, bus.fire, "app/ready", {"id": "web1"})
        reactor.callLater(0.15, bus.fire, "other/ready", {"id": "web2"})
        reactor.callLater(0.2, bus.fire, "app/ready", {"data": {"id": "web2"}})
        ret = yield self.runSalt(
            "wait_for_event", name="app/*", id_list=["web1", "web2"], timeout=5
        )
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(ret["changes"], {"minions_seen": ["web1", "web2"]})
        self.assertTrue(ret["comment"].startswith("All events seen in "))

    @inlineCallbacks
    def test_waitForEventTimeout(self) -> Any:
        """
        Not every id seen within C{timeout}: Salt's C{Timeout value reached.}
        """
        reactor.callLater(0.05, self.master.bus.fire, "app/ready", {"id": "web1"})
        ret = yield self.runSalt(
            "wait_for_event", name="app/ready", id_list=["web1", "web2"], timeout=0.3
        )
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (False, "Timeout value reached.", {"minions_seen": ["web1"]}),
        )

    @inlineCallbacks
    def test_argsEvent(self) -> Any:
        """
        Before publishing, Salt's C{salt/run/<orchestration jid>/args}
        event says what.
        """
        events: list[tuple[str, dict[str, Any]]] = []
        self.master.bus.subscribe(["salt/run/"], lambda tag, data: events.append((tag, data)))
        ctx = self.ctx()
        ctx.jid = "20261126010203123456"
        ctx.low = {"name": "test.ping"}
        ret = yield runState("salt.function", ctx=ctx, name="test.ping", tgt="db1")
        self.assertEqual(ret["result"], True)
        ((tag, data),) = events
        self.assertEqual(tag, "salt/run/20261126010203123456/args")
        self.assertEqual(
            {k: data[k] for k in ("type", "tgt", "name")},
            {"type": "function", "tgt": "db1", "name": "test.ping"},
        )

    @inlineCallbacks
    def test_noMaster(self) -> Any:
        """
        On a minion (no master), the states fail saying why.
        """
        ctx = self.ctx(master=None)
        ret = yield runState("salt.function", ctx=ctx, name="test.ping", tgt="*")
        self.assertEqual(ret["result"], False)
        self.assertIn("runs only in an orchestration on the master", ret["comment"])

    @inlineCallbacks
    def test_ssh(self) -> Any:
        """
        C{ssh: True} fails C{salt.state} and C{salt.function}, saying that
        salttwist has no salt-ssh, before anything is published (on a
        minion too: the missing salt-ssh is the problem named).
        """
        for fun, kwargs in (("state", {"sls": "web"}), ("function", {})):
            ret = yield self.runSalt(fun, name="test.ping", tgt="web*", ssh=True, **kwargs)
            self.assertIs(ret["result"], False)
            self.assertEqual(
                ret["comment"],
                f"salt.{fun}: ssh: True is not supported: salttwist has no salt-ssh (no roster, "
                "no agentless runs); it reaches only minions connected to the master, so leave "
                "ssh out and run salttwist-minion on the targets",
            )
        ctx = self.ctx(master=None)
        ret = yield runState("salt.state", ctx=ctx, name="x", tgt="*", sls="web", ssh=True)
        self.assertIn("salttwist has no salt-ssh", ret["comment"])
        self.assertEqual(self.master.published, [])

    @inlineCallbacks
    def test_top(self) -> Any:
        """
        C{top} (Salt's C{state.top}) fails C{salt.state}, naming what to use.
        """
        ret = yield self.runSalt("state", name="x", tgt="web*", top="other_top.sls")
        self.assertIs(ret["result"], False)
        self.assertIn("top is not supported by salttwist", ret["comment"])
        self.assertEqual(self.master.published, [])


class LoadedFunctionsTests(TestCase):
    """
    Only Salt's orchestration states are loaded from C{saltmod}, not its
    helpers.
    """

    def test_onlySaltsStates(self) -> None:
        """
        The C{salt} state module offers C{state}, C{function}, C{runner} and
        C{wait_for_event}; its helpers (publishing, waiting for events) are
        not state functions an SLS could name.
        """
        names = sorted(name for name in loadStates() if name.startswith("salt."))
        self.assertEqual(
            names, ["salt.function", "salt.runner", "salt.state", "salt.wait_for_event"]
        )
