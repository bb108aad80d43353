# -*- test-case-name: tests.integration.test_sigterm_job -*-
"""
SIGTERM while a job runs, on real daemons: the minion takes no new job,
gives running jobs L{salttwist.minion.core.STOP_GRACE} seconds, then sends
their commands SIGTERM and, L{salttwist.minion.core.KILL_GRACE} seconds
later, SIGKILL (their return saying so), keeps every return on disk until
the master has it, and exits 0; after a restart each return reaches the job
cache exactly once. The master, stopped by SIGTERM with a return just
acknowledged, exits 0 with that return in its job cache.
C{saltutil.term_job} sends a job's command SIGTERM, which it may trap.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time

from salttwist.master.service import JOB_CACHE_FILE
from salttwist.minion.core import KILL_GRACE, STOP_GRACE
from tests.integration.harness import runCommand, waitFor
from tests.integration.test_end_to_end import IntegrationTestCase
from tests.integration.test_killjob import running

JID = re.compile(r"\b(\d{20})\b")


class SigtermTests(IntegrationTestCase):
    """
    SIGTERM of the minion and of the master in the middle of a job.
    """

    async def setUp(self) -> None:
        super().setUp()
        await self.cluster.startReady(("minion1",))

    async def publish(self, *args: str) -> str:
        """
        Publish a job with C{--async} and return its jid.
        """
        result = await self.cluster.salt("--async", "minion1", *args)
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        match = JID.search(result.out)
        assert match is not None, self.cluster.explain(result)
        return match.group(1)

    async def waitUntilRunning(self, jid: str) -> None:
        """
        Wait until minion1 has started job C{jid}.
        """
        minion = self.cluster.minions["minion1"]
        await waitFor(
            lambda: f"for job {jid}" in minion.output(),
            f"minion1 to start job {jid}",
            context=self.cluster.logs,
        )

    async def terminateMinion(self, within: float) -> float:
        """
        SIGTERM minion1 and check that it exits 0 within C{within} seconds.

        @return: how long it took.
        """
        minion = self.cluster.minions["minion1"]
        start = time.monotonic()
        minion.sendSignal("TERM")
        exited = await minion.waitForExit(within)
        elapsed = time.monotonic() - start
        self.assertTrue(exited, f"still running after {within}s\n{self.cluster.logs()}")
        await minion.ended
        self.assertEqual((minion.exitCode, minion.signal), (0, None), self.cluster.logs())
        return elapsed

    def storedReturns(self, jid: str) -> list[bytes]:
        """
        @return: the returns of C{jid} in the master's job cache.
        """
        path = os.path.join(self.cluster.masterConfig()["cachedir"], JOB_CACHE_FILE)
        connection = sqlite3.connect(path)
        try:
            rows = connection.execute('SELECT "return" FROM returns WHERE jid = ?', (jid,))
            return [row[0] for row in rows]
        finally:
            connection.close()

    async def lookup(self, jid: str) -> dict[str, object] | None:
        """
        @return: C{salttwist-run jobs.lookup_jid} of C{jid} (JSON), or
            L{None} while it shows no return.
        """
        result = await runCommand(
            [
                "salttwist-run",
                "-c",
                self.cluster.masterDir,
                "--out",
                "json",
                "jobs.lookup_jid",
                jid,
            ]
        )
        if result.code != 0:
            return None
        try:
            value = json.loads(result.out)
        except ValueError:
            return None
        return value if value else None

    def queuedReturns(self) -> list[str]:
        """
        @return: the returns minion1 keeps on disk for the master.
        """
        cachedir = os.path.join(self.cluster.minionDir("minion1"), "var/cache/salttwist/minion")
        try:
            return os.listdir(os.path.join(cachedir, "returns"))
        except FileNotFoundError:
            return []

    async def test_jobFinishesDuringGrace(self) -> None:
        """
        A job that ends within the grace ends normally: the minion exits 0
        once its return is kept, and after a restart the return is in the
        job cache exactly once (its output: the minion waited for it, and
        did not kill it) and nothing is left queued on the minion.
        """
        jid = await self.publish("cmd.run", "sleep 1; echo done")
        await self.waitUntilRunning(jid)
        elapsed = await self.terminateMinion(STOP_GRACE)
        print(f"\nthe minion stopped {elapsed:.2f}s after SIGTERM, its job done")
        self.cluster.startMinion("minion1")
        found = await waitFor(
            lambda: self.lookup(jid), f"the return of {jid}", context=self.cluster.logs
        )
        self.assertEqual(found, {"minion1": "done"})
        await waitFor(
            lambda: not self.queuedReturns(), "an empty returns queue", context=self.cluster.logs
        )
        self.assertEqual(len(self.storedReturns(jid)), 1)

    async def test_jobKilledAfterGrace(self) -> None:
        """
        A job still running when the grace ends is killed: the minion exits
        0 within the grace and a little more, and its return, delivered
        after the restart, says it was killed.
        """
        jid = await self.publish("cmd.run", "sleep 60; echo never")
        await self.waitUntilRunning(jid)
        await self.terminateMinion(STOP_GRACE + 5)
        self.cluster.startMinion("minion1")
        found = await waitFor(
            lambda: self.lookup(jid), f"the return of {jid}", context=self.cluster.logs
        )
        self.assertIn("killed", str(found), found)
        self.assertEqual(len(self.storedReturns(jid)), 1)

    def outFile(self, name: str) -> str:
        """
        @return: the path of C{name} in a directory for the commands' files.
        """
        directory = os.path.join(self.cluster.baseDir, "out")
        os.makedirs(directory, exist_ok=True)
        return os.path.join(directory, name)

    async def startShell(self, script: str) -> tuple[str, int]:
        """
        Publish C{cmd.run} of C{script}, after which the shell starts a
        background C{sleep 300}, writes its pid and waits for it.

        @return: the jid, and the pid of the C{sleep} once written.
        """
        pidFile = self.outFile("sleep.pid")
        jid = await self.publish("cmd.run", f"{script}; sleep 300 & echo $! > {pidFile}; wait")

        def written() -> int | None:
            try:
                with open(pidFile) as f:
                    return int(f.read())
            except (OSError, ValueError):
                return None

        sleep = await waitFor(written, "the job's command to start", context=self.cluster.logs)
        self.addCleanup(lambda: running(sleep) and os.kill(sleep, 9))
        return jid, sleep

    async def test_termJobSendsTerm(self) -> None:
        """
        C{saltutil.term_job} on a C{cmd.run} job sends its command SIGTERM,
        not SIGKILL: the shell's C{trap} on C{TERM} runs and writes its
        marker, the command's C{sleep} is gone, and the job returns that it
        was killed with SIGTERM.
        """
        marker = self.outFile("term")
        jid, sleep = await self.startShell(f"trap 'echo term > {marker}; exit 3' TERM")
        result = await self.cluster.salt("minion1", "saltutil.term_job", jid, "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        self.assertIn("Signal 15 sent", result.out, self.cluster.explain(result))
        await waitFor(lambda: self.lookup(jid), f"the return of {jid}", context=self.cluster.logs)
        self.assertEqual(await self.lookup(jid), {"minion1": "The job was killed with SIGTERM"})
        with open(marker) as f:
            self.assertEqual(f.read(), "term\n")
        await waitFor(lambda: not running(sleep), f"sleep {sleep} to end")

    async def test_stopKillsCommandIgnoringTerm(self) -> None:
        """
        A job whose command ignores SIGTERM when the minion stops gets
        SIGKILL after the grace and L{KILL_GRACE}: the minion exits 0, the
        command's C{sleep} is gone, and the return, delivered after the
        restart, says the job was killed with SIGKILL.
        """
        jid, sleep = await self.startShell("trap '' TERM")
        await self.terminateMinion(STOP_GRACE + KILL_GRACE + 10)
        self.assertIn("sending SIGKILL to job", self.cluster.minions["minion1"].output())
        await waitFor(lambda: not running(sleep), f"sleep {sleep} to end")
        self.cluster.startMinion("minion1")
        found = await waitFor(
            lambda: self.lookup(jid), f"the return of {jid}", context=self.cluster.logs
        )
        self.assertEqual(found, {"minion1": "The job was killed with SIGKILL"})
        self.assertEqual(len(self.storedReturns(jid)), 1)

    async def test_masterKeepsAcknowledgedReturn(self) -> None:
        """
        The master stopped by SIGTERM just after it acknowledged a return
        exits 0, and the return is in its job cache.
        """
        events = await self.cluster.watchEvents()
        jid = await self.publish("cmd.run", "echo quick")
        await waitFor(
            lambda: f"salt/job/{jid}/ret/minion1" in events.tags,
            f"the return event of {jid}",
            context=self.cluster.logs,
        )
        master = self.cluster.master
        assert master is not None
        master.sendSignal("TERM")
        self.assertTrue(await master.waitForExit(10), self.cluster.logs())
        await master.ended
        self.assertEqual((master.exitCode, master.signal), (0, None), self.cluster.logs())
        self.assertEqual(len(self.storedReturns(jid)), 1)
