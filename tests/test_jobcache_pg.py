# -*- test-case-name: tests.test_jobcache_pg -*-
"""
Tests for L{salttwist.master.jobcache_pg} and its SQL,
L{salttwist.master.jobcache_pgsql}: the L{IJobCache} contract against
a real PostgreSQL server, then its migrations, replays, partitions and
pruning, and connection loss.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import TestCase

from salttwist.interfaces import IJobCache
from salttwist.master.jobcache import JobCacheError
from salttwist.master.jobcache_pg import PostgresJobCache, connectionOptions
from salttwist.master.jobcache_pgsql import (
    MIGRATIONS,
    JobCacheUnavailable,
    PostgresJobCacheDatabase,
    migrate,
)
from tests._postgres import temporaryDatabase
from tests.test_jobcache_contract import NOW, RealJobCacheTests, jid, load


def _connect(options: dict[str, Any]) -> Any:
    import psycopg

    return psycopg.connect(autocommit=True, **options)


_VERSIONS = "SELECT version FROM salttwist_jobcache_migrations ORDER BY 1"


class PostgresJobCacheContractTests(RealJobCacheTests, TestCase):
    """
    L{PostgresJobCache} keeps the L{IJobCache} contract.
    """

    def makeCache(self) -> Deferred[IJobCache]:
        cache = PostgresJobCache(temporaryDatabase(self), reactor, clock=self.clock)
        self.addCleanup(cache.close)
        return cache.whenOpen().addCallback(lambda _: cache)


class PostgresJobCacheTests(TestCase):
    """
    What the PostgreSQL cache does besides the contract.
    """

    def setUp(self) -> None:
        from twisted.internet.task import Clock

        self.clock = Clock()
        self.clock.advance(NOW)
        self.options = temporaryDatabase(self)

    async def _cache(self, **kwargs: Any) -> PostgresJobCache:
        cache = PostgresJobCache(self.options, reactor, clock=self.clock, **kwargs)
        self.addCleanup(cache.close)
        await cache.whenOpen()
        return cache

    def _query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with _connect(self.options) as connection:
            return connection.execute(sql, params).fetchall()  # type: ignore[no-any-return]

    async def test_migrationsApplied(self) -> None:
        """
        Opening a new database applies every migration once and records
        each version; opening it again applies none.
        """
        await (await self._cache()).close()
        versions = [v for v, _, _ in MIGRATIONS]
        self.assertEqual(
            [
                v
                for (v,) in self._query(
                    "SELECT version FROM salttwist_jobcache_migrations ORDER BY 1"
                )
            ],
            versions,
        )
        with _connect(self.options) as connection:
            self.assertEqual(migrate(connection, MIGRATIONS), [])
        indexes = {n for (n,) in self._query("SELECT indexname FROM pg_indexes")}
        self.assertIn("salttwist_jobs_start_time", indexes)
        self.assertIn("salttwist_jobs_fun", indexes)

    async def test_missingMigrationsApplied(self) -> None:
        """
        A database at an older version gets the later migrations, in order,
        and keeps its rows.
        """
        with _connect(self.options) as connection:
            self.assertEqual(migrate(connection, MIGRATIONS[:1]), [1])
        indexes = {n for (n,) in self._query("SELECT indexname FROM pg_indexes")}
        self.assertNotIn("salttwist_jobs_start_time", indexes)
        cache = await self._cache()
        await cache.storeJob(jid(1), load(), ["a"])
        self.assertEqual((await cache.getJob(jid(1)))["jid"], jid(1))
        self.assertEqual(
            [
                v
                for (v,) in self._query(
                    "SELECT version FROM salttwist_jobcache_migrations ORDER BY 1"
                )
            ],
            [v for v, _, _ in MIGRATIONS],
        )
        indexes = {n for (n,) in self._query("SELECT indexname FROM pg_indexes")}
        self.assertIn("salttwist_jobs_start_time", indexes)

    async def test_newerSchemaRefused(self) -> None:
        """
        A database with a schema version this code does not know is refused
        with a L{JobCacheError} naming both versions.
        """
        with _connect(self.options) as connection:
            migrate(connection, MIGRATIONS)
            connection.execute(
                "INSERT INTO salttwist_jobcache_migrations (version, description)"
                " VALUES (999, 'from the future')"
            )
        cache = PostgresJobCache(self.options, reactor, clock=self.clock)
        self.addCleanup(cache.close)
        with self.assertRaises(JobCacheError) as raised:
            await cache.whenOpen()
        self.assertIn("999", str(raised.exception))
        self.flushLoggedErrors(JobCacheError)

    async def test_replaysStoredOnce(self) -> None:
        """
        A job and a return replayed, in one batch or in several, and by
        another master's cache on the same database, are stored once: the
        first is kept.
        """
        first = await self._cache()
        second = await self._cache()
        writes = [
            first.storeJob(jid(1), load("test.ping"), ["a"]),
            first.storeReturn(jid(1), "a", {"return": "first"}),
            first.storeReturn(jid(1), "a", {"return": "same batch"}),
            first.storeJob(jid(1), load("cmd.run"), ["b"]),
        ]
        for d in writes:
            await d
        await second.storeJob(jid(1), load("test.echo"), ["c"])
        await second.storeReturn(jid(1), "a", {"return": "other master"})
        self.assertEqual((await second.getJob(jid(1)))["fun"], "test.ping")
        self.assertEqual((await second.getReturns(jid(1)))["a"]["return"], "first")
        self.assertEqual(self._query("SELECT count(*) FROM salttwist_returns"), [(1,)])
        self.assertEqual(self._query("SELECT count(*) FROM salttwist_jobs"), [(1,)])

    async def test_partitionPerHour(self) -> None:
        """
        Rows go to the partition of their jid's hour, made on demand; a
        jid whose digits are no date gets one too.
        """
        cache = await self._cache()
        odd = "99999999990000000000"
        await cache.storeJob(jid(1), load(), ["a"])
        await cache.storeReturn(jid(1), "a", {"return": 1})
        await cache.storeReturn(odd, "a", {"return": 2})
        self.assertEqual(
            self._query("SELECT tableoid::regclass::text FROM salttwist_returns ORDER BY jid"),
            [("salttwist_returns_p2024010100",), ("salttwist_returns_p9999999999",)],
        )
        self.assertEqual(
            self._query("SELECT tableoid::regclass::text FROM salttwist_jobs"),
            [("salttwist_jobs_p2024010100",)],
        )
        self.assertEqual(list(await cache.getReturns(odd)), ["a"])

    async def test_pruneDropsPartitions(self) -> None:
        """
        C{prune} drops the partitions of the hours whose jobs all started
        before the cutoff (the rows are gone, and so are the tables), and
        deletes the expired rows of an hour that also holds a newer job.
        """
        from datetime import datetime

        # Jids are local times: store these three hours later.
        self.clock.advance(datetime(2024, 1, 1, 3).timestamp() - self.clock.seconds())
        cache = await self._cache()
        old = "20240101000000000001"
        alsoOld = "20240101010000000001"
        straddling = "20240101020000000001"
        newer = "20240101020000000002"
        for j in (old, alsoOld, straddling):
            await cache.storeJob(j, load(), ["a"])
            await cache.storeReturn(j, "a", {"return": 1})
        self.clock.advance(100)
        await cache.storeJob(newer, load(), ["a"])
        await cache.storeReturn(newer, "a", {"return": 1})
        self.assertEqual(await cache.prune(50), 6)
        tables = {n for (n,) in self._query("SELECT tablename FROM pg_tables")}
        self.assertNotIn("salttwist_jobs_p2024010100", tables)
        self.assertNotIn("salttwist_returns_p2024010101", tables)
        self.assertIn("salttwist_jobs_p2024010102", tables)
        self.assertEqual([job["jid"] for job in await cache.listJobs()], [newer])
        self.assertEqual(list(await cache.getReturns(newer)), ["a"])
        self.assertEqual(await cache.getReturns(straddling), {})
        # A late return for a dropped hour makes its partition again.
        await cache.storeReturn(old, "b", {"return": 1})
        self.assertEqual(list(await cache.getReturns(old)), ["b"])

    async def test_partitionDroppedByAnotherMaster(self) -> None:
        """
        A write for an hour whose partitions another master dropped after
        this one made them makes them again and is stored.
        """
        from datetime import datetime

        self.clock.advance(datetime(2024, 1, 1, 3).timestamp() - self.clock.seconds())
        first = await self._cache()
        second = await self._cache()
        old = "20240101000000000001"
        await first.storeJob(old, load(), ["a"])
        self.clock.advance(100)
        self.assertEqual(await second.prune(50), 1)
        self.assertNotIn(
            ("salttwist_returns_p2024010100",), self._query("SELECT tablename FROM pg_tables")
        )
        await first.storeReturn(old, "a", {"return": "late"})
        self.assertEqual((await second.getReturns(old))["a"]["return"], "late")

    async def test_pruneAfterAnotherMasterDropped(self) -> None:
        """
        Partitions another master dropped after this one listed them are
        skipped: the prune removes nothing more and does not fail.
        """
        await (await self._cache()).close()
        database = PostgresJobCacheDatabase(self.options)
        self.addCleanup(database.close)
        database.open()
        database.writeBatch([], [("20240101000000000001", "a", b"\xc0", 0, 1, NOW)])
        with _connect(self.options) as connection:
            connection.execute(
                "DROP TABLE salttwist_jobs_p2024010100, salttwist_returns_p2024010100"
            )
        self.assertEqual(database._dropIfExpired(database._connect(), "2024010100", NOW + 1), 0)
        self.assertNotIn("2024010100", database._partitions)

    async def test_pruneOrphanReturns(self) -> None:
        """
        A return with no job expires by the time of its jid.
        """
        cache = await self._cache()
        await cache.storeReturn(jid(1), "a", {"return": 1})
        # jid(1) is 2024-01-01 00:00, local time.
        from datetime import datetime

        self.clock.advance(datetime(2024, 1, 2).timestamp() - self.clock.seconds())
        self.assertEqual(await cache.prune(3600), 1)
        self.assertEqual(await cache.getReturns(jid(1)), {})

    async def test_globsWithClasses(self) -> None:
        """
        A glob with a character class is matched as L{fnmatch} does, over
        rows read newest first, and C{limit} still keeps the newest.
        """
        cache = await self._cache()
        for n, (fun, tgt) in enumerate(
            [("test.ping", "web1"), ("test.echo", ["db1", "web2"]), ("cmd.run", "web3")],
            start=1,
        ):
            await cache.storeJob(jid(n), load(fun, tgt), [])
            self.clock.advance(10)

        async def jids(**kwargs: Any) -> list[str]:
            return [job["jid"] for job in await cache.listJobs(**kwargs)]

        self.assertEqual(await jids(searchTarget="web[12]"), [jid(2), jid(1)])
        self.assertEqual(await jids(searchTarget="web[12]", limit=1), [jid(2)])
        self.assertEqual(await jids(searchFunction="test.[!p]*"), [jid(2)])
        self.assertEqual(await jids(searchFunction="test.*", searchTarget="d?1"), [jid(2)])
        self.assertEqual(await jids(searchFunction="test_ping"), [])
        self.assertEqual(await jids(searchTarget="web%"), [])

    def test_likeIsFnmatch(self) -> None:
        """
        The C{LIKE} patterns made of globs without character classes match,
        in PostgreSQL, exactly the strings L{fnmatch.fnmatchcase} matches,
        whatever C{%}, C{_} and backslashes they hold (2,000 random pairs).
        """
        import fnmatch
        import random

        from salttwist.master.jobcache_pgsql import _likePattern

        rng = random.Random(23)
        alphabet = "ab%_\\*?."
        patterns = ["".join(rng.choices(alphabet, k=rng.randint(0, 6))) for _ in range(2000)]
        strings = ["".join(rng.choices("ab%_\\.", k=rng.randint(0, 5))) for _ in range(2000)]
        with _connect(self.options) as connection:
            matched = connection.execute(
                "SELECT s LIKE p FROM unnest(%s::text[], %s::text[]) AS t(s, p)",
                (strings, [_likePattern(p) for p in patterns]),
            ).fetchall()
        expected = [fnmatch.fnmatchcase(s, p) for s, p in zip(strings, patterns, strict=True)]
        self.assertEqual([m for (m,) in matched], expected)
        self.assertGreater(sum(expected), 50)

    async def test_connectionLostMidOperation(self) -> None:
        """
        When the server ends the cache's connection, the next operation
        reconnects and runs: nothing is lost.
        """
        cache = await self._cache()
        await cache.storeJob(jid(1), load(), ["a"])
        with _connect(self.options) as connection:
            killed = connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND application_name = 'salttwist-master'",
                (self.options["dbname"],),
            ).fetchall()
        self.assertEqual(killed, [(True,)])
        await cache.storeReturn(jid(1), "a", {"return": 1})
        self.assertEqual(list(await cache.getReturns(jid(1))), ["a"])
        self.assertEqual(cache.database.connections, 2)

    async def test_deadServerNoticed(self) -> None:
        """
        The connection has TCP keepalives and a user timeout (so a server
        that vanished without closing it fails the operation in flight in
        about 30 s); the cache's own options win over these defaults.
        """
        cache = await self._cache()
        await cache.getJob(jid(1))
        connection = cache.database._connection
        assert connection is not None
        parameters = connection.info.get_parameters()
        self.assertEqual(
            {key: parameters.get(key) for key in ("keepalives_idle", "tcp_user_timeout")},
            {"keepalives_idle": "10", "tcp_user_timeout": "30000"},
        )
        options = {**self.options, "tcp_user_timeout": 5000}
        own = PostgresJobCache(options, reactor, clock=self.clock)
        self.addCleanup(own.close)
        await own.whenOpen()
        assert own.database._connection is not None
        self.assertEqual(own.database._connection.info.get_parameters()["tcp_user_timeout"], "5000")

    async def test_unreachable(self) -> None:
        """
        With no server, the cache fails to open and each write fails with
        L{JobCacheUnavailable} naming the server, logged at critical level
        with the number of rows not stored; attempts back off.
        """
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        options = {"host": "127.0.0.1", "port": port, "dbname": "x", "user": "u"}
        times = [0.0]
        database = PostgresJobCacheDatabase(options, monotonic=lambda: times[0])
        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        cache = PostgresJobCache(options, reactor, clock=self.clock, database=database)
        self.addCleanup(cache.close)
        with self.assertRaises(JobCacheUnavailable) as raised:
            await cache.whenOpen()
        self.assertIn(f"u@127.0.0.1:{port}/x", str(raised.exception))
        with self.assertRaises(JobCacheUnavailable) as raised:
            await cache.storeJob(jid(1), load(), ["a"])
        self.assertIn("next attempt in 0.5 s", str(raised.exception))
        times[0] = 1.0
        with self.assertRaises(JobCacheUnavailable) as raised:
            await cache.storeJob(jid(1), load(), ["a"])
        self.assertIn("cannot connect", str(raised.exception))
        critical = [e for e in logged if "NOT stored" in e.get("log_format", "")]
        self.assertEqual([e["rows"] for e in critical], [1, 1])
        self.flushLoggedErrors(JobCacheUnavailable)

    async def test_reconnectsWhenServerReturns(self) -> None:
        """
        A cache opened while the server was unreachable connects, and
        migrates, once it can.
        """
        good = dict(self.options)
        times = [0.0]
        database = PostgresJobCacheDatabase({**good, "port": 1}, monotonic=lambda: times[0])
        cache = PostgresJobCache(good, reactor, clock=self.clock, database=database)
        self.addCleanup(cache.close)
        with self.assertRaises(JobCacheUnavailable):
            await cache.whenOpen()
        self.flushLoggedErrors(JobCacheUnavailable)
        database.options = good
        times[0] = 1.0
        await cache.storeJob(jid(1), load(), ["a"])
        self.assertEqual((await cache.getJob(jid(1)))["jid"], jid(1))

    async def test_logsUnavailableAndReconnected(self) -> None:
        """
        The cache logs once that its server is unavailable (saying that jobs
        are refused and returns not stored, and the back-off), however many
        operations fail, and once that it reconnected, with how many
        operations failed meanwhile.
        """
        good = dict(self.options)
        times = [0.0]
        database = PostgresJobCacheDatabase({**good, "port": 1}, monotonic=lambda: times[0])
        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        cache = PostgresJobCache(good, reactor, clock=self.clock, database=database)
        self.addCleanup(cache.close)
        with self.assertRaises(JobCacheUnavailable):
            await cache.whenOpen()
        with self.assertRaises(JobCacheUnavailable):
            await cache.storeJob(jid(1), load(), ["a"])
        self.flushLoggedErrors(JobCacheUnavailable)
        self.clock.advance(7)
        database.options = good
        times[0] = 1.0
        await cache.storeJob(jid(1), load(), ["a"])
        await cache.getJob(jid(1))
        unavailable = [e for e in logged if "is unavailable" in e.get("log_format", "")]
        self.assertEqual(len(unavailable), 1)
        self.assertIn("refused", unavailable[0]["log_format"])
        self.assertEqual((unavailable[0]["initial"], unavailable[0]["maximum"]), (0.5, 5.0))
        reconnected = [e for e in logged if "reconnected" in e.get("log_format", "")]
        self.assertEqual([(e["seconds"], e["failed"]) for e in reconnected], [(7, 2)])

    def test_nulInFunRefused(self) -> None:
        """
        A C{fun} holding NUL, which PostgreSQL text cannot hold, fails its
        call with L{ValueError} and fails no other write.
        """
        cache = PostgresJobCache.__new__(PostgresJobCache)
        self.failureResultOf(cache.storeJob(jid(1), load("a\x00b"), []), ValueError)


class ConnectionOptionsTests(TestCase):
    """
    L{connectionOptions} reads Salt's C{returner.pgjsonb.*} options.
    """

    def test_options(self) -> None:
        """
        Each set option becomes its libpq parameter; unset ones are left
        out.
        """
        config = {
            "returner.pgjsonb.host": "db.example",
            "returner.pgjsonb.port": 5433,
            "returner.pgjsonb.db": "salt",
            "returner.pgjsonb.user": "salt",
            "returner.pgjsonb.pass": "secret",
            "returner.pgjsonb.sslmode": "verify-full",
            "returner.pgjsonb.sslrootcert": None,
        }
        self.assertEqual(
            connectionOptions(config),
            {
                "host": "db.example",
                "port": 5433,
                "dbname": "salt",
                "user": "salt",
                "password": "secret",
                "sslmode": "verify-full",
            },
        )
