# -*- test-case-name: tests.integration.test_jobcache_pg -*-
"""
Integration test of the PostgreSQL job cache: a real master with
C{master_job_cache: pgjsonb} and a minion; a job's return is read back by
C{salttwist-run jobs.lookup_jid} from PostgreSQL.
"""

from __future__ import annotations

import json
import os

from twisted.trial.unittest import TestCase

from tests._postgres import temporaryDatabase
from tests.integration.harness import Cluster, runCommand


class PostgresJobCacheMasterTests(TestCase):
    """
    A master whose job cache is PostgreSQL.
    """

    timeout = 120

    async def test_lookupJid(self) -> None:
        """
        After C{salttwist minion1 test.ping}, C{jobs.lookup_jid} gives the
        minion's C{True}, the job and its return are rows in the database,
        and no SQLite job cache was made.
        """
        import psycopg

        options = temporaryDatabase(self)
        cluster = Cluster(self)
        cluster.writeMasterConfig(
            master_job_cache="pgjsonb",
            **{
                "returner.pgjsonb.host": options["host"],
                "returner.pgjsonb.port": int(options["port"]),
                "returner.pgjsonb.user": options["user"],
                "returner.pgjsonb.db": options["dbname"],
            },
        )
        await cluster.startReady(["minion1"])
        ping = await cluster.salt("minion1", "test.ping", "--static", "--out", "json")
        self.assertEqual(ping.code, 0, cluster.explain(ping))
        self.assertEqual(json.loads(ping.out), {"minion1": True}, str(ping))
        listed = await runCommand(
            ["salttwist-run", "-c", cluster.masterDir, "jobs.list_jobs", "--out", "json"],
            cwd=cluster.baseDir,
        )
        self.assertEqual(listed.code, 0, cluster.explain(listed))
        [jid] = json.loads(listed.out)
        looked = await runCommand(
            ["salttwist-run", "-c", cluster.masterDir, "jobs.lookup_jid", jid, "--out", "json"],
            cwd=cluster.baseDir,
        )
        self.assertEqual(looked.code, 0, cluster.explain(looked))
        self.assertEqual(json.loads(looked.out), {"minion1": True})
        with psycopg.connect(**options) as connection:
            self.assertEqual(
                connection.execute("SELECT jid, fun FROM salttwist_jobs").fetchall(),
                [(jid, "test.ping")],
            )
            self.assertEqual(
                connection.execute("SELECT jid, id FROM salttwist_returns").fetchall(),
                [(jid, "minion1")],
            )
        cachedir = cluster.masterConfig()["cachedir"]
        self.assertFalse(os.path.exists(os.path.join(cachedir, "jobs.sqlite")))
