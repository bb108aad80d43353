# -*- test-case-name: tests.test_jobcache_pg -*-
"""
The SQL of the PostgreSQL job cache (L{salttwist.master.jobcache_pg}, whose
docstring tells the design): the schema's migrations, the partitions, the
statements, and the one connection with its reconnection, all run
synchronously on the cache's thread.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from salttwist import serial
from salttwist.master.jobcache import JobCacheError, _unpackSuccess, listingDecoder
from salttwist.pgsql import (
    CONNECTION_DEFAULTS,
    Migration,
    applyMigrations,
    cutSocket,
    describeServer,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CONNECTION_DEFAULTS",
    "GET_JOB",
    "GET_RETURNS",
    "MIGRATIONS",
    "EARLY_RECONNECT",
    "LIST_FETCH_ROWS",
    "PARTITIONS_AHEAD",
    "PRUNE_CHUNK",
    "RECONNECT_INITIAL",
    "RECONNECT_MAX",
    "JobCacheUnavailable",
    "PostgresJobCacheDatabase",
    "describeServer",
    "listJobsQuery",
    "migrate",
]

RECONNECT_INITIAL = 0.5
"""
Seconds before the second connection attempt after a failed one.
"""

RECONNECT_MAX = 5.0
"""
The longest wait between two connection attempts: once the server is back,
jobs and returns are taken again within this many seconds (at 30 s, a long
outage left jobs refused up to 30 s after the server came back).
"""

EARLY_RECONNECT = 1.0
"""
Seconds since the last connection attempt after which a new job's
reservation (L{PostgresJobCacheDatabase.reserveJob}: a client waits for
it) tries to connect at once, whatever the back-off: at most one attempt
a second, and a job published after the server came back is not refused.
"""

PRUNE_CHUNK = 10000
"""
The most rows of each table one step of a prune deletes one by one: each
step is an operation of its own, well within L{OPERATION_TIMEOUT} (10,000
returns take about 0.1 s), and the cache's writes and reads run between
the steps of a large prune rather than wait for all of it.
"""

OPERATION_TIMEOUT = 30.0
"""
Seconds an operation may run before the cache cuts its connection from this
side (L{PostgresJobCacheDatabase.cut}): a server that hangs (stopped, or a
path that drops packets while the kernel still acknowledges them) would
otherwise hold the cache's thread, and every job and return queued behind
it, for ever.
"""

CONNECT_TIMEOUT = 10
"""
libpq's C{connect_timeout} when C{returner.pgjsonb.connect_timeout} is not
set: a server that accepts the TCP connection but never answers fails the
attempt after this many seconds rather than never.
"""

PARTITIONS_AHEAD = 2
"""
Hours of partitions made ahead of the current one, at open and at each
prune, so that the writes of the next hours need no C{CREATE TABLE}.
"""


_LOCK_MIGRATIONS = 0x5A17_0001
_LOCK_PARTITIONS = 0x5A17_0002

MIGRATIONS: list[tuple[int, str, tuple[str, ...]]] = [
    (
        1,
        "jobs and returns, partitioned by hour of jid",
        (
            """
            CREATE TABLE salttwist_jobs (
                jid text COLLATE "C" NOT NULL,
                fun text NOT NULL,
                arg bytea NOT NULL,
                tgt bytea NOT NULL,
                tgt_match text[] NOT NULL,
                tgt_type bytea NOT NULL,
                "user" bytea NOT NULL,
                minions bytea NOT NULL,
                start_time double precision NOT NULL,
                PRIMARY KEY (jid)
            ) PARTITION BY RANGE (jid)
            """,
            """
            CREATE TABLE salttwist_returns (
                jid text COLLATE "C" NOT NULL,
                id text NOT NULL,
                "return" bytea NOT NULL,
                retcode bytea NOT NULL,
                success bytea NOT NULL,
                time double precision NOT NULL,
                PRIMARY KEY (jid, id)
            ) PARTITION BY RANGE (jid)
            """,
        ),
    ),
    (
        2,
        "indexes for listJobs and prune",
        (
            "CREATE INDEX salttwist_jobs_start_time ON salttwist_jobs (start_time)",
            "CREATE INDEX salttwist_jobs_fun ON salttwist_jobs (fun)",
        ),
    ),
    (
        3,
        "the reservation that gave a job its jid",
        # NULL for a job stored as made elsewhere (storeJob); a nullable
        # column without a default costs no rewrite.
        ("ALTER TABLE salttwist_jobs ADD COLUMN reservation text",),
    ),
    (
        4,
        "an index of the targets' strings for listJobs' exact targets",
        ("CREATE INDEX salttwist_jobs_tgt_match ON salttwist_jobs USING gin (tgt_match)",),
    ),
]
"""
The schema's migrations: C{(version, description, statements)}, applied in
order. Never change one that was released: add the next.
"""

_INSERT_JOB = """
    INSERT INTO salttwist_jobs
        (jid, fun, arg, tgt, tgt_match, tgt_type, "user", minions, start_time)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT DO NOTHING
"""

_RESERVE_JOB = """
    INSERT INTO salttwist_jobs
        (jid, fun, arg, tgt, tgt_match, tgt_type, "user", minions, start_time, reservation)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT DO NOTHING
    RETURNING jid
"""

_INSERT_RETURNS = """
    INSERT INTO salttwist_returns (jid, id, "return", retcode, success, time)
    SELECT jid, id, ret, retcode, success, time
    FROM unnest(
        %s::text[], %s::text[], %s::bytea[], %s::bytea[], %s::bytea[], %s::double precision[]
    ) WITH ORDINALITY AS r(jid, id, ret, retcode, success, time, n)
    ORDER BY n
    ON CONFLICT DO NOTHING
"""

_JOB_COLUMNS = 'jid, fun, arg, tgt, tgt_type, "user", minions, start_time'
#: What a job listing shows (L{PostgresJobCacheDatabase.listJobSummaries}):
#: no C{minions}, which are most of a job's bytes (100 ids: 2.5 KB).
_SUMMARY_COLUMNS = 'jid, fun, arg, tgt, tgt_type, "user"'

LIST_FETCH_ROWS = 5000
"""
Rows fetched from the server at a time by a listing, each fetch a round
trip that counts as progress for L{OPERATION_TIMEOUT}.
"""

GET_JOB = f"SELECT {_JOB_COLUMNS} FROM salttwist_jobs WHERE jid = %s"
"""
The SQL of L{PostgresJobCacheDatabase.getJob}.
"""

GET_RETURNS = 'SELECT id, "return", retcode, success, time FROM salttwist_returns WHERE jid = %s'
"""
The SQL of L{PostgresJobCacheDatabase.getReturns}.
"""


class JobCacheUnavailable(JobCacheError):
    """
    Raised when the PostgreSQL server cannot be reached: the operation was
    not done (a write was not stored).
    """


# Values ---------------------------------------------------------------------


def _toBytes(packed: object) -> bytes:
    """
    A value as the reactor side packed it (L{salttwist.master.jobcache}:
    L{None}, a string, a number, or msgpack bytes of anything else) as
    msgpack bytes of the original value: bytes already are.
    """
    if isinstance(packed, bytes):
        return packed
    return serial.dumps(packed)


def _targetStrings(packed: object) -> list[str]:
    """
    @return: the strings a target glob is matched against: the target when
        it is a string, the strings in it when it is a list. PostgreSQL text
        cannot hold NUL, so a string holding one is left out.
    """
    return _strings(serial.loads(packed) if isinstance(packed, bytes) else packed)


def _strings(value: object) -> list[str]:
    """
    @return: C{value} if it is a string (without NUL), else the strings
        (without NUL) in it if it is a list.
    """
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, str) and "\x00" not in v]


def _likePattern(pattern: str) -> str | None:
    """
    @return: C{pattern} (an L{fnmatch} glob) as a C{LIKE} pattern matching
        the same strings, or L{None} if it has a character class (C{[}).
    """
    if "[" in pattern:
        return None
    out = []
    for character in pattern:
        if character == "*":
            out.append("%")
        elif character == "?":
            out.append("_")
        elif character in "%_\\":
            out.append("\\" + character)
        else:
            out.append(character)
    return "".join(out)


_SIMPLE_CLASS = re.compile(r"\A!?[A-Za-z0-9._-]+\Z")


def _regexPattern(pattern: str) -> str | None:
    """
    @return: C{pattern} (an L{fnmatch} glob with character classes) as an
        anchored PostgreSQL regular expression matching the same strings,
        or L{None} if a class is not a simple one (letters, digits, C{.},
        C{_}, ranges in order, C{!} first): those are matched in Python,
        as L{fnmatch.fnmatchcase} reads them.
    """
    out = ["^"]
    i, n = 0, len(pattern)
    while i < n:
        character = pattern[i]
        i += 1
        if character == "*":
            out.append(".*")
        elif character == "?":
            out.append(".")
        elif character == "[":
            end = pattern.find("]", i + 1 if pattern[i : i + 1] in ("!", "]") else i)
            if end < 0:
                out.append("\\[")
                continue
            inside = pattern[i:end]
            if not _SIMPLE_CLASS.match(inside) or not _rangesInOrder(inside.lstrip("!")):
                return None
            negate = inside.startswith("!")
            body = inside.lstrip("!")
            # A hyphen first or last is itself, in both languages.
            out.append("[" + ("^" if negate else "") + body + "]")
            i = end + 1
        else:
            out.append(re.escape(character) if not character.isalnum() else character)
    out.append("$")
    return "".join(out)


def _rangesInOrder(body: str) -> bool:
    """
    @return: whether a class's C{body} is single characters and C{a-z}
        ranges that run upwards, a hyphen elsewhere only first or last
        (PostgreSQL refuses the other ranges, which L{fnmatch} reads its
        own way).
    """
    index = 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            if body[index] == "-" or body[index] > body[index + 2] or body[index + 2] == "-":
                return False
            index += 3
        elif body[index] == "-" and 0 < index < len(body) - 1:
            return False
        else:
            index += 1
    return True


_SMALL_VALUES: dict[bytes, Any] = {
    **{bytes([n]): n for n in range(128)},
    **{bytes([256 + n]): n for n in range(-32, 0)},
    b"\xc0": None,
    b"\xc2": False,
    b"\xc3": True,
}
"""
The one-byte msgpack values that are immutable (fixints, nil, the
booleans), decoded: most retcodes and successes, and C{test.ping}'s
returns, are looked up instead of unpacked (10,000 returns of a job: three
values each).
"""


def _partitionKey(jid: str) -> str:
    """
    @return: the hour of C{jid} (its first 10 digits) that names its
        partition.
    """
    return jid[:10]


def _jidAt(seconds: float) -> str:
    """
    @return: the smallest jid of local time C{seconds} (jids are local
        times, see L{salttwist.jid}).
    """
    return datetime.fromtimestamp(max(seconds, 0)).strftime("%Y%m%d%H%M%S%f")


# The SQL ----------------------------------------------------------------------


@dataclass
class _Partition:
    """
    One hour's pair of partitions.
    """

    key: str

    @property
    def upper(self) -> str | None:
        """
        The exclusive upper bound, or L{None} for C{MAXVALUE}.
        """
        following = int(self.key) + 1
        return None if following >= 10**10 else f"{following:010d}"


class PostgresJobCacheDatabase:
    """
    The SQL of the PostgreSQL job cache, run synchronously on one thread
    (L{PostgresJobCache}'s) through one connection, reconnecting when it
    breaks (see the module's docstring).

    @ivar options: the C{psycopg.connect} keyword arguments.
    """

    log = Logger()

    def __init__(
        self,
        options: dict[str, Any],
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.options = options
        self._monotonic = monotonic
        self._now = now
        self._connection: psycopg.Connection[Any] | None = None
        self._closed = False
        self._backoff = 0.0
        self._nextAttempt = 0.0
        #: Returns per expired job at the last prune step (L{pruneJobsStep}).
        self._returnsPerJob = 1
        #: When (C{monotonic}) the last connection attempt was made.
        self._lastAttempt = float("-inf")
        self._lastError = ""
        self._partitions: set[str] = set()
        self._migrated = False
        #: The connection in use, from its making on (set before
        #: L{_prepare}), for L{cut} from another thread.
        self._current: psycopg.Connection[Any] | None = None
        #: The operation running on the cache's thread (a number the
        #: reactor side gave it, see L{runOperation}), and the one whose
        #: connection L{cut} cut.
        self._running: int | None = None
        self._cutOperation: int | None = None
        self._cutAfter = OPERATION_TIMEOUT
        #: How many connections were made (the first and every reconnection).
        self.connections = 0
        #: Whether the cache's thread applies the migrations (or waits for
        #: another master's migration lock): the reactor side does not cut
        #: an operation meanwhile (L{salttwist.master.jobcache_pg}).
        self.migrating = False
        #: Reservations that failed, maybe after their commit (a connection
        #: cut or lost while the server's answer was awaited): jid to
        #: token. Their rows, if any, are deleted before anything else on
        #: the next connection that works (L{_releaseFailed}): the job was
        #: refused to its client and never published.
        self._failedReservations: dict[str, str] = {}
        #: Called on the cache's thread with the connection right after a
        #: reservation's statement committed, before its result is read
        #: (tests inject a lost connection at that point).
        self.afterReservation: Callable[[psycopg.Connection[Any]], None] | None = None
        #: Bumped at each answer of the server in a long operation (a
        #: listing's fetch): the reactor side does not cut an operation
        #: that progresses (L{salttwist.master.jobcache_pg.PostgresJobCache}).
        self.progress = 0

    # Connecting --------------------------------------------------------------

    def _connect(self, urgent: bool = False) -> psycopg.Connection[Any]:
        """
        @param urgent: an operation a client waits for (a new job's
            reservation): it tries to connect within the back-off too,
            if the last attempt was L{EARLY_RECONNECT} seconds ago or more.
        @return: the connection, made anew if there is none or it broke.
        @raise JobCacheUnavailable: if the server cannot be reached now, or
            was not reachable at the last attempt less than the back-off
            delay ago.
        """
        import psycopg

        if self._closed:
            raise JobCacheError("the PostgreSQL job cache is closed")
        connection = self._connection
        if connection is not None and not connection.closed and not connection.broken:
            return connection
        if connection is not None:
            connection.close()
            self._connection = None
        now = self._monotonic()
        if now < self._nextAttempt and not (urgent and now >= self._lastAttempt + EARLY_RECONNECT):
            raise JobCacheUnavailable(
                f"the PostgreSQL job cache {describeServer(self.options)} is unreachable "
                f"({self._lastError}); next attempt in {self._nextAttempt - now:.1f} s"
            )
        self._lastAttempt = now
        try:
            connection = psycopg.connect(
                **{
                    **CONNECTION_DEFAULTS,
                    "application_name": "salttwist-master",
                    "connect_timeout": CONNECT_TIMEOUT,
                    **{k: v for k, v in self.options.items() if v is not None},
                    "autocommit": True,
                }
            )
        except psycopg.Error as e:
            self._lastError = str(e).strip() or type(e).__name__
            self._backoff = min(max(self._backoff * 2, RECONNECT_INITIAL), RECONNECT_MAX)
            self._nextAttempt = now + self._backoff
            raise JobCacheUnavailable(
                f"cannot connect to the PostgreSQL job cache "
                f"{describeServer(self.options)}: {self._lastError}"
            ) from e
        self._backoff = 0.0
        self._nextAttempt = 0.0
        self._current = connection
        try:
            self._prepare(connection)
        except BaseException:
            connection.close()
            raise
        self.connections += 1
        self._connection = connection
        return connection

    def _prepare(self, connection: psycopg.Connection[Any]) -> None:
        """
        Ready a new connection: apply the missing migrations (the first
        time), learn the partitions (another master may have made or dropped
        some meanwhile) and make those of the next hours.
        """
        if not self._migrated:
            # A migration of a large table (an index built, a column
            # added), or another master's migration holding the lock, may
            # take long while the server answers: not cut.
            self.migrating = True
            try:
                migrate(connection, MIGRATIONS)
            finally:
                self.migrating = False
            self._migrated = True
        self._partitions = self._listPartitions(connection)
        self._ensureAhead(connection)

    def _withConnection(
        self, work: Callable[[psycopg.Connection[Any]], Any], urgent: bool = False
    ) -> Any:
        """
        Run C{work(connection)}; if the connection broke under it, once more
        on a new connection (every operation here is idempotent).

        @param urgent: see L{_connect}.
        @raise JobCacheUnavailable: if the server cannot be reached.
        """
        import psycopg

        for attempt in (1, 2):
            try:
                connection = self._connect(urgent)
                if self._failedReservations:
                    self._releaseFailed(connection)
                return work(connection)
            except psycopg.OperationalError as e:
                connection = self._current
                if self._cutOperation is not None and self._cutOperation == self._running:
                    # Cut by the reactor side: the server hangs. Not tried
                    # again on it before the back-off.
                    self._cutOperation = None
                    self._hung()
                    raise JobCacheUnavailable(
                        f"the PostgreSQL job cache {describeServer(self.options)} did not "
                        f"answer within {self._cutAfter:g} s: its connection was cut"
                    ) from e
                if connection is None or not (connection.closed or connection.broken):
                    raise
                self._lastError = str(e).strip() or type(e).__name__
                if attempt == 2:
                    raise JobCacheUnavailable(
                        f"lost the connection to the PostgreSQL job cache "
                        f"{describeServer(self.options)} twice: {self._lastError}"
                    ) from e
                self.log.warn(
                    "lost the connection to the PostgreSQL job cache {server} ({error}); "
                    "reconnecting",
                    server=describeServer(self.options),
                    error=self._lastError,
                )
        raise AssertionError("unreachable")

    def _releaseFailed(self, connection: psycopg.Connection[Any]) -> None:
        """
        Delete the rows of the reservations that failed (see
        L{_failedReservations}): those a job holds under the failed
        attempt's token only, so a jid another job took is left alone.
        """
        import psycopg

        failed = dict(self._failedReservations)
        try:
            connection.execute(
                "DELETE FROM salttwist_jobs WHERE (jid, reservation) IN "
                "(SELECT * FROM unnest(%s::text[], %s::text[]))",
                (list(failed), list(failed.values())),
            )
        except psycopg.OperationalError:
            raise
        except psycopg.Error as e:
            # Not the connection: trying again would fail every operation
            # after it. The rows stay (jobs never published), said loudly.
            for jid in failed:
                self._failedReservations.pop(jid, None)
            self.log.critical(
                "could not delete the rows of {count} job reservations that failed "
                "({jids}): {error}; they stay listed as jobs that never ran",
                count=len(failed),
                jids=", ".join(sorted(failed)),
                error=e,
            )
            return
        for jid in failed:
            self._failedReservations.pop(jid, None)
        self.log.info(
            "deleted the rows of {count} job reservations that failed (their jobs were refused)",
            count=len(failed),
        )

    def _hung(self) -> None:
        """
        The connection was cut because the server did not answer: drop it,
        and wait the back-off before the next attempt.
        """
        self._lastError = f"no answer within {self._cutAfter:g} s"
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        self._backoff = min(max(self._backoff * 2, RECONNECT_INITIAL), RECONNECT_MAX)
        self._lastAttempt = self._monotonic()
        self._nextAttempt = self._lastAttempt + self._backoff

    def runOperation(self, number: int, operation: str, *args: Any) -> Any:
        """
        Run C{operation(*args)} (a method of this class) as the operation
        numbered C{number}, which L{cut} may end.
        """
        self._running = number
        try:
            return getattr(self, operation)(*args)
        finally:
            self._running = None
            self._cutOperation = None

    def progressed(self) -> None:
        """
        On the cache's thread: the server answered a step of a long
        operation (see L{progress}).
        """
        self.progress += 1

    def cut(self, number: int, seconds: float = OPERATION_TIMEOUT) -> None:
        """
        From any thread: if the operation numbered C{number} still runs,
        shut its connection's socket down, so the call blocked on a server
        that hangs fails at once.

        @param seconds: how long it ran, for the error.
        """
        connection = self._current
        if self._running != number or connection is None:
            return
        self._cutAfter = seconds
        self._cutOperation = number
        cutSocket(connection)

    # Schema --------------------------------------------------------------

    def open(self) -> None:
        """
        Connect, applying the missing migrations (see L{_prepare}). If the
        server cannot be reached, later operations connect (and migrate)
        when it can.

        @raise JobCacheError: if the database has a schema version this code
            does not know.
        @raise JobCacheUnavailable: if the server cannot be reached.
        """
        self._withConnection(lambda connection: None)

    def _listPartitions(self, connection: psycopg.Connection[Any]) -> set[str]:
        """
        @return: the keys of the hours that have both partitions.
        """
        rows = connection.execute(
            """
            SELECT c.relname FROM pg_inherits i
            JOIN pg_class c ON c.oid = i.inhrelid
            JOIN pg_class p ON p.oid = i.inhparent
            WHERE p.relname IN ('salttwist_jobs', 'salttwist_returns')
              AND p.relnamespace = current_schema()::regnamespace
            """
        ).fetchall()
        names = {name for (name,) in rows}
        return {
            name.removeprefix("salttwist_jobs_p")
            for name in names
            if name.startswith("salttwist_jobs_p")
            and "salttwist_returns_p" + name.removeprefix("salttwist_jobs_p") in names
        }

    def _ensurePartitions(self, connection: psycopg.Connection[Any], keys: Iterable[str]) -> None:
        """
        Make the partitions of the hours C{keys} that this connection does
        not know to exist, under the partitions' advisory lock (another
        master may make or drop the same ones).
        """
        missing = sorted(set(keys) - self._partitions)
        if not missing:
            return
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_PARTITIONS,))
            for key in missing:
                partition = _Partition(key)
                upper = "(MAXVALUE)" if partition.upper is None else f"('{partition.upper}')"
                for table in ("salttwist_jobs", "salttwist_returns"):
                    # key and upper are 10 digits each: nothing to quote.
                    connection.execute(
                        f"CREATE TABLE IF NOT EXISTS {table}_p{key} PARTITION OF {table}"
                        f" FOR VALUES FROM ('{key}') TO {upper}"
                    )
        self._partitions.update(missing)

    def _ensureAhead(self, connection: psycopg.Connection[Any]) -> None:
        """
        Make the partitions of this hour and L{PARTITIONS_AHEAD} more.
        """
        now = self._now()
        self._ensurePartitions(
            connection,
            {_partitionKey(_jidAt(now + 3600 * hours)) for hours in range(PARTITIONS_AHEAD + 1)},
        )

    # Operations --------------------------------------------------------------

    def writeBatch(self, jobs: list[tuple[Any, ...]], returns: list[tuple[Any, ...]]) -> None:
        """
        Write one batch of jobs and returns in one transaction; rows whose
        key is already stored are skipped.
        """
        import psycopg

        jobRows = [_jobRow(job) for job in jobs]
        returnColumns: list[list[Any]] = [[] for _ in range(6)]
        for row in returns:
            jid, minionId, value, retcode, success, received = row
            for column, item in zip(
                returnColumns,
                (jid, minionId, value, _toBytes(retcode), _toBytes(success), received),
                strict=True,
            ):
                column.append(item)
        keys = {_partitionKey(row[0]) for row in jobs} | {_partitionKey(row[0]) for row in returns}

        def work(connection: psycopg.Connection[Any]) -> None:
            self._ensurePartitions(connection, keys)
            try:
                self._insert(connection, jobRows, returnColumns)
            except psycopg.errors.CheckViolation:
                # No partition for a row: another master dropped one this
                # connection knew. Look again, make it, write once more.
                self._partitions = self._listPartitions(connection)
                self._ensurePartitions(connection, keys)
                self._insert(connection, jobRows, returnColumns)

        self._withConnection(work)

    def reserveJob(self, job: tuple[Any, ...], reservation: str) -> bool:
        """
        Store a new job under its jid unless another job holds that jid
        (see L{salttwist.master.jobcache_pg.PostgresJobCache.reserveJob}):
        the primary key decides, in one statement, so of two masters
        reserving one jid at once exactly one gets it.

        @param job: the job's row, as L{writeBatch}'s.
        @param reservation: a token of this reservation; a jid already held
            under the same token is this job's, stored by an earlier attempt
            (a connection lost after the commit).
        @return: whether the job holds the jid.
        """
        import psycopg

        jid = job[0]
        row = (*_jobRow(job), reservation)
        keys = {_partitionKey(jid)}

        def insert(connection: psycopg.Connection[Any]) -> bool:
            inserted = connection.execute(_RESERVE_JOB, row).fetchone() is not None
            if self.afterReservation is not None:
                self.afterReservation(connection)
            if inserted:
                return True
            held = connection.execute(
                "SELECT reservation FROM salttwist_jobs WHERE jid = %s", (jid,)
            ).fetchone()
            return held is not None and held[0] == reservation

        def work(connection: psycopg.Connection[Any]) -> bool:
            self._ensurePartitions(connection, keys)
            try:
                return insert(connection)
            except psycopg.errors.CheckViolation:
                # No partition for it: another master dropped one this
                # connection knew (see writeBatch).
                self._partitions = self._listPartitions(connection)
                self._ensurePartitions(connection, keys)
                return insert(connection)

        try:
            return self._withConnection(work, urgent=True)  # type: ignore[no-any-return]
        except BaseException:
            # Maybe committed before the failure (its answer lost, or its
            # connection cut while it was awaited): the job is refused, so
            # its row must go (with the next connection that works).
            self._failedReservations[jid] = reservation
            raise

    def _insert(
        self,
        connection: psycopg.Connection[Any],
        jobRows: list[tuple[Any, ...]],
        returnColumns: list[list[Any]],
    ) -> None:
        """
        Insert the batch in one transaction: the jobs row by row (in one
        pipeline), the returns, usually many more, as one statement over
        arrays.
        """
        with connection.transaction():
            if jobRows:
                with connection.cursor() as cursor:
                    cursor.executemany(_INSERT_JOB, jobRows)
            if returnColumns[0]:
                connection.execute(_INSERT_RETURNS, returnColumns)

    def getJob(self, jid: str) -> dict[str, Any] | None:
        """
        Read one job.
        """
        row = self._withConnection(lambda c: c.execute(GET_JOB, (jid,), binary=True).fetchone())
        return None if row is None else _jobFromRow(row)

    def getReturns(self, jid: str) -> dict[str, dict[str, Any]]:
        """
        Read the returns of one job.
        """
        # Results in binary: bytea comes as it is, not as hex text to
        # decode (a third of the time of 10,000 returns).
        rows = self._withConnection(
            lambda c: c.execute(GET_RETURNS, (jid,), binary=True).fetchall()
        )
        small = _SMALL_VALUES
        return {
            minionId: {
                "return": small[value] if value in small else serial.loads(value),
                "retcode": small[retcode] if retcode in small else serial.loads(retcode),
                "success": _unpackSuccess(
                    small[success] if success in small else serial.loads(success)
                ),
                "time": received,
            }
            for minionId, value, retcode, success, received in rows
        }

    def listJobs(
        self,
        functions: list[str] | None,
        targets: list[str] | None,
        start: float | None,
        end: float | None,
        limit: int | None,
    ) -> list[dict[str, Any]]:
        """
        Read the jobs that match every given filter, newest first.
        """
        query, params, checks = listJobsQuery(functions, targets, start, end, limit)
        return self._withConnection(  # type: ignore[no-any-return]
            lambda connection: self._listRows(connection, query, params, checks, limit, _jobFromRow)
        )

    def listJobSummaries(
        self,
        functions: list[str] | None,
        targets: list[str] | None,
        start: float | None,
        end: float | None,
        limit: int | None,
    ) -> list[tuple[Any, ...]]:
        """
        Read what a job listing shows of the jobs that match every given
        filter, newest first: C{(jid, fun, arg, tgt, tgt_type, user)} each,
        decoded (not the minions, most of a job's bytes). Values that are
        not containers are decoded once per listing and shared.
        """
        query, params, checks = listJobsQuery(
            functions, targets, start, end, limit, columns=_SUMMARY_COLUMNS
        )
        return self._withConnection(  # type: ignore[no-any-return]
            lambda connection: self._listRows(
                connection, query, params, checks, limit, _summaryDecoder()
            )
        )

    def _listRows(
        self,
        connection: psycopg.Connection[Any],
        query: str,
        params: list[object],
        checks: list[Callable[[tuple[Any, ...]], bool]],
        limit: int | None,
        make: Callable[[tuple[Any, ...]], Any],
    ) -> list[Any]:
        """
        Run a listing's C{query} and make each row that passes C{checks}
        with C{make}, up to C{limit}. A listing that may be long is streamed
        from a server-side cursor, L{LIST_FETCH_ROWS} at a time, each fetch
        counted as progress (L{progressed}): a long listing is not cut by
        L{OPERATION_TIMEOUT} while the server answers.
        """
        if limit == 0:
            return []
        if not checks and limit is not None and limit <= LIST_FETCH_ROWS:
            return [make(row) for row in connection.execute(query, params, binary=True)]
        found: list[Any] = []
        with (
            connection.transaction(),
            connection.cursor(name="salttwist_list_jobs", binary=True) as cursor,
        ):
            cursor.execute(query, params)
            while True:
                fetched = cursor.fetchmany(LIST_FETCH_ROWS)
                self.progressed()
                rows = (
                    [row for row in fetched if all(check(row) for check in checks)]
                    if checks
                    else fetched
                )
                found.extend(map(make, rows))
                if limit is not None and len(found) >= limit:
                    del found[limit:]
                    break
                if len(fetched) < LIST_FETCH_ROWS:
                    break
        return found

    def prune(self, cutoff: float, chunk: int = PRUNE_CHUNK) -> int:
        """
        Remove the jobs that started before C{cutoff} with their returns, and
        the returns with no job whose jid is older than C{cutoff}: drop the
        hours' partitions that hold nothing else, delete the rest row by row.
        All at once, in the steps the reactor side runs as operations of
        their own (L{salttwist.master.jobcache_pg.PostgresJobCache.prune}).

        @return: the number of rows removed from both tables.
        """
        removed = 0
        for key in self.expiredPartitions(cutoff):
            removed += self.dropPartition(key, cutoff)
        for step in (self.pruneJobsStep, self.pruneOrphansStep):
            more = True
            while more:
                count, more = step(cutoff, chunk)
                removed += count
        self.ensureAhead()
        return removed

    def expiredPartitions(self, cutoff: float) -> list[str]:
        """
        A prune's first step: the hours, oldest first, whose jids are all
        older than C{cutoff} (each may still hold a job stored after it).
        """
        cutoffKey = _partitionKey(_jidAt(cutoff))

        def work(connection: psycopg.Connection[Any]) -> list[str]:
            self._partitions = self._listPartitions(connection)
            return [key for key in sorted(self._partitions) if key < cutoffKey]

        return self._withConnection(work)  # type: ignore[no-any-return]

    def dropPartition(self, key: str, cutoff: float) -> int:
        """
        A prune's step: drop the partitions of hour C{key} if every job in
        it started before C{cutoff} (L{_dropIfExpired}).

        @return: the number of rows dropped.
        """
        return self._withConnection(  # type: ignore[no-any-return]
            lambda connection: self._dropIfExpired(connection, key, cutoff)
        )

    def pruneJobsStep(self, cutoff: float, chunk: int = PRUNE_CHUNK) -> tuple[int, bool]:
        """
        A prune's step: delete jobs that started before C{cutoff} with
        their returns, at most about C{chunk} rows, in one transaction (a
        job never loses its row before its returns). Whole jobs are taken
        while their returns fit in C{chunk} (how many a job has is counted
        through the primary key, and the typical count remembered for the
        next step); a job with more returns than C{chunk} loses them
        C{chunk} at a time, its row last.

        @return: the rows deleted, and whether there may be more.
        """

        def work(connection: psycopg.Connection[Any]) -> tuple[int, bool]:
            wanted = max(1, min(chunk, chunk // max(1, self._returnsPerJob)))
            with connection.transaction():
                jids = [
                    jid
                    for (jid,) in connection.execute(
                        "SELECT jid FROM salttwist_jobs WHERE start_time < %s LIMIT %s",
                        (cutoff, wanted),
                    )
                ]
                if not jids:
                    return 0, False
                # By their jids, so that PostgreSQL looks in their
                # partitions only, through the primary key: a join on jid
                # read every partition of returns (3.4 s at 10 million
                # returns, for 200 rows).
                counts = dict(
                    connection.execute(
                        "SELECT jid, count(*) FROM salttwist_returns WHERE jid = ANY(%s)"
                        " GROUP BY jid",
                        (jids,),
                    ).fetchall()
                )
                self._returnsPerJob = max(1, round(sum(counts.values()) / len(jids)))
                taken: list[str] = []
                rows = 0
                for jid in jids:
                    count = counts.get(jid, 0)
                    if taken and rows + count > chunk:
                        break
                    taken.append(jid)
                    rows += count
                if rows > chunk:
                    # One job with more returns than a step takes.
                    deleted = connection.execute(
                        "DELETE FROM salttwist_returns WHERE jid = %s AND id IN"
                        " (SELECT id FROM salttwist_returns WHERE jid = %s LIMIT %s)",
                        (taken[0], taken[0], chunk),
                    ).rowcount
                    return deleted, True
                deleted = 0
                if rows:
                    deleted = connection.execute(
                        "DELETE FROM salttwist_returns WHERE jid = ANY(%s)", (taken,)
                    ).rowcount
                deleted += connection.execute(
                    "DELETE FROM salttwist_jobs WHERE jid = ANY(%s)", (taken,)
                ).rowcount
                return deleted, len(taken) < len(jids) or len(jids) >= wanted

        return self._withConnection(work)  # type: ignore[no-any-return]

    def pruneOrphansStep(self, cutoff: float, chunk: int = PRUNE_CHUNK) -> tuple[int, bool]:
        """
        A prune's step: delete at most C{chunk} returns whose jid is older
        than C{cutoff} and that have no job.

        @return: the rows deleted, and whether there may be more.
        """
        cutoffJid = _jidAt(cutoff)

        def work(connection: psycopg.Connection[Any]) -> tuple[int, bool]:
            # The second bound on j.jid says the same, but lets the jobs'
            # side skip the partitions after the cutoff too.
            deleted = connection.execute(
                "DELETE FROM salttwist_returns WHERE jid < %s AND (jid, id) IN"
                " (SELECT r.jid, r.id FROM salttwist_returns r WHERE r.jid < %s AND NOT EXISTS"
                " (SELECT 1 FROM salttwist_jobs j WHERE j.jid = r.jid AND j.jid < %s) LIMIT %s)",
                (cutoffJid, cutoffJid, cutoffJid, chunk),
            ).rowcount
            return deleted, deleted >= chunk

        return self._withConnection(work)  # type: ignore[no-any-return]

    def ensureAhead(self) -> None:
        """
        A prune's last step: make the partitions of this hour and the next
        (L{PARTITIONS_AHEAD}).
        """
        self._withConnection(self._ensureAhead)

    def _dropIfExpired(self, connection: psycopg.Connection[Any], key: str, cutoff: float) -> int:
        """
        Drop the two partitions of hour C{key} (whose jids are all older than
        the cutoff) if every job in it started before C{cutoff}.

        @return: the number of rows dropped.
        """
        jobs, returns = f"salttwist_jobs_p{key}", f"salttwist_returns_p{key}"
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_PARTITIONS,))
            # Another master's prune may have dropped them since we listed.
            exists = connection.execute(
                "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                (jobs, returns),
            ).fetchone()
            if exists is None or not exists[0]:
                self._partitions.discard(key)
                return 0
            row = connection.execute(
                f"SELECT (SELECT max(start_time) FROM {jobs}), (SELECT count(*) FROM {jobs}),"
                f" (SELECT count(*) FROM {returns})"
            ).fetchone()
            assert row is not None
            newest, jobCount, returnCount = row
            if newest is not None and newest >= cutoff:
                return 0
            connection.execute(f"DROP TABLE {jobs}, {returns}")
        self._partitions.discard(key)
        return int(jobCount) + int(returnCount)

    def close(self) -> None:
        """
        Close the connection; later operations fail.
        """
        self._closed = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def listJobsQuery(
    functions: list[str] | None,
    targets: list[str] | None,
    start: float | None,
    end: float | None,
    limit: int | None,
    columns: str = _JOB_COLUMNS,
) -> tuple[str, list[object], list[Callable[[tuple[Any, ...]], bool]]]:
    """
    The SQL of L{PostgresJobCacheDatabase.listJobs} (the benchmark explains
    it too): the query, its parameters, and the checks left to Python (globs
    with C{[...]}), which the rows it yields, newest first, must pass.

    @param columns: the columns selected, C{jid, fun, arg, tgt} first (the
        checks read C{fun} and C{tgt} by position).
    """
    # Only fixed SQL fragments are joined here; every value is a
    # parameter.
    clauses: list[str] = []
    params: list[object] = []
    checks: list[Callable[[tuple[Any, ...]], bool]] = []
    if functions is not None:
        condition = _globCondition(
            functions, "fun = ANY(%s)", "fun LIKE ANY(%s)", 'fun COLLATE "C" ~ ANY(%s)'
        )
        if condition is None:
            checks.append(lambda row, f=functions: _anyMatch([row[1]], f))
        else:
            clauses.append(condition[0])
            params.append(condition[1])
    if targets is not None:
        condition = _globCondition(
            targets,
            # Exact targets (a minion's id): the GIN index of tgt_match.
            "tgt_match && %s::text[]",
            "EXISTS (SELECT 1 FROM unnest(tgt_match) AS t(v) WHERE v LIKE ANY(%s))",
            # Globs with classes ([ab]*): as regular expressions, in SQL
            # (read and matched in Python, 65 ms at 100,000 jobs).
            'EXISTS (SELECT 1 FROM unnest(tgt_match) AS t(v) WHERE v COLLATE "C" ~ ANY(%s))',
        )
        if condition is None:
            checks.append(lambda row, t=targets: _anyMatch(_strings(serial.loads(row[3])), t))
        else:
            clauses.append(condition[0])
            params.append(condition[1])
    if start is not None:
        clauses.append("start_time >= %s")
        params.append(start)
    if end is not None:
        clauses.append("start_time <= %s")
        params.append(end)
    query = f"SELECT {columns} FROM salttwist_jobs"
    if clauses:
        query += " WHERE " + " AND ".join(clauses)
    query += " ORDER BY start_time DESC, jid DESC"
    if limit is not None and not checks:
        query += " LIMIT %s"
        params.append(limit)
    return query, params, checks


def _globCondition(
    patterns: list[str], exact: str, like: str, regex: str
) -> tuple[str, list[str]] | None:
    """
    The SQL condition of L{listJobsQuery} for one column's globs, in the
    simplest form that reads them all: C{exact} (no glob characters), then
    C{like} (only C{*} and C{?}), then C{regex} (simple character classes),
    each a fixed fragment with one C{%s}.

    @return: the fragment and its parameter, or L{None} for globs only
        Python matches (their classes PostgreSQL reads otherwise).
    """
    if all(not set("*?[").intersection(p) for p in patterns):
        return exact, patterns
    likes = [_likePattern(p) for p in patterns]
    if all(pattern is not None for pattern in likes):
        return like, likes  # type: ignore[return-value]
    regexes = [_regexPattern(p) for p in patterns]
    if None not in regexes:
        return regex, regexes  # type: ignore[return-value]
    return None


def _jobRow(job: tuple[Any, ...]) -> tuple[Any, ...]:
    """
    @param job: a job as the cache queues it: C{(jid, fun, arg, tgt,
        tgt_type, user, minions, start_time)}.
    @return: its C{salttwist_jobs} columns up to C{start_time}: the target,
        its type and the user as C{bytea}, and the target's strings for
        C{tgt_match}.
    """
    jid, fun, arg, tgt, tgtType, user, minions, start = job
    return (
        jid,
        fun,
        arg,
        _toBytes(tgt),
        _targetStrings(tgt),
        _toBytes(tgtType),
        _toBytes(user),
        minions,
        start,
    )


def _anyMatch(values: list[Any], patterns: list[str]) -> bool:
    """
    Whether a string among C{values} matches one of C{patterns}, as Salt's
    C{list_jobs} (L{fnmatch.fnmatchcase}).
    """
    return any(isinstance(v, str) and fnmatch.fnmatchcase(v, p) for v in values for p in patterns)


def migrate(connection: psycopg.Connection[Any], migrations: list[Migration]) -> list[int]:
    """
    Apply the job cache's C{migrations} that the database lacks
    (L{applyMigrations}).

    @return: the versions applied now.
    @raise JobCacheError: if the database has a version this code does
        not know.
    """
    return applyMigrations(
        connection,
        migrations,
        "salttwist_jobcache_migrations",
        _LOCK_MIGRATIONS,
        "the PostgreSQL job cache",
        JobCacheError,
    )


def _summaryDecoder() -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """
    @return: a function making a C{(jid, fun, arg, tgt, tgt_type, user)}
        listing row of its msgpack columns decoded, repeated values once
        per listing (L{listingDecoder}).
    """
    value = listingDecoder(_SMALL_VALUES)

    def make(row: tuple[Any, ...]) -> tuple[Any, ...]:
        jid, fun, arg, tgt, tgtType, user = row
        return (jid, fun, value(arg), value(tgt), value(tgtType), value(user))

    return make


def _jobFromRow(row: tuple[Any, ...]) -> dict[str, Any]:
    """
    Turn a C{salttwist_jobs} row into the job dict L{IJobCache.getJob}
    returns.
    """
    jid, fun, arg, tgt, tgtType, user, minions, startTime = row
    return {
        "jid": jid,
        "fun": fun,
        "arg": serial.loads(arg),
        "tgt": serial.loads(tgt),
        "tgt_type": serial.loads(tgtType),
        "user": serial.loads(user),
        "minions": serial.loads(minions),
        "start_time": startTime,
    }
