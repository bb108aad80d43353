"""
Tests for C{salttwist --progress -b N} on a state run: each batch's job
asks its minions for state events, and the progress shows each minion's
states done while its batch runs.
"""

from __future__ import annotations

import io
from typing import Any

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
