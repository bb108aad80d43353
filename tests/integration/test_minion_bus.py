# -*- test-case-name: tests.integration.test_minion_bus -*-
"""
Integration test of the minion's own event bus (issue 5): a real master and
minion, C{salttwist-event --node minion} watching the minion's bus, and
C{salttwist-call --local event.fire} firing on it.
"""

from __future__ import annotations

import os
import time

from twisted.trial.unittest import TestCase

from salttwist.config import loadMinionConfig
from salttwist.events import minionEventSockets
from tests.integration.harness import DEADLINE, Cluster, runCommand, sleep, waitFor
from tests.integration.test_event_and_logs import parseEvents


class MinionBusTests(TestCase):
    """
    The minion daemon serves its bus; local commands reach it.
    """

    timeout = 120

    async def test_fireLocal(self) -> None:
        """
        With C{salttwist-event --node minion -c MINION_DIR --count 1 --tag
        myco/} running, C{salttwist-call --local event.fire '{"a": 1}'
        myco/tag} prints C{True}, and the listener prints that event and
        exits 0. Once the minion stops, its socket files are gone.
        """
        cluster = Cluster(self)
        await cluster.startReady(("minion1",))
        minionDir = cluster.minionDir("minion1")
        config = loadMinionConfig(minionDir)
        pubPath, pullPath = minionEventSockets(config["sock_dir"], "minion1")
        await waitFor(
            lambda: os.path.exists(pubPath) and os.path.exists(pullPath),
            "the minion's event sockets",
            context=cluster.logs,
        )
        listener = cluster.spawn(
            "listener",
            [
                "salttwist-event",
                "--node",
                "minion",
                "-c",
                minionDir,
                "--count",
                "1",
                "--tag",
                "myco/",
            ],
        )
        deadline = time.monotonic() + DEADLINE
        # The listener may not be subscribed yet: fire until it has seen one.
        while listener.running and time.monotonic() < deadline:
            result = await runCommand(
                [
                    "salttwist-call",
                    "-c",
                    minionDir,
                    "--local",
                    "--out",
                    "json",
                    "event.fire",
                    '{"a": 1}',
                    "myco/tag",
                ],
                cwd=cluster.baseDir,
            )
            self.assertEqual(result.code, 0, cluster.explain(result))
            self.assertIn("true", result.out, cluster.explain(result))
            await sleep(0.3)
        self.assertTrue(await listener.waitForExit(DEADLINE), cluster.explain())
        self.assertEqual((listener.exitCode, listener.signal), (0, None), listener.describe())
        [(tag, data)] = parseEvents(listener.output())
        self.assertEqual((tag, data["a"]), ("myco/tag", 1))
        await cluster.minions["minion1"].stop()
        self.assertFalse(os.path.exists(pubPath) or os.path.exists(pullPath))

    async def test_noDaemon(self) -> None:
        """
        Without a running minion, C{salttwist-call --local event.fire} fails
        with a message naming the missing socket.
        """
        cluster = Cluster(self)
        await cluster.startMaster()
        cluster.writeMinionConfig("minion1")
        result = await runCommand(
            [
                "salttwist-call",
                "-c",
                cluster.minionDir("minion1"),
                "--local",
                "event.fire",
                '{"a": 1}',
                "myco/tag",
            ],
            cwd=cluster.baseDir,
        )
        self.assertEqual(result.code, 1, cluster.explain(result))
        self.assertIn("no salttwist minion listens on", result.out + result.err)
