# -*- test-case-name: tests.test_states_saltmod_batch -*-
"""
Tests for C{batch} and C{subset} in L{salttwist.states.saltmod}'s
C{salt.state} and C{salt.function}: jobs published through a master whose
minions return real events on a real in-memory bus, a few seconds apart
on the real reactor, so the sliding window is seen to hold at most
C{batch} minions at a time.
"""

from __future__ import annotations

import fnmatch
import random
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase

from salttwist.modules import loadFunctions
from salttwist.states import StateContext, loadStates, saltmod
from tests._statectx import runState
from tests.test_states_saltmod import PublishingMaster, stateResult


class ListTargetingMaster(PublishingMaster):
    """
    A L{PublishingMaster} that also targets lists (a batch's or subset's
    jobs), answers C{sys.list_functions}, and records how many minions
    were running a job at once.

    @ivar running: the minions whose job was published and whose return
        was not fired yet.
    @ivar most: the largest size L{running} reached for non-ping jobs.
    """

    def __init__(self, minions: list[str], functions: dict[str, list[str]]) -> None:
        super().__init__(minions)
        self.functions = functions
        self.running: set[str] = set()
        self.most = 0

    def clientPublish(self, proto: Any, load: dict[str, Any]) -> dict[str, Any]:
        if load["tgt_type"] == "list":
            original = load
            load = dict(load, tgt="|".join(load["tgt"]))
        else:
            original = load
        self.published.append(original)
        jid = self.jids.next()
        if original["tgt_type"] == "list":
            targeted = [m for m in self.minions if m in original["tgt"]]
        else:
            targeted = [m for m in self.minions if fnmatch.fnmatch(m, str(load["tgt"]))]
        connected = [m for m in targeted if m in self.subscribers]
        counted = load["fun"] not in ("test.ping", "sys.list_functions")
        for position, minion in enumerate(connected):
            if load["fun"] == "sys.list_functions":
                value, retcode = self.functions.get(minion, []), 0
            else:
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
            if counted:
                self.running.add(minion)
                self.most = max(self.most, len(self.running))
            self.clock.callLater(0.01 * (position + 1), self.returned, counted, jid, minion, event)
        return {"jid": jid, "minions": targeted, "connected": connected}

    def returned(self, counted: bool, jid: str, minion: str, event: dict[str, Any]) -> None:
        if counted:
            self.running.discard(minion)
        self.bus.fire(f"salt/job/{jid}/ret/{minion}", event)


MINIONS = ["web1", "web2", "web3", "web4", "web5"]


class BatchTests(TestCase):
    """
    C{salt.state} and C{salt.function} with C{batch} and C{subset}.
    """

    def setUp(self) -> None:
        self.master = ListTargetingMaster(
            MINIONS,
            {m: ["state.sls", "test.ping"] for m in MINIONS[:4]} | {"web5": ["test.ping"]},
        )
        self.master.responder = lambda minion, load: (
            stateResult() if load["fun"].startswith("state.") else True,
            0,
        )

    def runSalt(self, fun: str, test: bool = False, **kwargs: Any) -> Any:
        ctx = StateContext(
            salt=loadFunctions(),
            opts={},
            test=test,
            states=loadStates(),
            reactor=reactor,
            master=self.master,
            user="alice",
        )
        return runState(f"salt.{fun}", ctx=ctx, **kwargs)

    def jobs(self, fun: str) -> list[dict[str, Any]]:
        return [load for load in self.master.published if load["fun"] == fun]

    @inlineCallbacks
    def test_batch(self) -> Any:
        """
        C{batch: 2}: a ping of the target, then the state run on every
        minion that answered, never more than two at a time, by list
        jobs; the result gathers every minion's.
        """
        ret = yield self.runSalt("state", name="web", tgt="web*", sls="web", batch=2)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(sorted(ret["changes"]["ret"]), MINIONS)
        self.assertEqual(len(self.jobs("test.ping")), 1)
        runs = self.jobs("state.sls")
        self.assertEqual(sorted(m for load in runs for m in load["tgt"]), MINIONS)
        self.assertTrue(all(load["tgt_type"] == "list" for load in runs))
        self.assertLessEqual(max(len(load["tgt"]) for load in runs), 2)
        self.assertEqual(self.master.most, 2)
        self.assertEqual(ret["comment"], f"States ran successfully. Updating {', '.join(MINIONS)}.")

    @inlineCallbacks
    def test_batchPercent(self) -> Any:
        """
        C{batch: '40%'} of five minions is two at a time (rounded up).
        """
        ret = yield self.runSalt("function", name="test.arg", tgt="web*", batch="40%")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(sorted(ret["changes"]["ret"]), MINIONS)
        self.assertEqual(self.master.most, 2)

    @inlineCallbacks
    def test_batchFailure(self) -> Any:
        """
        A minion whose run failed in its batch fails the state, named; a
        minion that did not answer the ping is reported as not returning.
        """
        del self.master.subscribers["web5"]
        self.master.responder = lambda minion, load: (stateResult(result=minion != "web2"), 0)
        ret = yield self.runSalt("state", name="web", tgt="web*", sls="web", batch=1)
        self.assertIs(ret["result"], False)
        self.assertEqual(self.master.most, 1)
        self.assertTrue(ret["comment"].startswith("Run failed on minions: "), ret["comment"])
        self.assertIn("web2", ret["comment"])
        self.assertIn("web5", ret["comment"])
        self.assertEqual(ret["changes"]["ret"]["web5"], False)

    @inlineCallbacks
    def test_badBatch(self) -> Any:
        """
        A batch that is not a size or a percentage fails the state saying
        so, and nothing is published.
        """
        ret = yield self.runSalt("state", name="web", tgt="web*", sls="web", batch="lots")
        self.assertIs(ret["result"], False)
        self.assertIn("batch size must be a whole number >= 1 or a percentage", ret["comment"])
        self.assertEqual(self.master.published, [])

    @inlineCallbacks
    def test_subset(self) -> Any:
        """
        C{subset: 2}: two minions at random among those having the
        function (not web5), in one list job.
        """
        self.patch(saltmod, "_shuffle", random.Random(7).shuffle)
        ret = yield self.runSalt("state", name="web", tgt="web*", sls="web", subset=2)
        self.assertIs(ret["result"], True, ret)
        runs = self.jobs("state.sls")
        self.assertEqual(len(runs), 1)
        chosen = runs[0]["tgt"]
        self.assertEqual(len(chosen), 2)
        self.assertNotIn("web5", chosen)
        self.assertEqual(sorted(ret["changes"]["ret"]), sorted(chosen))
        self.assertEqual(len(self.jobs("sys.list_functions")), 1)

    @inlineCallbacks
    def test_subsetRandom(self) -> Any:
        """
        Different shuffles pick different subsets.
        """
        picked = set()
        for seed in range(6):
            self.patch(saltmod, "_shuffle", random.Random(seed).shuffle)
            self.master.published = []
            yield self.runSalt("function", name="test.ping", tgt="web*", subset=1)
            picked.update(self.jobs("test.ping")[-1]["tgt"])
        self.assertGreater(len(picked), 1)
        self.assertNotIn("web5", picked)

    @inlineCallbacks
    def test_badSubset(self) -> Any:
        """
        A subset that is not a whole number >= 1 fails the state.
        """
        ret = yield self.runSalt("function", name="test.ping", tgt="web*", subset=0)
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["comment"], "subset must be a whole number >= 1, not 0")

    @inlineCallbacks
    def test_testMode(self) -> Any:
        """
        In test mode a batched C{salt.state} passes C{test=True} to every
        batch's run and its changes make the result L{None}.
        """
        ret = yield self.runSalt("state", test=True, name="web", tgt="web*", sls="web", batch=3)
        self.assertIsNone(ret["result"], ret)
        runs = self.jobs("state.sls")
        self.assertTrue(runs)
        self.assertTrue(all(load["arg"][-1]["test"] is True for load in runs))


class _RecordingReactor:
    """
    The real reactor, recording the delays of the calls scheduled through
    it (a batch's places held empty by C{batch_wait}).
    """

    def __init__(self) -> None:
        self.delays: list[float] = []

    def callLater(self, delay: float, f: Any, *args: Any, **kwargs: Any) -> Any:
        self.delays.append(delay)
        return reactor.callLater(delay, f, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(reactor, name)


class BatchWaitFailhardTests(TestCase):
    """
    C{batch_wait} and C{failhard} of a batched C{salt.state} and
    C{salt.function}, as Salt 3008's batch takes them.
    """

    def setUp(self) -> None:
        self.master = ListTargetingMaster(MINIONS, {})
        self.master.responder = lambda minion, load: (stateResult(), 0)
        self.reactor = _RecordingReactor()
        self.order: list[tuple[str, Any]] = []
        published, returned = self.master.clientPublish, self.master.returned

        def recordPublish(proto: Any, load: dict[str, Any]) -> dict[str, Any]:
            if load["fun"] != "test.ping":
                self.order.append(("publish", (list(load["tgt"]), self.master.clock.seconds())))
            return published(proto, load)

        def recordReturn(counted: bool, jid: str, minion: str, event: dict[str, Any]) -> None:
            if counted:
                self.order.append(("return", (minion, self.master.clock.seconds())))
            returned(counted, jid, minion, event)

        self.master.clientPublish = recordPublish  # type: ignore[method-assign]
        self.master.returned = recordReturn  # type: ignore[method-assign]

    def runSalt(self, fun: str, opts: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        ctx = StateContext(
            salt=loadFunctions(),
            opts=opts or {},
            test=False,
            states=loadStates(),
            reactor=self.reactor,
            master=self.master,
            user="alice",
        )
        return runState(f"salt.{fun}", ctx=ctx, **kwargs)

    def runs(self, fun: str = "state.sls") -> list[list[str]]:
        return [load["tgt"] for load in self.master.published if load["fun"] == fun]

    @inlineCallbacks
    def test_batchWait(self) -> Any:
        """
        C{batch_wait: 0.2} with C{batch: 1}: each returned minion's place
        stays empty 0.2 seconds before the next minion starts.
        """
        ret = yield self.runSalt(
            "state", name="web", tgt="web*", sls="web", batch=1, batch_wait=0.2
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(self.runs(), [[m] for m in MINIONS])
        self.assertEqual(self.reactor.delays.count(0.2), len(MINIONS) - 1)
        for (kind, (_minion, returnedAt)), (nextKind, (_chunk, publishedAt)) in zip(
            self.order[1::2], self.order[2::2], strict=False
        ):
            self.assertEqual((kind, nextKind), ("return", "publish"))
            self.assertGreaterEqual(publishedAt - returnedAt, 0.2)

    @inlineCallbacks
    def test_batchWaitFromConfig(self) -> Any:
        """
        Without the argument, the C{batch_wait} option is used (Salt's
        batch reads it from the master's options).
        """
        ret = yield self.runSalt(
            "function", opts={"batch_wait": 0.15}, name="test.ping", tgt="web*", batch=2
        )
        self.assertIs(ret["result"], True, ret)
        self.assertIn(0.15, self.reactor.delays)

    @inlineCallbacks
    def test_noBatchWait(self) -> Any:
        """
        Without either, no place is held.
        """
        ret = yield self.runSalt("state", name="web", tgt="web*", sls="web", batch=2)
        self.assertIs(ret["result"], True, ret)
        self.assertNotIn(0.0, self.reactor.delays)
        self.assertEqual(sorted(m for chunk in self.runs() for m in chunk), MINIONS)

    @inlineCallbacks
    def test_badBatchWait(self) -> Any:
        """
        A C{batch_wait} that is not a number of seconds >= 0 fails the
        state saying so, and nothing is published.
        """
        for bad in ("soon", -1, True):
            ret = yield self.runSalt(
                "state", name="web", tgt="web*", sls="web", batch=1, batch_wait=bad
            )
            self.assertIs(ret["result"], False)
            self.assertEqual(
                ret["comment"], f"batch_wait must be a number of seconds >= 0, not {bad!r}"
            )
        self.assertEqual(self.master.published, [])

    @inlineCallbacks
    def test_failhard(self) -> Any:
        """
        C{failhard: True} with C{batch: 1}: web2's run fails (retcode 2),
        so no minion starts after it; the comment names the failed minion
        and those that did not run.
        """
        self.master.responder = lambda minion, load: (
            stateResult(result=minion != "web2"),
            2 if minion == "web2" else 0,
        )
        ret = yield self.runSalt("state", name="web", tgt="web*", sls="web", batch=1, failhard=True)
        self.assertIs(ret["result"], False)
        self.assertEqual(self.runs(), [["web1"], ["web2"]])
        self.assertEqual(sorted(ret["changes"]["ret"]), ["web1", "web2"])
        self.assertTrue(ret["comment"].startswith("Run failed on minions: web2"), ret["comment"])
        self.assertIn(
            "failhard stopped the batch run; not run on: web3, web4, web5", ret["comment"]
        )

    @inlineCallbacks
    def test_failhardOption(self) -> Any:
        """
        The C{failhard} option stops a batched C{salt.function} too; the
        minions already running finish.
        """
        self.master.responder = lambda minion, load: (False, 1 if minion == "web1" else 0)
        ret = yield self.runSalt(
            "function", opts={"failhard": True}, name="test.ping", tgt="web*", batch=2
        )
        self.assertIs(ret["result"], False)
        self.assertEqual(self.runs("test.ping")[1:], [["web1", "web2"]])
        self.assertEqual(sorted(ret["changes"]["ret"]), ["web1", "web2"])
        self.assertIn("not run on: web3, web4, web5", ret["comment"])

    @inlineCallbacks
    def test_withoutFailhard(self) -> Any:
        """
        Without C{failhard}, a failed minion does not stop the batch.
        """
        self.master.responder = lambda minion, load: (
            stateResult(result=minion != "web2"),
            2 if minion == "web2" else 0,
        )
        ret = yield self.runSalt("state", name="web", tgt="web*", sls="web", batch=1)
        self.assertIs(ret["result"], False)
        self.assertEqual(self.runs(), [[m] for m in MINIONS])
        self.assertNotIn("failhard", ret["comment"])
