# -*- test-case-name: tests.integration.test_cluster_pg_restart -*-
"""
The PostgreSQL server of a cluster's job cache and key store restarted
while a job runs (issue 23, docs/cluster.md "PostgreSQL restarted during a
job"):

Two real masters (the installed wheel's daemons), A and B, in one cluster
through the machine's NATS JetStream server (a cluster id, so a stream and
subjects, of the test's own), with their keys (C{keys.cache_driver:
postgres}) and their job cache (C{master_job_cache: pgjsonb}) on a private
PostgreSQL server this test makes, stops and starts again
(L{tests.test_jobcache_pg_restart.PrivateServer}: never the machine's
own), and one key pair shared by both. L{MINIONS} simulated minions (the
real minion stack of the benchmark swarm, C{benchmarks/swarmlib.py}, in
this process), half of them on A and half on B.

Twice, once with a fast shutdown of the server and once with an immediate
one (a crash: the start recovers from the WAL), a C{test.sleep} job to
every minion is published (through A's CLI, then through B's), and while
every minion runs it the server is stopped, kept down while the returns
come in, then started again. Checked each time:

  - while the server is down, a new job is refused at once with an error
    naming the job cache and its server (no traceback), and the masters
    answer returns "return not stored", which the minions send again;
  - once it is back, every (jid, minion) return is in the job cache exactly
    once and was fired once on each master's bus, the CLI that published
    the job (on B: with A's minions' returns through the broker) reports
    every minion's C{True}, a new job is taken, and each master has logged
    the lost connection and the reconnection. The CLI's timeout is
    shorter than the job, so its C{saltutil.find_job} (a new job) is
    refused while the server is down: it keeps waiting.

The timeline is printed, never asserted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import TestCase

from benchmarks.swarmlib import (
    Swarm,
    ensureKeys,
    minionIdFor,
)
from salttwist import crypt
from tests._installed import installedCopy
from tests._nats import deleteStreamAfter, newClusterId, requireServer, serverUrl
from tests.integration.clusterswarm import (
    KEYS_DIR,
    acceptInDatabase,
    copyClusterKey,
    runSwarms,
    shareVerification,
    storedReturns,
)
from tests.integration.harness import Cluster, seedKeyPair, sleep, waitFor
from tests.test_jobcache_pg_restart import PrivateServer

#: How many simulated minions.
MINIONS = int(os.environ.get("SALTTWIST_PG_RESTART_MINIONS", "300"))
#: How long the job sleeps: long enough for the server to be down before
#: the first return comes.
SLEEP = 4
#: Seconds the server stays down at least (from the stop's start); it stays
#: down longer if the returns have not all come by then.
DOWN = 6.0
CONNECTED = "cluster: connected to the broker"
PREFIX = "pgr-"
#: What a minion logs when its master answered "return not stored".
NOT_STORED_WARNING = "the master could not store the return"
#: Seconds for the job cache to reconnect and the returns sent again to be
#: stored: the job cache's back-off (doubling from 0.5 s) and the minions'
#: back-off for a refused return (the first wait 2.5 to 5 s, doubling up to
#: 60 s: see salttwist.minion.returns).
RECOVERY = 90.0


class PostgresRestartedDuringJobTests(TestCase):
    """
    The PostgreSQL server restarted while a job runs, with a fast and with
    an immediate shutdown.
    """

    timeout = 400

    def logs(self) -> str:
        return f"== master A ==\n{self.a.logs()}\n== master B ==\n{self.b.logs()}"

    async def startMasters(self) -> None:
        """
        Make the private server, accept every swarm minion's key there, and
        start B, then A (with the cluster key B made, as an admin copies
        it), both on it and on the machine's broker.
        """
        url = serverUrl()
        await requireServer(self, url)
        self.server = PrivateServer(self)
        await self.server.create()
        database = self.server.options()
        self.database = database
        clusterId = newClusterId()
        deleteStreamAfter(self, url, clusterId)
        postgres = {
            "host": database["host"],
            "port": int(database["port"]),
            "user": database["user"],
            "db": database["dbname"],
            "connect_timeout": 2,
        }
        common: dict[str, Any] = {
            "cluster_id": clusterId,
            "cluster_broker": url,
            "keys.cache_driver": "postgres",
            "master_job_cache": "pgjsonb",
            **{f"keys.postgres.{k}": v for k, v in postgres.items()},
            **{f"returner.pgjsonb.{k}": v for k, v in postgres.items()},
        }
        made = time.monotonic()
        ensureKeys(KEYS_DIR, MINIONS)
        acceptInDatabase(database, PREFIX, MINIONS)
        accepted = time.monotonic()
        self.a, self.b = Cluster(self), Cluster(self)
        for name, cluster in (("b", self.b), ("a", self.a)):
            cluster.writeMasterConfig(cluster_master_id=f"master-{name}", **common)
            # One key pair for both masters: the minions pin it once.
            self.masterPub = seedKeyPair(cluster.masterPkiDir, "master", "pg-cluster")
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
        self.setupTimes = (made, accepted)

    def startSwarm(self) -> None:
        """
        Start the minions: the even ones on A, the odd ones on B.
        """
        from twisted.internet import reactor

        shareVerification(self)
        assert self.a.ports is not None and self.b.ports is not None
        swarms = [
            Swarm(
                reactor,
                os.path.join(self.a.baseDir, f"swarm{share}"),
                KEYS_DIR,
                list(range(share, MINIONS, 2)),
                "127.0.0.1",
                cluster.ports["ret_port"],
                idPrefix=PREFIX,
                configOverrides={"recon_default": 200, "recon_max": 1000},
                masterPub=crypt.canonicalPublicPem(self.masterPub),
            )
            for share, cluster in ((0, self.a), (1, self.b))
            if cluster.ports is not None
        ]

        self.minions = runSwarms(self, swarms)

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """
        @return: the rows of C{sql} in the test's database (blocking: the
            server answers at once on the loopback).
        """
        import psycopg

        with psycopg.connect(**self.database) as connection:
            return connection.execute(sql, args).fetchall()

    def storedReturns(self, jid: str) -> tuple[int, int]:
        """
        @return: how many rows the job cache holds for C{jid}'s returns,
            and for how many distinct minions.
        """
        return storedReturns(self.database, jid)

    def newJid(self, known: set[str]) -> str | None:
        """
        @return: the jid of a job in the job cache that is not in C{known},
            if there is one.
        """
        rows = self.query("SELECT jid FROM salttwist_jobs")
        fresh = [jid for (jid,) in rows if jid not in known]
        return fresh[0] if fresh else None

    def rss(self) -> str:
        """
        @return: the masters' resident and peak memory, from C{/proc}.
        """
        shown = []
        for name, cluster in (("A", self.a), ("B", self.b)):
            assert cluster.master is not None
            with open(f"/proc/{cluster.master.pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            shown.append(f"{name} {fields['VmRSS'].strip()} (peak {fields['VmHWM'].strip()})")
        return ", ".join(shown)

    async def restartDuringJob(self, mode: str, through: Cluster, known: set[str]) -> str:
        """
        Publish a C{test.sleep} to every minion through C{through}'s CLI,
        stop the server with C{pg_ctl stop -m mode} while the minions run
        it, check that a new job is refused, start the server again once
        the returns have come and it was down L{DOWN} seconds, and check
        that every return is stored once and the CLI reports them all.

        @param known: the jids of the jobs published before.
        @return: the timeline, to print.
        """
        marks = {
            name: len(c.master.output()) for name, c in (("A", self.a), ("B", self.b)) if c.master
        }
        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

        def notStoredWarnings() -> list[str]:
            return [e["jid"] for e in logged if NOT_STORED_WARNING in e.get("log_format", "")]

        # A timeout shorter than the job: the CLI asks the silent minions
        # with saltutil.find_job, a new job, while the server is down.
        cli: Deferred[Any] = Deferred.fromCoroutine(
            through.salt("*", "test.sleep", str(SLEEP), "--out", "json", "--static", "-t", "2")
        )
        cliDone: list[float] = []
        cli.addCallback(lambda result: cliDone.append(time.monotonic()) or result)
        jid = await waitFor(
            lambda: self.newJid(known), "the job in the job cache", context=self.logs
        )
        known.add(jid)
        await waitFor(
            lambda: all(jid in m.executor.context.running for m in self.minions),
            "every minion running the job",
            context=lambda: (
                f"{sum(jid in m.executor.context.running for m in self.minions)} running\n"
                + self.logs()
            ),
        )
        storedBefore = self.storedReturns(jid)[0]
        stopping = time.monotonic()
        await self.server.stop(mode)
        stopped = time.monotonic()

        # A new job while the server is down: refused at once, saying why.
        refused = await through.salt("*", "test.ping", "--out", "json", "--static", "-t", "10")
        refusedAfter = time.monotonic() - stopped
        shown = refused.err + refused.out
        self.assertNotEqual(refused.code, 0, f"{refused}\n{self.logs()}")
        self.assertIn("job refused: the job cache could not store it", shown, str(refused))
        self.assertIn(f"127.0.0.1:{self.server.port}", shown, str(refused))
        self.assertNotIn("Traceback", shown, str(refused))

        await waitFor(
            lambda: not any(jid in m.executor.context.running for m in self.minions),
            "every minion done with the job",
            context=self.logs,
        )
        finished = time.monotonic()
        await sleep(max(0.0, stopping + DOWN - finished))
        refusedReturns = notStoredWarnings().count(jid)
        starting = time.monotonic()
        await self.server.start()
        started = time.monotonic()

        await waitFor(
            lambda: self.storedReturns(jid)[0] >= MINIONS,
            "every return in the job cache",
            timeout=RECOVERY,
            context=lambda: f"{self.storedReturns(jid)} stored\n{self.logs()}",
        )
        allStored = time.monotonic()
        self.assertEqual(self.storedReturns(jid), (MINIONS, MINIONS))
        result = await cli
        self.assertEqual(result.code, 0, f"{result}\n{self.logs()}")
        self.assertEqual(
            json.loads(result.out),
            {minionIdFor(PREFIX, i): True for i in range(MINIONS)},
            self.logs(),
        )
        # The returns arrived while the server was down: they were answered
        # "return not stored", and sent again.
        self.assertGreater(refusedReturns, 0, self.logs())
        resent = notStoredWarnings().count(jid)

        # Each return was fired once on each master's bus (B's or A's
        # through the broker): not again when its copy was stored.
        prefix = f"salt/job/{jid}/ret/"
        for name, watcher in self.watchers.items():
            await waitFor(
                lambda watcher=watcher: (
                    len({t for t in watcher.tags if t.startswith(prefix)}) == MINIONS
                ),
                f"every return on {name}'s bus",
                context=self.logs,
            )
            fired = Counter(t for t in watcher.tags if t.startswith(prefix))
            self.assertEqual(
                [tag for tag, count in fired.items() if count != 1], [], f"on {name}'s bus"
            )

        # Jobs are taken again.
        ping = await through.salt("*", "test.ping", "--out", "json", "--static", "-t", "30")
        self.assertEqual(ping.code, 0, f"{ping}\n{self.logs()}")
        self.assertEqual(
            json.loads(ping.out), {minionIdFor(PREFIX, i): True for i in range(MINIONS)}
        )
        pingJid = self.newJid(known)
        assert pingJid is not None
        known.add(pingJid)

        for name, cluster in (("A", self.a), ("B", self.b)):
            assert cluster.master is not None
            output = cluster.master.output()[marks[name] :]
            for line in ("is unavailable", "reconnected to the PostgreSQL job cache"):
                self.assertIn(line, output, f"master {name}\n{self.logs()}")

        return (
            f"\n  {mode} shutdown, job through {'A' if through is self.a else 'B'}:"
            f" {storedBefore} returns stored before the stop, which took"
            f" {stopped - stopping:.2f}s; a new job refused {refusedAfter:.2f}s after it;"
            f" last return {finished - stopped:.1f}s after it; down {starting - stopping:.1f}s;"
            f"\n    start {started - starting:.2f}s; all {MINIONS} returns stored"
            f" {allStored - started:.1f}s after it; the CLI complete {cliDone[0] - stopped:.1f}s"
            f" after the stop; {refusedReturns} returns answered 'return not stored' while down,"
            f" {resent} in all; masters {self.rss()}"
        )

    async def test_restartDuringJob(self) -> None:
        """
        The server stopped fast while a job through A runs, then stopped
        immediately while a job through B runs: each time a new job is
        refused while it is down, every return is stored once afterwards,
        and the CLI reports them all.
        """
        # The wheel's installation, which every integration run pays once,
        # is not counted.
        installedCopy()
        began = time.monotonic()
        await self.startMasters()
        mastersUp = time.monotonic()
        self.startSwarm()
        assert self.a.ports is not None
        await waitFor(
            lambda: all(m.state == "ready" for m in self.minions),
            f"{MINIONS} minions ready",
            timeout=120,
            context=lambda: (
                f"{sum(m.state == 'ready' for m in self.minions)} ready\n" + self.logs()
            ),
        )
        ready = time.monotonic()
        self.watchers = {"A": await self.a.watchEvents(), "B": await self.b.watchEvents()}
        known: set[str] = set()
        made, accepted = self.setupTimes
        lines = [
            f"\n  server made in {made - began:.1f}s, keys accepted in {accepted - made:.1f}s,"
            f" masters up {mastersUp - accepted:.1f}s later,"
            f" {MINIONS} minions ready {ready - mastersUp:.1f}s later"
        ]
        lines.append(await self.restartDuringJob("fast", self.a, known))
        lines.append(await self.restartDuringJob("immediate", self.b, known))
        lines.append("\n")
        sys.stdout.write("".join(lines))
