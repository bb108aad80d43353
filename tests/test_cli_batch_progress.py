"""
Tests for C{salttwist --progress -b N} on a state run: each batch's job
asks its minions for state events, and the progress shows each minion's
states done while its batch runs.
"""

from __future__ import annotations

import io
from typing import Any

from twisted.internet.defer import Deferred

from salttwist.cli import salt
from salttwist.client import local
from salttwist.client.base import JobResult
from tests.test_cli_salt import FakeTerminal
from tests.test_cli_state_output import STATES, _prog, _SaltJobBase


class BatchStateProgressTests(_SaltJobBase):
    """
    C{--progress} with C{-b}: a recording bus listener, and a client
    whose ping answers the minions and whose jobs, one per batch, each
    fire their minions' state events then return.
    """

    JIDS = ("3" * 20, "4" * 20, "5" * 20)

    def setUp(self) -> None:
        """
        Replace the bus listener: record the subscriber and its closing.
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

    def batchRun(self, perMinion: dict[str, list[tuple[int, int]]]) -> None:
        """
        Make the client answer the ping with the minions of C{perMinion}
        and run each batch job: publish, fire each minion's C{(run
        number, total)} events, return.
        """
        testCase = self
        jids = iter(self.JIDS)

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
            if fun == "test.ping":
                returns = {m: {"return": True, "retcode": 0} for m in perMinion}
                return JobResult("1" * 20, list(perMinion), returns)
            jid = next(jids)
            if onPublished is not None:
                onPublished(jid, list(tgt))
            for minionId in tgt:
                for runNumber, total in perMinion[minionId]:
                    testCase.onEvent(*_prog(jid, minionId, runNumber, total))
            returns = {}
            for minionId in tgt:
                returns[minionId] = {"return": STATES, "retcode": 0}
                onReturn(minionId, returns[minionId])
            return JobResult(jid, list(tgt), returns)

        self.patch(local.LocalClient, "run", run)

    def test_batchNotTerminal(self) -> None:
        """
        With C{-b 2}, each batch's job gets C{state_events=True}, and the
        states of its minions are counted under their batch's
        announcement; the returns are counted out of every minion.
        """
        self.batchRun({"web1": [(0, 2), (1, 2)], "web2": [(0, 1)], "web3": [(0, 3), (2, 3)]})
        self.runJob(["--progress", "-b", "2", "web*", "state.apply", "web"])
        self.assertEqual(
            self.stderr.getvalue(),
            "Progress: 0/3 returns\n"
            "web1: 1/2 states\n"
            "web1: 2/2 states\n"
            "web2: 1/1 states\n"
            "Progress: 1/3 returns\n"
            "Progress: 2/3 returns\n"
            "web3: 1/3 states\n"
            "web3: 2/3 states\n"
            "Progress: 3/3 returns\n",
        )
        withEvents = ["web", {"state_events": True, "__kwarg__": True}]
        self.assertEqual(
            self.calls,
            [
                ("web*", "test.ping", []),
                (["web1", "web2"], "state.apply", withEvents),
                (["web3"], "state.apply", withEvents),
            ],
        )
        self.assertEqual(self.closed, [True])
        self.assertIn("Executing run on ['web1', 'web2']", self.stdout.getvalue())
        self.assertIn("Executing run on ['web3']", self.stdout.getvalue())

    def test_batchTerminal(self) -> None:
        """
        On a terminal, the live line names the minions of the running
        batch with their states done.
        """
        terminal = FakeTerminal()
        self.patch(salt.sys, "stdout", terminal)
        self.patch(salt.sys, "stderr", terminal)
        self.batchRun({"web1": [(0, 2)], "web2": [(0, 4), (1, 4)]})
        self.runJob(["--progress", "-b", "1", "--out", "json", "web*", "state.sls", "web"])
        text = terminal.getvalue().replace("\x1b[K", "")
        self.assertIn("\rProgress: 0/2 returns; states: web1 1/2", text)
        self.assertIn("\rProgress: 1/2 returns; states: web2 2/4", text)

    def test_otherJobsLeftOut(self) -> None:
        """
        Events of jobs that are not the batches' are not counted; those
        of a batch not yet published are kept until it is, even once
        other batches' jids are known.
        """
        router = salt._StateEvents(salt.StateProgress(io.StringIO()), batches=True)
        router.onEvent(*_prog(self.JIDS[1], "web2", 0, 2))
        router.published(self.JIDS[0])
        router.onEvent(*_prog("9" * 20, "web1", 0, 2))
        router.onEvent(*_prog(self.JIDS[0], "web1", 0, 2))
        self.assertEqual(router.progress.states, {"web1": ({0}, 2)})
        router.published(self.JIDS[1])
        self.assertEqual(router.progress.states, {"web1": ({0}, 2), "web2": ({0}, 2)})
        self.assertEqual([e[0] for e in router.early], ["9" * 20])

    def test_batchOtherFunctions(self) -> None:
        """
        Other functions in batches keep the bar of returns and get no
        state_events; no bus listener is opened.
        """
        self.onEvent = lambda tag, data: None
        self.batchRun({"web1": [], "web2": []})
        self.runJob(["--progress", "-b", "1", "web*", "test.ping"])
        self.assertIn("Progress: [", self.stderr.getvalue())
        self.assertEqual(self.listened, [])


def _states(count: int) -> dict[str, Any]:
    """
    @return: a state run's return naming C{count} states.
    """
    return {
        f"test_|-s{n}_|-s{n}_|-succeed_without_changes": {
            "result": True,
            "comment": "",
            "changes": {},
            "name": f"s{n}",
            "__run_num__": n,
        }
        for n in range(count)
    }


class LateStateEventsTests(_SaltJobBase):
    """
    The state events of a minion come by the master's bus, its return by
    the job's connection: some events come after the last return, and the
    command waits for them (at most L{salt.LATE_EVENTS_WAIT} seconds).
    """

    JID = "6" * 20

    def setUp(self) -> None:
        """
        Replace the bus listener: record the subscriber and its closing.
        """
        super().setUp()
        self.closed: list[bool] = []
        testCase = self

        class Transport:
            def loseConnection(self) -> None:
                testCase.closed.append(True)

        class Listener:
            transport = Transport()

        async def listen(reactor: Any, config: dict[str, Any], onEvent: Any) -> Any:
            self.onEvent = onEvent
            return Listener()

        self.patch(salt, "listenStateEvents", listen)

    def lateRun(self, before: dict[str, int], counts: dict[str, int]) -> None:
        """
        Make every job (one per batch with C{-b}) fire, before its
        minions return, the first C{before[minion]} events of each;
        each minion returns C{counts[minion]} states.
        """
        testCase = self
        jids = iter(str(n) * 20 for n in range(6, 10))

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
            minions = list(counts) if isinstance(tgt, str) else list(tgt)
            if fun == "test.ping":
                returns = {m: {"return": True, "retcode": 0} for m in minions}
                return JobResult("1" * 20, minions, returns)
            jid = next(jids)
            testCase.jids.append(jid)
            onPublished(jid, minions)
            for minionId in minions:
                for n in range(before[minionId]):
                    testCase.onEvent(*_prog(jid, minionId, n, counts[minionId]))
            returns = {}
            for minionId in minions:
                returns[minionId] = {"return": _states(counts[minionId]), "retcode": 0}
                onReturn(minionId, returns[minionId])
            return JobResult(jid, minions, returns)

        self.jids: list[str] = []
        self.patch(local.LocalClient, "run", run)

    def start(self, argv: list[str]) -> Any:
        """
        @return: the Deferred of L{salt.runJob} for C{argv}.
        """
        options = salt.buildParser().parse_args(argv)
        return Deferred.fromCoroutine(salt.runJob(self.reactor, options, self.config))

    def test_lateEventsShown(self) -> None:
        """
        Events that come after the last return are shown: the command
        waits for them, and ends as soon as the last one came, without
        waiting out its bound.
        """
        self.lateRun({"web1": 1, "web2": 0}, {"web1": 2, "web2": 2})
        d = self.start(["--progress", "--out", "quiet", "web*", "state.apply"])
        self.assertNoResult(d)
        self.assertEqual(self.closed, [])
        jid = self.jids[0]
        self.onEvent(*_prog(jid, "web2", 0, 2))
        self.onEvent(*_prog(jid, "web1", 1, 2))
        self.assertNoResult(d)
        self.onEvent(*_prog(jid, "web2", 1, 2))
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(self.closed, [True])
        self.assertEqual(self.reactor.getDelayedCalls(), [])
        err = self.stderr.getvalue()
        self.assertIn("web1: 2/2 states\n", err)
        self.assertIn("web2: 2/2 states\n", err)

    def test_lateEventsBatches(self) -> None:
        """
        With C{-b 1}, the events of the last batch's minion that come
        after its return are shown too.
        """
        self.lateRun({"web1": 2, "web2": 1}, {"web1": 2, "web2": 3})
        d = self.start(["--progress", "-b", "1", "--out", "quiet", "web*", "state.sls", "x"])
        self.assertNoResult(d)
        last = self.jids[-1]
        self.onEvent(*_prog(last, "web2", 1, 3))
        self.onEvent(*_prog(last, "web2", 2, 3))
        self.assertEqual(self.successResultOf(d), 0)
        err = self.stderr.getvalue()
        self.assertIn("web1: 2/2 states\n", err)
        self.assertIn("web2: 3/3 states\n", err)
        self.assertEqual(self.closed, [True])

    def test_boundedWait(self) -> None:
        """
        Events that never come hold the command L{salt.LATE_EVENTS_WAIT}
        seconds at most; it then ends with what it showed.
        """
        self.lateRun({"web1": 1}, {"web1": 3})
        d = self.start(["--progress", "--out", "quiet", "web1", "state.apply"])
        self.reactor.advance(salt.LATE_EVENTS_WAIT - 0.1)
        self.assertNoResult(d)
        self.reactor.advance(0.1)
        self.assertEqual(self.successResultOf(d), 0)
        self.assertIn("web1: 1/3 states\n", self.stderr.getvalue())
        self.assertEqual(self.closed, [True])

    def test_noWaitWithoutStates(self) -> None:
        """
        A return that names no state (a run that did not compile) and a
        complete set of events end the command at once.
        """
        self.lateRun({"web1": 2, "web2": 0}, {"web1": 2, "web2": 0})
        d = self.start(["--progress", "--out", "quiet", "web*", "state.apply"])
        self.assertEqual(self.successResultOf(d), 0)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_stateCount(self) -> None:
        """
        L{salt.stateCount} counts the entries of a state return that carry
        a run number; any other return counts none.
        """
        self.assertEqual(salt.stateCount(_states(4)), 4)
        self.assertEqual(salt.stateCount(["Data failed to compile"]), 0)
        self.assertEqual(salt.stateCount({"a": {"result": True}, "b": "x"}), 0)
        self.assertEqual(salt.stateCount(None), 0)
