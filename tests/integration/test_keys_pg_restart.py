# -*- test-case-name: tests.integration.test_keys_pg_restart -*-
"""
A master whose keys are in PostgreSQL (C{keys.cache_driver: postgres}) when
the server is down at its start and when it restarts under it: a private
PostgreSQL server of the test's own
(L{tests.test_jobcache_pg_restart.PrivateServer}), real daemons.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.pki.keystore import ACCEPTED
from salttwist.pki.keystore_pg import PostgresKeyStore
from tests.integration.harness import Cluster, seedKeyPair, waitFor
from tests.test_jobcache_pg_restart import PrivateServer

BUSY = "key store is unavailable"
AUTHENTICATED = "authenticated and subscribed to its master"
LOST = "lost the connection to the master"
WAIT = 90.0
"""
Seconds to wait for a reconnection: the stores' back-off grows to 30 s.
"""


class ServerDownTests(TestCase):
    """
    The master starts without its key store's server and catches up.
    """

    timeout = 300

    async def test_downAtStartThenRestart(self) -> None:
        """
        With the server down, the master starts, says that the keys are
        not loaded, and answers the minion "busy"; once the server is up
        the minion authenticates. When the server restarts under the
        running master, the minion stays connected, C{salttwist-key -d}
        fails meanwhile with exit code 2 naming the server; once it is back
        C{salttwist-key -d} cuts the minion off.
        """
        server = PrivateServer(self)
        await server.create()
        options: dict[str, Any] = server.options()
        cluster = Cluster(self)
        cluster.writeMasterConfig(
            **{
                "keys.cache_driver": "postgres",
                "keys.postgres.host": options["host"],
                "keys.postgres.port": options["port"],
                "keys.postgres.user": options["user"],
                "keys.postgres.db": options["dbname"],
                "keys.postgres.connect_timeout": 2,
            }
        )
        seedKeyPair(cluster.masterPkiDir, "master", "master")
        pem = seedKeyPair(cluster.minionPkiDir("minion1"), "minion", "minion1")
        store = PostgresKeyStore(options)
        store.start()
        store.waitReady(20)
        store.putKey(ACCEPTED, "minion1", pem)
        store.close()

        await server.stop()
        master = await cluster.startMaster()
        minion = cluster.startMinion("minion1")
        await waitFor(
            lambda: BUSY in minion.output() and "not loaded yet" in master.output(),
            "the minion told the key store is unavailable, the master saying so",
            timeout=WAIT,
            context=cluster.logs,
        )
        self.assertNotIn(AUTHENTICATED, minion.output())

        await server.start()
        await waitFor(
            lambda: AUTHENTICATED in minion.output(),
            "minion1 to authenticate once the keys are loaded",
            timeout=WAIT,
            context=cluster.logs,
        )
        self.assertIn("minion keys loaded from PostgreSQL", master.output())

        mark = len(minion.output())
        await server.stop()
        refused = await cluster.key("-d", "minion1", "-y")
        self.assertEqual(refused.code, 2, cluster.explain(refused))
        self.assertIn(f"127.0.0.1:{server.port}/postgres", refused.err)
        self.assertNotIn(LOST, minion.output()[mark:])

        await server.start()
        deleted = await cluster.key("-d", "minion1", "-y")
        self.assertEqual(deleted.code, 0, cluster.explain(deleted))
        await waitFor(
            lambda: LOST in minion.output()[mark:],
            "minion1 cut off after its key was deleted",
            timeout=WAIT,
            context=cluster.logs,
        )
