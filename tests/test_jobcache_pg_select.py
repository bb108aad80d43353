# -*- test-case-name: tests.test_jobcache_pg_select -*-
"""
Tests for the master's choice of job cache,
L{salttwist.master.service.makeJobCache}: C{master_job_cache}.
"""

from __future__ import annotations

import sys
from typing import Any

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from salttwist.config import ConfigError, loadMasterConfig
from salttwist.daemon import StartupError
from salttwist.master.jobcache import SQLiteJobCache
from salttwist.master.jobcache_pg import PostgresJobCache
from salttwist.master.jobcacheworker import WorkerJobCache
from salttwist.master.service import makeJobCache
from tests._postgres import temporaryDatabase


class MakeJobCacheTests(TestCase):
    """
    L{makeJobCache} builds the cache C{master_job_cache} names.
    """

    def config(self, **options: Any) -> dict[str, Any]:
        """
        @return: a master config with C{options} over the defaults, its
            cachedir a new directory.
        """
        cachedir = self.mktemp()
        return loadMasterConfig(
            self.mktemp(), overrides={"cachedir": cachedir, "root_dir": "/", **options}
        )

    def test_localCacheByDefault(self) -> None:
        """
        By default the cache is the SQLite file in the cachedir: on a thread
        without workers, else in a worker of its own.
        """
        import os

        config = self.config()
        self.assertEqual(config["master_job_cache"], "local_cache")
        os.makedirs(config["cachedir"])
        cache = makeJobCache(config, reactor, useWorkers=False)
        self.addCleanup(cache.close)
        self.assertIsInstance(cache, SQLiteJobCache)
        self.assertEqual(cache.path, os.path.join(config["cachedir"], "jobs.sqlite"))
        worker = makeJobCache(config, reactor, useWorkers=True)
        # Never started: only its shutdown trigger to remove.
        reactor.removeSystemEventTrigger(worker._shutdownTrigger)
        self.assertIsInstance(worker, WorkerJobCache)

    async def test_pgjsonb(self) -> None:
        """
        C{pgjsonb}, and its alias C{postgres}, select the PostgreSQL cache,
        connected with the C{returner.pgjsonb.*} options, workers or not.
        """
        options = temporaryDatabase(self)
        for name, useWorkers in (("pgjsonb", True), ("postgres", False)):
            config = self.config(
                master_job_cache=name,
                keep_jobs=3,
                **{
                    "returner.pgjsonb.host": options["host"],
                    "returner.pgjsonb.port": int(options["port"]),
                    "returner.pgjsonb.user": options["user"],
                    "returner.pgjsonb.db": options["dbname"],
                },
            )
            cache = makeJobCache(config, reactor, useWorkers=useWorkers)
            self.assertIsInstance(cache, PostgresJobCache)
            await cache.whenOpen()
            self.assertEqual(cache.keepJobsHours, 3)
            self.assertIsNone(cache.path)
            await cache.close()

    def test_psycopgMissing(self) -> None:
        """
        Without psycopg, selecting PostgreSQL stops the start with a
        L{StartupError} saying what to install.
        """
        saved = sys.modules.get("psycopg")
        # None in sys.modules makes the import fail with ImportError.
        sys.modules["psycopg"] = None  # type: ignore[assignment]
        if saved is None:
            self.addCleanup(sys.modules.pop, "psycopg", None)
        else:
            self.addCleanup(sys.modules.__setitem__, "psycopg", saved)
        with self.assertRaises(StartupError) as raised:
            makeJobCache(self.config(master_job_cache="pgjsonb"), reactor, useWorkers=False)
        self.assertIn("salttwist[postgres]", str(raised.exception))

    def test_unknownCache(self) -> None:
        """
        Any other C{master_job_cache} is a configuration error naming the
        choices.
        """
        with self.assertRaises(ConfigError) as raised:
            self.config(master_job_cache="mysql")
        self.assertIn("pgjsonb", str(raised.exception))
