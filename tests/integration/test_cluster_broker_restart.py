# -*- test-case-name: tests.integration.test_cluster_broker_restart -*-
"""
The cluster's broker restarted while the returns of a job flow between
the masters (issue 23: "Restart of the broker ... during a job: masters
reconnect with back-off, buffer in bounded memory ..., and nothing
acknowledged is lost"; docs/cluster.md "The broker restarted during a
job").

Two real masters (the installed wheel's daemons), A and B, in one cluster
through a private C{nats-server} with JetStream that this test starts,
stops and starts again by its pid (its file store, a directory of the
test's, kept across the restart; never the machine's server). L{MINIONS}
simulated minions (the benchmark swarm's real minion stack, in this
process) are connected to B only. A C{test.rand_sleep} job to all of them
is published through A's CLI, so their returns reach B over several
seconds; once a fifth of them have returned, the broker is stopped
(SIGTERM, or SIGKILL), kept down L{DOWN} seconds while B takes (and
acknowledges to the minions) more returns, then started again. Then:

  - A's CLI prints every minion's return exactly once, each C{True};
  - A's bus fired each minion's return exactly once;
  - A's job cache holds each (jid, minion) once: with each master's own
    SQLite job cache, the returns B took while the broker was down reached
    A through B's outbox after the restart; with one PostgreSQL job cache
    for both, B stored them;
  - both masters logged the lost broker and their reconnection, after
    retries with back-off.

The timeline is printed, never asserted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import sys
import time
from collections import Counter
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import TestCase

from benchmarks.swarmlib import (
    Swarm,
    acceptKeys,
    ensureKeys,
    minionIdFor,
)
from salttwist import crypt
from salttwist.master.service import JOB_CACHE_FILE
from tests._nats import PrivateNatsServer, newClusterId
from tests._postgres import temporaryDatabase
from tests.integration.clusterswarm import (
    KEYS_DIR,
    acceptInDatabase,
    copyClusterKey,
    runSwarms,
    shareVerification,
    storedReturns,
)
from tests.integration.harness import Cluster, seedKeyPair, sleep, waitFor

#: How many simulated minions, all on master B.
MINIONS = int(os.environ.get("SALTTWIST_BROKER_RESTART_MINIONS", "300"))
#: The job's longest sleep: its returns come over this many seconds.
SPREAD = 8
#: Seconds the broker stays down.
DOWN = 3.0
PREFIX = "restart-"
CONNECTED = "cluster: connected to the broker"
LOST = "cluster: lost the broker"
RETRY = re.compile(r"Scheduling retry (\d+) to connect .*? in ([0-9.]+) seconds")
AFTER = re.compile(re.escape(CONNECTED) + r" \S+ \(after ([0-9.]+) s\)")


class _Broker(PrivateNatsServer):
    """
    The private C{nats-server}, also ended by a signal of the test's choice.
    """

    async def kill(self, signum: int) -> None:
        """
        Send C{signum} to the server's pid and wait for its exit.
        """
        assert self._protocol is not None
        self._process.signalProcess(signum)
        await self._protocol.ended


class BrokerRestartDuringReturnsTests(TestCase):
    """
    The broker stopped and started again while the returns of a job
    published through A come in on B.
    """

    timeout = 300

    def logs(self) -> str:
        return f"== master A ==\n{self.a.logs()}\n== master B ==\n{self.b.logs()}"

    async def startMasters(self, url: str, shared: bool, **options: Any) -> None:
        """
        Start B, then A (with the cluster key B made, as an admin copies
        it), on broker C{url}, every swarm minion's key accepted on both.

        @param shared: one PostgreSQL database (of the test's own) for
            both masters' keys and job cache; else each master has its own
            key directory and SQLite job cache.
        @param options: more options for both masters.
        """
        common: dict[str, Any] = {
            "cluster_id": newClusterId(),
            "cluster_broker": url,
            # The broker is away for DOWN seconds: jobs are still taken.
            "cluster_unreachable_limit": 60,
            **options,
        }
        ensureKeys(KEYS_DIR, MINIONS)
        self.database: dict[str, Any] | None = None
        if shared:
            database = temporaryDatabase(self)
            self.database = database
            postgres = {
                "host": database["host"],
                "port": int(database["port"]),
                "user": database["user"],
                "db": database["dbname"],
            }
            common.update(
                {
                    "keys.cache_driver": "postgres",
                    "master_job_cache": "pgjsonb",
                    **{f"keys.postgres.{k}": v for k, v in postgres.items()},
                    **{f"returner.pgjsonb.{k}": v for k, v in postgres.items()},
                }
            )
            acceptInDatabase(database, PREFIX, MINIONS, KEYS_DIR)
        self.a, self.b = Cluster(self), Cluster(self)
        ids = [(i, minionIdFor(PREFIX, i)) for i in range(MINIONS)]
        for name, cluster in (("b", self.b), ("a", self.a)):
            cluster.writeMasterConfig(cluster_master_id=f"master-{name}", **common)
            self.masterPub = seedKeyPair(cluster.masterPkiDir, "master", "restart-cluster")
            if not shared:
                acceptKeys(cluster.masterPkiDir, KEYS_DIR, ids, 2048)
        await self.b.startMaster()
        await copyClusterKey(self.b, self.a, self.logs)
        await self.a.startMaster()
        await self.waitConnected(1)

    async def waitConnected(self, times: int) -> None:
        """
        Wait until both masters have logged C{times} connections to the
        broker.
        """
        for cluster in (self.a, self.b):
            master = cluster.master
            assert master is not None
            await waitFor(
                lambda master=master: master.output().count(CONNECTED) >= times,
                "the master's connection to the broker",
                timeout=60,
                context=self.logs,
            )

    def startSwarm(self) -> Swarm:
        """
        Start the minions, all on B.
        """
        from twisted.internet import reactor

        shareVerification(self)
        assert self.b.ports is not None
        swarm = Swarm(
            reactor,
            os.path.join(self.b.baseDir, "swarm"),
            KEYS_DIR,
            list(range(MINIONS)),
            "127.0.0.1",
            self.b.ports["ret_port"],
            idPrefix=PREFIX,
            configOverrides={"acceptance_wait_time": 0.5},
            masterPub=crypt.canonicalPublicPem(self.masterPub),
        )

        runSwarms(self, [swarm])
        return swarm

    def storedReturns(self, cluster: Cluster, jid: str) -> tuple[int, int]:
        """
        @return: how many rows C{cluster}'s master's job cache holds for
            C{jid}'s returns, and for how many distinct minions.
        """
        if self.database is not None:
            return storedReturns(self.database, jid)
        path = os.path.join(cluster.masterConfig()["cachedir"], JOB_CACHE_FILE)
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            [(rows, minions)] = connection.execute(
                "SELECT count(*), count(DISTINCT id) FROM returns WHERE jid = ?", (jid,)
            ).fetchall()
        finally:
            connection.close()
        return rows, minions

    async def refusedOnB(self) -> Any:
        """
        A ping through B, if B refused it; else L{None}.
        """
        result = await self.b.salt(
            minionIdFor(PREFIX, 0), "test.ping", "-t", "1", "--gather-job-timeout", "1"
        )
        return result if result.code != 0 and "job refused" in result.err + result.out else None

    async def restartDuringReturns(
        self, shared: bool, signum: int, bound: int | None = None
    ) -> None:
        """
        The test: see the module's docstring.

        @param shared: see L{startMasters}.
        @param signum: how the broker is stopped.
        @param bound: C{cluster_buffer_messages} for both masters, smaller
            than the returns that come while the broker is down: once B's
            buffer is full, B refuses new jobs, naming the broker, and
            answers returns C{return not stored} (the minions send them
            again); L{None}: the default bound.
        """
        broker = _Broker(self)
        await broker.start()
        options = {} if bound is None else {"cluster_buffer_messages": bound}
        await self.startMasters(broker.url, shared, **options)
        swarm = self.startSwarm()
        await waitFor(
            lambda: sum(m.returns.req is not None for m in swarm.minions) == MINIONS,
            f"{MINIONS} minions ready on B",
            timeout=120,
            context=lambda: (
                f"{sum(m.returns.req is not None for m in swarm.minions)} ready\n{self.logs()}"
            ),
        )
        watcherA = await self.a.watchEvents()

        def returnsOnA() -> Counter[str]:
            # The job's returns (not those of B's pings, with a bound).
            prefix = f"salt/job/{jid}/ret/"
            return Counter(tag[len(prefix) :] for tag in watcherA.tags if tag.startswith(prefix))

        began = time.monotonic()
        cli: Deferred[Any] = Deferred.fromCoroutine(
            self.a.salt(f"{PREFIX}*", "test.rand_sleep", str(SPREAD), "--out", "json", "-t", "120")
        )
        newTag = await waitFor(
            lambda: next((t for t in watcherA.tags if t.endswith("/new")), None),
            "the job on A's bus",
            context=self.logs,
        )
        jid = newTag.split("/")[2]
        await waitFor(
            lambda: swarm.returns >= MINIONS // 5,
            "a fifth of the returns",
            timeout=60,
            context=lambda: f"{swarm.returns} returned\n{self.logs()}",
        )
        killedAt = time.monotonic()
        returnedBefore = swarm.returns
        onABefore = len(returnsOnA())
        await broker.kill(signum)
        downAt = time.monotonic()
        refusal = ""
        if bound is not None:
            # B's buffer fills with the returns it takes meanwhile.
            result = await waitFor(
                self.refusedOnB, "B refusing jobs", timeout=60, context=self.logs
            )
            refusal = (result.err + result.out).strip()
            self.assertIn(
                "job refused: the cluster's outgoing buffer is full ("
                f"{bound} messages not yet acknowledged by the broker {broker.url}, "
                f"at most {bound})",
                refusal,
            )
        await sleep(max(0.0, DOWN - (time.monotonic() - downAt)))
        returnedDown = swarm.returns
        storedOnB = self.storedReturns(self.b, jid)[0]
        onADown = len(returnsOnA())
        restartedAt = time.monotonic()
        await broker.start()
        await self.waitConnected(2)
        reconnectedAt = time.monotonic()
        # What B stored while the broker was down reaches A first.
        await waitFor(
            lambda: len(returnsOnA()) >= storedOnB,
            "the returns B stored while the broker was down, on A's bus",
            timeout=60,
            context=lambda: f"{len(returnsOnA())} on A's bus\n{self.logs()}",
        )
        backlogOnA = time.monotonic()
        await waitFor(
            lambda: len(returnsOnA()) >= MINIONS,
            "every return on A's bus",
            timeout=120,
            context=lambda: f"{len(returnsOnA())} on A's bus\n{self.logs()}",
        )
        allOnA = time.monotonic()
        result = await cli

        # A's CLI: every minion's return once (JSON lines, one a return).
        self.assertEqual(result.code, 0, f"{result}\n{self.logs()}")
        printed = [json.loads(line) for line in result.out.splitlines() if line.strip()]
        perMinion = Counter(minionId for line in printed for minionId in line)
        expected = {minionIdFor(PREFIX, i) for i in range(MINIONS)}
        self.assertEqual(set(perMinion), expected, self.logs())
        self.assertEqual(
            [m for m, n in perMinion.items() if n != 1], [], f"{result}\n{self.logs()}"
        )
        self.assertTrue(
            all(value is True for line in printed for value in line.values()), str(result)
        )
        # A's bus: each return fired once.
        onA = returnsOnA()
        self.assertEqual(set(onA), expected)
        self.assertEqual([m for m, n in onA.items() if n != 1], [])
        # A's job cache (SQLite: written by A from the broker; PostgreSQL:
        # by B), each (jid, minion) once; written a moment after the bus.
        await waitFor(
            lambda: self.storedReturns(self.a, jid)[0] >= MINIONS,
            "every return in A's job cache",
            context=lambda: f"{self.storedReturns(self.a, jid)} stored\n{self.logs()}",
        )
        self.assertEqual(self.storedReturns(self.a, jid), (MINIONS, MINIONS))
        # The logs: the broker lost, retries with back-off, reconnected.
        retries: dict[str, list[float]] = {}
        after: dict[str, list[str]] = {}
        for name, cluster in (("A", self.a), ("B", self.b)):
            assert cluster.master is not None
            output = cluster.master.output()
            self.assertIn(LOST, output, self.logs())
            retries[name] = [float(delay) for _, delay in RETRY.findall(output)]
            self.assertTrue(retries[name], f"no retry logged by {name}\n{self.logs()}")
            after[name] = AFTER.findall(output)
        # Returns B took while the broker was down crossed afterwards.
        self.assertGreater(storedOnB, onADown)
        sys.stdout.write(
            f"\n  {MINIONS} minions on B, {'PostgreSQL' if shared else 'SQLite'} job cache,"
            f" broker stopped by {signal.Signals(signum).name}"
            f" {killedAt - began:.1f}s after the CLI started;"
            f"\n  at the stop: {returnedBefore} returned, {onABefore} on A's bus;"
            f" {DOWN:.0f}s later: {returnedDown} returned, {storedOnB} stored by B,"
            f" {onADown} on A's bus;"
            f"\n  retries (s): A {retries['A']}, B {retries['B']};"
            f" reconnected (after, s): A {after['A'][-1:]}, B {after['B'][-1:]},"
            f" both {reconnectedAt - restartedAt:.1f}s after the start;"
            f"\n  the {storedOnB} returns B stored by then on A's bus"
            f" {backlogOnA - reconnectedAt:.2f}s after both reconnected;"
            f" every return on A's bus {allOnA - restartedAt:.1f}s after the start,"
            f" {allOnA - began:.1f}s after the CLI started\n"
            + (f"  bound {bound}: {refusal}\n" if bound is not None else "")
        )

    async def test_sqliteSigterm(self) -> None:
        """
        Each master its own SQLite job cache; the broker stopped by SIGTERM.
        """
        await self.restartDuringReturns(False, signal.SIGTERM)

    async def test_sqliteSigkill(self) -> None:
        """
        Each master its own SQLite job cache; the broker killed by SIGKILL.
        """
        await self.restartDuringReturns(False, signal.SIGKILL)

    async def test_postgresSigkill(self) -> None:
        """
        One PostgreSQL job cache for both; the broker killed by SIGKILL.
        """
        await self.restartDuringReturns(True, signal.SIGKILL)

    async def test_postgresSigterm(self) -> None:
        """
        One PostgreSQL job cache for both; the broker stopped by SIGTERM.
        """
        await self.restartDuringReturns(True, signal.SIGTERM)

    async def test_sqliteBufferFull(self) -> None:
        """
        Each master its own SQLite job cache and a buffer of 40 messages;
        the broker killed by SIGKILL: past the bound B refuses jobs and
        returns, and every return still reaches A once.
        """
        await self.restartDuringReturns(False, signal.SIGKILL, bound=40)
