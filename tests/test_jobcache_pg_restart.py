# -*- test-case-name: tests.test_jobcache_pg_restart -*-
"""
The PostgreSQL job cache across a restart of its server: a private
PostgreSQL made for the test (C{initdb} as the C{postgres} user, on a port of
its own), stopped and started again under a live cache.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from typing import Any

from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.internet.threads import deferToThread
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SkipTest, TestCase

from salttwist.master.jobcache_pg import PostgresJobCache
from salttwist.master.jobcache_pgsql import (
    _LOCK_MIGRATIONS,
    JobCacheUnavailable,
    PostgresJobCacheDatabase,
)
from tests._postgres import temporaryDatabase
from tests.test_jobcache_contract import NOW, jid, load


def _binaries() -> str:
    """
    @return: the directory of the newest installed PostgreSQL's programs.
    @raise SkipTest: if there is none, or this is not root (initdb runs as
        the C{postgres} user), outside CI.
    """
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    problem = None
    if not found:
        problem = "no PostgreSQL server programs under /usr/lib/postgresql"
    elif os.geteuid() != 0 or shutil.which("runuser") is None:
        problem = "making a private PostgreSQL server needs root and runuser"
    if problem is not None:
        if os.environ.get("CI"):
            raise AssertionError(problem)
        raise SkipTest(problem)
    return os.path.dirname(found[-1])


class PrivateServer:
    """
    A PostgreSQL server of a test's own, in a temporary directory.

    @ivar port: its TCP port on 127.0.0.1.
    """

    def __init__(self, testCase: TestCase) -> None:
        self._bin = _binaries()
        self._dir = tempfile.mkdtemp(prefix="salttwist-pg-")
        testCase.addCleanup(shutil.rmtree, self._dir, ignore_errors=True)
        shutil.chown(self._dir, "postgres", "postgres")
        self._data = os.path.join(self._dir, "data")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        testCase.addCleanup(self._stopNow)

    def _run(self, *argv: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            check=True,
            capture_output=True,
            cwd=self._dir,
        )

    def _initdb(self) -> None:
        self._run(
            os.path.join(self._bin, "initdb"), "-D", self._data, "-A", "trust",
            "-U", "postgres", "--no-sync",
        )  # fmt: skip

    def _start(self) -> None:
        options = f"-p {self.port} -k {self._dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            os.path.join(self._bin, "pg_ctl"), "-D", self._data, "-o", options,
            "-l", os.path.join(self._dir, "log"), "-w", "start",
        )  # fmt: skip

    def _stop(self, mode: str = "fast") -> None:
        self._run(os.path.join(self._bin, "pg_ctl"), "-D", self._data, "-m", mode, "-w", "stop")

    def _stopNow(self) -> None:
        if os.path.exists(os.path.join(self._data, "postmaster.pid")):
            self._stop("immediate")

    async def create(self) -> None:
        """
        Make the cluster and start it.
        """
        await deferToThread(self._initdb)
        await deferToThread(self._start)

    async def start(self) -> None:
        """
        Start the server.
        """
        await deferToThread(self._start)

    async def stop(self, mode: str = "fast") -> None:
        """
        Stop the server.

        @param mode: C{pg_ctl stop}'s mode: C{fast} (its connections are
            ended, then it shuts down cleanly) or C{immediate} (it quits at
            once, as in a crash: the next start recovers from the WAL).
        """
        await deferToThread(self._stop, mode)

    def _processes(self) -> list[int]:
        """
        @return: the pids of the server: its postmaster and the postmaster's
            children (backends and helpers).
        """
        with open(os.path.join(self._data, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        children = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            # The command may hold spaces and parentheses: the fields
            # follow the last ")".
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                children.append(int(entry))
        return [postmaster, *children]

    def pause(self, testCase: TestCase) -> None:
        """
        Stop every process of the server (SIGSTOP), as a server that hangs:
        its kernel still accepts connections and acknowledges data, nothing
        answers. Resumed when C{testCase} ends, if not before.
        """
        self._paused = self._processes()
        for pid in self._paused:
            os.kill(pid, signal.SIGSTOP)
        testCase.addCleanup(self.resume)

    def resume(self) -> None:
        """
        Continue the processes L{pause} stopped.
        """
        paused, self._paused = getattr(self, "_paused", []), []
        for pid in paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def options(self) -> dict[str, Any]:
        """
        @return: C{psycopg.connect} keyword arguments for its C{postgres}
            database.
        """
        return {"host": "127.0.0.1", "port": self.port, "user": "postgres", "dbname": "postgres"}


class RestartTests(TestCase):
    """
    The cache across a restart of its server.
    """

    timeout = 120

    async def test_restart(self) -> None:
        """
        While the server is down, writes fail with L{JobCacheUnavailable},
        logged as not stored; once it is back (and the back-off has passed),
        the cache reconnects by itself and what it stored before is there.
        """
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise SkipTest("psycopg is not installed") from None
        server = PrivateServer(self)
        await server.create()
        clock = Clock()
        clock.advance(NOW)
        times = [0.0]
        database = PostgresJobCacheDatabase(server.options(), monotonic=lambda: times[0])
        cache = PostgresJobCache(server.options(), reactor, clock=clock, database=database)
        self.addCleanup(cache.close)
        await cache.whenOpen()
        await cache.storeJob(jid(1), load(), ["a", "b"])
        await cache.storeReturn(jid(1), "a", {"return": "before"})

        logged = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        await server.stop()
        with self.assertRaises(JobCacheUnavailable):
            await cache.storeReturn(jid(1), "b", {"return": "during"})
        with self.assertRaises(JobCacheUnavailable) as raised:
            await cache.getReturns(jid(1))
        self.assertIn("next attempt in", str(raised.exception))
        self.assertEqual(
            [e["rows"] for e in logged if "NOT stored" in e.get("log_format", "")], [1]
        )

        await server.start()
        times[0] = 60.0
        await cache.storeReturn(jid(1), "b", {"return": "after"})
        returns = await cache.getReturns(jid(1))
        self.assertEqual(
            {m: r["return"] for m, r in returns.items()}, {"a": "before", "b": "after"}
        )
        self.assertEqual((await cache.getJob(jid(1)))["minions"], ["a", "b"])
        self.assertEqual(database.connections, 2)


class _SignallingDatabase(PostgresJobCacheDatabase):
    """
    A database that sets L{entered}, once a test gives it one, when the
    cache's thread starts a write batch (inside L{runOperation}): the test
    then knows the operation runs, and may be cut, without guessing how
    long the thread takes to get there.
    """

    entered: threading.Event | None = None

    def writeBatch(self, jobs: list[tuple[Any, ...]], returns: list[tuple[Any, ...]]) -> None:
        if self.entered is not None:
            self.entered.set()
        super().writeBatch(jobs, returns)


class HungServerTests(TestCase):
    """
    The cache under a server that hangs rather than goes away.
    """

    timeout = 120

    async def test_hungServerCut(self) -> None:
        """
        An operation the server does not answer within the cache's
        C{operationTimeout} (of its clock) has its connection cut: it fails
        with L{JobCacheUnavailable} saying so, and what was queued behind
        it fails too rather than wait for ever. Once the server answers
        again (and the back-off has passed), the cache reconnects and
        stores.
        """
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise SkipTest("psycopg is not installed") from None
        server = PrivateServer(self)
        await server.create()
        clock = Clock()
        clock.advance(NOW)
        times = [0.0]
        database = _SignallingDatabase(server.options(), monotonic=lambda: times[0])
        cache = PostgresJobCache(
            server.options(), reactor, clock=clock, database=database, operationTimeout=5
        )
        self.addCleanup(cache.close)
        await cache.whenOpen()
        await cache.storeJob(jid(1), load(), ["a", "b", "c"])

        server.pause(self)
        entered = database.entered = threading.Event()
        stuck = cache.storeReturn(jid(1), "a", {"return": "during"})
        behind = cache.getReturns(jid(1))
        # The write runs on the cache's thread (whether or not it was sent
        # yet, the cut ends it): nothing answers it.
        await deferToThread(entered.wait)
        self.assertFalse(stuck.called)
        clock.advance(5)
        with self.assertRaises(JobCacheUnavailable) as raised:
            await stuck
        self.assertIn("did not answer within 5 s", str(raised.exception))
        with self.assertRaises(JobCacheUnavailable):
            await behind
        self.flushLoggedErrors(JobCacheUnavailable)

        server.resume()
        times[0] = 60.0
        await cache.storeReturn(jid(1), "b", {"return": "after"})
        returns = await cache.getReturns(jid(1))
        self.assertEqual({m: r["return"] for m, r in returns.items()}, {"b": "after"})


def _waitForMigrationWaiter(options: dict[str, Any]) -> None:
    """
    On a thread: return once a connection of the database C{options} names
    waits for an advisory lock (the job cache, for the migrations' lock).
    """
    import psycopg

    with psycopg.connect(autocommit=True, **options) as connection:
        while True:
            row = connection.execute(
                """
                SELECT count(*) FROM pg_locks
                WHERE locktype = 'advisory' AND NOT granted
                  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """
            ).fetchone()
            if row is not None and row[0]:
                return


class MigrationNotCutTests(TestCase):
    """
    The operation timeout spares the migrations.
    """

    timeout = 120

    async def test_migrationLockWaitNotCut(self) -> None:
        """
        A cache opening while another master holds the migrations' lock
        (applying a long migration) waits for it however long it takes:
        the operation timeout, passed three times over meanwhile, does not
        cut it. Once the lock is released, the cache opens on its first
        connection and works.
        """
        try:
            import psycopg
        except ImportError:
            raise SkipTest("psycopg is not installed") from None
        options = temporaryDatabase(self)
        holder = psycopg.connect(**options)
        self.addCleanup(holder.close)
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATIONS,))
        clock = Clock()
        clock.advance(NOW)
        database = PostgresJobCacheDatabase(options)
        cache = PostgresJobCache(
            options, reactor, clock=clock, database=database, operationTimeout=5
        )
        self.addCleanup(cache.close)
        await deferToThread(_waitForMigrationWaiter, options)
        for _ in range(3):
            clock.advance(5)
        self.assertTrue(database.migrating)
        holder.commit()
        await cache.whenOpen()
        self.assertFalse(database.migrating)
        await cache.storeJob(jid(1), load(), ["a"])
        self.assertEqual((await cache.getJob(jid(1)))["minions"], ["a"])
        self.assertEqual(database.connections, 1)
