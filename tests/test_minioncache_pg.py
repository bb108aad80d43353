# -*- test-case-name: tests.test_minioncache_pg -*-
"""
Tests for L{salttwist.master.minioncache_pg}: one contract for the grains
cache and one for the pillar cache, run on the embedded caches and on the
PostgreSQL ones; then what a cluster needs of the PostgreSQL caches: two
masters (two stores on one database) see each other's grains and pillars,
removals included, a master's own newer write is never undone by an older
row, and a store opened later loads everything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from twisted.internet import reactor, task
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.trial.unittest import TestCase
from zope.interface.verify import verifyObject

from salttwist import serial
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.master.core import runSynchronously
from salttwist.master.grainscache import MAX_GRAINS_BYTES, GrainsCache
from salttwist.master.interfaces import IGrainsCache, IPillarCache
from salttwist.master.minioncache_pg import (
    MinionCacheError,
    MinionDataStore,
    PostgresGrainsCache,
    PostgresPillarCache,
    _connect,
    cachesFromConfig,
    connectionOptions,
)
from salttwist.master.pillarcache import PillarCache
from tests._postgres import temporaryDatabase

WAIT = 20.0


@inlineCallbacks
def waitFor(predicate: Callable[[], bool], what: str) -> Any:
    """
    Poll C{predicate} on the reactor until true; fail after L{WAIT} seconds.
    """
    for _ in range(int(WAIT / 0.02)):
        if predicate():
            return
        yield task.deferLater(reactor, 0.02, lambda: None)
    raise AssertionError(f"never happened: {what}")


def openStore(testCase: TestCase, options: dict[str, Any]) -> MinionDataStore:
    """
    @return: a started store over C{options}, stopped at the test's end.
    """
    store = MinionDataStore(options, reactor)
    store.startService()
    testCase.addCleanup(store.stopService)
    return store


class GrainsCacheContractMixin:
    """
    What every grains cache does, for L{makeCache}.
    """

    def makeCache(self) -> Any:
        raise NotImplementedError

    @inlineCallbacks
    def test_interface(self) -> Any:
        """
        The cache provides L{IGrainsCache}.
        """
        cache = yield self.makeCache()
        self.assertTrue(verifyObject(IGrainsCache, cache))

    @inlineCallbacks
    def test_updateThenRead(self) -> Any:
        """
        Updated grains are read back from C{grains}; a second update
        replaces them.
        """
        cache = yield self.makeCache()
        yield cache.update("web1", {"os": "Debian"})
        self.assertEqual(cache.grains["web1"], {"os": "Debian"})
        yield cache.update("web1", {"os": "Alpine"})
        self.assertEqual(cache.grains, {"web1": {"os": "Alpine"}})

    @inlineCallbacks
    def test_forget(self) -> Any:
        """
        Forgotten grains are gone; the others stay.
        """
        cache = yield self.makeCache()
        yield cache.update("web1", {"os": "Debian"})
        yield cache.update("web2", {"os": "Debian"})
        yield cache.forget("web1")
        self.assertEqual(list(cache.grains), ["web2"])

    @inlineCallbacks
    def test_refused(self) -> Any:
        """
        Grains that are not a map, or too large, are refused with
        L{ValueError}, and nothing is kept.
        """
        cache = yield self.makeCache()
        self.assertRaises(ValueError, cache.update, "web1", ["os"])
        big = {"blob": "x" * (MAX_GRAINS_BYTES + 1)}
        error = self.assertRaises(ValueError, cache.update, "web1", big)
        self.assertIn("exceed", str(error))
        self.assertEqual(cache.grains, {})


class PillarCacheContractMixin:
    """
    What every pillar cache does, for L{makePillarCache}.
    """

    def makePillarCache(self) -> Any:
        raise NotImplementedError

    @inlineCallbacks
    def test_pillarInterface(self) -> Any:
        """
        The cache provides L{IPillarCache}.
        """
        cache = yield self.makePillarCache()
        self.assertTrue(verifyObject(IPillarCache, cache))

    @inlineCallbacks
    def test_storeGetFresh(self) -> Any:
        """
        A stored pillar is read back, fresh within the TTL for its env only.
        """
        cache = yield self.makePillarCache()
        cache.store("web1", {"secret": "s3"}, stamp=100.0, env=("base", None))
        self.assertEqual(cache.get("web1"), {"secret": "s3"})
        self.assertEqual(cache.fresh("web1", ("base", None), 150.0, 60), {"secret": "s3"})
        self.assertIsNone(cache.fresh("web1", ("dev", None), 150.0, 60))
        self.assertIsNone(cache.fresh("web1", ("base", None), 170.0, 60))
        self.assertEqual(dict(cache.byId()), {"web1": {"secret": "s3"}})

    @inlineCallbacks
    def test_forgetAndGeneration(self) -> Any:
        """
        L{forget} drops the pillar and moves the generation on.
        """
        cache = yield self.makePillarCache()
        cache.store("web1", {"a": 1})
        generation = cache.generation("web1")
        cache.forget("web1")
        self.assertIsNone(cache.get("web1"))
        self.assertEqual(cache.generation("web1"), generation + 1)

    @inlineCallbacks
    def test_keepOnly(self) -> Any:
        """
        L{keepOnly} drops the pillars of the minions it does not name.
        """
        cache = yield self.makePillarCache()
        cache.store("web1", {"a": 1})
        cache.store("web2", {"a": 2})
        cache.keepOnly(frozenset({"web2"}))
        self.assertEqual(list(cache.byId()), ["web2"])


class EmbeddedCachesTests(GrainsCacheContractMixin, PillarCacheContractMixin, TestCase):
    """
    The contracts on the embedded caches (C{cache: localfs}).
    """

    def makeCache(self) -> Deferred[GrainsCache]:
        path = os.path.join(os.path.abspath(self.mktemp()), "grains.cache")
        cache = GrainsCache(path, runSynchronously)
        cache.load()
        d: Deferred[GrainsCache] = Deferred()
        d.callback(cache)
        return d

    def makePillarCache(self) -> Deferred[PillarCache]:
        d: Deferred[PillarCache] = Deferred()
        d.callback(PillarCache())
        return d


class PostgresCachesTests(GrainsCacheContractMixin, PillarCacheContractMixin, TestCase):
    """
    The contracts on the PostgreSQL caches, then two masters sharing them.
    """

    timeout = 60

    def setUp(self) -> None:
        self.options = temporaryDatabase(self)

    @inlineCallbacks
    def makeCache(self) -> Any:
        store = openStore(self, self.options)
        yield store.whenLoaded()
        return PostgresGrainsCache(store)

    @inlineCallbacks
    def makePillarCache(self) -> Any:
        store = openStore(self, self.options)
        yield store.whenLoaded()
        return PostgresPillarCache(store)

    @inlineCallbacks
    def twoMasters(self) -> Any:
        """
        @return: C{(grainsA, pillarA, grainsB, pillarB)} over two stores on
            one database.
        """
        caches = []
        for _ in range(2):
            store = openStore(self, self.options)
            caches += [PostgresGrainsCache(store), PostgresPillarCache(store)]
            yield store.whenLoaded()
        return caches

    @inlineCallbacks
    def test_grainsReachTheOtherMaster(self) -> Any:
        """
        Grains reported to A are in B's memory soon after; so is their
        removal (a deleted key).
        """
        grainsA, _, grainsB, _ = yield self.twoMasters()
        yield grainsA.update("web1", {"os": "Debian", "roles": ["web"]})
        yield waitFor(lambda: "web1" in grainsB.grains, "B has web1's grains")
        self.assertEqual(grainsB.grains["web1"], {"os": "Debian", "roles": ["web"]})
        yield grainsA.forget("web1")
        yield waitFor(lambda: "web1" not in grainsB.grains, "B dropped web1's grains")

    @inlineCallbacks
    def test_pillarReachesTheOtherMaster(self) -> Any:
        """
        A pillar compiled on A is in B's cache for targeting, but never
        fresh for B's C{pillar_cache}; its removal reaches B; A's
        L{keepOnly} (local acceptance) does not remove it from the database.
        """
        _, pillarA, _, pillarB = yield self.twoMasters()
        pillarA.store("web1", {"role": "db"}, stamp=100.0)
        yield waitFor(lambda: pillarB.get("web1") is not None, "B has web1's pillar")
        self.assertEqual(pillarB.get("web1"), {"role": "db"})
        self.assertIsNone(pillarB.fresh("web1", (None, None), 100.0, 3600))
        pillarA.keepOnly(frozenset())
        self.assertIsNone(pillarA.get("web1"))
        store = openStore(self, self.options)
        late = PostgresPillarCache(store)
        yield store.whenLoaded()
        self.assertEqual(late.get("web1"), {"role": "db"})
        pillarB.forget("web1")
        yield waitFor(lambda: late.get("web1") is None, "the late store dropped it")

    @inlineCallbacks
    def test_laterStoreLoadsEverything(self) -> Any:
        """
        A master started later (or reconnected) reads every row at once,
        removals included.
        """
        grainsA, _, _, _ = yield self.twoMasters()
        yield grainsA.update("web1", {"os": "Debian"})
        yield grainsA.update("web2", {"os": "Alpine"})
        yield grainsA.forget("web2")
        store = openStore(self, self.options)
        late = PostgresGrainsCache(store)
        yield store.whenLoaded()
        self.assertEqual(late.grains, {"web1": {"os": "Debian"}})

    @inlineCallbacks
    def test_ownPendingWriteWins(self) -> Any:
        """
        A row read from the database does not replace a minion's grains
        while this master's newer write of them is on its way, nor once
        that write committed with a higher version.
        """
        grainsA, _, grainsB, _ = yield self.twoMasters()
        store = grainsB.dataStore
        yield grainsA.update("web1", {"os": "old"})
        yield waitFor(lambda: "web1" in grainsB.grains, "B has web1's grains")
        writing = grainsB.update("web1", {"os": "new"})
        version = store._versions[("grains", "web1")]
        # An older row (as a late notification would give) is ignored.
        store._deliver([("grains", "web1", version + 100, serial.dumps({"os": "stale"}))])
        self.assertEqual(grainsB.grains["web1"], {"os": "new"})
        yield writing
        yield waitFor(lambda: grainsA.grains["web1"] == {"os": "new"}, "A has B's grains")
        store._deliver([("grains", "web1", version, serial.dumps({"os": "old"}))])
        self.assertEqual(grainsB.grains["web1"], {"os": "new"})

    @inlineCallbacks
    def test_connectionsCut(self) -> Any:
        """
        With every connection of both stores cut by the server (a restart,
        an admin), a write made meanwhile is tried again on a new
        connection and reaches the other master, whose listener reconnects
        and reloads.
        """
        import psycopg

        grainsA, _, grainsB, _ = yield self.twoMasters()
        yield grainsA.update("web1", {"os": "Debian"})
        yield waitFor(lambda: "web1" in grainsB.grains, "B has web1's grains")
        with psycopg.connect(**self.options, autocommit=True) as admin:
            cut = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND application_name = 'salttwist-minioncache'"
            ).fetchone()
        self.assertGreaterEqual(cut[0], 3)
        yield grainsA.update("web2", {"os": "Alpine"})
        yield waitFor(lambda: "web2" in grainsB.grains, "B has web2's grains")
        yield waitFor(lambda: grainsB.dataStore.connected, "B's listener back")
        self.assertEqual(grainsB.grains["web2"], {"os": "Alpine"})

    def test_statementTimeout(self) -> None:
        """
        The stores' connections have a C{statement_timeout}, so a stuck
        statement cannot hold a thread for ever.
        """
        with _connect(self.options) as connection:
            [(value,)] = connection.execute("SHOW statement_timeout").fetchall()
        self.assertEqual(value, "1min")

    @inlineCallbacks
    def test_unreachableServer(self) -> Any:
        """
        A write to a server that cannot be reached fails with
        L{MinionCacheError} naming the server; the grains stay in memory.
        """
        options = dict(self.options, port=1, connect_timeout=2)
        store = openStore(self, options)
        cache = PostgresGrainsCache(store)
        yield cache.update("web1", {"os": "Debian"})
        self.assertEqual(cache.grains, {"web1": {"os": "Debian"}})
        error = yield self.assertFailure(store.write("grains", "web2", b"\x80"), MinionCacheError)
        self.assertIn(":1/", str(error))
        self.assertFalse(store.connected)


class ConfigTests(TestCase):
    """
    C{cache} and C{cache.postgres.*}.
    """

    def config(self, text: str) -> dict[str, Any]:
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        with open(os.path.join(directory, "master"), "w") as f:
            f.write(text)
        return loadMasterConfig(directory)

    def test_default(self) -> None:
        """
        By default each master has its own caches: no store.
        """
        self.assertIsNone(cachesFromConfig(self.config(""), reactor))

    def test_options(self) -> None:
        """
        C{cache.postgres.*} are the libpq parameters.
        """
        config = self.config(
            "cache: postgres\nkeys.cache_driver: postgres\n"
            "cache.postgres.host: db\ncache.postgres.pass: pw\n"
        )
        options = connectionOptions(config)
        self.assertEqual(
            options,
            {
                "host": "db",
                "port": 5432,
                "dbname": "salt",
                "user": "salt",
                "password": "pw",
                "connect_timeout": 10,
            },
        )
        made = cachesFromConfig(config, reactor)
        assert made is not None
        self.assertIsInstance(made[1], PostgresGrainsCache)

    def test_needsSharedKeys(self) -> None:
        """
        C{cache: postgres} with each master's own keys is refused, saying so.
        """
        error = self.assertRaises(
            ValueError, cachesFromConfig, self.config("cache: postgres\n"), reactor
        )
        self.assertIn("keys.cache_driver: postgres", str(error))

    def test_badDriver(self) -> None:
        """
        An unknown C{cache} driver is refused at start.
        """
        error = self.assertRaises(ConfigError, self.config, "cache: redis\n")
        self.assertIn("cache", str(error))
