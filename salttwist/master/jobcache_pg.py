# -*- test-case-name: tests.test_jobcache_pg -*-
"""
The master's job cache in PostgreSQL (issue 23): C{master_job_cache: pgjsonb}
(or its alias C{postgres}), for masters that share one job cache. The SQLite
file (L{salttwist.master.jobcache}) stays the default: a single master needs
no database server.

The reactor side is the SQLite cache's own (L{BatchingJobCache}): the same
argument checks, the same queue that runs operations one at a time in call
order and writes consecutive C{storeJob}/C{storeReturn} calls as one batch.
Only the backend differs: L{PostgresJobCacheDatabase} runs the SQL on one
dedicated thread through one connection.

Driver: psycopg 3 (the maintained successor of psycopg2, with binary wheels
that carry libpq). Its blocking API runs on that thread with
C{deferToThreadPool}, as the SQLite cache does. Twisted's C{adbapi} needs a
DB-API module and a pool of connections, and a pool buys nothing here: the
queue hands over one operation at a time to keep the read-your-writes order.
asyncpg would need the asyncio reactor, and the master runs epoll.

The schema:
  - migrations are numbered (L{MIGRATIONS}); the versions applied are rows
    of C{salttwist_jobcache_migrations}; those missing are applied at open,
    in order, under an advisory lock, so several masters starting together
    apply each one once. A database with a version this code does not know
    is refused (L{JobCacheError}).
  - C{salttwist_jobs} and C{salttwist_returns} are partitioned by range of
    C{jid}: one partition per hour of jid time (the first 10 digits,
    C{YYYYmmddHH}). A job and its returns share the partition key, so the
    primary keys (C{jid}; C{jid, id}) hold across partitions and a replayed
    job or return is stored once (C{ON CONFLICT DO NOTHING}). Partitions are
    made on demand (and an hour or two ahead), under an advisory lock.
  - L{PostgresJobCacheDatabase.prune} drops the partitions whose jobs all
    started before the cutoff and whose jids are all older than it, then
    deletes the remaining expired rows (those of the partition that straddles
    the cutoff, or of a partition holding a job stored long after its jid
    was made) with indexed C{DELETE}s: the result is exactly
    L{IJobCache.prune}'s, most of the data goes by C{DROP TABLE}.
  - indexes: the primary keys serve C{getJob} and C{getReturns}; C{start_time}
    and C{fun} serve C{listJobs}.

Values are stored as msgpack (C{bytea}), as the SQLite cache keeps every
structured value, so whatever came off the wire comes back unchanged;
C{fun} is text, and the strings of C{tgt} are kept in a C{text[]} for
C{listJobs}' target globs. Globs made only of C{*} and C{?} become C{LIKE}
patterns; a glob with C{[...]} is matched in Python, over rows streamed
newest first.

Connection loss: an operation whose connection broke is run again once on a
new connection (every operation is idempotent: writes are C{ON CONFLICT DO
NOTHING}). When the server cannot be reached, the operation fails with
L{JobCacheUnavailable} naming the server and the reason, and connection
attempts back off (L{RECONNECT_INITIAL} doubling to L{RECONNECT_MAX}, 5
seconds); operations called meanwhile fail at once with the same error,
except a new job's reservation, which tries at once if the last attempt
was a second ago or more (L{salttwist.master.jobcache_pgsql.EARLY_RECONNECT}). A
write batch that fails is logged at critical level with its size: nothing is
dropped silently. TCP keepalives and a user timeout
(L{salttwist.pgsql.CONNECTION_DEFAULTS}) end a connection to
a server that vanished without closing it in about 30 s. A server that
hangs (stopped, its kernel still acknowledging) is not seen by those: an
operation it has not answered for L{OPERATION_TIMEOUT} seconds has its
connection cut from this side, fails with L{JobCacheUnavailable}, and the
back-off starts; connection attempts give up after C{connect_timeout}
(L{salttwist.master.jobcache_pgsql.CONNECT_TIMEOUT} by default). Long
operations are not cut while the server answers: a listing streams its
rows, each fetch counting as progress, and a prune runs as steps, each an
operation of its own deleting at most C{pruneChunk} rows of each table
(L{salttwist.master.jobcache_pgsql.PRUNE_CHUNK}). The migrations (at open,
or at the first connection that works) are never cut, nor the wait for
another master's migration lock: a migration of a large table may take
minutes; a server that vanishes meanwhile is still seen by the keepalives.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred, fail, gatherResults
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist import pgsql
from salttwist.master.jobcache import PRUNE_INTERVAL, BatchingJobCache, _DatabaseThreadPool
from salttwist.master.jobcache_pgsql import (
    MIGRATIONS,
    OPERATION_TIMEOUT,
    PRUNE_CHUNK,
    RECONNECT_INITIAL,
    RECONNECT_MAX,
    JobCacheUnavailable,
    PostgresJobCacheDatabase,
    describeServer,
)

__all__ = [
    "JOB_CACHE_NAMES",
    "MIGRATIONS",
    "JobCacheUnavailable",
    "PostgresJobCache",
    "PostgresJobCacheDatabase",
    "connectionOptions",
]

JOB_CACHE_NAMES = frozenset({"pgjsonb", "postgres"})
"""
The C{master_job_cache} values that select this cache: Salt's name for its
PostgreSQL returner, and an alias.
"""

# Connection options ------------------------------------------------------------


def connectionOptions(config: dict[str, Any]) -> dict[str, Any]:
    """
    The libpq connection parameters of C{returner.pgjsonb.*}, as Salt's
    C{pgjsonb} returner reads them (C{host}, C{port}, C{db}, C{user}, C{pass},
    C{sslmode}, C{sslcert}, C{sslkey}, C{sslrootcert}, C{sslcrl},
    C{connect_timeout}); unset ones (L{None}) are left to libpq (its
    environment variables and C{~/.pgpass}).

    @return: keyword arguments for C{psycopg.connect}.
    """
    return pgsql.optionsFromConfig(config, "returner.pgjsonb.")


# The reactor side -------------------------------------------------------------


class PostgresJobCache(BatchingJobCache):
    """
    An L{IJobCache} in a PostgreSQL database, its SQL run on one dedicated
    thread (see the module's docstring).

    It has no C{path}: runners that read the job cache run in the master
    process (L{salttwist.master.runnerdispatch}), through this cache.

    @ivar database: the L{PostgresJobCacheDatabase} run on the thread.
    """

    log = Logger()

    def __init__(
        self,
        options: dict[str, Any],
        reactor: Any,
        keepJobsHours: float = 24,
        clock: Any = None,
        pruneInterval: float = PRUNE_INTERVAL,
        writeInterval: float | None = None,
        database: PostgresJobCacheDatabase | None = None,
        operationTimeout: float = OPERATION_TIMEOUT,
        pruneChunk: int = PRUNE_CHUNK,
    ) -> None:
        """
        @param options: C{psycopg.connect} keyword arguments (see
            L{connectionOptions}).
        @param database: the backend to run (tests); by default one over
            C{options}.
        @param operationTimeout: seconds (of C{clock}) the server may leave
            an operation unanswered before its connection is cut
            (L{OPERATION_TIMEOUT}).
        @param pruneChunk: the most rows of each table a step of a prune
            deletes one by one (L{PRUNE_CHUNK}).
        Other parameters as L{BatchingJobCache}'s.
        """
        self.database = database or PostgresJobCacheDatabase(options)
        self.server = describeServer(options)
        #: When (C{clock.seconds()}) the server became unavailable, while it
        #: is, and how many operations failed since.
        self._unavailableSince: float | None = None
        self._failedMeanwhile = 0
        #: Seconds an operation may run before its connection is cut.
        self.operationTimeout = operationTimeout
        self._operationNumber = 0
        #: The most rows of each table a step of a prune deletes.
        self.pruneChunk = pruneChunk
        #: The prunes under way (L{flush} waits for them).
        self._prunes: set[Deferred[int]] = set()
        super().__init__(
            None,  # type: ignore[arg-type]
            reactor,
            keepJobsHours,
            clock=clock,
            pruneInterval=pruneInterval,
            writeInterval=writeInterval,
        )

    @classmethod
    def fromConfig(cls, config: dict[str, Any], reactor: Any) -> PostgresJobCache:
        """
        @return: the cache the master's C{returner.pgjsonb.*} and C{keep_jobs}
            options describe.
        """
        return cls(connectionOptions(config), reactor, config.get("keep_jobs", 24))

    def storeJob(self, jid: str, load: dict[str, Any], minions: Iterable[str]) -> Deferred[None]:
        """
        See L{IJobCache.storeJob}. A C{fun} holding a NUL character (which
        PostgreSQL text cannot hold) fails with L{ValueError}.
        """
        if isinstance(load, dict) and isinstance(load.get("fun"), str) and "\x00" in load["fun"]:
            return fail(ValueError(f"a job load's fun must not hold NUL: {load['fun']!r}"))
        return super().storeJob(jid, load, minions)

    def reserveJob(self, jid: str, load: dict[str, Any], minions: Iterable[str]) -> Deferred[bool]:
        """
        Store a job this master made under C{jid}, unless that jid is
        already another job's (another master made it in the same
        microsecond): the database decides, atomically, before the jid is
        handed out (see L{salttwist.master.publishing.reserveJid}). A job
        another master made is stored with L{storeJob} instead.

        The reservation runs at once, alone (not in a write batch), behind
        the operations already queued, and is idempotent: run again after a
        lost connection, it finds its own row. One that fails (the job is
        refused), maybe after its commit (its connection cut while the
        answer was awaited), has its row deleted, under its token only,
        before anything else once a connection works again.

        @return: a L{Deferred} firing with C{True} once the job holds
            C{jid}, C{False} if another job does (nothing is stored then);
            failing like L{storeJob}'s.
        """
        if isinstance(load, dict) and isinstance(load.get("fun"), str) and "\x00" in load["fun"]:
            return fail(ValueError(f"a job load's fun must not hold NUL: {load['fun']!r}"))
        try:
            row, _ = self._jobRow(jid, load, minions)
        except ValueError as e:
            return fail(e)
        return self._enqueue("reserveJob", row, secrets.token_hex(16))

    def _automaticPruneAge(self) -> float:
        """
        C{keep_jobs} rounded up to the start of the hour of jids it falls
        in: the automatic prune's cutoff is an hour's boundary, so it drops
        whole partitions and deletes no row one by one. A cutoff inside an
        hour made each hourly prune delete the rows of the part of the hour
        before it (half an hour of returns, on average: 4 s at ten million
        returns, against 0.3 s for a drop). Jobs are kept up to an hour
        longer than C{keep_jobs}.
        """
        now = float(self._clock.seconds())
        cutoff = now - self.keepJobsHours * 3600
        # Jids are local times: the hour's start in local time.
        hour = datetime.fromtimestamp(max(cutoff, 0)).replace(minute=0, second=0, microsecond=0)
        return now - hour.timestamp()

    def _pruneBefore(self, cutoff: float) -> Deferred[int]:
        """
        Prune in steps, each an operation of its own in the queue (see
        L{PostgresJobCacheDatabase.prune}): list the expired hours, drop
        each one's partitions, delete the other expired jobs with their
        returns and the returns without a job L{pruneChunk} rows at a time,
        make the partitions ahead. No step of a large prune comes near
        C{operationTimeout}, and writes and reads run between the steps.
        """

        async def prune() -> int:
            removed = 0
            for key in await self._enqueue("expiredPartitions", cutoff):
                removed += await self._enqueue("dropPartition", key, cutoff)
            for step in ("pruneJobsStep", "pruneOrphansStep"):
                more = True
                while more:
                    count, more = await self._enqueue(step, cutoff, self.pruneChunk)
                    removed += count
            await self._enqueue("ensureAhead")
            return removed

        d = Deferred.fromCoroutine(prune())
        self._prunes.add(d)

        def done(result: object) -> object:
            self._prunes.discard(d)
            return result

        return d.addBoth(done)

    def flush(self) -> Deferred[None]:
        """
        See L{BatchingJobCache.flush}; a prune called before it counts as
        one operation: its steps all end first.
        """
        waits = [self._operations.barrier()]
        for prune in self._prunes:
            ended: Deferred[None] = Deferred()
            prune.addBoth(lambda result, ended=ended: (ended.callback(None), result)[1])
            waits.append(ended)
        return gatherResults(waits).addCallback(lambda _: None)

    def _startBackend(self) -> Deferred[None]:
        """
        Start the database thread and open the database on it.
        """
        self._pool = _DatabaseThreadPool(1, 1, name="salttwist-jobcache-pg")
        self._pool.start()
        return self._enqueue("open")

    def _run(self, operation: str, *args: Any) -> Deferred[Any]:
        """
        Run the operation on the database thread; if the server has not
        answered it for C{operationTimeout} seconds (it hangs), cut its
        connection (L{PostgresJobCacheDatabase.cut}): it then fails with
        L{JobCacheUnavailable}. A long operation whose steps the server
        answers (a listing's fetches, L{PostgresJobCacheDatabase.progress})
        is not cut: every C{operationTimeout} seconds the timer looks
        whether it progressed since, and cuts it only if not. Nor is one
        while it applies the schema's migrations, or waits for another
        master's migration lock (L{PostgresJobCacheDatabase.migrating}): a
        migration of a large table may take minutes.
        """
        self._operationNumber += 1
        number = self._operationNumber
        database = self.database
        timer: list[Any] = [None]
        seen = [database.progress]

        def check() -> None:
            if database.progress != seen[0] or database.migrating:
                seen[0] = database.progress
                timer[0] = self._clock.callLater(self.operationTimeout, check)
            else:
                database.cut(number, self.operationTimeout)

        timer[0] = self._clock.callLater(self.operationTimeout, check)
        d = deferToThreadPool(
            self._reactor, self._pool, database.runOperation, number, operation, *args
        )

        def ended(result: object) -> object:
            if timer[0].active():
                timer[0].cancel()
            return result

        return d.addBoth(ended).addBoth(self._watchServer)

    def _watchServer(self, result: object) -> object:
        """
        Log when the server becomes unavailable (once, with what that means
        for jobs and returns) and when it answers again (with how long it
        was away and how many operations failed meanwhile); C{result}, an
        operation's, is passed on.
        """
        if isinstance(result, Failure) and result.check(JobCacheUnavailable):
            if self._unavailableSince is None:
                self._unavailableSince = self._clock.seconds()
                self._failedMeanwhile = 0
                self.log.warn(
                    "the PostgreSQL job cache {server} is unavailable ({error}): new jobs are "
                    "refused and returns answered 'return not stored' until it is back; "
                    "reconnecting with back-off ({initial} s doubling to {maximum} s)",
                    server=self.server,
                    error=result.getErrorMessage(),
                    initial=RECONNECT_INITIAL,
                    maximum=RECONNECT_MAX,
                )
            self._failedMeanwhile += 1
        elif not isinstance(result, Failure) and self._unavailableSince is not None:
            self.log.info(
                "reconnected to the PostgreSQL job cache {server}: unavailable for "
                "{seconds:.1f} s, {failed} operations failed meanwhile",
                server=self.server,
                seconds=self._clock.seconds() - self._unavailableSince,
                failed=self._failedMeanwhile,
            )
            self._unavailableSince = None
        return result

    def _stopBackend(self) -> None:
        """
        Stop the database thread.
        """
        self._pool.stop()

    def _batchFailed(self, failure: Failure, rows: int) -> None:
        """
        A write batch failed: say loudly that its rows are not stored.
        """
        self.log.critical(
            "{rows} job cache rows (jobs and returns) were NOT stored in {server}: {error}",
            rows=rows,
            server=self.server,
            error=failure.getErrorMessage(),
        )

    def _openFailed(self, failure: Failure) -> None:
        """
        Remember why the database could not be opened and log it.
        """
        self._openError = failure
        self.log.failure(
            "cannot open the PostgreSQL job cache {server}", failure, server=self.server
        )
