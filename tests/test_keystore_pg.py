# -*- test-case-name: tests.test_keystore_pg -*-
"""
Tests for L{salttwist.pki.keystore_pg}: the L{IKeyStore} contract against a
real PostgreSQL server, then what a cluster needs: a change made through one
store reaches another on the same database, versions keep older states out,
and the listener reloads after losing its connection.
"""

from __future__ import annotations

import functools
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.pki import keystore_pg
from salttwist.pki.ids import DEFAULT_ID_RULES
from salttwist.pki.keystore import ACCEPTED, PENDING, REJECTED, KeyChanged
from salttwist.pki.keystore_pg import (
    MIGRATIONS,
    KeyStoreError,
    KeyStoreUnavailable,
    PostgresKeyStore,
    _Mirror,
    migrate,
)
from tests._postgres import adminConnection, temporaryDatabase
from tests.test_keystore import PEM_A, PEM_B, KeyStoreContractMixin

READY_TIMEOUT = 20.0


def _connect(options: dict[str, Any]) -> Any:
    import psycopg

    return psycopg.connect(autocommit=True, **options)


def _openStore(testCase: SynchronousTestCase, options: dict[str, Any]) -> PostgresKeyStore:
    """
    @return: a started, loaded store on C{options}, closed at the end of
        C{testCase} (before its database is dropped).
    """
    store = PostgresKeyStore(options)
    store.start()
    testCase.addCleanup(store.close)
    store.waitReady(READY_TIMEOUT)
    return store


def _holds(store: PostgresKeyStore, minionId: str, states: list[str]) -> bool:
    """
    @return: whether C{store} holds keys of C{minionId} in C{states} only.
    """
    return store.stateOf(minionId) == states


class PostgresKeyStoreContractTests(KeyStoreContractMixin, SynchronousTestCase):
    """
    L{PostgresKeyStore} keeps the L{IKeyStore} contract.
    """

    def makeStore(self) -> PostgresKeyStore:
        """
        @return: a loaded store on a fresh database.
        """
        self.options = temporaryDatabase(self)  # type: ignore[arg-type]
        return _openStore(self, self.options)

    def waitFor(self, condition: Callable[[], bool], timeout: float = 20.0) -> None:
        """
        Check C{condition} every 10 ms until it holds; fail after
        C{timeout} seconds.
        """
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.fail(f"not true within {timeout} s")
            time.sleep(0.01)

    def test_writesWaitingTogetherBatched(self) -> None:
        """
        Writes queued while the writer is busy commit in one transaction,
        each with its own outcome: one refused move (L{KeyChanged}) leaves
        the others done.
        """
        self.store.putKey(ACCEPTED, "blocker", PEM_A)
        self.store.putKey(PENDING, "changed", PEM_B)
        before = self.store.batches
        pool = ThreadPoolExecutor(11)
        self.addCleanup(pool.shutdown)
        with _connect(self.options) as outside, outside.transaction():
            # Hold blocker's row: the writer's next write waits on it.
            outside.execute(
                "SELECT 1 FROM salttwist_key_minions WHERE minion_id = 'blocker' FOR UPDATE"
            )
            first = pool.submit(self.store.deleteKey, ACCEPTED, "blocker")
            with _connect(self.options) as watcher:
                self.waitFor(
                    lambda: (
                        watcher.execute(
                            "SELECT count(*) FROM pg_locks WHERE NOT granted"
                        ).fetchone()[0]
                        > 0
                    )
                )
            rest = [pool.submit(self.store.putKey, PENDING, f"m{n}", PEM_A) for n in range(9)]
            refused = pool.submit(self.store.moveKey, "changed", PENDING, ACCEPTED, expected=PEM_A)
            self.waitFor(lambda: self.store._writes.qsize() == 10)
        self.assertTrue(first.result(20))
        for future in rest:
            self.assertIsNone(future.result(20))
        self.assertRaises(KeyChanged, refused.result, 20)
        self.assertEqual(self.store.batches - before, 2)
        self.assertEqual(self.store.listKeys(PENDING), ["changed"] + [f"m{n}" for n in range(9)])
        self.assertEqual(self.store.stateOf("blocker"), [])
        other = _openStore(self, self.options)
        self.assertEqual(other.listKeys(PENDING), self.store.listKeys(PENDING))

    def test_writerReconnects(self) -> None:
        """
        When the server ends the writer's connection (a restart), the next
        write, which found it broken before anything was committed, is made
        again on a new connection and succeeds.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        old = self.store.writerPid
        with adminConnection() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (old,))
        self.assertTrue(self.store.moveKey("web1", PENDING, ACCEPTED))
        self.assertNotEqual(self.store.writerPid, old)
        self.assertEqual(_openStore(self, self.options).stateOf("web1"), [ACCEPTED])

    def test_persisted(self) -> None:
        """
        A second store on the same database loads the keys the first wrote,
        in their states.
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        self.store.putKey(ACCEPTED, "web2", PEM_B)
        self.store.moveKey("web1", PENDING, REJECTED)
        other = _openStore(self, self.options)
        self.assertEqual(other.getKey(REJECTED, "web1"), PEM_A)
        self.assertEqual(other.listKeys(ACCEPTED), ["web2"])
        self.assertEqual(other.stateOf("web1"), [REJECTED])


class PostgresKeyStoreSchemaTests(SynchronousTestCase):
    """
    The schema's migrations, and reads before the keys were loaded.
    """

    def setUp(self) -> None:
        self.options = temporaryDatabase(self)  # type: ignore[arg-type]

    def test_migrationsOnce(self) -> None:
        """
        A store applies every migration and records it; applying again
        does nothing.
        """
        _openStore(self, self.options)
        with _connect(self.options) as connection:
            versions = [
                v
                for (v,) in connection.execute(
                    "SELECT version FROM salttwist_keystore_migrations ORDER BY 1"
                )
            ]
            self.assertEqual(versions, [v for v, _, _ in MIGRATIONS])
            self.assertEqual(migrate(connection), [])

    def test_newerSchemaRefused(self) -> None:
        """
        A database with a schema version this code does not know is refused
        with a L{KeyStoreError} naming it, and reads fail rather than answer
        from an empty mirror.
        """
        with _connect(self.options) as connection:
            migrate(connection)
            connection.execute(
                "INSERT INTO salttwist_keystore_migrations (version, description)"
                " VALUES (999, 'from the future')"
            )
        store = PostgresKeyStore(self.options)
        store.start()
        self.addCleanup(store.close)
        with self.assertRaises(KeyStoreError) as raised:
            store.waitReady(READY_TIMEOUT)
        self.assertIn("999", str(raised.exception))
        self.assertRaises(KeyStoreUnavailable, store.listKeys, ACCEPTED)

    def test_notLoaded(self) -> None:
        """
        Before the keys were loaded, reads raise L{KeyStoreUnavailable}: an
        empty list of accepted keys would cut off every minion.
        """
        store = PostgresKeyStore(self.options)
        self.assertRaises(KeyStoreUnavailable, store.listKeys, ACCEPTED)
        self.assertRaises(KeyStoreUnavailable, store.getKey, ACCEPTED, "web1")
        self.assertRaises(KeyStoreUnavailable, store.stateOf, "web1")

    def test_unreachable(self) -> None:
        """
        A write to a server that cannot be reached fails with
        L{KeyStoreUnavailable} naming the server; so does waiting for the
        load.
        """
        options = dict(self.options, port=1, connect_timeout=2)
        store = PostgresKeyStore(options)
        store.start()
        self.addCleanup(store.close)
        with self.assertRaises(KeyStoreUnavailable) as raised:
            store.putKey(PENDING, "web1", PEM_A)
        self.assertIn(":1/", str(raised.exception))
        self.assertRaises(KeyStoreUnavailable, store.waitReady, 0.1)


class _FreezingProxy:
    """
    A TCP proxy on 127.0.0.1 to a PostgreSQL server that can stop passing
    bytes on (L{freeze}): to its clients the server then hangs while TCP
    stays up, as a stopped or swapped-out server does.

    @ivar port: the port it listens on.
    """

    def __init__(self, testCase: SynchronousTestCase, host: str, port: int) -> None:
        self._target = (host, port)
        self._frozen = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._sockets.append(self._listener)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        testCase.addCleanup(self.close)

    def freeze(self) -> None:
        """
        Pass nothing more, either way.
        """
        self._frozen.set()

    def close(self) -> None:
        """
        Close every socket.
        """
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            # Frozen: hold what came, never answer (TCP still acknowledges).
            while self._frozen.is_set():
                time.sleep(0.05)
            try:
                sink.sendall(data)
            except OSError:
                return


class WriteTimeoutTests(SynchronousTestCase):
    """
    A write never blocks for ever: the server gives up a write that waits
    too long (C{statement_timeout}), and a server that does not answer at
    all has its connection cut (L{keystore_pg._Watchdog}).
    """

    def setUp(self) -> None:
        self.options = temporaryDatabase(self)  # type: ignore[arg-type]

    def test_statementTimeout(self) -> None:
        """
        A write that waits on a row another transaction holds fails after
        C{writeTimeout} with L{KeyStoreUnavailable} saying nothing was
        written; once the row is free, writes succeed on the same store.
        """
        store = PostgresKeyStore(self.options, writeTimeout=0.5)
        store.start()
        self.addCleanup(store.close)
        store.waitReady(READY_TIMEOUT)
        store.putKey(PENDING, "web1", PEM_A)
        with _connect(self.options) as outside, outside.transaction():
            outside.execute(
                "SELECT 1 FROM salttwist_key_minions WHERE minion_id = 'web1' FOR UPDATE"
            )
            with self.assertRaises(KeyStoreUnavailable) as raised:
                store.moveKey("web1", PENDING, ACCEPTED)
        message = str(raised.exception)
        self.assertIn("within 0.5 s (statement_timeout); nothing was written", message)
        self.assertEqual(store.stateOf("web1"), [PENDING])
        self.assertTrue(store.moveKey("web1", PENDING, ACCEPTED))
        self.assertEqual(store.stateOf("web1"), [ACCEPTED])

    def test_hungServerCut(self) -> None:
        """
        When the server stops answering in the middle of a write, the
        connection is cut after C{writeTimeout} plus L{WATCHDOG_GRACE}, the
        write fails with L{KeyStoreUnavailable} naming the wait, and it is
        not tried again on the hung server.
        """
        self.patch(keystore_pg, "WATCHDOG_GRACE", 0.5)
        proxy = _FreezingProxy(self, self.options["host"], int(self.options["port"]))
        store = PostgresKeyStore(dict(self.options, port=proxy.port), writeTimeout=0.5)
        store.start()
        self.addCleanup(store.close)
        store.waitReady(READY_TIMEOUT)
        store.putKey(PENDING, "web1", PEM_A)
        proxy.freeze()
        with self.assertRaises(KeyStoreUnavailable) as raised:
            store.putKey(PENDING, "web2", PEM_B)
        self.assertIn("did not answer a write within 1 s", str(raised.exception))
        self.assertIn("nothing was written", str(raised.exception))

    def test_oneWatchdogThread(self) -> None:
        """
        Guarding writes and the listener's queries takes one thread per
        process, whatever the number of queries (not a timer thread each).
        """
        store = _openStore(self, self.options)
        for n in range(20):
            store.putKey(PENDING, f"web{n}", PEM_A)
        threads = threading.enumerate()
        names = [t.name for t in threads]
        self.assertEqual(names.count("salttwist-keystore-watchdog"), 1)
        self.assertEqual([t for t in threads if isinstance(t, threading.Timer)], [])

    def test_badTimeout(self) -> None:
        """
        A write timeout that is not a positive number is refused.
        """
        with self.assertRaises(ValueError) as raised:
            PostgresKeyStore(self.options, writeTimeout=0)
        self.assertIn("writeTimeout", str(raised.exception))


class PostgresKeyStoreLifeTests(TestCase):
    """
    Waiting for the load on the reactor, and closing.
    """

    async def test_whenReady(self) -> None:
        """
        L{PostgresKeyStore.whenReady} fires on the reactor once the keys
        were loaded: reads then answer, with the keys already stored.
        """
        options = temporaryDatabase(self)
        _openStore(self, options).putKey(ACCEPTED, "web1", PEM_A)
        store = PostgresKeyStore(options)
        store.start()
        self.addCleanup(store.close)
        await store.whenReady(reactor)
        self.assertEqual(store.listKeys(ACCEPTED), ["web1"])
        self.assertTrue(store.connected)
        await store.whenReady(reactor)

    def test_closeQuiet(self) -> None:
        """
        Closing cuts the listener's connection rather than wait for its next
        poll, and that is not logged as a lost server; its thread has ended.
        """
        from twisted.logger import globalLogPublisher

        store = _openStore(self, temporaryDatabase(self))
        logged: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, logged.append)
        threads = list(store._threads)
        store.close()
        self.assertEqual([t for t in threads if t.is_alive()], [])
        self.assertEqual([e for e in logged if "lost" in e.get("log_format", "")], [])

    def test_writeAfterClose(self) -> None:
        """
        A write after L{PostgresKeyStore.close} fails with
        L{KeyStoreUnavailable} instead of waiting for a writer that is gone.
        """
        store = _openStore(self, temporaryDatabase(self))
        store.close()
        with self.assertRaises(KeyStoreUnavailable) as raised:
            store.putKey(PENDING, "web1", PEM_A)
        self.assertIn("closed", str(raised.exception))


class MirrorTests(SynchronousTestCase):
    """
    L{_Mirror} takes a minion's state only at a newer version.
    """

    def test_olderVersionIgnored(self) -> None:
        """
        A state at a version the mirror already passed is not taken: a slow
        notification never undoes a newer change.
        """
        mirror = _Mirror(DEFAULT_ID_RULES)
        self.assertTrue(mirror.apply("web1", 2, {REJECTED: PEM_A}))
        self.assertFalse(mirror.apply("web1", 1, {ACCEPTED: PEM_A}))
        self.assertFalse(mirror.apply("web1", 2, {ACCEPTED: PEM_A}))
        self.assertEqual(mirror.keys[ACCEPTED], {})
        self.assertEqual(mirror.keys[REJECTED], {"web1": PEM_A})
        self.assertEqual(mirror.index.clashes("WEB1"), [(REJECTED, "web1")])

    def test_reloadKeepsNewer(self) -> None:
        """
        A full load keeps a minion the mirror holds at a newer version, and
        takes the others, reporting which changed.
        """
        mirror = _Mirror(DEFAULT_ID_RULES)
        mirror.apply("web1", 5, {ACCEPTED: PEM_A})
        mirror.apply("web2", 1, {PENDING: PEM_B})
        changed = mirror.replace({"web1": 4, "web2": 2, "web3": 1}, {"web1": {}, "web3": {}})
        self.assertEqual(changed, ["web2"])
        self.assertEqual(mirror.keys[ACCEPTED], {"web1": PEM_A})
        self.assertEqual(mirror.keys[PENDING], {})
        self.assertEqual(mirror.versions, {"web1": 5, "web2": 2, "web3": 1})


class ClusterTests(TestCase):
    """
    Two stores on one database, as two masters of a cluster: a change made
    through either reaches the other through C{LISTEN}/C{NOTIFY}, without
    polling.
    """

    timeout = 60

    def setUp(self) -> None:
        self.options = temporaryDatabase(self)
        self.one = _openStore(self, self.options)
        self.two = _openStore(self, self.options)

    def seen(self, store: PostgresKeyStore, test: Callable[[], bool]) -> Deferred[None]:
        """
        @return: a L{Deferred} firing on the reactor thread once C{test()}
            holds, checked now and after every change C{store} takes.
        """
        done: Deferred[None] = Deferred()

        def check(*_: object) -> None:
            if not done.called and test():
                stop()
                done.callback(None)

        stop = store.watch(lambda *a: reactor.callFromThread(check))
        reactor.callLater(0, check)
        return done

    async def test_rejectReachesOther(self) -> None:
        """
        A key accepted, then rejected, through one store is seen in each
        state by the other; the accepted list of the other no longer names
        it (what the master's per-second key check cuts off on).
        """
        await deferToThread(self.one.putKey, ACCEPTED, "web1", PEM_A)
        await self.seen(self.two, lambda: self.two.listKeys(ACCEPTED) == ["web1"])
        self.assertEqual(self.two.getKey(ACCEPTED, "web1"), PEM_A)
        moved = await deferToThread(self.one.moveKey, "web1", ACCEPTED, REJECTED)
        self.assertTrue(moved)
        await self.seen(self.two, lambda: self.two.stateOf("web1") == [REJECTED])
        self.assertEqual(self.two.listKeys(ACCEPTED), [])
        self.assertEqual(self.two.getKey(REJECTED, "web1"), PEM_A)

    async def test_deleteReachesOther(self) -> None:
        """
        A key deleted through the second store is gone from the first.
        """
        await deferToThread(self.one.putKey, ACCEPTED, "web1", PEM_A)
        await self.seen(self.two, lambda: self.two.stateOf("web1") == [ACCEPTED])
        self.assertTrue(await deferToThread(self.two.deleteKey, ACCEPTED, "web1"))
        await self.seen(self.one, lambda: self.one.stateOf("web1") == [])
        self.assertEqual(self.one.idClashes("WEB1"), [])

    async def test_burstReachesOther(self) -> None:
        """
        A burst of writes from many threads through one store (batched
        transactions, notifications read together) all reach the other.
        """
        ids = [f"burst{n:03d}" for n in range(100)]
        await gatherResults([deferToThread(self.one.putKey, PENDING, m, PEM_A) for m in ids])
        await self.seen(self.two, lambda: self.two.listKeys(PENDING) == ids)
        self.assertEqual(self.two.listKeys(PENDING), self.one.listKeys(PENDING))

    async def test_moveRaceOneWinner(self) -> None:
        """
        The same pending key accepted through one store and rejected through
        the other at once: exactly one move wins, and both stores end with
        the key in the winner's state only.
        """
        for n in range(10):
            minionId = f"race{n}"
            await deferToThread(self.one.putKey, PENDING, minionId, PEM_A)
            accept = deferToThread(self.one.moveKey, minionId, PENDING, ACCEPTED, expected=PEM_A)
            reject = deferToThread(self.two.moveKey, minionId, PENDING, REJECTED)
            results = [await accept, await reject]
            self.assertEqual(sorted(results), [False, True])
            state = [ACCEPTED, REJECTED][results.index(True)]
            for store in (self.one, self.two):
                await self.seen(store, functools.partial(_holds, store, minionId, [state]))

    async def test_reloadAfterLostConnection(self) -> None:
        """
        When the server ends the second store's listener connection, the
        listener reconnects and reloads: a change made while it was away is
        seen.
        """
        loads = self.two.loads
        with adminConnection() as admin:
            (killed,) = admin.execute(
                "SELECT pg_terminate_backend(%s)", (self.two.listenerPid,)
            ).fetchone()
        self.assertTrue(killed)
        await deferToThread(self.one.putKey, ACCEPTED, "web9", PEM_B)
        await self.seen(self.two, lambda: self.two.listKeys(ACCEPTED) == ["web9"])
        # Its old connection is gone, so what it saw came through a new one.
        self.assertGreater(self.two.loads, loads)
