# -*- test-case-name: tests.integration.test_event_and_logs -*-
"""
Integration tests of C{salttwist-event} and of the daemons' logging: a real
master (and minion) on 127.0.0.1, the real commands, real signals.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.events.fire import fireMasterEvent
from tests.integration.harness import DEADLINE, Cluster, DaemonProcess, sleep, waitFor


def parseEvents(output: str, pretty: bool = False) -> list[tuple[str, Any]]:
    """
    @return: the C{(tag, data)} of each event C{salttwist-event} printed:
        one per line, or with C{pretty} indented over lines ending in a
        C{}} line.
    """
    chunks = [c + "\n}" for c in output.split("\n}\n") if c] if pretty else output.splitlines()
    events = []
    for chunk in chunks:
        tag, _, data = chunk.partition("\t")
        events.append((tag, json.loads(data)))
    return events


class EventCommandTests(TestCase):
    """
    C{salttwist-event} against a real master with presence events and
    statistics on.
    """

    timeout = 120

    async def setUp(self) -> None:
        """
        Start a master that fires presence and statistics events twice a
        second, and one minion.
        """
        self.cluster = Cluster(self)
        self.cluster.writeMasterConfig(
            presence_events=True, loop_interval=0.5, master_stats=True, master_stats_event_iter=0.5
        )
        await self.cluster.startReady(("minion1",))

    def event(self, name: str, *args: str) -> DaemonProcess:
        """
        Start C{salttwist-event -c MASTER_DIR ARGS}.
        """
        return self.cluster.spawn(name, ["salttwist-event", "-c", self.cluster.masterDir, *args])

    async def finished(self, process: DaemonProcess) -> str:
        """
        Wait for C{process} to exit 0.

        @return: its output.
        """
        self.assertTrue(await process.waitForExit(DEADLINE), self.cluster.explain())
        self.assertEqual((process.exitCode, process.signal), (0, None), process.describe())
        return process.output()

    async def test_presence(self) -> None:
        """
        C{--tag salt/presence/present --count 1 --pretty} prints the
        master's next presence event, listing the connected minion, as
        indented JSON, and exits 0.
        """
        process = self.event(
            "presence", "--tag", "salt/presence/present", "--count", "1", "--pretty"
        )
        output = await self.finished(process)
        self.assertIn('\n    "present": [', output)
        [(tag, data)] = parseEvents(output, pretty=True)
        self.assertEqual((tag, data["present"]), ("salt/presence/present", ["minion1"]))

    async def test_stats(self) -> None:
        """
        C{--tag salt/master/stats --count 1} prints a statistics event with
        the worker pool's, the minions' and the event bus's figures.
        """
        output = await self.finished(self.event("stats", "--tag", "salt/master/", "--count", "1"))
        [(tag, data)] = parseEvents(output)
        self.assertEqual(tag, "salt/master/stats")
        self.assertEqual(data["minions"], 1)
        self.assertGreaterEqual(data["events"]["subscribers"], 1)
        self.assertIn("busy", data["workers"])

    async def test_onlyChosenTags(self) -> None:
        """
        With a prefix and a glob, C{--count 3} prints the first three events
        that match one of them, and none of the others fired around them.
        """
        process = self.event(
            "chosen", "--tag", "test/wanted/", "--tag", "test/glob/*/x", "--count", "3"
        )
        sockDir = self.cluster.sockDir
        deadline = time.monotonic() + DEADLINE
        n = 0
        # The command may not be subscribed yet: fire until it has seen three.
        while process.running and time.monotonic() < deadline:
            n += 1
            for tag in ("test/unwanted/1", f"test/wanted/{n}", "test/glob/a/y", "test/glob/a/x"):
                fireMasterEvent(sockDir, tag, {"n": n})
            await sleep(0.2)
        output = await self.finished(process)
        tags = [tag for tag, _ in parseEvents(output)]
        self.assertEqual(len(tags), 3, output)
        for tag in tags:
            self.assertTrue(tag.startswith("test/wanted/") or tag == "test/glob/a/x", output)


class LogFileTests(TestCase):
    """
    The master's log file: JSON lines, and reopened on SIGHUP after a
    rename (what logrotate does).
    """

    timeout = 120

    async def test_sighupReopens(self) -> None:
        """
        With C{log_fmt_json} and C{--log-file}, every line of the file is a
        JSON object. After the file is renamed and the master gets SIGHUP,
        it writes to a new file of the same name and keeps running.
        """
        cluster = Cluster(self)
        cluster.writeMasterConfig(log_fmt_json=True)
        logPath = os.path.join(cluster.baseDir, "log", "master.log")
        master = await cluster.startMaster(
            ["salttwist-master", "-c", cluster.masterDir, "--log-file", logPath]
        )

        def read(path: str) -> str:
            try:
                with open(path, encoding="utf-8") as f:
                    return f.read()
            except FileNotFoundError:
                return ""

        await waitFor(
            lambda: "salttwist master ready" in read(logPath),
            "the ready line",
            context=cluster.logs,
        )
        os.rename(logPath, logPath + ".1")
        master.sendSignal("HUP")
        await waitFor(
            lambda: "reopened" in read(logPath), "the reopened log file", context=cluster.logs
        )
        self.assertTrue(master.running, cluster.logs())
        rotated = [json.loads(line) for line in read(logPath + ".1").splitlines()]
        current = [json.loads(line) for line in read(logPath).splitlines()]
        self.assertIn("salttwist master ready", " ".join(r["message"] for r in rotated))
        # The daemons run Twisted's epoll reactor with the lean dispatch.
        self.assertIn(
            "reactor class: salttwist.leanreactor.LeanEPollReactor.",
            [r["message"] for r in rotated],
        )
        self.assertEqual(current[0]["message"], f"log file {logPath} reopened")
        self.assertEqual(current[0]["level"], "info")
        self.assertEqual(set(current[0]), {"time", "level", "name", "message", "pid"})
        await cluster.stopMaster()
        self.assertEqual(master.exitCode, 0, cluster.logs())
