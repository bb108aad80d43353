# -*- test-case-name: tests.test_keystore_stores -*-
"""
Tests for the key store's wiring (issue 23): C{keys.cache_driver} and the
C{keys.postgres.*} options (L{salttwist.pki.stores}), the master's use of a
shared store (L{salttwist.master.keywatch.KeyStoreFeed},
L{salttwist.master.keywatch.KeyWatch.storeChanged}, L{MasterService}), the
auth workers' store (L{salttwist.master.authtasks.loadAuthenticator}) and
C{salttwist-key} over PostgreSQL.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock, deferLater
from twisted.internet.testing import MemoryReactorClock
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist import crypt, wire
from salttwist.blocking import runSynchronously
from salttwist.cli import key as keyCommand
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.master import authtasks
from salttwist.master.auth import KEY_STORE_UNAVAILABLE, NONCE_BYTES
from salttwist.master.keywatch import KeyStoreFeed
from salttwist.master.service import KeyStoreService, MasterService
from salttwist.pki.ids import IdRules
from salttwist.pki.keystore import ACCEPTED, DENIED, PENDING, REJECTED, FilesystemKeyStore
from salttwist.pki.keystore_pg import PostgresKeyStore
from salttwist.pki.stores import (
    LOCALFS,
    POSTGRES,
    KeyStoreSetupError,
    copyKeys,
    describeKeyStore,
    keyStoreSpec,
    openKeyStore,
    postgresOptions,
)
from tests._loopback import Loopback
from tests._postgres import temporaryDatabase
from tests.test_keystore import PEM_A, PEM_B
from tests.test_master_core import MINION_KEYS, MasterTestCase

READY_TIMEOUT = 20.0


def _masterConfig(root: str, **options: Any) -> dict[str, Any]:
    """
    @return: a master config under C{root} with C{options}.
    """
    return loadMasterConfig(root, overrides={"root_dir": root, "interface": "127.0.0.1", **options})


def _postgresConfig(options: dict[str, Any]) -> dict[str, Any]:
    """
    @return: the C{keys.*} options that select the database C{options}
        (C{psycopg.connect} keywords) as the key store.
    """
    return {
        "keys.cache_driver": "postgres",
        "keys.postgres.host": options["host"],
        "keys.postgres.port": int(options["port"]),
        "keys.postgres.user": options["user"],
        "keys.postgres.db": options["dbname"],
        "keys.postgres.connect_timeout": 5,
    }


def _openPostgres(testCase: SynchronousTestCase, options: dict[str, Any]) -> PostgresKeyStore:
    """
    @return: a loaded store on C{options}, closed after the test.
    """
    store = PostgresKeyStore(options)
    store.start()
    testCase.addCleanup(store.close)
    store.waitReady(READY_TIMEOUT)
    return store


class OptionTests(SynchronousTestCase):
    """
    C{keys.cache_driver} and C{keys.postgres.*} in the master's config.
    """

    def setUp(self) -> None:
        self.root = self.mktemp()

    def test_defaultIsFiles(self) -> None:
        """
        By default the keys are files under C{pki_dir} (Salt's
        C{localfs_key}): no database needed.
        """
        config = _masterConfig(self.root)
        self.assertEqual(config["keys.cache_driver"], LOCALFS)
        spec = keyStoreSpec(config)
        self.assertEqual(spec, {"driver": LOCALFS, "pki_dir": config["pki_dir"]})
        self.assertIsInstance(openKeyStore(spec), FilesystemKeyStore)
        self.assertEqual(describeKeyStore(spec), config["pki_dir"])

    def test_postgresSpec(self) -> None:
        """
        C{keys.cache_driver: postgres} selects the database the
        C{keys.postgres.*} options name, with Salt's C{pgjsonb} option
        names mapped to libpq's; unset ones are left to libpq.
        """
        config = _masterConfig(
            self.root,
            **{
                "keys.cache_driver": "postgres",
                "keys.postgres.host": "db.example",
                "keys.postgres.db": "keys",
                "keys.postgres.pass": "secret",
                "keys.postgres.sslmode": "require",
                "keys.postgres.write_timeout": 2.5,
            },
        )
        spec = keyStoreSpec(config)
        self.assertEqual(spec["driver"], POSTGRES)
        self.assertEqual(
            spec["options"],
            {
                "host": "db.example",
                "port": 5432,
                "dbname": "keys",
                "user": "salt",
                "password": "secret",
                "sslmode": "require",
                "connect_timeout": 10,
            },
        )
        self.assertEqual(spec["write_timeout"], 2.5)
        self.assertEqual(describeKeyStore(spec), "PostgreSQL salt@db.example:5432/keys")
        self.assertNotIn("secret", describeKeyStore(spec))
        self.assertEqual(postgresOptions({}), {})

    def test_unknownDriver(self) -> None:
        """
        A driver this salttwist does not have stops the master at start,
        naming the option and the drivers it has.
        """
        with self.assertRaises(ConfigError) as raised:
            _masterConfig(self.root, **{"keys.cache_driver": "mmap_key"})
        self.assertIn("keys.cache_driver", str(raised.exception))
        self.assertIn("'postgres'", str(raised.exception))
        with self.assertRaises(KeyStoreSetupError) as refused:
            keyStoreSpec({"keys.cache_driver": "redis", "pki_dir": self.root})
        self.assertIn("localfs_key, postgres", str(refused.exception))

    def test_badValues(self) -> None:
        """
        A port out of range or a write timeout that is not positive is
        refused with the option named.
        """
        for option, value in (
            ("keys.postgres.port", 70000),
            ("keys.postgres.write_timeout", 0),
            ("keys.postgres.connect_timeout", "soon"),
        ):
            with self.assertRaises(ConfigError) as raised:
                _masterConfig(self.root, **{option: value})
            self.assertIn(option, str(raised.exception))

    def test_unreachableWithin(self) -> None:
        """
        Asked to wait for the keys, opening a store whose server cannot be
        reached fails with L{KeyStoreSetupError} naming the server.
        """
        spec = keyStoreSpec(
            _masterConfig(
                self.root,
                **{
                    "keys.cache_driver": "postgres",
                    "keys.postgres.host": "127.0.0.1",
                    "keys.postgres.port": 1,
                    "keys.postgres.connect_timeout": 1,
                },
            )
        )
        with self.assertRaises(KeyStoreSetupError) as raised:
            openKeyStore(spec, readyTimeout=0.5)
        self.assertIn("salt@127.0.0.1:1/salt", str(raised.exception))


class CopyKeysTests(SynchronousTestCase):
    """
    L{copyKeys} moves a master's key files into PostgreSQL.
    """

    def test_copied(self) -> None:
        """
        Every key is copied in its state, except those of minions the
        database already knows (in any state), which are left as they are.
        """
        files = FilesystemKeyStore(self.mktemp())
        files.putKey(ACCEPTED, "web1", PEM_A)
        files.putKey(DENIED, "web1", PEM_B)
        files.putKey(PENDING, "web2", PEM_B)
        files.putKey(ACCEPTED, "web3", PEM_A)
        database = _openPostgres(self, temporaryDatabase(self))
        database.putKey(REJECTED, "web3", PEM_A)
        self.assertEqual(
            copyKeys(files, database),
            [(PENDING, "web2"), (ACCEPTED, "web1"), (DENIED, "web1")],
        )
        self.assertEqual(database.stateOf("web1"), [ACCEPTED, DENIED])
        self.assertEqual(database.getKey(DENIED, "web1"), files.getKey(DENIED, "web1"))
        self.assertEqual(database.stateOf("web3"), [REJECTED])
        self.assertEqual(copyKeys(files, database), [])


class _CallFromThreadRecorder:
    """
    A reactor whose C{callFromThread} only records the calls.
    """

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def callFromThread(self, f: Any, *args: Any) -> None:
        self.calls.append((f, args))

    def runAll(self) -> None:
        calls, self.calls = self.calls, []
        for f, args in calls:
            f(*args)


class KeyStoreFeedTests(SynchronousTestCase):
    """
    L{KeyStoreFeed} carries a store's changes to the reactor, coalesced.
    """

    def test_coalesced(self) -> None:
        """
        Changes that come while one hand-over is queued go with it, each
        minion with its latest states; the feed is then dirty.
        """
        fake = _CallFromThreadRecorder()
        received: list[dict[str, list[str]]] = []
        feed = KeyStoreFeed(fake, received.append)
        feed.dirty = False
        feed("web1", [PENDING])
        feed("web2", [ACCEPTED])
        feed("web1", [REJECTED])
        self.assertEqual(len(fake.calls), 1)
        fake.runAll()
        self.assertEqual(received, [{"web1": [REJECTED], "web2": [ACCEPTED]}])
        self.assertTrue(feed.dirty)
        feed("web3", [])
        self.assertEqual(len(fake.calls), 1)
        fake.runAll()
        self.assertEqual(received[-1], {"web3": []})

    def test_failureLogged(self) -> None:
        """
        A hand-over whose handler fails is logged, and the next one still
        comes.
        """
        fake = _CallFromThreadRecorder()
        received: list[dict[str, list[str]]] = []

        def handler(changes: dict[str, list[str]]) -> None:
            received.append(changes)
            if len(received) == 1:
                raise RuntimeError("boom")

        feed = KeyStoreFeed(fake, handler)
        feed("web1", [])
        fake.runAll()
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        feed("web2", [])
        fake.runAll()
        self.assertEqual(received, [{"web1": []}, {"web2": []}])


class StoreChangedTests(MasterTestCase):
    """
    L{KeyWatch.storeChanged}: the master acts on changes of a shared store.
    """

    def test_connectedCutOff(self) -> None:
        """
        A connected minion whose key is no longer accepted is cut off at
        once (its session and subscription closed) and the publication key
        rotates.
        """
        _, reqServer, sessionKey = self.authMinion("m1")
        _, pubServer, _, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        kid = self.master.publicationKey.kid
        self.master.keyStore.moveKey("m1", ACCEPTED, REJECTED)
        self.master.keyWatch.storeChanged({"m1": [REJECTED]})
        self.assertTrue(reqServer.transport.disconnecting)
        self.assertTrue(pubServer.transport.disconnecting)
        self.assertNotIn("m1", self.master.sessions)
        self.assertEqual(self.master.publicationKey.kid, kid + 1)

    def test_acceptedNotChecked(self) -> None:
        """
        A change that leaves a connected minion accepted, or that concerns
        a minion not connected here, checks nothing, but the accepted ids
        are listed again when next needed.
        """
        _, reqServer, _ = self.authMinion("m1")
        accepted = self.master.keyWatch.accepted
        generation = accepted.generation
        self.assertIsNone(self.master.keyWatch.storeChanged({"m1": [ACCEPTED], "m9": []}))
        self.assertFalse(reqServer.transport.disconnecting)
        self.assertGreater(accepted.generation, generation)
        self.assertIsNone(accepted.ids)

    def test_pendingCountedAgain(self) -> None:
        """
        Any change makes the count of pending keys stale: another master
        may have added some.
        """
        admission = self.master.admission
        admission._pendingStale = False
        self.master.keyWatch.storeChanged({"m7": [PENDING]})
        self.assertTrue(admission._pendingStale)


class StoreDownAuthTests(MasterTestCase):
    """
    While the master's key store cannot be used (PostgreSQL down, the keys
    never loaded), a minion's authentication is answered "master busy" and
    the master logs one line, not a traceback per request.
    """

    def setUp(self) -> None:
        self.store = PostgresKeyStore({"host": "127.0.0.1", "port": 1})
        self.master = self.makeMaster(runSynchronously)
        self.net = Loopback(self.master.clock)

    def makeMaster(self, runBlocking: Any) -> Any:
        master = super().makeMaster(runBlocking)
        # The store the rooms use: one never loaded.
        master.keyStore = master.admission.keyStore = self.store
        master.admission.authenticator._keys = self.store
        master.keyWatch.keyStore = self.store
        return master

    def authenticate(self) -> dict[str, Any]:
        client, server = self.connectReq()
        key = MINION_KEYS["m1"]
        pem = crypt.publicKeyToPem(key.public_key())
        nonce = os.urandom(NONCE_BYTES)
        load = {
            "cmd": "_auth",
            "id": "m1",
            "pub": pem,
            "nonce": nonce,
            "sig": crypt.sign(key, wire.authRequestMessage(server.challenge, nonce, "m1", pem)),
        }
        d = client.sendClear(load)
        self.net.flush()
        return self.successResultOf(d)  # type: ignore[no-any-return]

    def test_busy(self) -> None:
        """
        The minion is told to retry, without the server's address; the
        master logs the refusals once a minute.
        """
        from twisted.logger import globalLogPublisher

        logged: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, logged.append)
        for _ in range(3):
            self.assertEqual(self.authenticate(), {"ret": "error", "error": KEY_STORE_UNAVAILABLE})
        self.assertEqual(self.flushLoggedErrors(), [])
        lines = [e for e in logged if "key store is unavailable" in e.get("log_format", "")]
        self.assertEqual(len(lines), 1)


def _silently(options: dict[str, Any], *statements: str) -> None:
    """
    Change the database behind the stores' backs: no notification, as if
    it were still on its way.
    """
    import psycopg

    with psycopg.connect(autocommit=True, **options) as connection, connection.transaction():
        for statement in statements:
            connection.execute(statement)  # type: ignore[arg-type]


class FreshDecisionTests(SynchronousTestCase):
    """
    A decision other than "accepted, the same key" is made on the
    database's current keys, not on a copy a notification has not reached
    yet (L{PostgresKeyStore.refresh}, called by L{Authenticator}).
    """

    def setUp(self) -> None:
        self.options = temporaryDatabase(self)
        self.store = _openPostgres(self, self.options)
        self.pem = crypt.publicKeyToPem(MINION_KEYS["m1"].public_key())
        self.store.putKey(PENDING, "m1", self.pem)
        # Accepted elsewhere (autosign in the master), its notification
        # not yet here.
        _silently(
            self.options,
            "UPDATE salttwist_keys SET state = 'minions' WHERE minion_id = 'm1'",
            "UPDATE salttwist_key_minions SET version = version + 1 WHERE minion_id = 'm1'",
        )

    def test_refresh(self) -> None:
        """
        L{PostgresKeyStore.refresh} reads the minion's keys into the copy;
        an unknown id is left alone.
        """
        self.assertEqual(self.store.stateOf("m1"), [PENDING])
        self.store.refresh("m1")
        self.assertEqual(self.store.stateOf("m1"), [ACCEPTED])
        self.store.refresh("m9")
        self.assertEqual(self.store.stateOf("m9"), [])

    def test_authenticateFresh(self) -> None:
        """
        A minion whose copy says pending, but whose key was accepted in the
        database, is accepted.
        """
        from salttwist.master.auth import Authenticator
        from salttwist.master.keys import MasterKeys, PublicationKey
        from tests.test_master_core import MASTER_KEY, MASTER_PEM, ROOT_KEY

        authenticator = Authenticator(
            self.store,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            PublicationKey,
            lambda: 4505,
        )
        key = MINION_KEYS["m1"]
        nonce = os.urandom(NONCE_BYTES)
        challenge = os.urandom(32)
        load = {
            "id": "m1",
            "pub": self.pem,
            "nonce": nonce,
            "sig": crypt.sign(key, wire.authRequestMessage(challenge, nonce, "m1", self.pem)),
        }
        self.assertEqual(self.store.stateOf("m1"), [PENDING])
        outcome = authenticator.authenticate(load, challenge, "127.0.0.1:1")
        self.assertEqual(outcome.reply["ret"], "accepted")


class _Keys:
    """
    Minion key pairs for the tests below (PEM of the public halves).
    """

    m1 = crypt.publicKeyToPem(MINION_KEYS["m1"].public_key())


class _MemoryReactorFromThreads(MemoryReactorClock):
    """
    A memory reactor that also takes calls from other threads (a key
    store's), keeping them in C{fromThreads}.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fromThreads: list[tuple[Any, tuple[Any, ...]]] = []

    def callFromThread(self, f: Any, *args: Any) -> None:
        self.fromThreads.append((f, args))


class MasterServiceStoreTests(SynchronousTestCase):
    """
    L{MasterService} with C{keys.cache_driver: postgres}.
    """

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="stk-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.reactor = _MemoryReactorFromThreads()
        self.reactor.running = True

    def makeService(self, **options: Any) -> MasterService:
        service = MasterService(
            _masterConfig(self.root, keysize=2048, **options),
            self.reactor,
            runBlocking=runSynchronously,
            jobCache=_NullJobCache(),
            useWorkers=False,
        )
        store = service.keyStore
        if hasattr(store, "close"):
            self.addCleanup(store.close)
        return service

    def test_filesByDefault(self) -> None:
        """
        By default the master's keys are files and no key store service
        or feed is made.
        """
        service = self.makeService()
        self.assertIsInstance(service.master.keyStore, FilesystemKeyStore)
        self.assertIsNone(service.keyFeed)
        self.assertNotIn(KeyStoreService, [type(child) for child in service])

    def test_postgres(self) -> None:
        """
        With C{keys.cache_driver: postgres} the master's key store is the
        database's; the key store service is its first child (so it stops
        last); the periodic check runs only once the keys are loaded and
        then only when the store told of a change.
        """
        options = temporaryDatabase(self)
        _openPostgres(self, options).putKey(ACCEPTED, "m1", _Keys.m1)
        service = self.makeService(**_postgresConfig(options))
        store = service.master.keyStore
        self.assertIsInstance(store, PostgresKeyStore)
        self.assertIs(service.keyStore, store)
        self.assertIsInstance(list(service)[0], KeyStoreService)
        # Its threads start with the services, not before (twistd may fork
        # in between).
        self.assertEqual(store._threads, [])
        calls: list[object] = []
        self.patch(service.master, "reconcileKeys", lambda *a: calls.append(a))
        store.start()
        store.waitReady(READY_TIMEOUT)
        self.assertEqual(store.listKeys(ACCEPTED), ["m1"])
        # The load went to the key watch, through the reactor.
        self.assertEqual([f for f, _ in self.reactor.fromThreads], [service.keyFeed._flush])
        service._reconcileIfChanged()
        self.assertEqual(len(calls), 1)
        service._reconcileIfChanged()
        self.assertEqual(len(calls), 1)
        service.keyFeed.dirty = True  # type: ignore[union-attr]
        service._reconcileIfChanged()
        self.assertEqual(len(calls), 2)

    def test_notLoadedNotChecked(self) -> None:
        """
        While the keys were never loaded (the server unreachable), the
        periodic check does nothing: an empty list would cut off every
        minion. The master still builds (it retries with back-off).
        """
        service = self.makeService(
            **{
                "keys.cache_driver": "postgres",
                "keys.postgres.host": "127.0.0.1",
                "keys.postgres.port": 1,
                "keys.postgres.connect_timeout": 1,
            }
        )
        calls: list[object] = []
        self.patch(service.master, "reconcileKeys", lambda *a: calls.append(a))
        self.assertIsNone(service._reconcileIfChanged())
        self.assertEqual(calls, [])

    def test_missingPsycopg(self) -> None:
        """
        Without psycopg, C{keys.cache_driver: postgres} stops the master
        at start, saying what to install.
        """
        from salttwist.daemon import StartupError

        had = "psycopg" in sys.modules
        saved = sys.modules.get("psycopg")
        sys.modules["psycopg"] = None  # type: ignore[assignment]

        def restore() -> None:
            if had:
                sys.modules["psycopg"] = saved  # type: ignore[assignment]
            else:
                del sys.modules["psycopg"]

        self.addCleanup(restore)
        with self.assertRaises(StartupError) as raised:
            self.makeService(**{"keys.cache_driver": "postgres"})
        self.assertIn("salttwist[postgres]", str(raised.exception))


class _NullJobCache:
    """
    A job cache that stores nothing (the service tests do not publish).
    """

    def startPruning(self) -> None:
        pass

    def close(self) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        d.callback(None)
        return d


class KeyStoreServiceTests(TestCase):
    """
    L{KeyStoreService}: the load reported, a slow load warned of, the store
    closed at stop.
    """

    async def test_loadedAndClosed(self) -> None:
        """
        Starting the service starts the store; once the keys are loaded
        the service calls back; stopping closes the store (its threads
        end).
        """
        options = temporaryDatabase(self)
        store = PostgresKeyStore(options)
        self.addCleanup(store.close)
        loaded: Deferred[None] = Deferred()
        clock = Clock()

        class Both:
            callLater = clock.callLater
            callFromThread = reactor.callFromThread

        service = KeyStoreService(store, "here", Both(), 5.0, lambda: loaded.callback(None))
        service.startService()
        self.assertEqual(len(store._threads), 2)
        await loaded
        self.assertEqual(clock.getDelayedCalls(), [])
        await service.stopService()
        self.assertEqual(store._threads, [])

    def test_slowLoadWarned(self) -> None:
        """
        Keys not loaded within the wait are reported as an error naming
        the store and saying that minions cannot authenticate.
        """
        store = PostgresKeyStore({"host": "127.0.0.1", "port": 1, "connect_timeout": 1})
        clock = Clock()
        logged: list[dict[str, Any]] = []
        from twisted.logger import globalLogPublisher

        globalLogPublisher.addObserver(logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, logged.append)

        class Both:
            callLater = clock.callLater
            callFromThread = reactor.callFromThread

        service = KeyStoreService(store, "PostgreSQL x", Both(), 5.0, lambda: None)
        service.startService()
        self.addCleanup(store.close)
        clock.advance(5.0)
        texts = [e["log_format"] for e in logged if "not loaded yet" in e.get("log_format", "")]
        self.assertEqual(len(texts), 1)
        self.assertIn("cannot authenticate", texts[0])


class SharedStoreMasterTests(TestCase):
    """
    Two stores on one database, one of them a master's (its feed and key
    watch): a change made through the other reaches the master's key watch.
    """

    async def test_changeReachesKeyWatch(self) -> None:
        """
        A key deleted through another store reaches the feed on the
        reactor, with the minion's states (none).
        """
        options = temporaryDatabase(self)
        mine = PostgresKeyStore(options)
        mine.start()
        self.addCleanup(mine.close)
        await mine.whenReady(reactor)
        received: list[dict[str, list[str]]] = []
        feed = KeyStoreFeed(reactor, received.append)
        mine.watch(feed)
        other = PostgresKeyStore(options)
        other.start()
        self.addCleanup(other.close)
        await other.whenReady(reactor)
        await deferToThread(other.putKey, ACCEPTED, "web1", PEM_A)
        await deferToThread(other.deleteKey, ACCEPTED, "web1")
        for _ in range(2000):
            if any(changes.get("web1") == [] for changes in received):
                break
            await deferLater(reactor, 0.01, lambda: None)
        self.assertIn([], [changes.get("web1") for changes in received])


class _AuthTaskCase(SynchronousTestCase):
    """
    A master key pair for the auth tasks; their state cleared after.
    """

    def setUp(self) -> None:
        self.pkiDir = self.mktemp()
        os.makedirs(self.pkiDir)
        crypt.loadOrCreateKeyPair(self.pkiDir, "master", 2048)
        self.addCleanup(self._closeStore)

    def _closeStore(self) -> None:
        store = authtasks._state.pop("store", None)
        authtasks._state.pop("keys", None)
        if hasattr(store, "close"):
            store.close()


class AuthTaskStoreTests(_AuthTaskCase):
    """
    L{authtasks.loadAuthenticator} opens the store its master names.
    """

    def test_files(self) -> None:
        """
        Without a spec, the worker's store is the files under C{pki_dir}.
        """
        authtasks.loadAuthenticator(self.pkiDir, False)
        self.assertIsInstance(authtasks._state["store"], FilesystemKeyStore)

    def test_postgres(self) -> None:
        """
        With the master's spec, the worker opens its own PostgreSQL store,
        loaded before the task returns; running the task again replaces it
        (the old one closed).
        """
        options = temporaryDatabase(self)
        _openPostgres(self, options).putKey(ACCEPTED, "web1", PEM_B)
        spec = {"driver": "postgres", "pki_dir": self.pkiDir, "options": options}
        authtasks.loadAuthenticator(self.pkiDir, True, spec)
        store = authtasks._state["store"]
        self.assertIsInstance(store, PostgresKeyStore)
        self.assertEqual(store.listKeys(ACCEPTED), ["web1"])
        self.assertEqual(store.idRules, IdRules(unicode=True))
        authtasks.loadAuthenticator(self.pkiDir, True, spec)
        self.assertIsNot(authtasks._state["store"], store)
        self.assertEqual(store._threads, [])


class AuthTaskStoreDownTests(_AuthTaskCase):
    """
    A worker starts even when its PostgreSQL key store cannot load.
    """

    def test_serverDown(self) -> None:
        """
        With the server unreachable, the init task returns after
        L{authtasks.WORKER_READY_TIMEOUT}, and the worker answers
        authentications "master busy" until its store loads.
        """
        self.patch(authtasks, "WORKER_READY_TIMEOUT", 0.2)
        spec = {
            "driver": "postgres",
            "pki_dir": self.pkiDir,
            "options": {"host": "127.0.0.1", "port": 1, "connect_timeout": 1},
        }
        authtasks.loadAuthenticator(self.pkiDir, False, spec)
        self.assertFalse(authtasks._state["store"].loaded)
        key = MINION_KEYS["m1"]
        pem = crypt.publicKeyToPem(key.public_key())
        nonce = os.urandom(NONCE_BYTES)
        challenge = os.urandom(32)
        load = {
            "id": "m1",
            "pub": pem,
            "nonce": nonce,
            "sig": crypt.sign(key, wire.authRequestMessage(challenge, nonce, "m1", pem)),
        }
        [answer] = authtasks.authenticateMany(
            [[load, challenge, "127.0.0.1:1", True]], b"k" * 32, 1, 4505
        )
        self.assertEqual(
            answer["result"]["reply"], {"ret": "error", "error": KEY_STORE_UNAVAILABLE}
        )


class KeyCommandPostgresTests(SynchronousTestCase):
    """
    C{salttwist-key} on a master whose keys are in PostgreSQL.
    """

    def setUp(self) -> None:
        self.options = temporaryDatabase(self)
        self.root = self.mktemp()
        os.makedirs(self.root)
        config = {"root_dir": self.root, **_postgresConfig(self.options)}
        import yaml

        with open(os.path.join(self.root, "master"), "w") as f:
            yaml.safe_dump(config, f)
        self.store = _openPostgres(self, self.options)

    def key(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        self.patch(sys, "stdout", out)
        self.patch(sys, "stderr", err)
        code = keyCommand.main(["-c", self.root, *argv])
        return code, out.getvalue(), err.getvalue()

    def test_listAndAccept(self) -> None:
        """
        C{-L} lists the database's keys; C{-a ID -y} accepts in the
        database (another store on it sees the key accepted).
        """
        self.store.putKey(PENDING, "web1", PEM_A)
        code, out, _ = self.key("-L", "--out", "json")
        self.assertEqual(code, 0)
        self.assertIn('"minions_pre": [\n        "web1"', out)
        code, out, _ = self.key("-a", "web1", "-y")
        self.assertEqual(code, 0, out)
        self.assertIn("Key for minion web1 accepted.", out)
        other = _openPostgres(self, self.options)
        self.assertEqual(other.stateOf("web1"), [ACCEPTED])

    def test_unreachable(self) -> None:
        """
        When the database cannot be reached, the command fails with exit
        code 2 and says which server and why.
        """
        import yaml

        with open(os.path.join(self.root, "master"), "w") as f:
            yaml.safe_dump(
                {
                    "root_dir": self.root,
                    "keys.cache_driver": "postgres",
                    "keys.postgres.host": "127.0.0.1",
                    "keys.postgres.port": 1,
                    "keys.postgres.connect_timeout": 1,
                },
                f,
            )
        self.patch(keyCommand, "openKeyStore", _shortWait(keyCommand.openKeyStore))
        code, _, err = self.key("-L")
        self.assertEqual(code, 2)
        self.assertIn("cannot use the key store", err)
        self.assertIn("salt@127.0.0.1:1/salt", err)


def _shortWait(openKeyStore: Any) -> Any:
    """
    @return: C{openKeyStore} waiting at most half a second.
    """

    def opened(spec: Any, *args: Any, readyTimeout: float | None = None, **kwargs: Any) -> Any:
        return openKeyStore(spec, *args, readyTimeout=0.5, **kwargs)

    return opened
