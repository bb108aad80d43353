# -*- test-case-name: tests.integration.test_cluster_faults -*-
"""
A master of a cluster killed (C{kill -9}) while a job to a swarm of
failover minions runs (issue 23, docs/cluster.md "Faults"):

Two real masters (the installed wheel's daemons), A and B, in one cluster
through the machine's NATS JetStream server (a cluster id, so a stream and
subjects, of the test's own), with their keys (C{keys.cache_driver:
postgres}) and their job cache (C{master_job_cache: pgjsonb}) in one
PostgreSQL database of the test's own, and one key pair shared by both.
L{MINIONS} simulated minions (the real minion stack of the benchmark swarm,
C{benchmarks/swarmlib.py}, in this process) list both masters with
C{master_type: failover}, half of them A first and half B first.

A C{test.sleep} job to all of them is published through A's CLI; once
every minion runs it, B gets SIGKILL. B's minions move to A, the returns
they finish meanwhile wait in their return queues and are sent to A, and:

  - A's CLI reports the job complete: every minion returned C{True};
  - the job cache holds every minion's return exactly once;
  - every minion is connected to A again (the time from the kill is
    printed, never asserted).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import TestCase

from benchmarks.swarmlib import (
    Swarm,
    ensureKeys,
    minionIdFor,
)
from salttwist import crypt
from tests._nats import deleteStreamAfter, newClusterId, requireServer, serverUrl
from tests._postgres import temporaryDatabase
from tests.integration.clusterswarm import (
    KEYS_DIR,
    acceptInDatabase,
    copyClusterKey,
    runSwarms,
    shareVerification,
    storedReturns,
)
from tests.integration.harness import Cluster, seedKeyPair, waitFor

#: How many simulated minions.
MINIONS = int(os.environ.get("SALTTWIST_FAULT_MINIONS", "1000"))
#: How long the job sleeps: long enough for every minion to be running it
#: when B is killed, short enough that B's minions finish it while they
#: move to A.
SLEEP = 4
CONNECTED = "cluster: connected to the broker"
PREFIX = "fault-"
#: The failover minions' options: a check of the master every 2 s, and up
#: to 2 s of spread before moving, with a short back-off.
MINION_OPTIONS = {
    "master_type": "failover",
    "master_alive_interval": 2,
    "random_reauth_delay": 2,
    "recon_default": 200,
    "recon_max": 1000,
    "acceptance_wait_time": 0.5,
}


class MasterKilledDuringJobTests(TestCase):
    """
    C{kill -9} of master B while a job published through master A runs.
    """

    timeout = 240

    def logs(self) -> str:
        return f"== master A ==\n{self.a.logs()}\n== master B ==\n{self.b.logs()}"

    async def startMasters(self) -> None:
        """
        Start B, then A (with the cluster key B made, as an admin copies
        it), both on the test's database and the machine's broker, with
        every swarm minion's key accepted in the database.
        """
        url = serverUrl()
        await requireServer(self, url)
        clusterId = newClusterId()
        deleteStreamAfter(self, url, clusterId)
        database = temporaryDatabase(self)
        self.database = database
        postgres = {
            "host": database["host"],
            "port": int(database["port"]),
            "user": database["user"],
            "db": database["dbname"],
        }
        common: dict[str, Any] = {
            "cluster_id": clusterId,
            "cluster_broker": url,
            "keys.cache_driver": "postgres",
            "master_job_cache": "pgjsonb",
            **{f"keys.postgres.{k}": v for k, v in postgres.items()},
            **{f"returner.pgjsonb.{k}": v for k, v in postgres.items()},
        }
        ensureKeys(KEYS_DIR, MINIONS)
        acceptInDatabase(database, PREFIX, MINIONS, KEYS_DIR)
        self.a, self.b = Cluster(self), Cluster(self)
        for name, cluster in (("b", self.b), ("a", self.a)):
            cluster.writeMasterConfig(cluster_master_id=f"master-{name}", **common)
            # One key pair for both masters: the minions pin it once.
            self.masterPub = seedKeyPair(cluster.masterPkiDir, "master", "fault-cluster")
        await self.b.startMaster()
        await copyClusterKey(self.b, self.a, self.logs)
        await self.a.startMaster()
        for cluster in (self.a, self.b):
            master = cluster.master
            assert master is not None
            await waitFor(
                lambda master=master: CONNECTED in master.output(),
                "the master's connection to the broker",
                context=self.logs,
            )

    def startSwarm(self) -> list[Swarm]:
        """
        Start the minions: the even ones list A first, the odd ones B.

        @return: the two swarms.
        """
        from twisted.internet import reactor

        shareVerification(self)
        assert self.a.ports is not None and self.b.ports is not None
        portA, portB = self.a.ports["ret_port"], self.b.ports["ret_port"]
        self.portA, self.portB = portA, portB
        swarms = []
        for share, ports in ((0, (portA, portB)), (1, (portB, portA))):
            swarms.append(
                Swarm(
                    reactor,
                    os.path.join(self.a.baseDir, f"swarm{share}"),
                    KEYS_DIR,
                    list(range(share, MINIONS, 2)),
                    "127.0.0.1",
                    ports[0],
                    idPrefix=PREFIX,
                    configOverrides={
                        "master": [f"127.0.0.1:{port}" for port in ports],
                        **MINION_OPTIONS,
                    },
                    masterPub=crypt.canonicalPublicPem(self.masterPub),
                )
            )

        self.minions = runSwarms(self, swarms)
        return swarms

    def readyOn(self, port: int) -> list[Any]:
        """
        @return: the minions whose session is up on the master of C{port}.
        """
        return [m for m in self.minions if m.state == "ready" and m.masters.current.port == port]

    def storedReturns(self, jid: str) -> tuple[int, int]:
        """
        @return: how many rows the job cache holds for C{jid}'s returns,
            and for how many distinct minions.
        """
        return storedReturns(self.database, jid)

    def publishedJid(self) -> str | None:
        """
        @return: the jid of the job in the job cache, if it is there.
        """
        import psycopg

        with psycopg.connect(**self.database) as connection:
            rows = connection.execute("SELECT jid FROM salttwist_jobs").fetchall()
        return rows[0][0] if rows else None

    async def test_killDuringJob(self) -> None:
        """
        B killed while every minion runs a job published through A: A's
        CLI reports every minion's return, each return is stored once, and
        every minion is on A again.
        """
        began = time.monotonic()
        await self.startMasters()
        mastersUp = time.monotonic()
        self.startSwarm()
        await waitFor(
            lambda: len(self.readyOn(self.portA)) + len(self.readyOn(self.portB)) == MINIONS,
            f"{MINIONS} minions ready",
            timeout=120,
            context=lambda: (
                f"on A {len(self.readyOn(self.portA))}, on B {len(self.readyOn(self.portB))}\n"
                + self.logs()
            ),
        )
        swarmUp = time.monotonic()
        onB = {m.id for m in self.readyOn(self.portB)}
        # Every minion is up: with the spread of the start, some that
        # listed A first may be on B, and the other way round.
        self.assertTrue(onB and len(onB) < MINIONS, f"{len(onB)} minions on B")
        cli: Deferred[Any] = Deferred.fromCoroutine(
            self.a.salt("*", "test.sleep", str(SLEEP), "--out", "json", "--static", "-t", "60")
        )
        jid = await waitFor(self.publishedJid, "the job in the job cache", context=self.logs)
        await waitFor(
            lambda: all(jid in m.executor.context.running for m in self.minions),
            "every minion running the job",
            context=lambda: (
                f"{sum(jid in m.executor.context.running for m in self.minions)} running\n"
                + self.logs()
            ),
        )
        assert self.b.master is not None
        killed = time.monotonic()
        os.kill(self.b.master.pid, 9)
        await self.b.master.ended
        await waitFor(
            lambda: len(self.readyOn(self.portA)) == MINIONS,
            "every minion on A",
            timeout=60,
            context=lambda: f"{len(self.readyOn(self.portA))} on A\n{self.logs()}",
        )
        allOnA = time.monotonic() - killed
        result = await cli
        done = time.monotonic() - killed
        self.assertEqual(result.code, 0, f"{result}\n{self.logs()}")
        returned = json.loads(result.out)
        self.assertEqual(
            returned, {minionIdFor(PREFIX, i): True for i in range(MINIONS)}, self.logs()
        )
        # A's CLI saw the last returns on the bus; their rows follow.
        await waitFor(
            lambda: self.storedReturns(jid)[0] >= MINIONS,
            "every return in the job cache",
            context=lambda: f"{self.storedReturns(jid)} stored\n{self.logs()}",
        )
        self.assertEqual(self.storedReturns(jid), (MINIONS, MINIONS))
        sys.stdout.write(
            f"\n  keys and masters up in {mastersUp - began:.1f}s, the swarm in"
            f" {swarmUp - mastersUp:.1f}s;"
            f"\n  {MINIONS} minions, {len(onB)} on B: all on A {allOnA:.1f}s after kill -9 of B;"
            f" A's CLI complete {done:.1f}s after it\n"
        )
