# -*- test-case-name: tests.integration.test_jobcache_pg_call -*-
"""
Integration test of C{salttwist-call} with a master whose job cache is
PostgreSQL (C{master_job_cache: pgjsonb}): the job the master makes for the
call's return (jid C{req}) holds a reserved row in the database, and the
call's return is stored under it.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import TestCase

from tests._postgres import temporaryDatabase
from tests.integration.harness import Cluster, runCommand

MINION = "minion1"


class PostgresCallTests(TestCase):
    """
    C{salttwist-call} against a master with the PostgreSQL job cache.
    """

    timeout = 120

    async def test_callReserved(self) -> None:
        """
        C{salttwist-call test.echo hi} prints its result; the job's row
        carries a reservation (it was reserved, not stored as another
        master's job), its return is stored under its jid, and
        C{jobs.list_jobs} shows it with the minion as its target.
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
        await cluster.startReady([MINION])
        call = await runCommand(
            ["salttwist-call", "-c", cluster.minionDir(MINION), "test.echo", "hi"],
            cwd=cluster.baseDir,
        )
        self.assertEqual((call.code, call.out), (0, "local:\n    hi\n"), cluster.explain(call))
        with psycopg.connect(**options) as connection:
            [(jid, fun, reservation)] = connection.execute(
                "SELECT jid, fun, reservation FROM salttwist_jobs"
            ).fetchall()
            self.assertEqual(fun, "test.echo")
            self.assertIsNotNone(reservation)
            self.assertEqual(
                connection.execute("SELECT jid, id FROM salttwist_returns").fetchall(),
                [(jid, MINION)],
            )
        listed = await runCommand(
            ["salttwist-run", "-c", cluster.masterDir, "jobs.list_jobs", "--out", "json"],
            cwd=cluster.baseDir,
        )
        self.assertEqual(listed.code, 0, cluster.explain(listed))
        job = json.loads(listed.out)[jid]
        self.assertEqual(
            (job["Function"], job["Arguments"], job["Target"], job["Target-type"]),
            ("test.echo", ["hi"], MINION, "list"),
        )
