# -*- test-case-name: tests.integration.test_keys_pg -*-
"""
Keys in PostgreSQL (issue 23) with real processes: two masters, A and B,
on one database (C{keys.cache_driver: postgres}), each test with a database
of its own; C{salttwist-key} run with either master's config acts for both.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED, PENDING
from salttwist.pki.keystore_pg import PostgresKeyStore
from tests._postgres import temporaryDatabase
from tests.integration.harness import Cluster, runCommand, seedKeyPair, waitFor

AUTHENTICATED = "authenticated and subscribed to its master"
LOST = "lost the connection to the master"
CUT_OFF = "is no longer accepted: cut off"


def _keyOptions(options: dict[str, Any]) -> dict[str, Any]:
    """
    @return: the master options that put its keys in the database
        C{options} (C{psycopg.connect} keywords) names.
    """
    return {
        "keys.cache_driver": "postgres",
        "keys.postgres.host": options["host"],
        "keys.postgres.port": int(options["port"]),
        "keys.postgres.user": options["user"],
        "keys.postgres.db": options["dbname"],
    }


class TwoMastersTests(TestCase):
    """
    Masters A and B share their keys in PostgreSQL.
    """

    timeout = 120

    async def setUp(self) -> None:
        self.options = temporaryDatabase(self)
        self.a = Cluster(self)
        self.b = Cluster(self)
        for cluster in (self.a, self.b):
            cluster.writeMasterConfig(**_keyOptions(self.options))
            seedKeyPair(cluster.masterPkiDir, "master", "master")

    def store(self) -> PostgresKeyStore:
        """
        @return: a loaded store on the test's database (this process's),
            closed after the test.
        """
        store = PostgresKeyStore(self.options)
        store.start()
        self.addCleanup(store.close)
        store.waitReady(20)
        return store

    def logs(self) -> str:
        return f"--- master A and its minions\n{self.a.logs()}\n--- B\n{self.b.logs()}"

    async def keyOn(self, cluster: Cluster, *args: str) -> Any:
        """
        Run C{salttwist-key} with C{cluster}'s master config.
        """
        result = await cluster.key(*args)
        self.assertEqual(result.code, 0, f"{result}\n{self.logs()}")
        return result

    async def test_deleteOnBCutsOffOnA(self) -> None:
        """
        A minion connected to A, its key accepted in the database: C{salttwist-key
        -d} run with B's config deletes it, and A cuts the minion off (the
        figure printed: seconds from the command's exit to the minion
        logging the lost connection). The minion then authenticates again
        and its key is pending for both masters.
        """
        pem = seedKeyPair(self.a.minionPkiDir("minion1"), "minion", "minion1")
        self.store().putKey(ACCEPTED, "minion1", pem)
        await self.a.startMaster()
        await self.b.startMaster()
        watcher = await self.a.watchEvents()
        minion = self.a.startMinion("minion1")
        await self.a.waitForStart(watcher, ["minion1"])
        ping = await self.a.salt("minion1", "test.ping", "--static", "--out", "json")
        self.assertEqual(json.loads(ping.out), {"minion1": True}, f"{ping}\n{self.logs()}")
        mark = len(minion.output())

        started = time.monotonic()
        result = await self.keyOn(self.b, "-d", "minion1", "-y")
        exited = time.monotonic()
        self.assertIn("Key for minion minion1 deleted.", result.out)
        await waitFor(
            lambda: LOST in minion.output()[mark:],
            "minion1 to be cut off by master A",
            context=self.logs,
        )
        now = time.monotonic()
        sys.stdout.write(
            f"\n  salttwist-key -d through B ran {(exited - started) * 1000:.0f} ms; minion cut "
            f"off on A {(now - started) * 1000:.0f} ms after it started "
            f"({max(0.0, now - exited) * 1000:.0f} ms after it exited)\n"
        )
        assert self.a.master is not None
        self.assertIn(f"minion1 {CUT_OFF}", self.a.master.output(), self.logs())

        listed = await self.keyOn(self.a, "-L", "--out", "json")
        await waitFor(
            lambda: "minion1" in self.store().listKeys(PENDING),
            "minion1's key to be pending again",
            context=self.logs,
        )
        self.assertNotIn("minion1", json.loads(listed.out)["minions"])

    async def test_acceptedAcrossMasters(self) -> None:
        """
        A minion that asks B for acceptance is pending on A too; accepted
        with A's config, it is accepted by B (it authenticates there);
        another accepted with B's config is listed as accepted by
        C{salttwist-key -L} with A's config.
        """
        await self.a.startMaster()
        await self.b.startMaster()
        watcher = await self.b.watchEvents()
        for minionId in ("minion2", "minion3"):
            self.b.startMinion(minionId)

        async def pendingOnA() -> bool:
            result = await self.a.key("-L", "--out", "json")
            return result.code == 0 and {"minion2", "minion3"} <= set(
                json.loads(result.out)["minions_pre"]
            )

        await waitFor(pendingOnA, "the keys of minion2 and minion3 pending on A", context=self.logs)

        await self.keyOn(self.a, "-a", "minion2", "-y")
        await self.b.waitForStart(watcher, ["minion2"])
        self.assertIn(AUTHENTICATED, self.b.minions["minion2"].output())

        await self.keyOn(self.b, "-a", "minion3", "-y")
        listed = await runCommand(
            ["salttwist-key", "-c", self.a.masterDir, "-L", "--out", "json"], cwd=self.a.baseDir
        )
        self.assertEqual(listed.code, 0, f"{listed}\n{self.logs()}")
        self.assertEqual(json.loads(listed.out)["minions"], ["minion2", "minion3"])
        await self.b.waitForStart(watcher, ["minion3"])
