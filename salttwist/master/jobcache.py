# -*- test-case-name: tests.test_jobcache -*-
"""
The master's job cache: published jobs and their returns in one SQLite file.

Every database operation runs on one dedicated thread, because an SQLite
connection belongs to the thread that opened it and writes must be serialised
anyway. Operations run strictly in the order they were called, so a read
issued after a write sees that write even when the caller did not wait for it.

Writes are batched for throughput: while one batch is being written, the
C{storeJob} and C{storeReturn} calls that arrive are queued, and the next batch
writes all of them in one transaction with C{executemany}. The L{Deferred} of
each call fires when the transaction holding it has committed. While writes
keep coming (a job's returns arrive one by one over some milliseconds), a
write batch starts at most every L{WRITE_INTERVAL} seconds, so that one
transaction (and, for the worker process, one round trip) holds many of them
rather than a few; a write after a quiet spell, and any read, flush or close,
starts at once (see L{BatchingJobCache.__init__}).

Values are stored as they were given: strings and integers natively, any
structure (lists, dicts, bytes, ...) as a msgpack blob made with
L{salttwist.serial}. Values are serialised when the call is made, so a caller
may change its dicts afterwards without changing what is stored. They are read
back with L{salttwist.serial.loads}, so they must be what it accepts (map keys
that are strings or bytes, nesting within its depth limit), as everything that
came off the wire is.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable
from datetime import datetime
from threading import Thread
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, fail, maybeDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool
from zope.interface import implementer

from salttwist import serial
from salttwist.interfaces import IJobCache
from salttwist.jid import isJid
from salttwist.master.jobcachequeue import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ROWS,
    WRITE_INTERVAL,
    JobCacheClosed,
    OperationQueue,
    _Call,
    _Write,
)
from salttwist.pki.ids import validateMinionId

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ROWS",
    "PRUNE_INTERVAL",
    "WRITE_INTERVAL",
    "BatchingJobCache",
    "JobCacheClosed",
    "JobCacheDatabase",
    "JobCacheError",
    "OperationQueue",
    "SQLiteJobCache",
    "_Call",
    "_Write",
]

SCHEMA_VERSION = 1
"""
The value of C{PRAGMA user_version} for the tables this module creates.
"""

PRUNE_INTERVAL = 3600.0
"""
Seconds between two automatic prunes.
"""

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS jobs (
        jid TEXT PRIMARY KEY NOT NULL,
        fun TEXT NOT NULL,
        arg BLOB,
        tgt,
        tgt_type,
        user,
        minions BLOB NOT NULL,
        start_time REAL NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS jobs_fun ON jobs (fun)",
    "CREATE INDEX IF NOT EXISTS jobs_start_time ON jobs (start_time)",
    """
    CREATE TABLE IF NOT EXISTS returns (
        jid TEXT NOT NULL,
        id TEXT NOT NULL,
        "return" BLOB,
        retcode,
        success,
        time REAL NOT NULL,
        PRIMARY KEY (jid, id)
    )
    """,
    "CREATE INDEX IF NOT EXISTS returns_id ON returns (id)",
)

_INSERT_JOB = (
    "INSERT OR IGNORE INTO jobs (jid, fun, arg, tgt, tgt_type, user, minions, start_time)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_RETURN = (
    'INSERT OR IGNORE INTO returns (jid, id, "return", retcode, success, time)'
    " VALUES (?, ?, ?, ?, ?, ?)"
)
_JOB_COLUMNS = "jid, fun, arg, tgt, tgt_type, user, minions, start_time"
_SUMMARY_COLUMNS = "jid, fun, arg, tgt, tgt_type, user"
_GLOB_CHARACTERS = frozenset("*?[")


class JobCacheError(RuntimeError):
    """
    Raised when the database cannot be opened or has a schema this version
    does not know.
    """


# Storing values -------------------------------------------------------------


def _packValue(value: object) -> object:
    """
    Make C{value} storable in a column without a declared type: L{None},
    strings, 64-bit integers and floats as themselves, anything else (lists,
    dicts, bytes, booleans, huge integers) as a msgpack blob.

    @raise salttwist.serial.SerialError: if C{value} cannot be serialised.
    """
    if value is None or type(value) is str or type(value) is float:
        return value
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return serial.dumps(value)


def _unpackValue(stored: object) -> Any:
    """
    The inverse of L{_packValue}.
    """
    if isinstance(stored, bytes):
        return serial.loads(stored)
    return stored


def _packSuccess(value: object) -> object:
    """
    Store a boolean C{success} as C{1}/C{0} (so it can be queried), anything
    else like L{_packValue}.
    """
    if type(value) is bool:
        return int(value)
    return _packValue(value)


def _unpackSuccess(stored: object) -> Any:
    """
    The inverse of L{_packSuccess}.
    """
    if type(stored) is int:
        return bool(stored)
    return _unpackValue(stored)


def _checkJid(jid: object) -> str:
    """
    @return: C{jid} if it is a job id.
    @raise ValueError: naming the problem, if it is not.
    """
    if not isJid(jid):
        raise ValueError(f"invalid jid {jid!r}: a jid is a string of exactly 20 digits")
    assert isinstance(jid, str)
    return jid


@functools.lru_cache(maxsize=65536)
def _validMinionId(minionId: str) -> str:
    """
    L{validateMinionId}, remembered: a master sees the same few thousand ids
    in every job, and checking one character by character costs more than
    storing its return. Only valid ids are remembered (an exception is not).
    """
    return validateMinionId(minionId)


def _checkMinionId(minionId: object) -> str:
    """
    @return: C{minionId} if it is a valid minion id.
    @raise ValueError: naming the problem, if it is not.
    """
    if type(minionId) is not str:
        # Not hashable perhaps, and certainly not valid: say why.
        return validateMinionId(minionId)
    return _validMinionId(minionId)


def _patternList(name: str, value: object) -> list[str] | None:
    """
    Normalise a Salt search pattern argument the way Salt's
    C{salt.utils.args.split_input} does: a list is used as it is, a string is
    split at commas and each part stripped.

    @return: the patterns, or L{None} for no filter (L{None}, C{""} or an
        empty list, which Salt also treats as no filter).
    @raise ValueError: if C{value} is neither a string nor a list of strings.
    """
    if not value:
        return None
    if isinstance(value, str):
        return [part.strip() for part in value.split(",")]
    if isinstance(value, (list, tuple)) and all(isinstance(part, str) for part in value):
        return list(value)
    raise ValueError(f"{name} must be a string or a list of strings, not {value!r}")


def _timeBound(name: str, value: object) -> float | None:
    """
    @return: C{value} as POSIX seconds (a number, or an aware or local
        L{datetime}), or L{None}.
    @raise ValueError: for any other type.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"{name} must be a number of seconds or a datetime, not {value!r}")


def _listFilters(
    searchFunction: object, searchTarget: object, startTime: object, endTime: object, limit: object
) -> tuple[list[str] | None, list[str] | None, float | None, float | None, int | None]:
    """
    Check and normalise L{IJobCache.listJobs}' arguments.

    @return: C{(functions, targets, start, end, limit)} as the database's
        C{listJobs} takes them.
    @raise ValueError: naming what is wrong.
    """
    functions = _patternList("searchFunction", searchFunction)
    targets = _patternList("searchTarget", searchTarget)
    start = _timeBound("startTime", startTime)
    end = _timeBound("endTime", endTime)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"limit must be a non-negative integer, not {limit!r}")
    return functions, targets, start, end, limit  # type: ignore[return-value]


@functools.lru_cache(maxsize=64)
def _compilePatterns(packed: bytes) -> re.Pattern[str]:
    """
    Compile msgpack-packed fnmatch patterns into one regular expression that
    matches when any of them matches, exactly as L{fnmatch.fnmatchcase}.
    """
    patterns = serial.loads(packed)
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def _sqlFnmatchAny(stored: object, packedPatterns: bytes) -> int:
    """
    The SQL function C{salttwist_fnmatch(column, patterns)}: whether the
    stored value, or any string in it when it is a list, matches one of the
    patterns. This is Salt's C{list_jobs} matching (C{fnmatch} of each target
    against each pattern), which SQLite's own C{GLOB} does not quite equal.
    """
    regex = _compilePatterns(packedPatterns)
    try:
        value = _unpackValue(stored)
    except serial.SerialError:
        return 0
    values = value if isinstance(value, list) else [value]
    return int(any(isinstance(v, str) and regex.match(v) is not None for v in values))


# The queue ------------------------------------------------------------------


def _daemonThread(*args: Any, **kwargs: Any) -> Thread:
    """
    Make the database thread a daemon: a cache nobody closed must not keep
    the process alive at exit (the writes it still holds are queued on the
    reactor side, which has stopped, so waiting would only hang; SQLite rolls
    back a transaction the exit interrupts).
    """
    return Thread(*args, daemon=True, **kwargs)


class _DatabaseThreadPool(ThreadPool):
    """
    A L{ThreadPool} of daemon threads.
    """

    threadFactory = staticmethod(_daemonThread)  # type: ignore[assignment]


@implementer(IJobCache)
class BatchingJobCache:
    """
    The reactor side of a job cache in one SQLite file: argument checks and
    the rows, then the queue of operations and the batching of writes (an
    L{OperationQueue}, in L{salttwist.master.jobcachequeue}), whatever runs
    the SQL (L{JobCacheDatabase}). Subclasses say where it runs: L{SQLiteJobCache}
    on a thread, L{salttwist.master.jobcacheworker.WorkerJobCache} in a
    worker process. Operations run one at a time, in the order they were
    called; consecutive writes run as one batch.

    @ivar transactionCount: how many write transactions have committed; each
        holds one batch of C{storeJob}/C{storeReturn} calls.
    @ivar rowsWritten: how many C{storeJob}/C{storeReturn} calls those
        transactions held.
    """

    log = Logger()
    #: Whether queued operations run as soon as the backend is started by
    #: the constructor (L{WorkerJobCache} waits for its C{start}).
    _runsAtOnce = True

    def __init__(
        self,
        path: str,
        reactor: Any,
        keepJobsHours: float = 24,
        clock: Any = None,
        pruneInterval: float = PRUNE_INTERVAL,
        writeInterval: float | None = None,
    ) -> None:
        """
        Start the database's backend (L{_startBackend}). Operations may be
        called at once; they run after the open.

        @param path: the database file; its directory must exist.
        @param reactor: provides C{addSystemEventTrigger} (and what the
            backend needs).
        @param keepJobsHours: Salt's C{keep_jobs}: hours a job is kept by
            L{startPruning}; C{0} keeps jobs forever.
        @param clock: an C{IReactorTime} for start and receive times and the
            pruning schedule; the reactor by default.
        @param pruneInterval: seconds between two automatic prunes.
        @param writeInterval: seconds at least between the starts of two
            write batches (scheduled with C{reactor.callLater}); by default
            L{WRITE_INTERVAL} if C{reactor} provides C{IReactorTime}, else
            C{0} (every batch starts as soon as the previous one ended).
        """
        self.path = path
        self._reactor = reactor
        self._clock = clock if clock is not None else reactor
        self.keepJobsHours = keepJobsHours
        self._pruneInterval = pruneInterval
        if writeInterval is None:
            writeInterval = WRITE_INTERVAL if IReactorTime.providedBy(reactor) else 0.0
        self._operations = OperationQueue(
            reactor, self._run, self._batchFailed, writeInterval, running=self._runsAtOnce
        )
        # Bound once: storeJob and storeReturn are on the return path.
        self._write = self._operations.write
        self._enqueue = self._operations.call
        self._closing: Deferred[None] | None = None
        self._pruning: LoopingCall | None = None
        # Without this, a master stopped without close() would lose the
        # writes still queued.
        self._shutdownTrigger: Any = reactor.addSystemEventTrigger(
            "before", "shutdown", self._closeAtShutdown
        )
        self._openError: Failure | None = None
        self._opened: Deferred[None] = self._startBackend()
        self._opened.addErrback(self._openFailed)

    # The backend (subclasses) --------------------------------------------------

    def _startBackend(self) -> Deferred[None]:
        """
        Start running operations and open the database.

        @return: a L{Deferred} that fires when it is open, or fails with the
            reason it cannot be.
        """
        raise NotImplementedError()

    def _run(self, operation: str, *args: Any) -> Deferred[Any]:
        """
        Run C{JobCacheDatabase.<operation>(*args)} off the reactor. Called
        with one operation at a time.
        """
        raise NotImplementedError()

    def _stopBackend(self) -> Deferred[None] | None:
        """
        Release the backend once the connection is closed.
        """
        raise NotImplementedError()

    def _batchFailed(self, failure: Failure, rows: int) -> None:
        """
        A write batch of C{rows} rows failed (its callers' L{Deferred}s fail
        next). Nothing by default.
        """

    # Public API --------------------------------------------------------------

    def whenOpen(self) -> Deferred[None]:
        """
        @return: a L{Deferred} that fires when the database is open, or fails
            with the reason it could not be opened.
        """
        d: Deferred[None] = Deferred()

        def relay(_: object) -> None:
            if self._openError is not None:
                d.errback(self._openError)
            else:
                d.callback(None)

        self._opened.addCallback(relay)
        return d

    def storeJob(self, jid: str, load: dict[str, Any], minions: Iterable[str]) -> Deferred[None]:
        """
        See L{IJobCache.storeJob}. A job id stored twice keeps the first job.
        """
        try:
            row, size = self._jobRow(jid, load, minions)
        except ValueError as e:
            return fail(e)
        return self._write(True, row, size)

    def _jobRow(
        self, jid: str, load: dict[str, Any], minions: Iterable[str]
    ) -> tuple[tuple[Any, ...], int]:
        """
        Check a job's arguments and make its row.

        @return: the row and its serialised size.
        @raise ValueError: naming what is wrong.
        """
        _checkJid(jid)
        if not isinstance(load, dict):
            raise ValueError(f"a job load must be a dict, not {type(load).__name__}")
        fun = load.get("fun")
        if not isinstance(fun, str):
            raise ValueError(f"a job load's fun must be a string, not {fun!r}")
        if isinstance(minions, (str, bytes)) or not isinstance(minions, Iterable):
            raise ValueError(f"minions must be a list of minion ids, not {minions!r}")
        minionList = [_checkMinionId(m) for m in minions]
        arg = serial.dumps(load.get("arg", []))
        packedMinions = serial.dumps(minionList)
        row = (
            jid,
            fun,
            arg,
            _packValue(load.get("tgt")),
            _packValue(load.get("tgt_type")),
            _packValue(load.get("user")),
            packedMinions,
            float(self._clock.seconds()),
        )
        return row, len(arg) + len(packedMinions)

    def storeReturn(self, jid: str, minionId: str, ret: dict[str, Any]) -> Deferred[None]:
        """
        See L{IJobCache.storeReturn}. A second return for the same job and
        minion is ignored: the first one stays.
        """
        try:
            _checkJid(jid)
            _checkMinionId(minionId)
            if not isinstance(ret, dict):
                raise ValueError(f"a return must be a dict, not {type(ret).__name__}")
            value = serial.dumps(ret.get("return"))
            row = (
                jid,
                minionId,
                value,
                _packValue(ret.get("retcode")),
                _packSuccess(ret.get("success")),
                float(self._clock.seconds()),
            )
        except ValueError as e:
            return fail(e)
        return self._write(False, row, len(value))

    def getJob(self, jid: str) -> Deferred[dict[str, Any] | None]:
        """
        See L{IJobCache.getJob}.
        """
        try:
            _checkJid(jid)
        except ValueError as e:
            return fail(e)
        return self._enqueue("getJob", jid)

    def getReturns(self, jid: str) -> Deferred[dict[str, dict[str, Any]]]:
        """
        See L{IJobCache.getReturns}.
        """
        try:
            _checkJid(jid)
        except ValueError as e:
            return fail(e)
        return self._enqueue("getReturns", jid)

    def listJobs(
        self,
        searchFunction: str | list[str] | None = None,
        searchTarget: str | list[str] | None = None,
        startTime: float | datetime | None = None,
        endTime: float | datetime | None = None,
        limit: int | None = None,
    ) -> Deferred[list[dict[str, Any]]]:
        """
        See L{IJobCache.listJobs}.
        """
        try:
            filters = _listFilters(searchFunction, searchTarget, startTime, endTime, limit)
        except ValueError as e:
            return fail(e)
        return self._enqueue("listJobs", *filters)

    def listJobSummaries(
        self,
        searchFunction: str | list[str] | None = None,
        searchTarget: str | list[str] | None = None,
        startTime: float | datetime | None = None,
        endTime: float | datetime | None = None,
        limit: int | None = None,
    ) -> Deferred[list[tuple[Any, ...]]]:
        """
        L{listJobs}, with only what a job listing shows (C{jobs.list_jobs}):
        C{(jid, fun, arg, tgt, tgt_type, user)} for each job, newest first.
        The minions, most of a job's bytes, are not read. A backend that
        has no such operation (the job cache worker's) lists whole jobs.

        @return: a L{Deferred} firing with the tuples.
        """
        try:
            filters = _listFilters(searchFunction, searchTarget, startTime, endTime, limit)
        except ValueError as e:
            return fail(e)
        database = getattr(self, "_database", None) or getattr(self, "database", None)
        if database is not None and hasattr(database, "listJobSummaries"):
            return self._enqueue("listJobSummaries", *filters)
        return self._enqueue("listJobs", *filters).addCallback(
            lambda jobs: [
                (j["jid"], j["fun"], j["arg"], j["tgt"], j["tgt_type"], j["user"]) for j in jobs
            ]
        )

    def prune(self, olderThanSeconds: float) -> Deferred[int]:
        """
        See L{IJobCache.prune}.
        """
        if not isinstance(olderThanSeconds, (int, float)) or isinstance(olderThanSeconds, bool):
            return fail(ValueError(f"olderThanSeconds must be a number, not {olderThanSeconds!r}"))
        if olderThanSeconds < 0:
            return fail(ValueError("olderThanSeconds must not be negative"))
        cutoff = float(self._clock.seconds()) - olderThanSeconds
        return self._pruneBefore(cutoff)

    def _pruneBefore(self, cutoff: float) -> Deferred[int]:
        """
        Run the prune of everything older than C{cutoff} (POSIX seconds):
        one operation here.

        @return: a L{Deferred} firing with the number of rows removed.
        """
        return self._enqueue("prune", cutoff)

    def startPruning(self) -> None:
        """
        Prune jobs older than C{keepJobsHours} now and then every
        C{pruneInterval} seconds of the clock, until L{close}. Does nothing
        when C{keepJobsHours} is C{0} (Salt's "keep forever") or pruning
        already runs.
        """
        if self._operations.closed or self._pruning is not None or not self.keepJobsHours:
            return
        self._pruning = LoopingCall(self._pruneOnce)
        self._pruning.clock = self._clock
        self._pruning.start(self._pruneInterval, now=True)

    def flush(self) -> Deferred[None]:
        """
        @return: a L{Deferred} that fires once every operation called before
            it has finished (successfully or not): writes are then committed
            and visible to other connections, such as a runner's. Costs no
            database work.
        """
        return self._operations.barrier()

    def close(self) -> Deferred[None]:
        """
        See L{IJobCache.close}. Every operation called before C{close} still
        completes; every one called after fails with L{JobCacheClosed}.
        Calling C{close} again is harmless.
        """
        if self._closing is None:
            self._closing = self._startClosing()
        d: Deferred[None] = Deferred()
        self._closing.addCallback(lambda _: d.callback(None))
        return d

    @property
    def transactionCount(self) -> int:
        """
        How many write transactions have committed; each holds one batch of
        C{storeJob}/C{storeReturn} calls.
        """
        return self._operations.transactionCount

    @property
    def rowsWritten(self) -> int:
        """
        How many C{storeJob}/C{storeReturn} calls those transactions held.
        """
        return self._operations.rowsWritten

    def _pump(self) -> None:
        """
        Run what is queued, if it may run now.
        """
        self._operations.pump()

    def _openFailed(self, failure: Failure) -> None:
        """
        Remember why the database could not be opened (for L{whenOpen}) and
        log it. Every later operation fails with L{JobCacheError}.
        """
        self._openError = failure
        self.log.failure("cannot open the job cache {path}", failure, path=self.path)

    def _automaticPruneAge(self) -> float:
        """
        @return: how old, in seconds, the jobs the automatic prune removes
            are: C{keepJobsHours}.
        """
        return self.keepJobsHours * 3600

    def _pruneOnce(self) -> Deferred[None]:
        """
        One automatic prune. A failure is logged, not raised, so that the
        L{LoopingCall} keeps running.
        """

        def done(removed: int) -> None:
            if removed:
                self.log.info(
                    "pruned {removed} job cache rows older than {hours} hours",
                    removed=removed,
                    hours=self.keepJobsHours,
                )

        d = self.prune(self._automaticPruneAge())
        d.addCallback(done)
        d.addErrback(lambda f: self.log.failure("pruning the job cache", f))
        return d

    def _startClosing(self) -> Deferred[None]:
        """
        Stop pruning, queue the closing of the connection behind every queued
        operation, then stop the backend.
        """
        if self._shutdownTrigger is not None:
            self._reactor.removeSystemEventTrigger(self._shutdownTrigger)
            self._shutdownTrigger = None
        if self._pruning is not None and self._pruning.running:
            self._pruning.stop()
        self._pruning = None
        closing: Deferred[None] = self._enqueue("close")
        self._operations.closed = True

        def stopBackend(result: object) -> object:
            # The backend is idle: its last job was the close.
            stopped = maybeDeferred(self._stopBackend)
            stopped.addErrback(
                lambda f: self.log.failure("stopping the job cache {path}", f, path=self.path)
            )
            return stopped.addCallback(lambda _: result)

        closing.addBoth(stopBackend)
        closing.addErrback(
            lambda f: self.log.failure("closing the job cache {path}", f, path=self.path)
        )
        return closing

    def _closeAtShutdown(self) -> Deferred[None]:
        """
        The reactor shuts down: flush the queue and close.
        """
        self._shutdownTrigger = None
        return self.close()


class SQLiteJobCache(BatchingJobCache):
    """
    A job cache in one SQLite database file (WAL journal, C{synchronous=NORMAL},
    mode 0600), run on one dedicated thread of this process: an SQLite
    connection belongs to the thread that opened it, and writes must be
    serialised anyway.

    @ivar transactionCount: how many write transactions have committed; each
        holds one batch of C{storeJob}/C{storeReturn} calls.
    @ivar rowsWritten: how many C{storeJob}/C{storeReturn} calls those
        transactions held.
    """

    def _startBackend(self) -> Deferred[None]:
        """
        Start the database thread and open the database on it.
        """
        self._database = JobCacheDatabase(self.path)
        self._pool = _DatabaseThreadPool(1, 1, name="salttwist-jobcache")
        self._pool.start()
        return self._enqueue("open")

    def _run(self, operation: str, *args: Any) -> Deferred[Any]:
        """
        Run the operation on the database thread.
        """
        return deferToThreadPool(
            self._reactor, self._pool, getattr(self._database, operation), *args
        )

    def _stopBackend(self) -> None:
        """
        Stop the database thread.
        """
        self._pool.stop()


# The SQL --------------------------------------------------------------------


class JobCacheDatabase:
    """
    The SQL of the job cache: one SQLite connection and the statements run on
    it, synchronously. L{SQLiteJobCache} calls it on its database thread;
    the job cache worker process (L{salttwist.master.jobcachetasks}) calls it
    from its tasks, and runner workers read through a C{readOnly} one.

    Every method but L{open} must be called on the thread that called
    L{open}.

    @ivar path: the database file.
    @ivar readOnly: whether this connection only reads (no schema set-up, no
        writes).
    """

    def __init__(self, path: str, readOnly: bool = False) -> None:
        self.path = path
        self.readOnly = readOnly
        self._connection: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        """
        @return: the open connection.
        @raise JobCacheError: if the database could not be opened.
        """
        if self._connection is None:
            raise JobCacheError(f"the job cache {self.path} is not open")
        return self._connection

    def open(self) -> None:
        """
        Open the database: read-write, creating the file with mode 0600
        (never following a symbolic link) and setting up the journal and the
        tables; or, when C{readOnly}, an existing database for reading only.

        @raise JobCacheError: if its schema is newer than this version's, or
            WAL cannot be used.
        """
        if self.readOnly:
            self._openReadOnly()
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            # An existing file may have been made with a looser mode; returns
            # can hold secrets.
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        # Imported here: the master process only batches the writes for the
        # job cache's worker, and SQLite is 0.8 MB it would keep for nothing.
        import sqlite3

        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=True)
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise JobCacheError(
                    f"{self.path} has job cache schema version {version}; "
                    f"this salttwist knows version {SCHEMA_VERSION}"
                )
            mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise JobCacheError(f"cannot use WAL journal mode on {self.path} (got {mode})")
            connection.execute("PRAGMA synchronous=NORMAL")
            # Another process (a runner) may read while we write.
            connection.execute("PRAGMA busy_timeout=10000")
            # Checkpoint every ~40 MB of WAL rather than every 4 MB: the index
            # on minion ids makes every batch touch pages all over it, and
            # a checkpoint writes each page once however often the WAL holds
            # it (this halves the cost of a return at a few 100,000 rows).
            connection.execute("PRAGMA wal_autocheckpoint=10000")
            connection.execute("PRAGMA cache_size=-65536")
            # Give back the disk a large return's WAL took, after a checkpoint.
            connection.execute("PRAGMA journal_size_limit=67108864")
            connection.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION:d}")
            connection.execute("COMMIT")
            connection.create_function("salttwist_fnmatch", 2, _sqlFnmatchAny, deterministic=True)
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    def _openReadOnly(self) -> None:
        """
        Open an existing database for reading only: another process (the job
        cache's writer) keeps it; WAL lets this connection read while it
        writes.
        """
        import sqlite3

        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
        connection = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            connection.execute("PRAGMA busy_timeout=10000")
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise JobCacheError(
                    f"{self.path} has job cache schema version {version}; "
                    f"this salttwist knows version {SCHEMA_VERSION}"
                )
            connection.create_function("salttwist_fnmatch", 2, _sqlFnmatchAny, deterministic=True)
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    def _transaction(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """
        Run C{work(connection)} in one write transaction.
        """
        connection = self._db()
        connection.execute("BEGIN IMMEDIATE")
        try:
            result = work(connection)
        except BaseException:
            # SQLite may have rolled back already (on a full disk, for one).
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return result

    def writeBatch(self, jobs: list[tuple[Any, ...]], returns: list[tuple[Any, ...]]) -> None:
        """
        Write one batch of jobs and returns in one transaction.
        """

        def work(connection: sqlite3.Connection) -> None:
            if jobs:
                connection.executemany(_INSERT_JOB, jobs)
            if returns:
                connection.executemany(_INSERT_RETURN, returns)

        self._transaction(work)

    def getJob(self, jid: str) -> dict[str, Any] | None:
        """
        Read one job.
        """
        row = (
            self._db().execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE jid = ?", (jid,)).fetchone()
        )
        return None if row is None else _jobFromRow(row)

    def getReturns(self, jid: str) -> dict[str, dict[str, Any]]:
        """
        Read the returns of one job.
        """
        rows = self._db().execute(
            'SELECT id, "return", retcode, success, time FROM returns WHERE jid = ?', (jid,)
        )
        return {
            minionId: {
                "return": serial.loads(value),
                "retcode": _unpackValue(retcode),
                "success": _unpackSuccess(success),
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
        query, params = _listQuery(_JOB_COLUMNS, functions, targets, start, end, limit)
        return [_jobFromRow(row) for row in self._db().execute(query, params)]

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
        filter, newest first: C{(jid, fun, arg, tgt, tgt_type, user)} each
        (see L{BatchingJobCache.listJobSummaries}); not the minions.
        """
        query, params = _listQuery(_SUMMARY_COLUMNS, functions, targets, start, end, limit)
        value = listingDecoder()
        return [
            (
                jid,
                fun,
                value(arg) if arg is not None else [],
                value(tgt) if type(tgt) is bytes else tgt,
                value(tgtType) if type(tgtType) is bytes else tgtType,
                value(user) if type(user) is bytes else user,
            )
            for jid, fun, arg, tgt, tgtType, user in self._db().execute(query, params)
        ]

    def prune(self, cutoff: float) -> int:
        """
        Remove the jobs that started before C{cutoff} with their returns, and
        the returns with no job whose jid is older than C{cutoff}.

        @return: the number of rows removed from both tables.
        """
        # jids are local timestamps, so a return without a job (one stored
        # before its job, or whose job was never stored) expires by its jid,
        # which the returns' primary key indexes.
        cutoffJid = datetime.fromtimestamp(max(cutoff, 0)).strftime("%Y%m%d%H%M%S%f")

        def work(connection: sqlite3.Connection) -> int:
            removed = connection.execute(
                "DELETE FROM returns WHERE jid IN (SELECT jid FROM jobs WHERE start_time < ?)",
                (cutoff,),
            ).rowcount
            removed += connection.execute(
                "DELETE FROM jobs WHERE start_time < ?", (cutoff,)
            ).rowcount
            removed += connection.execute(
                "DELETE FROM returns WHERE jid < ? AND jid NOT IN (SELECT jid FROM jobs)",
                (cutoffJid,),
            ).rowcount
            return removed

        return self._transaction(work)

    def close(self) -> None:
        """
        Close the connection (SQLite checkpoints the WAL into the file).
        """
        if self._connection is not None:
            try:
                if not self.readOnly:
                    self._connection.execute("PRAGMA optimize")
            finally:
                self._connection.close()
                self._connection = None


_SCALARS = frozenset((str, int, float, bool, type(None)))
_MISSING = object()


def listingDecoder(known: dict[bytes, Any] | None = None) -> Callable[[bytes], Any]:
    """
    @param known: values known already, by their msgpack bytes (immutable
        ones only).
    @return: a function decoding the msgpack values of one job listing. A
        listing repeats values (C{tgt_type}, C{user}, C{[]} or
        C{["uptime"]} as C{arg}, the same glob or list of minions as
        C{tgt}): scalars and lists of scalars are decoded once per listing
        and looked up after, each list copied (a caller may change it);
        other containers are decoded each time.
    """
    scalarsKnown: dict[bytes, Any] = dict(known or {})
    lists: dict[bytes, list[Any]] = {}
    loads = serial.loads
    scalars = _SCALARS

    def value(packed: bytes) -> Any:
        decoded = scalarsKnown.get(packed, _MISSING)
        if decoded is not _MISSING:
            return decoded
        flat = lists.get(packed)
        if flat is not None:
            return list(flat)
        decoded = loads(packed)
        kind = type(decoded)
        if kind in scalars:
            if len(scalarsKnown) < 65536:
                scalarsKnown[packed] = decoded
        elif kind is list and len(lists) < 4096 and all(type(v) in scalars for v in decoded):
            lists[packed] = list(decoded)
        return decoded

    return value


def _listQuery(
    columns: str,
    functions: list[str] | None,
    targets: list[str] | None,
    start: float | None,
    end: float | None,
    limit: int | None,
) -> tuple[str, list[object]]:
    """
    The SQL of L{JobCacheDatabase.listJobs}, selecting C{columns}.

    @return: the query and its parameters.
    """
    # Only fixed SQL fragments and placeholders are joined here; every
    # value is a parameter.
    clauses: list[str] = []
    params: list[object] = []
    if functions is not None:
        if any(_GLOB_CHARACTERS.intersection(p) for p in functions):
            clauses.append("salttwist_fnmatch(fun, ?)")
            params.append(serial.dumps(functions))
        else:
            # Literal names: an equality the fun index can serve.
            clauses.append("fun IN (" + ", ".join("?" * len(functions)) + ")")
            params.extend(functions)
    if targets is not None:
        clauses.append("salttwist_fnmatch(tgt, ?)")
        params.append(serial.dumps(targets))
    if start is not None:
        clauses.append("start_time >= ?")
        params.append(start)
    if end is not None:
        clauses.append("start_time <= ?")
        params.append(end)
    query = f"SELECT {columns} FROM jobs"
    if clauses:
        query += " WHERE " + " AND ".join(clauses)
    query += " ORDER BY start_time DESC, jid DESC"
    if limit is not None:
        query += " LIMIT ?"
        params.append(limit)
    return query, params


def _jobFromRow(row: tuple[Any, ...]) -> dict[str, Any]:
    """
    Turn a C{jobs} row into the job dict L{IJobCache.getJob} returns.
    """
    jid, fun, arg, tgt, tgtType, user, minions, startTime = row
    return {
        "jid": jid,
        "fun": fun,
        "arg": serial.loads(arg) if arg is not None else [],
        "tgt": _unpackValue(tgt),
        "tgt_type": _unpackValue(tgtType),
        "user": _unpackValue(user),
        "minions": serial.loads(minions),
        "start_time": startTime,
    }
