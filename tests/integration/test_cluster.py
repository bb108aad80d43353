# -*- test-case-name: tests.integration.test_cluster -*-
"""
Two real masters (the installed wheel's daemons) in one cluster through a
real NATS JetStream broker (issue 23, docs/cluster.md "Broker fan-out"):

  - a minion connected to master B runs a job published through master A's
    CLI, and A's CLI prints its return, also with one PostgreSQL job cache
    for both, where the job and the return are stored once (L{FanOutTests};
    the machine's NATS server, a cluster id of the test's own);
  - the broker restarts during a job: the job published meanwhile reaches
    the minion once the broker is back, and its return reaches A's CLI;
    the broker away past C{cluster_unreachable_limit}: A refuses jobs,
    saying why, and takes them again once it is back
    (L{BrokerRestartTests}; a private C{nats-server} this test starts and
    stops by its pid, never the machine's);
  - A cut off from the broker by a proxy dropping its traffic refuses jobs,
    saying why, and takes them again once the partition heals
    (L{PartitionTests});
  - C{salttwist-key -d} run with B's config: its C{salt/key} event is
    printed by C{salttwist-run state.event} on A (L{KeyEventTests}).

Each master has its own C{pki_dir} (its own key pair and publication key);
the minion's key is accepted on both, as a shared key store would have it;
the cluster key B made is copied to A, as an admin does.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from tests._nats import (
    DropProxy,
    PrivateNatsServer,
    deleteStreamAfter,
    newClusterId,
    requireServer,
    serverUrl,
)
from tests._postgres import temporaryDatabase
from tests.integration.harness import Cluster, runCommand, seedKeyPair, sleep, waitFor

CONNECTED = "cluster: connected to the broker"


class _TwoMasters:
    """
    Masters A (no minion) and B (with C{minion1}) in one cluster.
    """

    async def startMasters(self, url: str, urlA: str | None = None, **options: Any) -> None:
        """
        Start B, then A, both on broker C{url} (A on C{urlA} if given: the
        same broker through a proxy).
        """
        self.clusterId = newClusterId()
        self.url = url
        if url == serverUrl():
            # The machine's server keeps streams: this test's goes after it.
            deleteStreamAfter(self, url, self.clusterId)  # type: ignore[arg-type]
        self.a = Cluster(self)  # type: ignore[arg-type]
        self.b = Cluster(self)  # type: ignore[arg-type]
        common = {"cluster_id": self.clusterId, "cluster_broker": url, **options}
        self.b.writeMasterConfig(cluster_master_id="master-b", **common)
        await self.b.startReady(["minion1"])
        await self.waitConnected(self.b)
        if urlA is not None:
            common["cluster_broker"] = urlA
        self.a.writeMasterConfig(cluster_master_id="master-a", **common)
        seedKeyPair(self.a.masterPkiDir, "master", "master-a")
        # The cluster key B made, copied to A as an admin does.
        os.makedirs(os.path.join(self.a.masterPkiDir, "cluster"), mode=0o700)
        shutil.copy2(
            os.path.join(self.b.masterPkiDir, "cluster", "cluster.key"),
            os.path.join(self.a.masterPkiDir, "cluster", "cluster.key"),
        )
        with open(os.path.join(self.b.minionPkiDir("minion1"), "minion.pub"), "rb") as f:
            FilesystemKeyStore(self.a.masterPkiDir).putKey(ACCEPTED, "minion1", f.read())
        await self.a.startMaster()
        await self.waitConnected(self.a)

    async def waitConnected(self, cluster: Cluster, times: int = 1) -> None:
        """
        Wait until C{cluster}'s master has logged its connection to the
        broker C{times} times.
        """
        assert cluster.master is not None
        master = cluster.master
        await waitFor(
            lambda: master.output().count(CONNECTED) >= times,
            "the master's connection to the broker",
            context=self.logs,
        )

    def logs(self) -> str:
        return f"== master A ==\n{self.a.logs()}\n== master B ==\n{self.b.logs()}"

    async def ping(self, *args: str) -> Any:
        return await self.a.salt("minion1", "test.ping", "--static", "--out", "json", *args)

    async def refused(self) -> Any:
        """
        A ping through A (waiting little for a return that cannot come),
        if A refused it as unable to reach the broker; else L{None}.
        """
        result = await self.ping("-t", "1", "--gather-job-timeout", "1")
        return result if result.code != 0 and "unreachable" in result.err + result.out else None


class FanOutTests(_TwoMasters, TestCase):
    """
    Through the machine's NATS server.
    """

    async def test_jobThroughOtherMaster(self) -> None:
        """
        A job published through A's CLI reaches C{minion1} on B, and A's
        CLI prints its return; B's bus saw the job.
        """
        url = serverUrl()
        await requireServer(self, url)
        await self.startMasters(url)
        watcherB = await self.b.watchEvents()
        ping = await self.ping()
        self.assertEqual(ping.code, 0, f"{ping}\n{self.logs()}")
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")
        self.assertTrue(
            any(
                tag.startswith("salt/job/") and tag.endswith("/ret/minion1")
                for tag in watcherB.tags
            )
        )
        echo = await self.a.salt("minion1", "test.echo", "across", "--out", "json", "--static")
        self.assertEqual(json.loads(echo.out), {"minion1": "across"}, f"{echo}\n{self.logs()}")

    async def test_sharedJobCache(self) -> None:
        """
        With one PostgreSQL job cache for both masters, the job published
        on A and the return that B accepted are each stored once, and
        C{jobs.lookup_jid} on A finds the return.
        """
        import psycopg

        url = serverUrl()
        await requireServer(self, url)
        options = temporaryDatabase(self)
        await self.startMasters(
            url,
            master_job_cache="pgjsonb",
            **{
                "returner.pgjsonb.host": options["host"],
                "returner.pgjsonb.port": int(options["port"]),
                "returner.pgjsonb.user": options["user"],
                "returner.pgjsonb.db": options["dbname"],
            },
        )
        ping = await self.ping()
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")
        with psycopg.connect(**options) as connection:
            [(jid, fun)] = connection.execute("SELECT jid, fun FROM salttwist_jobs").fetchall()
            self.assertEqual(fun, "test.ping")
            # The return is written by B's job cache a moment after A's CLI
            # saw it on the bus.
            await waitFor(
                lambda: connection.execute("SELECT jid, id FROM salttwist_returns").fetchall(),
                "the return in the job cache",
                context=self.logs,
            )
            self.assertEqual(
                connection.execute("SELECT jid, id FROM salttwist_returns").fetchall(),
                [(jid, "minion1")],
            )
        looked = await runCommand(
            ["salttwist-run", "-c", self.a.masterDir, "jobs.lookup_jid", jid, "--out", "json"],
            cwd=self.a.baseDir,
        )
        self.assertEqual(json.loads(looked.out), {"minion1": True}, f"{looked}\n{self.logs()}")


class KeyEventTests(_TwoMasters, TestCase):
    """
    Master events across the cluster, through the machine's NATS server.
    """

    async def test_keyDeleteOnOtherMaster(self) -> None:
        """
        C{salttwist-key -d minion1} run with B's config fires C{salt/key}
        on B's bus, and C{salttwist-run state.event} on A prints it, with
        the data B fired and C{_cluster_origin: master-b}.
        """
        url = serverUrl()
        await requireServer(self, url)
        await self.startMasters(url)
        watcher = self.a.spawn(
            "state.event",
            [
                "salttwist-run",
                "-c",
                self.a.masterDir,
                "state.event",
                "tagmatch=salt/key|salt/job/.*/new",
            ],
        )

        # state.event may not be subscribed yet: ping through A until it
        # prints a job's start, then it sees what follows.
        async def listening() -> bool:
            if not watcher.running:
                self.fail(f"state.event ended\n{watcher.describe()}")
            if "salt/job/" in watcher.output():
                return True
            await self.ping("-t", "2")
            return "salt/job/" in watcher.output()

        await waitFor(listening, "state.event on A listening", context=self.logs)
        deleted = await self.b.key("-d", "minion1", "-y")
        self.assertEqual(deleted.code, 0, f"{deleted}\n{self.logs()}")

        def keyEvents() -> list[dict[str, Any]]:
            lines = watcher.output().splitlines()
            return [
                json.loads(line.partition("\t")[2])
                for line in lines
                if line.startswith("salt/key\t")
            ]

        [event, *_] = await waitFor(keyEvents, "salt/key on A's state.event", context=self.logs)
        self.assertEqual(
            (event["act"], event["id"], event["_cluster_origin"]),
            ("delete", "minion1", "master-b"),
            watcher.describe(),
        )


class BrokerRestartTests(_TwoMasters, TestCase):
    """
    Through a private C{nats-server}, stopped and started again.
    """

    async def test_brokerRestartDuringJob(self) -> None:
        """
        A job published on A while the broker is down (within the
        unreachable limit) is held by A, reaches C{minion1} on B once the
        broker is back, and A's CLI prints its return.
        """
        server = PrivateNatsServer(self)
        await server.start()
        await self.startMasters(server.url, cluster_unreachable_limit=60)
        await server.stop()
        pending = self.ping("-t", "30")
        await sleep(1.0)
        await server.start()
        ping = await pending
        self.assertEqual(ping.code, 0, f"{ping}\n{self.logs()}")
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")

    async def test_refusedWhileUnreachable(self) -> None:
        """
        Once the broker has been away longer than
        C{cluster_unreachable_limit}, A refuses jobs and says why; once it
        is back, A takes them again and the minion on B answers.
        """
        server = PrivateNatsServer(self)
        await server.start()
        await self.startMasters(server.url, cluster_unreachable_limit=1)
        await server.stop()

        result = await waitFor(self.refused, "A refusing jobs", timeout=60, context=self.logs)
        self.assertIn("job refused", result.err + result.out, str(result))
        self.assertIn(server.url, result.err + result.out, str(result))
        await server.start()
        await self.waitConnected(self.a, 2)
        await self.waitConnected(self.b, 2)
        ping = await self.ping()
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")


class PartitionTests(_TwoMasters, TestCase):
    """
    Master A reaches the machine's broker through a proxy that can drop
    every byte without closing anything (a partition).
    """

    async def test_partition(self) -> None:
        """
        Cut off, A refuses jobs and says why (its PINGs go unanswered);
        healed, it takes them again and the minion on B answers.
        """
        url = serverUrl()
        await requireServer(self, url)
        proxy = DropProxy(self, int(url.rsplit(":", 1)[1]))
        await self.startMasters(url, urlA=await proxy.listen(), cluster_unreachable_limit=1)
        proxy.dropping = True

        result = await waitFor(self.refused, "A refusing jobs", timeout=60, context=self.logs)
        # Why: its PINGs went unanswered, then (if the check came later)
        # its new connections were never answered.
        said = result.err + result.out
        self.assertTrue(
            "stopped answering PINGs" in said or "did not answer within" in said, str(result)
        )
        proxy.dropping = False
        await self.waitConnected(self.a, 2)
        ping = await self.ping()
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")
