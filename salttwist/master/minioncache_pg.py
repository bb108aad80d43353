# -*- test-case-name: tests.test_minioncache_pg -*-
"""
The grains and pillar caches in PostgreSQL (issue 23): C{cache: postgres}
(Salt's option for the minion data cache driver, whose default is
C{localfs}), so that every master of a cluster can target by grain and
pillar (C{-G}, C{-I}, C{J@}, C{P@}, C{cache.grains}, the API's
C{GET /minions}) the minions connected to the others.

Each master keeps its whole cache in memory, as with C{localfs}, so
targeting reads never wait on the network; PostgreSQL is where the masters
meet:

  - B{writes} (a minion reports its grains; a pillar is compiled; a key is
    deleted) change the memory at once, then go to the database on the
    store's writer thread: every change queued meanwhile in one
    transaction, only the last change of each minion kept. A write that
    fails (the server is away) stays queued and is tried again with
    back-off (L{RECONNECT_INITIAL} doubling to L{RECONNECT_MAX}); what is
    queued is bounded by one entry per minion and cache.
  - B{other masters' writes} reach this one through C{LISTEN}/C{NOTIFY}
    (L{CHANNEL}, the payload is the cache and minion id, never the data) on
    the listener thread, which reads the changed rows and hands them to the
    reactor. On (re)connection it reads every row.
  - B{ordering}: every write takes the next number of one sequence. A row
    read from the database replaces the memory's only if its number is
    higher than the one held and this master has no write of that minion
    still on its way (its own write will be the newer one in the
    database). Removals are rows without data (tombstones), so a removal
    made while a master was disconnected is seen when it reloads.

Pillar is secret: with C{cache: postgres} each minion's compiled pillar is
stored in the database (never written to the master's disk, never logged,
not in the notifications). Whoever can read the table C{salttwist_minion_data}
reads every minion's pillar: see docs/cluster.md.

Blocking psycopg calls run only on the store's two threads (the writer and
the listener), never on the reactor.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger

from salttwist import pgsql, serial
from salttwist.master.grainscache import MAX_GRAINS_BYTES, GrainsCache
from salttwist.master.pillarcache import PillarCache, PillarEnv
from salttwist.pgsql import CONNECTION_DEFAULTS, Migration, applyMigrations, describeServer
from salttwist.pki.ids import validateMinionId

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CACHE_DRIVERS",
    "CHANNEL",
    "GRAINS",
    "MIGRATIONS",
    "PILLAR",
    "MinionCacheError",
    "MinionDataStore",
    "PostgresGrainsCache",
    "PostgresPillarCache",
    "connectionOptions",
]

CACHE_DRIVERS = ("localfs", "postgres")
"""
The C{cache} values taken: Salt's default (each master its own: the grains
in C{cachedir/grains.cache}, the pillar in memory only), and the database.
"""

CHANNEL = "salttwist_minion_data"
"""
The C{NOTIFY} channel of changes; each payload is C{<cache>/<minion id>}.
"""

GRAINS = "grains"
PILLAR = "pillar"

RECONNECT_INITIAL = 0.5
RECONNECT_MAX = 30.0
STATEMENT_TIMEOUT = 60.0
"""
Seconds a statement may take on the server (its C{statement_timeout}).
"""
LOAD_CHUNK = 200
"""
Rows read and handed to the reactor at a time when loading every row (the
listener waits for the reactor to apply each chunk before the next).
"""

MIGRATIONS: list[Migration] = [
    (
        1,
        "grains and pillar caches",
        (
            "CREATE SEQUENCE salttwist_minion_data_version",
            """
            CREATE TABLE salttwist_minion_data (
                bank text NOT NULL,
                id text NOT NULL,
                version bigint NOT NULL,
                data bytea,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (bank, id)
            )
            """,
        ),
    ),
]
_MIGRATIONS_TABLE = "salttwist_minion_data_migrations"
_LOCK_ID = 0x5A17_0003


_WRITE = """
INSERT INTO salttwist_minion_data (bank, id, data, version)
SELECT b, i, d, nextval('salttwist_minion_data_version')
FROM unnest(%s::text[], %s::text[], %s::bytea[]) AS u(b, i, d)
ON CONFLICT (bank, id) DO UPDATE
SET data = EXCLUDED.data, version = EXCLUDED.version, updated_at = now()
RETURNING bank, id, version
"""
_NOTIFY = (
    f"SELECT pg_notify('{CHANNEL}', b || '/' || i) FROM unnest(%s::text[], %s::text[]) AS u(b, i)"
)
_READ = """
SELECT bank, id, version, data FROM salttwist_minion_data
WHERE (bank, id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""

#: C{(cache, minion id)}.
Key = tuple[str, str]
#: C{(cache, minion id, version, data or None)}, as read from the database.
Row = tuple[str, str, int, bytes | None]


class MinionCacheError(Exception):
    """
    The database cannot be used (unreachable, or made by a newer salttwist).
    """


def connectionOptions(config: dict[str, Any]) -> dict[str, Any]:
    """
    The libpq connection parameters of C{cache.postgres.*}; unset ones are
    left to libpq (its environment variables, C{~/.pgpass}).

    @return: keyword arguments for C{psycopg.connect}.
    """
    return pgsql.optionsFromConfig(config, "cache.postgres.")


def _connect(options: dict[str, Any]) -> psycopg.Connection[Any]:
    try:
        import psycopg
    except ImportError as e:
        raise MinionCacheError(
            "cache: postgres needs psycopg 3: pip install 'salttwist[postgres]'"
        ) from e
    options = {**CONNECTION_DEFAULTS, **options}
    # A statement waiting on a lock or a stuck server fails rather than
    # holding the thread (and the writes queued behind it) for ever.
    setting = f"-c statement_timeout={round(STATEMENT_TIMEOUT * 1000)}"
    options["options"] = f"{options.get('options', '')} {setting}".strip()
    return psycopg.connect(autocommit=True, application_name="salttwist-minioncache", **options)


class MinionDataStore(Service):
    """
    The database side of the caches: a writer thread and a listener thread
    (see the module's docstring), started and stopped as a service.
    Everything but the two threads' loops runs on the reactor thread.
    """

    log = Logger()

    def __init__(self, options: dict[str, Any], reactor: Any) -> None:
        """
        @param options: C{psycopg.connect} keyword arguments.
        """
        self.options = options
        self.server = describeServer(options)
        self._reactor = reactor
        self._lock = threading.Condition()
        #: Guarded by C{_lock}: what the writer writes next, by key, with
        #: the ticket of that change.
        self._queued: dict[Key, tuple[int, bytes | None]] = {}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        # Reactor side.
        self._ticket = 0
        self._lastTicket: dict[Key, int] = {}
        self._doneTicket: dict[Key, int] = {}
        self._waiters: dict[Key, list[tuple[int, Deferred[None]]]] = {}
        self._versions: dict[Key, int] = {}
        self._appliers: dict[str, Callable[[str, bytes | None], None]] = {}
        self._loadedOnce: Deferred[None] = Deferred()
        self._stopped: Deferred[None] = Deferred()
        self._running = 0
        #: Whether the listener is connected (and has loaded every row).
        self.connected = False
        self.lastError = ""

    def subscribe(self, bank: str, apply: Callable[[str, bytes | None], None]) -> None:
        """
        Call C{apply(minionId, data)} on the reactor for each change of
        C{bank} read from the database (L{None}: removed) that is newer
        than what this master holds.
        """
        self._appliers[bank] = apply

    def whenLoaded(self) -> Deferred[None]:
        """
        @return: a L{Deferred} that fires once every row has been read once.
        """
        d: Deferred[None] = Deferred()
        if self._loadedOnce.called:
            d.callback(None)
        else:
            self._loadedOnce.addBoth(lambda r: (d.callback(None), r)[1])
        return d

    # Reactor side ----------------------------------------------------------------

    def write(self, bank: str, minionId: str, data: bytes | None) -> Deferred[None]:
        """
        Queue C{data} (L{None}: a removal) as C{minionId}'s row of C{bank}.

        @return: a L{Deferred} that fires once this write (or a later one
            of the same row) is committed, or fails with
            L{MinionCacheError} if an attempt failed (it is tried again).
        """
        key = (bank, minionId)
        self._ticket += 1
        ticket = self._ticket
        self._lastTicket[key] = ticket
        waiter: Deferred[None] = Deferred()
        self._waiters.setdefault(key, []).append((ticket, waiter))
        with self._lock:
            self._queued[key] = (ticket, data)
            self._lock.notify()
        return waiter

    def _pending(self, key: Key) -> bool:
        return self._lastTicket.get(key, 0) > self._doneTicket.get(key, 0)

    def _committed(self, done: list[tuple[Key, int, int]]) -> None:
        """
        The writer committed these C{(key, ticket, version)}.
        """
        for key, ticket, version in done:
            self._doneTicket[key] = max(self._doneTicket.get(key, 0), ticket)
            self._versions[key] = max(self._versions.get(key, 0), version)
            self._fire(key, ticket, None)

    def _failed(self, keys: list[tuple[Key, int]], error: str) -> None:
        """
        An attempt to write these C{(key, ticket)} failed.
        """
        self.lastError = error
        failure = MinionCacheError(f"the minion data cache {self.server}: {error}")
        for key, ticket in keys:
            self._fire(key, ticket, failure)

    def _fire(self, key: Key, ticket: int, error: Exception | None) -> None:
        waiters = self._waiters.get(key, [])
        due = [d for t, d in waiters if t <= ticket]
        rest = [(t, d) for t, d in waiters if t > ticket]
        if rest:
            self._waiters[key] = rest
        else:
            self._waiters.pop(key, None)
        for d in due:
            if error is None:
                d.callback(None)
            else:
                d.errback(error)

    def _deliver(self, rows: list[Row], complete: bool = False) -> None:
        """
        Rows read from the database: apply those newer than what is held
        and not overtaken by a write of this master on its way.

        @param complete: the end of a full load.
        """
        for bank, minionId, version, data in rows:
            key = (bank, minionId)
            if version <= self._versions.get(key, 0) or self._pending(key):
                continue
            self._versions[key] = version
            apply = self._appliers.get(bank)
            if apply is not None:
                apply(minionId, data)
        if complete:
            self.connected = True
            if not self._loadedOnce.called:
                self._loadedOnce.callback(None)

    def _listenerLost(self, error: str) -> None:
        self.connected = False
        self.lastError = error

    # Service ---------------------------------------------------------------------

    def startService(self) -> None:
        """
        Start the writer and listener threads.
        """
        super().startService()
        self._stopping.clear()
        for name, loop in (("writer", self._writeLoop), ("listener", self._listenLoop)):
            thread = threading.Thread(
                target=self._runLoop, args=(loop,), name=f"salttwist-minioncache-{name}"
            )
            thread.daemon = True
            self._threads.append(thread)
            self._running += 1
            thread.start()

    def stopService(self) -> Deferred[None]:
        """
        Stop the threads (the writer tries once more what is queued).

        @return: a L{Deferred} that fires once both threads ended.
        """
        super().stopService()
        self._stopping.set()
        with self._lock:
            self._lock.notify()
        if self._running == 0:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._stopped.addBoth(lambda _: d.callback(None))
        return d

    def _runLoop(self, loop: Callable[[], None]) -> None:
        try:
            loop()
        finally:
            self._reactor.callFromThread(self._threadEnded)

    def _threadEnded(self) -> None:
        self._running -= 1
        if self._running == 0:
            self._threads = []
            stopped, self._stopped = self._stopped, Deferred()
            stopped.callback(None)

    def _backOff(self, delay: float) -> float:
        """
        Wait C{delay} (jittered) unless stopping. @return: the next delay.
        """
        self._stopping.wait(delay * random.uniform(0.5, 1.0))
        return min(delay * 2, RECONNECT_MAX)

    def _open(self) -> psycopg.Connection[Any]:
        connection = _connect(self.options)
        try:
            applyMigrations(
                connection,
                MIGRATIONS,
                _MIGRATIONS_TABLE,
                _LOCK_ID,
                "the PostgreSQL minion data cache",
                MinionCacheError,
            )
        except BaseException:
            connection.close()
            raise
        return connection

    # The writer thread ------------------------------------------------------------

    def _writeLoop(self) -> None:
        connection = None
        delay = RECONNECT_INITIAL
        while True:
            with self._lock:
                while not self._queued and not self._stopping.is_set():
                    self._lock.wait()
                batch, self._queued = self._queued, {}
            if not batch:
                break
            try:
                if connection is None:
                    connection = self._open()
                done = self._writeBatch(connection, batch)
            except Exception as e:
                if connection is not None:
                    connection.close()
                    connection = None
                error = str(e).strip() or type(e).__name__
                with self._lock:
                    for key, entry in batch.items():
                        self._queued.setdefault(key, entry)
                self.log.warn(
                    "{n} grains/pillar cache writes to {server} failed, will retry: {error}",
                    n=len(batch),
                    server=self.server,
                    error=error,
                )
                self._reactor.callFromThread(
                    self._failed, [(key, t) for key, (t, _) in batch.items()], error
                )
                if self._stopping.is_set():
                    break
                delay = self._backOff(delay)
                continue
            delay = RECONNECT_INITIAL
            self._reactor.callFromThread(self._committed, done)
            if self._stopping.is_set():
                with self._lock:
                    if not self._queued:
                        break
        if connection is not None:
            connection.close()

    def _writeBatch(
        self, connection: psycopg.Connection[Any], batch: dict[Key, tuple[int, bytes | None]]
    ) -> list[tuple[Key, int, int]]:
        banks = [bank for bank, _ in batch]
        ids = [minionId for _, minionId in batch]
        datas = [data for _, data in batch.values()]
        with connection.transaction():
            rows = connection.execute(_WRITE, (banks, ids, datas)).fetchall()
            connection.execute(_NOTIFY, (banks, ids))
        return [
            ((bank, minionId), batch[bank, minionId][0], version)
            for bank, minionId, version in rows
        ]

    # The listener thread ----------------------------------------------------------

    def _listenLoop(self) -> None:
        delay = RECONNECT_INITIAL
        while not self._stopping.is_set():
            connection = None
            try:
                connection = self._open()
                connection.execute(f"LISTEN {CHANNEL}")
                # LISTEN before the load: a change committed meanwhile is
                # both loaded and notified (and applied once: versions).
                self._loadAll(connection)
                delay = RECONNECT_INITIAL
                self._listen(connection)
            except Exception as e:
                error = str(e).strip() or type(e).__name__
                self.log.warn(
                    "the grains/pillar cache lost {server}, reconnecting: {error}",
                    server=self.server,
                    error=error,
                )
                self._reactor.callFromThread(self._listenerLost, error)
                delay = self._backOff(delay)
            finally:
                if connection is not None:
                    connection.close()

    def _loadAll(self, connection: psycopg.Connection[Any]) -> None:
        with connection.transaction(), connection.cursor(name="salttwist_load") as cursor:
            cursor.execute("SELECT bank, id, version, data FROM salttwist_minion_data")
            while True:
                rows = cursor.fetchmany(LOAD_CHUNK)
                if not rows:
                    break
                self._handOver([tuple(r) for r in rows])
        self._handOver([], True)

    def _handOver(self, rows: list[Any], complete: bool = False) -> None:
        """
        Give C{rows} to the reactor and wait until it has applied them, so
        that a load of many rows never queues more than one chunk of work
        on the reactor (each is decoded there).
        """
        done = threading.Event()

        def deliver() -> None:
            try:
                self._deliver(rows, complete)
            finally:
                done.set()

        self._reactor.callFromThread(deliver)
        while not done.wait(0.5):
            if self._stopping.is_set():
                return

    def _listen(self, connection: psycopg.Connection[Any]) -> None:
        while not self._stopping.is_set():
            notes = list(connection.notifies(timeout=0.5, stop_after=1))
            if not notes:
                continue
            notes += connection.notifies(timeout=0, stop_after=LOAD_CHUNK)
            keys = {tuple(note.payload.split("/", 1)) for note in notes}
            keys = {k for k in keys if len(k) == 2}
            if not keys:
                continue
            rows = connection.execute(
                _READ, ([bank for bank, _ in keys], [minionId for _, minionId in keys])
            ).fetchall()
            self._handOver([tuple(r) for r in rows])


def _logWriteFailure(failure: Any) -> None:
    # The write stays queued and is retried; the store logged the reason.
    failure.trap(MinionCacheError)


class PostgresGrainsCache(GrainsCache):
    """
    A L{GrainsCache} whose grains every master of the cluster shares
    through a L{MinionDataStore}: the same reads (C{grains}), writes that
    go to the database.
    """

    def __init__(self, store: MinionDataStore) -> None:
        super().__init__(None, _noBlocking)
        self.dataStore = store
        #: Ids whose grains in memory are those in the database.
        self._stored: set[str] = set()
        store.subscribe(GRAINS, self._applyRemote)

    def load(self) -> None:
        """
        Nothing to read at start: the store's listener loads every row.
        """

    def update(self, minionId: str, grains: dict[str, Any]) -> Deferred[None]:
        """
        See L{GrainsCache.update}: the grains are in memory at once; the
        L{Deferred} fires once they are committed, or once an attempt
        failed (logged; the write is tried again).
        """
        if not isinstance(grains, dict):
            raise ValueError("grains must be a map")
        if minionId in self._stored and self.grains.get(minionId) == grains:
            return succeed(None)
        data = serial.dumps(grains)
        if len(data) > MAX_GRAINS_BYTES:
            raise ValueError(f"grains of {len(data)} bytes exceed {MAX_GRAINS_BYTES}")
        self.grains[minionId] = grains
        self._stored.discard(minionId)

        def written(_: object) -> None:
            if self.grains.get(minionId) is grains:
                self._stored.add(minionId)

        return self.dataStore.write(GRAINS, minionId, data).addCallbacks(written, _logWriteFailure)

    def forget(self, minionId: str) -> Deferred[None]:
        """
        Drop C{minionId}'s grains here and in the database.
        """
        self.grains.pop(minionId, None)
        self._stored.discard(minionId)
        d = self.dataStore.write(GRAINS, validateMinionId(minionId), None)
        return d.addErrback(_logWriteFailure)

    def _applyRemote(self, minionId: str, data: bytes | None) -> None:
        if data is None:
            self.grains.pop(minionId, None)
            self._stored.discard(minionId)
            return
        try:
            grains = serial.loads(data)
        except serial.SerialError as e:
            self.log.warn("skipping the stored grains of {id!r}: {e}", id=minionId, e=e)
            return
        if isinstance(grains, dict):
            self.grains[minionId] = grains
            self._stored.add(minionId)


class PostgresPillarCache(PillarCache):
    """
    A L{PillarCache} whose pillars every master of the cluster shares
    through a L{MinionDataStore}, for pillar targeting. A pillar compiled
    by another master is never fresh for C{pillar_cache} here (its stamp
    is unknown): this master compiles its own when a minion asks it.
    """

    log = Logger()

    def __init__(self, store: MinionDataStore) -> None:
        super().__init__()
        self.dataStore = store
        store.subscribe(PILLAR, self._applyRemote)

    def storePacked(
        self,
        minionId: str,
        packed: bytes,
        stamp: float | None = None,
        env: PillarEnv = (None, None),
    ) -> None:
        """
        See L{PillarCache.storePacked}; also written to the database.
        """
        unchanged = self.pillars.get(minionId) == packed
        super().storePacked(minionId, packed, stamp, env)
        if not unchanged:
            self.dataStore.write(PILLAR, minionId, packed).addErrback(_logWriteFailure)

    def forget(self, minionId: str) -> None:
        """
        Drop C{minionId}'s pillar here and in the database.
        """
        super().forget(minionId)
        self.dataStore.write(PILLAR, minionId, None).addErrback(_logWriteFailure)

    def keepOnly(self, acceptedIds: frozenset[str]) -> None:
        """
        Drop from memory the pillar of every minion not in C{acceptedIds};
        the database keeps it (its removal, when a key is deleted, is
        L{forget}'s).
        """
        for minionId in [m for m in self.pillars if m not in acceptedIds]:
            super().forget(minionId)

    def _applyRemote(self, minionId: str, data: bytes | None) -> None:
        if data is None:
            super().forget(minionId)
        else:
            self.pillars[minionId] = data
            self._stamps[minionId] = (None, (None, None))


def _noBlocking(*args: Any, **kwargs: Any) -> Deferred[Any]:
    raise AssertionError("the PostgreSQL grains cache writes no file")


def cachesFromConfig(
    config: dict[str, Any], reactor: Any
) -> tuple[MinionDataStore, PostgresGrainsCache, PostgresPillarCache] | None:
    """
    @return: the store and the two caches C{cache: postgres} asks for, or
        L{None} for C{localfs}.
    @raise ValueError: C{cache: postgres} without a shared key store, or
        without psycopg.
    """
    if config.get("cache", "localfs") != "postgres":
        return None
    if config.get("keys.cache_driver") != "postgres":
        raise ValueError(
            "cache: postgres needs keys.cache_driver: postgres (the masters sharing "
            "grains and pillar must share the minions' keys)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ValueError(
            "cache: postgres needs psycopg 3: pip install 'salttwist[postgres]'"
        ) from None
    store = MinionDataStore(connectionOptions(config), reactor)
    return store, PostgresGrainsCache(store), PostgresPillarCache(store)
