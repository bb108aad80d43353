# -*- test-case-name: tests.test_jobcache_pg_scale -*-
"""
Tests for what keeps the PostgreSQL job cache fast at ten million returns
(C{benchmarks/jobcache_pg_10m_bench.py}): the automatic prune's cutoff on an
hour's boundary, the prune's deletes by jid, exact targets through the
index of C{tgt_match}. Against a real server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from salttwist.master.jobcache_pg import PostgresJobCache
from salttwist.master.jobcache_pgsql import _jidAt, listJobsQuery
from tests._postgres import temporaryDatabase
from tests.test_jobcache_contract import NOW, load


class PostgresJobCacheScaleTests(TestCase):
    """
    The PostgreSQL cache's answers for the queries made fast.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)
        self.options = temporaryDatabase(self)

    async def _cache(self, **kwargs: Any) -> PostgresJobCache:
        cache = PostgresJobCache(self.options, reactor, clock=self.clock, **kwargs)
        self.addCleanup(cache.close)
        await cache.whenOpen()
        return cache

    def _query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(autocommit=True, **self.options) as connection:
            return connection.execute(sql, params).fetchall()  # type: ignore[no-any-return]

    def _at(self, when: datetime) -> str:
        """
        Move the clock to C{when} (local time, as jids are).

        @return: the jid of that instant.
        """
        self.clock.advance(when.timestamp() - self.clock.seconds())
        return _jidAt(when.timestamp())

    async def _storeAt(self, cache: PostgresJobCache, when: datetime) -> str:
        jid = self._at(when)
        await cache.storeJob(jid, load(), ["a"])
        await cache.storeReturn(jid, "a", {"return": 1})
        return jid

    async def test_automaticPruneOnTheHour(self) -> None:
        """
        The automatic prune (C{startPruning}) cuts at the start of the hour
        C{keep_jobs} ago falls in: a job older than C{keep_jobs} but of that
        hour is kept (its hour is dropped whole at a later prune); the
        hours before are dropped. An explicit C{prune} still cuts exactly.
        """
        cache = await self._cache(keepJobsHours=1, pruneInterval=3600)
        old = await self._storeAt(cache, datetime(2024, 1, 1, 0, 40))
        straddling = await self._storeAt(cache, datetime(2024, 1, 1, 1, 10))
        recent = await self._storeAt(cache, datetime(2024, 1, 1, 2, 20))
        self._at(datetime(2024, 1, 1, 2, 30))
        # keep_jobs 1 hour: the cutoff would be 01:30; it is 01:00.
        cache.startPruning()
        await cache.flush()
        self.assertEqual([j["jid"] for j in await cache.listJobs()], [recent, straddling])
        self.assertEqual(list(await cache.getReturns(straddling)), ["a"])
        tables = {n for (n,) in self._query("SELECT tablename FROM pg_tables")}
        self.assertNotIn("salttwist_returns_p2024010100", tables)
        self.assertIn("salttwist_returns_p2024010101", tables)
        # An hour later the straddling hour goes whole.
        self.clock.advance(3600)
        await cache.flush()
        self.assertEqual([j["jid"] for j in await cache.listJobs()], [recent])
        tables = {n for (n,) in self._query("SELECT tablename FROM pg_tables")}
        self.assertNotIn("salttwist_returns_p2024010101", tables)
        self.assertIsNone(await cache.getJob(old))
        # The contract's prune is exact.
        self.assertEqual(await cache.prune(3600 - 60), 2)
        self.assertEqual(await cache.listJobs(), [])

    async def test_pruneDeletesTheExpiredJobsReturns(self) -> None:
        """
        In an hour that holds newer jobs too, the prune deletes the expired
        jobs and exactly their returns, and the returns without a job whose
        jid is older than the cutoff; nothing in the hours after it.
        """
        cache = await self._cache()
        expired = await self._storeAt(cache, datetime(2024, 1, 1, 1, 10))
        await cache.storeReturn(expired, "b", {"return": 2})
        kept = await self._storeAt(cache, datetime(2024, 1, 1, 1, 50))
        orphan = self._at(datetime(2024, 1, 1, 1, 20))
        await cache.storeReturn(orphan, "c", {"return": 3})
        lateOrphan = self._at(datetime(2024, 1, 1, 3, 0))
        await cache.storeReturn(lateOrphan, "d", {"return": 4})
        self._at(datetime(2024, 1, 1, 3, 30))
        # The cutoff: 01:30.
        self.assertEqual(await cache.prune(2 * 3600), 4)
        self.assertIsNone(await cache.getJob(expired))
        self.assertEqual(await cache.getReturns(expired), {})
        self.assertEqual(await cache.getReturns(orphan), {})
        self.assertEqual(list(await cache.getReturns(kept)), ["a"])
        self.assertEqual(list(await cache.getReturns(lateOrphan)), ["d"])

    async def test_exactTargets(self) -> None:
        """
        A target without glob characters matches a job whose target is that
        string, or a list holding it, exactly: not a longer one, and the
        characters C{LIKE} treats specially (C{%}, C{_}, C{\\}) are
        themselves. The query uses C{tgt_match &&}, which the GIN index of
        migration 4 serves.
        """
        cache = await self._cache()
        targets = [
            ("a", "web1.example.com"),
            ("b", ["db1", "web1.example.com"]),
            ("c", "web1.example.com.au"),
            ("d", "100%_sure\\"),
            ("e", "100x_sure\\"),
        ]
        jids = {}
        for n, (name, tgt) in enumerate(targets):
            jids[name] = f"20240101000000{n:06d}"
            await cache.storeJob(jids[name], load(tgt=tgt), [])
            self.clock.advance(1)

        async def listed(target: str) -> list[str]:
            return sorted(j["jid"] for j in await cache.listJobs(searchTarget=target, limit=10))

        self.assertEqual(await listed("web1.example.com"), [jids["a"], jids["b"]])
        self.assertEqual(await listed("db1,web1.example.com.au"), [jids["b"], jids["c"]])
        self.assertEqual(await listed("100%_sure\\"), [jids["d"]])
        self.assertEqual(await listed("web1"), [])
        query, params, checks = listJobsQuery(None, ["web1"], None, None, 10)
        self.assertIn("tgt_match && %s::text[]", query)
        self.assertEqual((params, checks), ([["web1"], 10], []))
        indexes = {n for (n,) in self._query("SELECT indexname FROM pg_indexes")}
        self.assertIn("salttwist_jobs_tgt_match", indexes)

    async def test_classGlobsInSql(self) -> None:
        """
        Globs with simple character classes (C{[ab]*}, C{web[0-9]?}, C{[!a-c]*})
        are matched in SQL as regular expressions and list exactly the jobs
        L{fnmatch.fnmatchcase} matches; classes PostgreSQL reads otherwise
        (C{[z-a]}, C{[]a]}, C{[a\\b]}) are still matched in Python.
        """
        import fnmatch

        cache = await self._cache()
        jobs = [
            ("test.ping", "web1"),
            ("cmd.run", ["app2", "db1"]),
            ("state.apply", "web12.x"),
            ("test.echo", "]a"),
            ("grains.items", "b-1"),
            ("pkg.install", "a\\b"),
        ]
        for n, (fun, tgt) in enumerate(jobs):
            await cache.storeJob(f"20240101000000{n:06d}", load(fun, tgt), [])
            self.clock.advance(1)
        for pattern in ("[ab]*", "web[0-9]?", "[!a-c]*", "*[0-9]", "[-b]-1", "[]a]*", "[a\\\\b]*"):
            expected = sorted(
                f"20240101000000{n:06d}"
                for n, (fun, tgt) in enumerate(jobs)
                if any(
                    fnmatch.fnmatchcase(t, pattern)
                    for t in (tgt if isinstance(tgt, list) else [tgt])
                )
            )
            listed = sorted(j["jid"] for j in await cache.listJobs(searchTarget=[pattern]))
            self.assertEqual(listed, expected, pattern)
        for pattern in ("test.[pe]*", "[!t]*"):
            expected = sorted(
                f"20240101000000{n:06d}"
                for n, (fun, _) in enumerate(jobs)
                if fnmatch.fnmatchcase(fun, pattern)
            )
            listed = sorted(j["jid"] for j in await cache.listJobs(searchFunction=[pattern]))
            self.assertEqual(listed, expected, pattern)
        _, _, checks = listJobsQuery(["test.[pe]*"], ["web[0-9]?", "[!a-c]*"], None, None, 5)
        self.assertEqual(checks, [])
        _, _, checks = listJobsQuery(None, ["[z-a]"], None, None, 5)
        self.assertEqual(len(checks), 1)

    async def test_smallValuesRead(self) -> None:
        """
        Returns, retcodes and successes of one msgpack byte (looked up, not
        unpacked) read back as stored, booleans and C{None} included; empty
        lists and maps are new objects for each return.
        """
        cache = await self._cache()
        jid = "20240101000000000001"
        values: list[Any] = [True, False, None, 0, 127, -1, -32, 128, -33, [], {}, "", 1.5]
        for n, value in enumerate(values):
            await cache.storeReturn(
                jid, f"m{n:02d}", {"return": value, "retcode": n - 3, "success": value}
            )
        returns = await cache.getReturns(jid)
        for n, value in enumerate(values):
            ret = returns[f"m{n:02d}"]
            self.assertEqual(
                (ret["return"], type(ret["return"]), ret["retcode"], ret["success"]),
                # An integer success reads as a boolean (the cache stores
                # booleans as 1 and 0).
                (value, type(value), n - 3, bool(value) if type(value) is int else value),
            )
        await cache.storeReturn(jid, "other", {"return": [], "retcode": 0, "success": True})
        returns = await cache.getReturns(jid)
        self.assertIsNot(returns["other"]["return"], returns["m09"]["return"])
