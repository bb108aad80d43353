# -*- test-case-name: tests.integration.test_failover -*-
"""
Integration tests of a minion's failover between two real masters
(C{master_type: failover}): the masters share one key pair (as a cluster
does) and one PostgreSQL job cache, and each has the minion's key accepted
in its own C{pki_dir}; the minion lists both.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from tests._postgres import temporaryDatabase
from tests.integration.harness import (
    Cluster,
    EventWatcher,
    runCommand,
    seedKeyPair,
    waitFor,
)

MINION = "failover1"
#: Seconds between the minion's checks that its master answers.
ALIVE_INTERVAL = 2


class FailoverTests(TestCase):
    """
    A minion with C{master: [A, B]} and C{master_type: failover}.
    """

    timeout = 180

    def setUp(self) -> None:
        """
        Two clusters, each one master: A holds the minion's directories.
        """
        self.database = temporaryDatabase(self)
        self.a = Cluster(self)
        self.b = Cluster(self)

    def masterOptions(self, **options: Any) -> dict[str, Any]:
        """
        @return: the options of both masters: the shared job cache, and
            C{options}.
        """
        return {
            "master_job_cache": "pgjsonb",
            "returner.pgjsonb.host": self.database["host"],
            "returner.pgjsonb.port": int(self.database["port"]),
            "returner.pgjsonb.user": self.database["user"],
            "returner.pgjsonb.db": self.database["dbname"],
            **options,
        }

    async def startMasters(self) -> tuple[EventWatcher, EventWatcher]:
        """
        Start both masters, with one key pair and the minion's key accepted
        on each.

        @return: a watcher of each one's bus.
        """
        minionPem = seedKeyPair(self.a.minionPkiDir(MINION), "minion", MINION)
        for cluster in (self.a, self.b):
            cluster.writeMasterConfig(**self.masterOptions())
            seedKeyPair(cluster.masterPkiDir, "master", "master")
            FilesystemKeyStore(cluster.masterPkiDir).putKey(ACCEPTED, MINION, minionPem)
            await cluster.startMaster()
        return await self.a.watchEvents(), await self.b.watchEvents()

    def startMinion(self) -> None:
        """
        Start the minion, A first in its list.
        """
        assert self.a.ports is not None and self.b.ports is not None
        self.a.startMinion(
            MINION,
            master=[
                f"127.0.0.1:{self.a.ports['ret_port']}",
                f"127.0.0.1:{self.b.ports['ret_port']}",
            ],
            master_type="failover",
            master_alive_interval=ALIVE_INTERVAL,
        )

    def logs(self) -> str:
        return "A:\n" + self.a.logs() + "\nB:\n" + self.b.logs()

    async def ping(self, cluster: Cluster) -> None:
        """
        C{test.ping} the minion through C{cluster}'s master: it answers.
        """
        result = await cluster.salt(MINION, "test.ping", "--static", "--out", "json")
        self.assertEqual(result.code, 0, f"{result}\n{self.logs()}")
        self.assertEqual(json.loads(result.out), {MINION: True}, f"{result}\n{self.logs()}")

    async def waitForStart(self, watcher: EventWatcher, count: int = 1) -> None:
        """
        Wait until C{watcher} has seen the minion's start event C{count} times.
        """
        tag = f"salt/minion/{MINION}/start"
        await waitFor(
            lambda: watcher.tags.count(tag) >= count,
            f"{MINION} starting on a master",
            context=self.logs,
        )

    def storedReturns(self, jid: str) -> list[tuple[str, str]]:
        """
        @return: the rows of the shared job cache's returns for C{jid}.
        """
        import psycopg

        with psycopg.connect(**self.database) as connection:
            return connection.execute(
                "SELECT jid, id FROM salttwist_returns WHERE jid = %s", (jid,)
            ).fetchall()

    def storedJobs(self, jid: str) -> list[tuple[str]]:
        """
        @return: the rows of the shared job cache's jobs for C{jid}.
        """
        import psycopg

        with psycopg.connect(**self.database) as connection:
            return connection.execute(
                "SELECT jid FROM salttwist_jobs WHERE jid = %s", (jid,)
            ).fetchall()

    async def test_killFirstMaster(self) -> None:
        """
        A job through A works; after C{kill -9} of A the minion opens its
        session on B, through which a job works.
        """
        watchA, watchB = await self.startMasters()
        self.startMinion()
        await self.waitForStart(watchA)
        await self.ping(self.a)
        assert self.a.master is not None
        killed = time.monotonic()
        self.a.master.sendSignal("KILL")
        await self.a.master.ended
        await self.waitForStart(watchB)
        print(f"\nfailover: on B {time.monotonic() - killed:.2f}s after kill -9 of A")
        await self.ping(self.b)

    async def test_hungFirstMaster(self) -> None:
        """
        A master that keeps its connections but answers nothing (SIGSTOP)
        is left after C{master_alive_interval}: the minion opens its session
        on B.
        """
        watchA, watchB = await self.startMasters()
        self.startMinion()
        await self.waitForStart(watchA)
        assert self.a.master is not None
        stopped = time.monotonic()
        self.a.master.sendSignal("STOP")
        try:
            await self.waitForStart(watchB)
            print(f"\nfailover: on B {time.monotonic() - stopped:.2f}s after SIGSTOP of A")
            await self.ping(self.b)
        finally:
            # Twisted's signalProcess knows no "CONT": the pid is this
            # test's own child.
            assert self.a.master.pid is not None
            os.kill(self.a.master.pid, signal.SIGCONT)

    async def test_returnQueuedWhileNoMasterReplayed(self) -> None:
        """
        A job's return that the minion finished while no master was up (A
        killed while the job ran, B stopped) is kept on disk, and sent to B
        once B is back: B stores it, once, in the job cache the masters
        share, where C{jobs.lookup_jid} on B finds it.
        """
        watchA, watchB = await self.startMasters()
        self.startMinion()
        await self.waitForStart(watchA)
        await self.ping(self.a)
        # B goes away, to come back on the same ports.
        assert self.b.ports is not None and self.b.master is not None
        bPorts = dict(self.b.ports)
        await self.b.stopMaster()
        self.b.writeMasterConfig(
            **self.masterOptions(publish_port=bPorts["publish_port"], ret_port=bPorts["ret_port"])
        )
        published = await self.a.salt(MINION, "test.sleep", "3", "--async")
        self.assertEqual(published.code, 0, f"{published}\n{self.logs()}")
        jid = published.out.strip().split()[-1]
        # A writes the job to the job cache in the background: killed
        # before that, its job is unknown to B, which refuses the return.
        await waitFor(lambda: self.storedJobs(jid), f"job {jid} in the job cache")
        assert self.a.master is not None
        self.a.master.sendSignal("KILL")
        await self.a.master.ended
        queue = os.path.join(self.minionCachedir(), "returns")
        await waitFor(
            lambda: any(name.endswith(f"-{jid}.ret") for name in _listdir(queue)),
            f"the return of {jid} kept on disk",
            context=self.logs,
        )
        started = time.monotonic()
        await self.b.startMaster()
        self.b.ports = await waitFor(lambda: self.b.ports, "B's ports", context=self.logs)
        watchB = await self.b.watchEvents()
        await self.waitForStart(watchB)
        print(f"\nreconnect: on B {time.monotonic() - started:.2f}s after B wrote its ports")
        await waitFor(
            lambda: not any(name.endswith(f"-{jid}.ret") for name in _listdir(queue)),
            f"the return of {jid} delivered",
            context=self.logs,
        )
        self.assertEqual(self.storedReturns(jid), [(jid, MINION)], self.logs())
        looked = await runCommand(
            ["salttwist-run", "-c", self.b.masterDir, "jobs.lookup_jid", jid, "--out", "json"],
            cwd=self.b.baseDir,
        )
        self.assertEqual(looked.code, 0, f"{looked}\n{self.logs()}")
        self.assertEqual(json.loads(looked.out), {MINION: True}, f"{looked}\n{self.logs()}")
        await self.ping(self.b)

    def minionCachedir(self) -> str:
        """
        @return: the minion's C{cachedir}.
        """
        from salttwist.config import loadMinionConfig

        directory = self.a.minionDir(MINION)
        return str(loadMinionConfig(directory, overrides={"root_dir": directory})["cachedir"])


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
