# -*- test-case-name: tests.test_keystore_pg -*-
"""
Minion keys in PostgreSQL (issue 23): an L{IKeyStore} that several masters
share, so that C{salttwist-key} on any of them can act for the cluster.

Selected by C{keys.cache_driver: postgres} (L{salttwist.pki.stores}): the
master (L{salttwist.master.service}), each of its auth worker processes
(L{salttwist.master.authtasks}) and C{salttwist-key} then each open one.

L{IKeyStore} is synchronous (the master calls it through C{runBlocking}, and
its workers call it directly), and the master reads it often: the accepted
ids every second (L{salttwist.master.keywatch}), a key per authentication.
A database round trip per read would make every one of those a network
wait, so L{PostgresKeyStore} keeps a mirror of every key in memory:

  - B{reads} (C{getKey}, C{listKeys}, C{stateOf}, C{idClashes}) answer from
    the mirror, never touching the network: they are safe on any thread,
    the reactor's included. C{refresh(id)} reads one minion's keys from the
    database into the mirror, for a decision that must not miss a change
    whose notification is still on its way (blocking, as a write).
  - B{writes} (C{putKey}, C{moveKey}, C{deleteKey}) run on one dedicated
    thread through one connection and block the calling thread until they
    committed (as L{FilesystemKeyStore}'s writes block on the disk): call
    them from a thread, as the master does. Writes that wait together
    share one transaction, each in a savepoint of its own, so an auth storm
    of new ids pays one commit per batch, not per key.
  - B{the mirror} is loaded in full at start and after every reconnection
    of the listener (a second connection, on a thread of its own, that
    C{LISTEN}s on L{CHANNEL}). Every write bumps the minion's version in
    C{salttwist_key_minions} and sends a C{NOTIFY} (delivered at commit) with
    the id and version; each store then reads that minion's keys again. So a
    reject or delete made through any store reaches every other store within
    the notification latency (milliseconds on a LAN), and the master's
    per-second key check then cuts the minion off.

Consistency model:
  - Per minion id, changes are serialized by a row lock on its
    C{salttwist_key_minions} row, and each carries a version one higher than
    the last. The mirror applies a minion's state only if its version is
    higher than the one it holds, so a slow notification never undoes a
    newer change, and a store sees its own writes as soon as they return
    (read-your-writes).
  - Across minions there is no ordering guarantee between stores: each
    minion's state converges independently.
  - While the listener is disconnected, reads answer from the mirror as it
    was (stale, at most by the changes made during the outage), the
    connection is retried with back-off (L{RECONNECT_INITIAL} doubling to
    L{RECONNECT_MAX} seconds), and the whole mirror is reloaded once it is
    back. L{PostgresKeyStore.connected} says whether it is listening now.
  - Before the first load, reads raise L{KeyStoreUnavailable}: an empty
    mirror must never pass for "no key is accepted", which would cut off
    every minion.

Writer connection loss: a batch whose connection broke before its
C{COMMIT} was sent (the server rolled it back) runs once more on a new
connection; one that broke during C{COMMIT} fails with
L{KeyStoreUnavailable} saying the write may or may not have been made.
When the server cannot be reached, writes fail at once with
L{KeyStoreUnavailable} naming it, and connection attempts back off.

Timeouts: the writer's connection has a C{statement_timeout} of
C{writeTimeout} (L{WRITE_TIMEOUT}) seconds, so a write waiting on a lock or
a slow server fails (nothing written) instead of blocking the writer; a
server that does not answer at all (hung, but its kernel still acknowledges)
has the connection cut from this side L{WATCHDOG_GRACE} seconds later
(L{_Watchdog}), and the write fails, not tried again. The listener's
queries are cut the same way after L{LISTENER_TIMEOUT}, and it reconnects.

Driver: psycopg 3, as L{salttwist.master.jobcache_pg}. The schema is
versioned (L{MIGRATIONS}) in C{salttwist_keystore_migrations}, applied at
connection under an advisory lock so masters starting together apply each
migration once.
"""

from __future__ import annotations

import contextlib
import json
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger
from zope.interface import implementer

from salttwist.crypt import canonicalPublicPem
from salttwist.interfaces import IKeyStore
from salttwist.pgsql import (
    CONNECTION_DEFAULTS,
    Migration,
    applyMigrations,
    cutSocket,
    describeServer,
)
from salttwist.pki.ids import DEFAULT_ID_RULES, IdIndex, IdRules, validateMinionId
from salttwist.pki.keystore import STATES, KeyChanged, _checkMove, _checkState

if TYPE_CHECKING:
    import psycopg
    from twisted.internet.defer import Deferred

__all__ = [
    "CHANNEL",
    "MIGRATIONS",
    "KeyStoreError",
    "KeyStoreUnavailable",
    "PostgresKeyStore",
    "migrate",
]

CHANNEL = "salttwist_keys"
"""
The C{LISTEN}/C{NOTIFY} channel of key changes. Each payload is JSON:
C{{"id": minion id, "v": its new version}}.
"""

RECONNECT_INITIAL = 0.5
"""
Seconds before the second connection attempt after a failed one.
"""

RECONNECT_MAX = 30.0
"""
The longest wait between two connection attempts.
"""

IDLE_CHECK = 5.0
"""
Seconds without a notification after which the listener checks that its
connection still works (a silent network failure sends no error).
"""

WRITE_TIMEOUT = 10.0
"""
Seconds a write transaction may take on the server by default: the writer's
connection runs with this C{statement_timeout}, so a lock held elsewhere or a
server too slow to answer fails the write (nothing written) rather than
blocking it, and every write queued behind it, for ever.
"""

WATCHDOG_GRACE = 5.0
"""
Seconds beyond the statement timeout after which a connection that still
has not answered is cut from this side (its socket shut down): a server
that hangs (stopped, swapped out, a half-open network path whose kernel
still acknowledges) never applies its own C{statement_timeout}, and TCP
sees nothing wrong.
"""

LISTENER_TIMEOUT = 60.0
"""
Seconds the listener's queries (a full load, a refresh, its idle check) may
take before its connection is cut and made again, for the same reason.
"""

MAX_BATCH = 100
"""
The most writes one transaction of the writer holds.
"""

MAX_REFRESH = 1000
"""
The most notifications the listener takes at once (and reads their
minions again in one query).
"""

_LOCK_MIGRATIONS = 0x5A17_0101

_Write = tuple[str, "Callable[[psycopg.Connection[Any]], Any]", "Future[Any]"]
"""
A queued write: the minion id, the work, and the future of its result.
"""

MIGRATIONS: list[tuple[int, str, tuple[str, ...]]] = [
    (
        1,
        "minion keys and per-minion versions",
        (
            """
            CREATE TABLE salttwist_key_minions (
                minion_id text COLLATE "C" PRIMARY KEY,
                version bigint NOT NULL
            )
            """,
            """
            CREATE TABLE salttwist_keys (
                minion_id text COLLATE "C" NOT NULL
                    REFERENCES salttwist_key_minions (minion_id),
                state text NOT NULL CHECK (state IN
                    ('minions_pre', 'minions', 'minions_rejected', 'minions_denied')),
                pem bytea NOT NULL,
                PRIMARY KEY (minion_id, state)
            )
            """,
        ),
    ),
]
"""
The schema's migrations: C{(version, description, statements)}, applied in
order. Never change one that was released: add the next.
"""


class KeyStoreError(Exception):
    """
    The PostgreSQL key store cannot be used as it is (for example its
    schema is newer than this salttwist).
    """


class _Unchanged(Exception):
    """
    Raised by a write that changed nothing, to roll back its version bump;
    it carries the write's result.
    """

    def __init__(self, result: object) -> None:
        super().__init__()
        self.result = result


class KeyStoreUnavailable(KeyStoreError):
    """
    The PostgreSQL server cannot be reached, or the keys were never loaded:
    the operation was not done (or, if the message says so, the connection
    broke while it committed, and it may or may not have been done).
    """


class _LostConnection(KeyStoreUnavailable):
    """
    The writer's connection broke during a batch.

    @ivar timedOut: whether it was cut because the server did not answer
        in time (L{_Watchdog}).
    """

    def __init__(self, message: str, timedOut: bool = False) -> None:
        super().__init__(message)
        self.timedOut = timedOut


def _connect(
    options: dict[str, Any], statementTimeout: float | None = None
) -> psycopg.Connection[Any]:
    """
    @param statementTimeout: if given, the connection's C{statement_timeout}
        in seconds (added to any server options C{options} carry).
    @return: an autocommit connection made with C{options} over
        L{CONNECTION_DEFAULTS}.
    """
    import psycopg

    options = {**CONNECTION_DEFAULTS, **options}
    if statementTimeout is not None:
        setting = f"-c statement_timeout={max(1, round(statementTimeout * 1000))}"
        options["options"] = f"{options.get('options', '')} {setting}".strip()
    return psycopg.connect(autocommit=True, application_name="salttwist-keystore", **options)


WATCHDOG_TICK = 0.25
"""
Seconds between two looks of the watchdog thread at the deadlines it
guards: a connection is cut at most this late.
"""


class _Watchdog:
    """
    Cuts a connection whose query has not returned within a deadline, by
    shutting its socket down from another thread: the blocked call then
    fails at once with a broken connection (see L{WATCHDOG_GRACE}).

    One thread per process looks at every guarded query each
    L{WATCHDOG_TICK} (started with the first): guarding a query costs a
    lock and a L{dict} entry, not a timer thread of its own (a thread per
    query was a measurable share of a key store's CPU in an auth storm).

    @ivar fired: whether it cut the connection.
    """

    _lock = threading.Lock()
    _guarded: dict[int, _Watchdog] = {}
    _thread: threading.Thread | None = None

    def __init__(self, connection: psycopg.Connection[Any], seconds: float) -> None:
        self.fired = False
        self._connection = connection
        self._deadline = time.monotonic() + seconds

    @classmethod
    def _watch(cls) -> None:
        while True:
            time.sleep(WATCHDOG_TICK)
            now = time.monotonic()
            with cls._lock:
                late = [w for w in cls._guarded.values() if w._deadline <= now]
                for watchdog in late:
                    del cls._guarded[id(watchdog)]
                    watchdog.fired = True
            for watchdog in late:
                cutSocket(watchdog._connection)

    @classmethod
    @contextlib.contextmanager
    def guarding(cls, connection: psycopg.Connection[Any], seconds: float) -> Iterator[_Watchdog]:
        """
        Watch C{connection} for C{seconds} while the block runs.
        """
        watchdog = cls(connection, seconds)
        with cls._lock:
            cls._guarded[id(watchdog)] = watchdog
            if cls._thread is None:
                thread = threading.Thread(
                    target=cls._watch, name="salttwist-keystore-watchdog", daemon=True
                )
                thread.start()
                cls._thread = thread
        try:
            yield watchdog
        finally:
            with cls._lock:
                cls._guarded.pop(id(watchdog), None)


def migrate(
    connection: psycopg.Connection[Any], migrations: list[Migration] = MIGRATIONS
) -> list[int]:
    """
    Apply the key store's C{migrations} that the database lacks
    (L{applyMigrations}).

    @return: the versions applied now.
    @raise KeyStoreError: if the database has a version this code does
        not know.
    """
    return applyMigrations(
        connection,
        migrations,
        "salttwist_keystore_migrations",
        _LOCK_MIGRATIONS,
        "the PostgreSQL key store",
        KeyStoreError,
    )


# The mirror -----------------------------------------------------------------


class _Mirror:
    """
    Every key in memory, with each minion's version; shared by the writer
    thread, the listener thread and readers on any thread (under a lock).
    """

    def __init__(self, idRules: IdRules) -> None:
        self.idRules = idRules
        self.lock = threading.Lock()
        self.keys: dict[str, dict[str, bytes]] = {state: {} for state in STATES}
        self.versions: dict[str, int] = {}
        self.index = IdIndex(idRules)

    def apply(self, minionId: str, version: int, states: dict[str, bytes]) -> bool:
        """
        Take C{states} (state to PEM) as the keys of C{minionId} at
        C{version}, unless the mirror already holds that version or a newer
        one.

        @return: whether anything was taken.
        """
        with self.lock:
            if version <= self.versions.get(minionId, 0):
                return False
            self.versions[minionId] = version
            self._set(minionId, states)
            return True

    def _set(self, minionId: str, states: dict[str, bytes]) -> None:
        """
        Make C{states} the keys of C{minionId} (the lock is held).
        """
        for state in STATES:
            held = self.keys[state]
            pem = states.get(state)
            if pem is None:
                if held.pop(minionId, None) is not None:
                    self.index.move(minionId, None, state)
            else:
                if minionId not in held:
                    self.index.move(minionId, state, None)
                held[minionId] = pem

    def replace(self, versions: dict[str, int], keys: dict[str, dict[str, bytes]]) -> list[str]:
        """
        Take a full load (every minion's version, and its keys by state),
        keeping what the mirror holds for a minion at a newer version (a
        write of this store that committed after the load began).

        @return: the ids whose keys changed.
        """
        with self.lock:
            changed = []
            for minionId in set(versions) | set(self.versions):
                version = versions.get(minionId, 0)
                if self.versions.get(minionId, 0) > version:
                    continue
                new = keys.get(minionId, {})
                old = {s: self.keys[s][minionId] for s in STATES if minionId in self.keys[s]}
                self.versions[minionId] = version
                if new != old:
                    self._set(minionId, new)
                    changed.append(minionId)
            return sorted(changed)


# The store -------------------------------------------------------------------


@implementer(IKeyStore)
class PostgresKeyStore:
    """
    An L{IKeyStore} in PostgreSQL, shared by every master of a cluster: see
    the module's docstring for the threads and the consistency model.

    Call L{start}, then wait for L{waitReady} (blocking) or L{whenReady} (a
    L{Deferred}); L{close} when done.

    @ivar options: the C{psycopg.connect} keyword arguments.
    @ivar idRules: the rules new ids must meet (L{checkNewId}).
    @ivar connected: whether the listener is connected now (its mirror is
        up to date but for notifications in flight).
    @ivar loads: how many full loads the listener made (the first and one
        per reconnection).
    @ivar batches: how many write transactions committed (each holds the
        writes that waited together).
    @ivar writeTimeout: the seconds a write transaction may take on the
        server (L{WRITE_TIMEOUT}); after that many and L{WATCHDOG_GRACE}
        more without an answer, the connection is cut.
    @ivar writerPid: the server process id of the writer's connection.
    @ivar listenerPid: the server process id of the listener's connection
        (for an admin, and tests, to find it).
    """

    log = Logger()

    def __init__(
        self,
        options: dict[str, Any],
        idRules: IdRules = DEFAULT_ID_RULES,
        writeTimeout: float = WRITE_TIMEOUT,
    ) -> None:
        if not writeTimeout > 0:
            raise ValueError(
                f"writeTimeout must be a positive number of seconds, not {writeTimeout!r}"
            )
        self.options = options
        self.writeTimeout = writeTimeout
        self._mirror = _Mirror(idRules)
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._closeLock = threading.Lock()
        self._writes: queue.Queue[_Write | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._readyError: BaseException | None = None
        self._readyLock = threading.Lock()
        self._readyCallbacks: list[Callable[[], None]] = []
        self._watchers: list[Callable[[str, list[str]], None]] = []
        self._writer: psycopg.Connection[Any] | None = None
        self._listener: psycopg.Connection[Any] | None = None
        self._writerBackoff = 0.0
        self._writerNextAttempt = 0.0
        self._lastError = ""
        self.connected = False
        self.loads = 0
        self.listenerPid: int | None = None
        self.writerPid: int | None = None
        self.batches = 0

    @property
    def lastError(self) -> str:
        """
        Why the last connection attempt or query failed (C{""} if none did).
        """
        return self._lastError

    @property
    def loaded(self) -> bool:
        """
        Whether the keys were loaded (reads answer), even if the listener is
        reconnecting now (L{connected}).
        """
        return self._ready.is_set() and self._readyError is None

    @property
    def idRules(self) -> IdRules:
        """
        The rules new ids must meet (as L{FilesystemKeyStore.idRules}).
        """
        return self._mirror.idRules

    @idRules.setter
    def idRules(self, rules: IdRules) -> None:
        mirror = self._mirror
        with mirror.lock:
            mirror.idRules = rules
            mirror.index = IdIndex(rules)
            for state in STATES:
                for minionId in mirror.keys[state]:
                    mirror.index.add(state, minionId)

    # Life ----------------------------------------------------------------

    def start(self) -> None:
        """
        Start the writer and listener threads; the listener connects,
        applies the missing migrations and loads every key.
        """
        for name, target in (("writer", self._writeLoop), ("listener", self._listenLoop)):
            thread = threading.Thread(target=target, name=f"salttwist-keystore-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def waitReady(self, timeout: float) -> None:
        """
        Block until the keys were loaded once.

        @raise KeyStoreError: if the schema is refused.
        @raise KeyStoreUnavailable: if they were not loaded within
            C{timeout} seconds.
        """
        if not self._ready.wait(timeout):
            raise KeyStoreUnavailable(
                f"the PostgreSQL key store {describeServer(self.options)} did not load "
                f"within {timeout} s ({self._lastError or 'no answer'})"
            )
        if self._readyError is not None:
            raise self._readyError

    def whenReady(self, reactor: Any) -> Deferred[None]:
        """
        @param reactor: the reactor to fire the L{Deferred} on (through
            C{callFromThread}).
        @return: a L{Deferred} that fires when the keys were loaded once, or
            fails with L{KeyStoreError} if the schema is refused. No thread
            waits meanwhile.
        """
        # Imported here: salttwist-key opens this store without Twisted's
        # reactor machinery.
        from twisted.internet.defer import Deferred

        done: Deferred[None] = Deferred()

        def fire() -> None:
            if self._readyError is not None:
                done.errback(self._readyError)
            else:
                done.callback(None)

        with self._readyLock:
            if not self._ready.is_set():
                self._readyCallbacks.append(lambda: reactor.callFromThread(fire))
                return done
        fire()
        return done

    def _setReady(self, error: BaseException | None = None) -> None:
        """
        The keys were loaded once (or never will be: C{error}): wake every
        waiter.
        """
        with self._readyLock:
            if self._ready.is_set():
                return
            self._readyError = error
            self._ready.set()
            callbacks, self._readyCallbacks = self._readyCallbacks, []
        for callback in callbacks:
            callback()

    def close(self) -> None:
        """
        Stop both threads and close their connections (blocking, briefly).
        Writes queued meanwhile fail with L{KeyStoreUnavailable}.
        """
        with self._closeLock:
            self._stopping.set()
            self._writes.put(None)
        listener = self._listener
        if listener is not None:
            # Rather than wait for its next poll: salttwist-key closes a
            # store on every run.
            cutSocket(listener)
        for thread in self._threads:
            thread.join(10)
        self._threads = []

    def watch(self, callback: Callable[[str, list[str]], None]) -> Callable[[], None]:
        """
        Call C{callback(minionId, states)} after each change the mirror
        takes (a write of this store, a notification, or a reload), on the
        writer's or listener's thread: a reactor user wraps it in
        C{reactor.callFromThread}.

        @return: a function that stops the calls.
        """
        self._watchers.append(callback)
        return lambda: self._watchers.remove(callback)

    def _changed(self, minionIds: list[str]) -> None:
        """
        Tell the watchers about C{minionIds}.
        """
        mirror = self._mirror
        for minionId in minionIds:
            with mirror.lock:
                states = [state for state in STATES if minionId in mirror.keys[state]]
            for callback in list(self._watchers):
                try:
                    callback(minionId, states)
                except Exception:
                    self.log.failure("key store watcher failed")

    # The listener ------------------------------------------------------------

    def _listenLoop(self) -> None:
        """
        The listener thread: connect, C{LISTEN}, load every key, then read
        each notified minion again; on a lost connection, back off and start
        over.
        """
        import psycopg

        backoff = 0.0
        while not self._stopping.is_set():
            connection = None
            try:
                connection = _connect(self.options)
                self._listener = connection
                if self._stopping.is_set():
                    break
                migrate(connection)
                # LISTEN before loading: a change committed during the load
                # is notified, and versions keep the older state out.
                connection.execute(f"LISTEN {CHANNEL}")
                with _Watchdog.guarding(connection, LISTENER_TIMEOUT):
                    self._load(connection)
                self.listenerPid = connection.info.backend_pid
                backoff = 0.0
                self.connected = True
                self._setReady()
                self._listen(connection)
            except KeyStoreError as e:
                if self._ready.is_set():
                    # A newer salttwist migrated the schema under us: stop
                    # answering rather than serve what can no longer be
                    # kept up to date.
                    self._readyError = e
                self._setReady(e)
                self.log.critical("{error}", error=str(e))
                return
            except psycopg.Error as e:
                if self._stopping.is_set():
                    # Closed (its socket cut by close): not a lost server.
                    break
                if self.connected:
                    self.log.warn(
                        "lost the PostgreSQL key store {server} ({error}); reconnecting",
                        server=describeServer(self.options),
                        error=str(e).strip(),
                    )
                else:
                    self.log.warn(
                        "cannot reach the PostgreSQL key store {server}: {error}",
                        server=describeServer(self.options),
                        error=str(e).strip(),
                    )
                self._lastError = str(e).strip()
            finally:
                self.connected = False
                self._listener = None
                if connection is not None:
                    connection.close()
            backoff = min(max(backoff * 2, RECONNECT_INITIAL), RECONNECT_MAX)
            self._stopping.wait(backoff * random.uniform(0.75, 1.0))

    def _load(self, connection: psycopg.Connection[Any]) -> None:
        """
        Load every minion's version and keys in one snapshot into the
        mirror.
        """
        versions: dict[str, int] = {}
        keys: dict[str, dict[str, bytes]] = {}
        with connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            for minionId, version in connection.execute(
                "SELECT minion_id, version FROM salttwist_key_minions"
            ):
                versions[minionId] = version
            for minionId, state, pem in connection.execute(
                "SELECT minion_id, state, pem FROM salttwist_keys"
            ):
                keys.setdefault(minionId, {})[state] = bytes(pem)
        self.loads += 1
        self._changed(self._mirror.replace(versions, keys))

    def _listen(self, connection: psycopg.Connection[Any]) -> None:
        """
        Take notifications until stopped or the connection breaks.
        """
        quiet = time.monotonic()
        while not self._stopping.is_set():
            # notifies() holds the connection: collect, then query.
            notes = list(connection.notifies(timeout=0.5, stop_after=1))
            if not notes:
                if time.monotonic() - quiet > IDLE_CHECK:
                    with _Watchdog.guarding(connection, LISTENER_TIMEOUT):
                        connection.execute("SELECT 1")
                    quiet = time.monotonic()
                continue
            # Take those already here too: one query for all of them.
            notes += connection.notifies(timeout=0, stop_after=MAX_REFRESH)
            quiet = time.monotonic()
            wanted: set[str] = set()
            for note in notes:
                try:
                    payload = json.loads(note.payload)
                    minionId, version = payload["id"], int(payload["v"])
                except (ValueError, KeyError, TypeError):
                    self.log.warn("ignored a malformed key notification {p!r}", p=note.payload)
                    continue
                if not isinstance(minionId, str):
                    continue
                if version > self._mirror.versions.get(minionId, 0):
                    wanted.add(minionId)
            if wanted:
                with _Watchdog.guarding(connection, LISTENER_TIMEOUT):
                    self._refresh(connection, sorted(wanted))

    def _refresh(self, connection: psycopg.Connection[Any], minionIds: list[str]) -> None:
        """
        Read the keys of C{minionIds} and their versions again into the
        mirror (one statement: one snapshot).
        """
        found: dict[str, tuple[int, dict[str, bytes]]] = {}
        for minionId, version, state, pem in connection.execute(
            "SELECT m.minion_id, m.version, k.state, k.pem FROM salttwist_key_minions m"
            " LEFT JOIN salttwist_keys k USING (minion_id) WHERE m.minion_id = ANY(%s)",
            (minionIds,),
        ):
            states = found.setdefault(minionId, (version, {}))[1]
            if state is not None:
                states[state] = bytes(pem)
        changed = [
            minionId
            for minionId, (version, states) in sorted(found.items())
            if self._mirror.apply(minionId, version, states)
        ]
        self._changed(changed)

    # The writer --------------------------------------------------------------

    def _writeLoop(self) -> None:
        """
        The writer thread: run the queued writes, those waiting together as
        one batch (L{_runBatch}).
        """
        stopped = False
        carried: _Write | None = None
        while not stopped:
            item = carried if carried is not None else self._writes.get()
            carried = None
            batch: list[_Write] = []
            while item is not None:
                batch.append(item)
                try:
                    item = self._writes.get_nowait()
                except queue.Empty:
                    break
                if len(batch) == MAX_BATCH:
                    # The batch is full: this one starts the next.
                    carried, item = item, None
                    break
            else:
                stopped = carried is None
            if self._stopping.is_set():
                stopped = True
                for _, _, future in batch:
                    future.set_exception(KeyStoreUnavailable("the PostgreSQL key store is closed"))
                continue
            self._runBatch(batch)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        while True:
            try:
                item = self._writes.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[2].set_exception(KeyStoreUnavailable("the PostgreSQL key store is closed"))

    def _runBatch(self, batch: list[_Write]) -> None:
        """
        Run C{batch} in one transaction, so that writes waiting together
        cost one commit (one disk flush on the server) between them. Each
        runs in a savepoint of its own, so one that fails (L{KeyChanged})
        leaves the others; they run in order of minion id (stable, so the
        writes of one minion keep their order), so two stores' batches lock
        minions in the same order and never deadlock. Their results are
        given once the transaction committed.
        """
        import psycopg
        import psycopg.errors

        batch = sorted(batch, key=lambda write: write[0])
        outcomes: list[tuple[bool, Any]] = []

        def attempt(
            connection: psycopg.Connection[Any], write: Callable[[psycopg.Connection[Any]], Any]
        ) -> tuple[bool, Any]:
            # A transaction of its own when alone, else a savepoint.
            try:
                with connection.transaction():
                    return True, write(connection)
            except _Unchanged as unchanged:
                return True, unchanged
            except psycopg.errors.QueryCanceled as e:
                if connection.closed or connection.broken:
                    raise
                return False, KeyStoreUnavailable(
                    f"the PostgreSQL key store {describeServer(self.options)} did not finish "
                    f"a write within {self.writeTimeout:g} s (statement_timeout); nothing "
                    f"was written: {str(e).strip()}"
                )
            except psycopg.OperationalError as e:
                if connection.closed or connection.broken:
                    raise
                return False, e
            except Exception as e:
                return False, e

        # Set once the last statement before COMMIT ran: a connection lost
        # after that leaves the outcome unknown; before it, the server
        # rolled the transaction back and the batch can run again.
        committing = False

        def work(connection: psycopg.Connection[Any]) -> None:
            nonlocal committing
            outcomes.clear()
            committing = False
            if len(batch) == 1:
                write = batch[0][1]

                def alone(connection: psycopg.Connection[Any]) -> Any:
                    nonlocal committing
                    result = write(connection)
                    committing = True
                    return result

                outcomes.append(attempt(connection, alone))
                return
            with connection.transaction():
                for _, write, _ in batch:
                    outcomes.append(attempt(connection, write))
                committing = True

        for tries in (1, 2):
            try:
                self._withConnection(work)
                break
            except _LostConnection as e:
                if tries == 1 and not committing and not e.timedOut:
                    self.log.warn("{error}; writing again on a new connection", error=str(e))
                    continue
                error: BaseException = KeyStoreUnavailable(
                    f"{e}; the write may or may not have been made"
                    if committing
                    else f"{e}; nothing was written"
                )
            except BaseException as e:
                error = e
            for _, _, future in batch:
                future.set_exception(error)
            return
        self.batches += 1
        for (_, _, future), (ok, value) in zip(batch, outcomes, strict=True):
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _write(self, minionId: str, work: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        """
        Run C{work(connection)} on the writer thread, inside a transaction,
        and wait until it committed.

        @raise KeyStoreUnavailable: if the server cannot be reached, or the
            connection broke during the write (which may or may not have
            committed).
        """
        future: Future[Any] = Future()
        # Under the lock close takes: a write is queued before close's
        # marker (and so run, or failed, by the writer) or refused here.
        with self._closeLock:
            if self._stopping.is_set():
                raise KeyStoreUnavailable("the PostgreSQL key store is closed")
            self._writes.put((minionId, work, future))
        return future.result()

    def _withConnection(self, work: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        """
        On the writer thread: run C{work} on the writer's connection, made
        anew (with back-off) if there is none or it broke.
        """
        import psycopg

        connection = self._writer
        if connection is None or connection.closed or connection.broken:
            if connection is not None:
                connection.close()
                self._writer = None
            now = time.monotonic()
            if now < self._writerNextAttempt:
                raise KeyStoreUnavailable(
                    f"the PostgreSQL key store {describeServer(self.options)} is unreachable "
                    f"({self._lastError}); next attempt in {self._writerNextAttempt - now:.1f} s"
                )
            try:
                connection = _connect(self.options, self.writeTimeout)
                migrate(connection)
            except psycopg.Error as e:
                self._lastError = str(e).strip() or type(e).__name__
                self._writerBackoff = min(
                    max(self._writerBackoff * 2, RECONNECT_INITIAL), RECONNECT_MAX
                )
                self._writerNextAttempt = now + self._writerBackoff
                raise KeyStoreUnavailable(
                    f"cannot connect to the PostgreSQL key store "
                    f"{describeServer(self.options)}: {self._lastError}"
                ) from e
            self._writerBackoff = 0.0
            self._writerNextAttempt = 0.0
            self._writer = connection
            self.writerPid = connection.info.backend_pid
        watched = _Watchdog.guarding(connection, self.writeTimeout + WATCHDOG_GRACE)
        try:
            with watched as watchdog:
                return work(connection)
        except psycopg.OperationalError as e:
            if not (connection.closed or connection.broken):
                raise
            if watchdog.fired:
                self._lastError = (
                    f"no answer within {self.writeTimeout + WATCHDOG_GRACE:g} s; connection cut"
                )
                raise _LostConnection(
                    f"the PostgreSQL key store {describeServer(self.options)} did not "
                    f"answer a write within {self.writeTimeout + WATCHDOG_GRACE:g} s",
                    timedOut=True,
                ) from e
            self._lastError = str(e).strip() or type(e).__name__
            raise _LostConnection(
                f"lost the connection to the PostgreSQL key store "
                f"{describeServer(self.options)}: {self._lastError}"
            ) from e

    def _change(
        self, minionId: str, body: Callable[[psycopg.Connection[Any]], tuple[Any, bool]]
    ) -> Any:
        """
        Change the keys of C{minionId} in one transaction that holds its
        version row locked: C{body(connection)} returns C{(result,
        changed)}; when it changed something, the version goes up by one,
        a notification goes out at commit, and the mirror takes the new
        state at once.

        @return: C{body}'s result.
        """

        def work(connection: psycopg.Connection[Any]) -> Any:
            # Bumping first takes the row lock at once; a write that changes
            # nothing raises _Unchanged, which rolls the bump back.
            (version,) = connection.execute(
                "INSERT INTO salttwist_key_minions AS m (minion_id, version) VALUES (%s, 1)"
                " ON CONFLICT (minion_id) DO UPDATE SET version = m.version + 1"
                " RETURNING version",
                (minionId,),
            ).fetchone()  # type: ignore[misc]
            result, changed = body(connection)
            if not changed:
                raise _Unchanged(result)
            # One row whatever the keys (an aggregate): one notification.
            _, states, pems = connection.execute(
                "SELECT pg_notify(%s, %s), array_agg(state), array_agg(pem)"
                " FROM salttwist_keys WHERE minion_id = %s",
                (CHANNEL, json.dumps({"id": minionId, "v": version}), minionId),
            ).fetchone()  # type: ignore[misc]
            return result, (version, dict(zip(states or [], map(bytes, pems or []), strict=True)))

        outcome = self._write(minionId, work)
        if isinstance(outcome, _Unchanged):
            return outcome.result
        result, applied = outcome
        if self._mirror.apply(minionId, *applied):
            self._changed([minionId])
        return result

    def refresh(self, minionId: str) -> None:
        """
        Read the keys of C{minionId} from the database now into the mirror
        (when newer than what it holds), after every write queued before
        (on the writer's connection). For a decision that must not rest on
        a copy a notification has not reached yet: another process may have
        changed that minion's keys a few milliseconds ago (L{salttwist.master.auth}
        calls it for every authentication that is not an accepted minion's).
        Blocks, as a write does.

        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise KeyStoreUnavailable: if the server cannot be reached.
        """
        validateMinionId(minionId)

        def work(connection: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return connection.execute(
                "SELECT m.version, k.state, k.pem FROM salttwist_key_minions m"
                " LEFT JOIN salttwist_keys k USING (minion_id) WHERE m.minion_id = %s",
                (minionId,),
            ).fetchall()

        rows = self._write(minionId, work)
        if not rows:
            # Never written: the mirror holds nothing for it either.
            return
        states = {state: bytes(pem) for _, state, pem in rows if state is not None}
        if self._mirror.apply(minionId, rows[0][0], states):
            self._changed([minionId])

    # IKeyStore ---------------------------------------------------------------

    def _loaded(self) -> _Mirror:
        """
        @return: the mirror, once loaded.
        @raise KeyStoreUnavailable: if the keys were never loaded.
        """
        if not self._ready.is_set() or self._readyError is not None:
            raise KeyStoreUnavailable(
                f"the PostgreSQL key store {describeServer(self.options)} is not loaded"
                + (f" ({self._lastError})" if self._lastError else "")
            )
        return self._mirror

    def getKey(self, state: str, minionId: str) -> bytes | None:
        """
        @return: the PEM bytes stored for C{minionId} in C{state}, or
            L{None} (from memory).
        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if C{state} is not one of L{STATES}.
        @raise KeyStoreUnavailable: if the keys were never loaded.
        """
        validateMinionId(minionId)
        _checkState(state)
        mirror = self._loaded()
        with mirror.lock:
            return mirror.keys[state].get(minionId)

    def putKey(self, state: str, minionId: str, pem: bytes) -> None:
        """
        Store C{pem}, in canonical form, for C{minionId} in C{state},
        replacing any key already there in that state. Blocks until
        committed.

        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if C{state} is not one of L{STATES}.
        @raise salttwist.crypt.CryptError: if C{pem} is not an acceptable
            public key.
        @raise KeyStoreUnavailable: if the server cannot be reached.
        """
        validateMinionId(minionId)
        _checkState(state)
        canonical = canonicalPublicPem(pem)

        def body(connection: psycopg.Connection[Any]) -> tuple[None, bool]:
            connection.execute(
                "INSERT INTO salttwist_keys (minion_id, state, pem) VALUES (%s, %s, %s)"
                " ON CONFLICT (minion_id, state) DO UPDATE SET pem = EXCLUDED.pem",
                (minionId, state, canonical),
            )
            return None, True

        self._change(minionId, body)

    def moveKey(
        self, minionId: str, fromState: str, toState: str, expected: bytes | None = None
    ) -> bool:
        """
        Move the key of C{minionId} from C{fromState} to C{toState} in one
        transaction, replacing any key of C{minionId} in C{toState}.

        @param expected: if given, move the key only if its bytes are
            exactly these.
        @return: L{True} if a key was moved, L{False} if there was none.
        @raise KeyChanged: if C{expected} was given and the key differs.
        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if a state is unknown or both are the same.
        @raise KeyStoreUnavailable: if the server cannot be reached.
        """
        _checkMove(minionId, fromState, toState)

        def body(connection: psycopg.Connection[Any]) -> tuple[bool, bool]:
            row = connection.execute(
                "DELETE FROM salttwist_keys WHERE minion_id = %s AND state = %s RETURNING pem",
                (minionId, fromState),
            ).fetchone()
            if row is None:
                return False, False
            pem = bytes(row[0])
            if expected is not None and pem != expected:
                # Raising rolls the transaction back: the key stays.
                raise KeyChanged(f"the key of {minionId} in {fromState} has changed")
            connection.execute(
                "INSERT INTO salttwist_keys (minion_id, state, pem) VALUES (%s, %s, %s)"
                " ON CONFLICT (minion_id, state) DO UPDATE SET pem = EXCLUDED.pem",
                (minionId, toState, pem),
            )
            return True, True

        return bool(self._change(minionId, body))

    def deleteKey(self, state: str, minionId: str) -> bool:
        """
        Remove the key of C{minionId} from C{state}.

        @return: L{True} if a key was removed, L{False} if there was none.
        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise ValueError: if C{state} is not one of L{STATES}.
        @raise KeyStoreUnavailable: if the server cannot be reached.
        """
        validateMinionId(minionId)
        _checkState(state)

        def body(connection: psycopg.Connection[Any]) -> tuple[bool, bool]:
            row = connection.execute(
                "DELETE FROM salttwist_keys WHERE minion_id = %s AND state = %s RETURNING 1",
                (minionId, state),
            ).fetchone()
            return row is not None, row is not None

        return bool(self._change(minionId, body))

    def listKeys(self, state: str) -> list[str]:
        """
        @return: the sorted list of minion ids in C{state} (from memory).
        @raise ValueError: if C{state} is not one of L{STATES}.
        @raise KeyStoreUnavailable: if the keys were never loaded.
        """
        _checkState(state)
        mirror = self._loaded()
        with mirror.lock:
            ids = list(mirror.keys[state])
        return sorted(ids)

    def stateOf(self, minionId: str) -> list[str]:
        """
        @return: the states, in L{STATES} order, that hold a key for
            C{minionId} (from memory).
        @raise InvalidMinionId: if C{minionId} is not valid.
        @raise KeyStoreUnavailable: if the keys were never loaded.
        """
        validateMinionId(minionId)
        mirror = self._loaded()
        with mirror.lock:
            return [state for state in STATES if minionId in mirror.keys[state]]

    def idClashes(self, minionId: str) -> list[tuple[str, str]]:
        """
        @see: L{FilesystemKeyStore.idClashes} (answered from memory).
        """
        mirror = self._loaded()
        with mirror.lock:
            return mirror.index.clashes(minionId)
