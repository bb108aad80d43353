# -*- test-case-name: tests.integration.test_cluster_caches -*-
"""
Two real masters (the installed wheel's daemons) in one cluster, their keys
and their grains and pillar caches in one PostgreSQL database (C{cache:
postgres}, issue 23), the fan-out through the machine's NATS server: master
A targets by grain (C{-G}, C{G@} in a compound) a minion connected to
master B only, and A's C{cache.grains} runner shows its grains; A targets
it by pillar (C{-I}) once B compiled its pillar, each master compiling from
a C{pillar_roots} tree on its own disk (the same files), as without a
shared filesystem.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED
from salttwist.pki.keystore_pg import PostgresKeyStore
from tests._nats import deleteStreamAfter, newClusterId, requireServer, serverUrl
from tests._postgres import temporaryDatabase
from tests.integration.harness import Cluster, runCommand, seedKeyPair, waitFor

CONNECTED = "cluster: connected to the broker"
PILLAR = {"top.sls": "base:\n  '*':\n    - role\n", "role.sls": "role: db\n"}


def _databaseOptions(options: dict[str, Any]) -> dict[str, Any]:
    """
    @return: the master options that put its keys and its grains and
        pillar caches in the database C{options} names.
    """
    settings: dict[str, Any] = {"keys.cache_driver": "postgres", "cache": "postgres"}
    for prefix in ("keys.postgres", "cache.postgres"):
        settings[f"{prefix}.host"] = options["host"]
        settings[f"{prefix}.port"] = int(options["port"])
        settings[f"{prefix}.user"] = options["user"]
        settings[f"{prefix}.db"] = options["dbname"]
    return settings


class SharedGrainsTests(TestCase):
    """
    A minion on B, targeted by grain through A.
    """

    timeout = 180

    def logs(self) -> str:
        return f"== master A ==\n{self.a.logs()}\n== master B ==\n{self.b.logs()}"

    async def waitConnected(self, cluster: Cluster) -> None:
        assert cluster.master is not None
        master = cluster.master
        await waitFor(
            lambda: CONNECTED in master.output(),
            "the master's connection to the broker",
            context=self.logs,
        )

    async def test_grainTargetAcrossMasters(self) -> None:
        """
        C{salttwist -G id:minion1} and C{-C G@...} through A reach C{minion1},
        connected to B only, and print its return; A's C{cache.grains}
        shows the grains B received.
        """
        url = serverUrl()
        await requireServer(self, url)
        clusterId = newClusterId()
        deleteStreamAfter(self, url, clusterId)
        options = temporaryDatabase(self)
        store = PostgresKeyStore(options)
        store.start()
        self.addCleanup(store.close)
        store.waitReady(20)
        self.a = Cluster(self)
        self.b = Cluster(self)
        common = {"cluster_id": clusterId, "cluster_broker": url, **_databaseOptions(options)}
        for name, cluster in (("master-a", self.a), ("master-b", self.b)):
            pillarRoot = os.path.join(cluster.baseDir, "srv", "pillar")
            os.makedirs(pillarRoot)
            for file, text in PILLAR.items():
                with open(os.path.join(pillarRoot, file), "w") as f:
                    f.write(text)
            cluster.writeMasterConfig(
                cluster_master_id=name, pillar_roots={"base": [pillarRoot]}, **common
            )
            seedKeyPair(cluster.masterPkiDir, "master", "master")
        pem = seedKeyPair(self.b.minionPkiDir("minion1"), "minion", "minion1")
        store.putKey(ACCEPTED, "minion1", pem)
        await self.b.startMaster()
        await self.waitConnected(self.b)
        os.makedirs(os.path.join(self.a.masterPkiDir, "cluster"), mode=0o700)
        shutil.copy2(
            os.path.join(self.b.masterPkiDir, "cluster", "cluster.key"),
            os.path.join(self.a.masterPkiDir, "cluster", "cluster.key"),
        )
        await self.a.startMaster()
        await self.waitConnected(self.a)
        watcher = await self.b.watchEvents()
        self.b.startMinion("minion1")
        await self.b.waitForStart(watcher, ["minion1"])

        async def grainsOnA() -> Any:
            result = await runCommand(
                ["salttwist-run", "-c", self.a.masterDir, "cache.grains", "tgt=minion1"]
                + ["--out", "json"],
                cwd=self.a.baseDir,
            )
            if result.code != 0:
                return None
            return json.loads(result.out).get("minion1")

        grains = await waitFor(grainsOnA, "minion1's grains on master A", context=self.logs)
        self.assertEqual(grains["id"], "minion1")
        for args in (("-G", "id:minion1"), ("-C", "G@id:minion1 and minion*")):
            ping = await self.a.salt(*args, "test.ping", "--static", "--out", "json")
            self.assertEqual(ping.code, 0, f"{args} {ping}\n{self.logs()}")
            self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")
        nobody = await self.a.salt("-G", "id:nobody", "test.ping", "--static", "--out", "json")
        self.assertNotIn("minion1", nobody.out)

        # The pillar B compiled for minion1 (it asks for it at start, and
        # pillar.get makes sure) is A's to target with.
        role = await self.b.salt("minion1", "pillar.get", "role", "--static", "--out", "json")
        self.assertEqual(json.loads(role.out), {"minion1": "db"}, f"{role}\n{self.logs()}")

        async def pillarTarget() -> Any:
            result = await self.a.salt("-I", "role:db", "test.ping", "--static", "--out", "json")
            return result if result.code == 0 and "minion1" in result.out else None

        ping = await waitFor(pillarTarget, "A's -I role:db reaching minion1", context=self.logs)
        self.assertEqual(json.loads(ping.out), {"minion1": True})
