# -*- test-case-name: tests.test_jobcache -*-
"""
Tests for L{salttwist.master.jobcache}.

These use the real reactor, a real database thread and a real SQLite file:
the thread and the file are what is being tested. Times come from a
L{Clock}, so start times, receive times and the pruning schedule are
deterministic.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from datetime import datetime
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface.verify import verifyObject

from salttwist.interfaces import IJobCache
from salttwist.master.jobcache import (
    MAX_BATCH_ROWS,
    WRITE_INTERVAL,
    BatchingJobCache,
    JobCacheClosed,
    JobCacheError,
    SQLiteJobCache,
)
from salttwist.master.jobcachequeue import (
    MAX_QUEUED_BYTES,
    MAX_QUEUED_CALLS,
    MAX_QUEUED_ROWS,
    JobCacheQueueFull,
)
from salttwist.serial import SerialError

# 2023-11-14T22:13:20Z: a realistic "now" for the clock.
NOW = 1_700_000_000.0

INVALID_JIDS: list[Any] = [
    "1 OR 1=1",
    "../x",
    "2024010100000000000'",
    "2024010100000000000",
    "202401010000000000000",
    "2024010100000000000\n",
    "",
    None,
    20240101000000000000,
    ["20240101000000000000"],
    b"20240101000000000000",
]


def jid(n: int) -> str:
    """
    @return: a valid jid, the C{n}th of 2024-01-01.
    """
    return f"20240101000000{n:06d}"


def load(fun: str = "test.ping", tgt: Any = "*", **extra: Any) -> dict[str, Any]:
    """
    @return: a job load as the master stores it.
    """
    result = {"fun": fun, "arg": [], "tgt": tgt, "tgt_type": "glob", "user": "root"}
    result.update(extra)
    return result


class _RecordingReactor:
    """
    The real reactor, except that system event triggers are recorded
    instead of registered, so a test can fire the shutdown trigger.
    """

    def __init__(self) -> None:
        self.triggers: dict[int, tuple[str, str, Any]] = {}

    def callFromThread(self, f: Any, *args: Any, **kwargs: Any) -> None:
        reactor.callFromThread(f, *args, **kwargs)

    def addSystemEventTrigger(self, phase: str, event: str, f: Any) -> int:
        handle = len(self.triggers) + 1
        self.triggers[handle] = (phase, event, f)
        return handle

    def removeSystemEventTrigger(self, handle: int) -> None:
        del self.triggers[handle]


class SQLiteJobCacheTests(TestCase):
    """
    Tests for L{SQLiteJobCache}.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)
        self.path = self.mktemp()

    def makeCache(self, path: str | None = None, **kwargs: Any) -> SQLiteJobCache:
        """
        @return: a cache on C{path} (the test's path by default) with the
            test's clock, closed when the test ends.
        """
        kwargs.setdefault("clock", self.clock)
        cache = SQLiteJobCache(self.path if path is None else path, reactor, **kwargs)
        self.addCleanup(cache.close)
        return cache

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        """
        @return: every row of C{table}, read with a separate connection.
        """
        assert table in ("jobs", "returns")
        connection = sqlite3.connect(self.path)
        try:
            return connection.execute("SELECT * FROM " + table).fetchall()
        finally:
            connection.close()

    # The interface --------------------------------------------------------

    def test_interface(self) -> None:
        """
        L{SQLiteJobCache} provides L{IJobCache}.
        """
        self.assertTrue(verifyObject(IJobCache, self.makeCache()))

    # Round trips ------------------------------------------------------------

    async def test_jobRoundTrip(self) -> None:
        """
        L{SQLiteJobCache.getJob} returns the job stored by C{storeJob}: its
        load's fields, its minions and the clock's time as its start time.
        Structured arguments and a list target survive intact; keys outside
        the schema are not kept.
        """
        cache = self.makeCache()
        arg = ["echo hi", {"cwd": "/tmp", "env": {"A": "1"}}, 3, None, b"\x00\xff"]
        await cache.storeJob(
            jid(1), load("cmd.run", ["web1", "web2"], arg=arg, tgt_type="list", extra="x"), ["web1"]
        )
        self.assertEqual(
            await cache.getJob(jid(1)),
            {
                "jid": jid(1),
                "fun": "cmd.run",
                "arg": arg,
                "tgt": ["web1", "web2"],
                "tgt_type": "list",
                "user": "root",
                "minions": ["web1"],
                "start_time": NOW,
            },
        )

    async def test_unknownJob(self) -> None:
        """
        An unknown jid has no job (L{None}) and no returns (an empty dict).
        """
        cache = self.makeCache()
        self.assertIsNone(await cache.getJob(jid(9)))
        self.assertEqual(await cache.getReturns(jid(9)), {})

    async def test_returnRoundTrip(self) -> None:
        """
        L{SQLiteJobCache.getReturns} gives, per minion, the return value of
        any type, the retcode, the success flag and the clock's time when the
        return was stored.
        """
        cache = self.makeCache()
        await cache.storeJob(jid(1), load(), ["a", "b", "c"])
        await cache.storeReturn(jid(1), "a", {"return": True, "retcode": 0, "success": True})
        self.clock.advance(2.5)
        await cache.storeReturn(
            jid(1),
            "b",
            {
                "return": {"out": "text", "raw": b"\x00\x01", "n": [1, 2.5]},
                "retcode": 1,
                "success": False,
                "fun": "ignored",
            },
        )
        await cache.storeReturn(jid(1), "c", {"return": "plain"})
        self.assertEqual(
            await cache.getReturns(jid(1)),
            {
                "a": {"return": True, "retcode": 0, "success": True, "time": NOW},
                "b": {
                    "return": {"out": "text", "raw": b"\x00\x01", "n": [1, 2.5]},
                    "retcode": 1,
                    "success": False,
                    "time": NOW + 2.5,
                },
                "c": {"return": "plain", "retcode": None, "success": None, "time": NOW + 2.5},
            },
        )

    async def test_unusualRetcodeAndSuccess(self) -> None:
        """
        A retcode that is not a 64-bit integer (a structure, a huge number, a
        string) and a success that is not a boolean are stored and read back
        unchanged rather than refused: they come from minions.
        """
        cache = self.makeCache()
        await cache.storeReturn(jid(1), "a", {"return": 1, "retcode": {"x": 2}, "success": "yes"})
        await cache.storeReturn(jid(1), "b", {"return": 1, "retcode": 2**63, "success": [1]})
        await cache.storeReturn(jid(1), "c", {"return": 1, "retcode": "254", "success": 0.5})
        returns = await cache.getReturns(jid(1))
        self.assertEqual(
            {m: (r["retcode"], r["success"]) for m, r in returns.items()},
            {"a": ({"x": 2}, "yes"), "b": (2**63, [1]), "c": ("254", 0.5)},
        )

    async def test_callerMayChangeItsDictsAfterwards(self) -> None:
        """
        Values are captured when C{storeJob} and C{storeReturn} are called,
        so changing the caller's dicts before the write commits changes
        nothing stored.
        """
        cache = self.makeCache()
        jobLoad = load(arg=["x"])
        minions = ["a"]
        ret = {"return": {"k": "v"}, "retcode": 0, "success": True}
        stored = gatherResults(
            [cache.storeJob(jid(1), jobLoad, minions), cache.storeReturn(jid(1), "a", ret)]
        )
        jobLoad["arg"].append("y")
        minions.append("b")
        ret["return"]["k"] = "changed"
        await stored
        job = await cache.getJob(jid(1))
        self.assertEqual((job["arg"], job["minions"]), (["x"], ["a"]))
        self.assertEqual((await cache.getReturns(jid(1)))["a"]["return"], {"k": "v"})

    async def test_readsSeeEarlierWrites(self) -> None:
        """
        Operations run in the order they are called: a read called right
        after a write, without waiting for it, sees it.
        """
        cache = self.makeCache()
        cache.storeJob(jid(1), load(), ["a"])
        cache.storeReturn(jid(1), "a", {"return": 1, "retcode": 0, "success": True})
        job, returns = await gatherResults([cache.getJob(jid(1)), cache.getReturns(jid(1))])
        self.assertEqual(job["minions"], ["a"])
        self.assertEqual(list(returns), ["a"])

    # The file -------------------------------------------------------------

    async def test_fileMode(self) -> None:
        """
        The database file, and the WAL journal next to it, are created with
        mode 0600 whatever the umask.
        """
        oldUmask = os.umask(0)
        self.addCleanup(os.umask, oldUmask)
        cache = self.makeCache()
        await cache.storeJob(jid(1), load(), ["a"])
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(self.path + "-wal").st_mode), 0o600)

    async def test_existingFileModeTightened(self) -> None:
        """
        An existing database file with a looser mode is set to 0600.
        """
        with open(self.path, "wb"):
            pass
        os.chmod(self.path, 0o644)
        await self.makeCache().whenOpen()
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)

    async def test_walJournal(self) -> None:
        """
        The database uses the WAL journal mode.
        """
        await self.makeCache().whenOpen()
        connection = sqlite3.connect(self.path)
        self.addCleanup(connection.close)
        self.assertEqual(connection.execute("PRAGMA journal_mode").fetchone()[0], "wal")

    async def test_schema(self) -> None:
        """
        The file has the tables C{jobs} and C{returns} with the documented
        columns, and indexes on the function, the start time and the minion
        id.
        """
        await self.makeCache().whenOpen()
        connection = sqlite3.connect(self.path)
        self.addCleanup(connection.close)

        def pragma(name: str, argument: str) -> list[tuple[Any, ...]]:
            # Table-valued pragma functions take their argument as a parameter.
            query = {
                "table_info": "SELECT * FROM pragma_table_info(?)",
                "index_list": "SELECT * FROM pragma_index_list(?)",
                "index_info": "SELECT * FROM pragma_index_info(?)",
            }[name]
            return connection.execute(query, (argument,)).fetchall()

        def columns(table: str) -> list[str]:
            return [row[1] for row in pragma("table_info", table)]

        def indexed(table: str) -> list[list[str]]:
            return [
                [row[2] for row in pragma("index_info", index[1])]
                for index in pragma("index_list", table)
            ]

        self.assertEqual(
            columns("jobs"),
            ["jid", "fun", "arg", "tgt", "tgt_type", "user", "minions", "start_time"],
        )
        self.assertEqual(columns("returns"), ["jid", "id", "return", "retcode", "success", "time"])
        self.assertIn(["fun"], indexed("jobs"))
        self.assertIn(["start_time"], indexed("jobs"))
        self.assertIn(["jid"], indexed("jobs"))
        self.assertIn(["id"], indexed("returns"))
        self.assertIn(["jid", "id"], indexed("returns"))

    async def test_symlinkRefused(self) -> None:
        """
        The cache does not open a database through a symbolic link; the
        failure is reported by C{whenOpen} and later operations fail.
        """
        target = self.mktemp()
        os.symlink(target, self.path)
        cache = self.makeCache()
        await self.assertFailure(cache.whenOpen(), OSError)
        await self.assertFailure(cache.getJob(jid(1)), JobCacheError)
        self.assertFalse(os.path.exists(target))
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)

    async def test_newerSchemaRefused(self) -> None:
        """
        A database whose schema version is newer than this code's is not
        touched: opening it fails with L{JobCacheError}.
        """
        connection = sqlite3.connect(self.path)
        connection.execute("PRAGMA user_version=99")
        connection.close()
        cache = self.makeCache()
        await self.assertFailure(cache.whenOpen(), JobCacheError)
        self.assertEqual(len(self.flushLoggedErrors(JobCacheError)), 1)

    async def test_reopenKeepsData(self) -> None:
        """
        After C{close}, a new cache on the same file has the jobs and returns
        stored before, and stores more.
        """
        cache = self.makeCache()
        await cache.storeJob(jid(1), load(), ["a"])
        await cache.storeReturn(jid(1), "a", {"return": "r", "retcode": 0, "success": True})
        await cache.close()
        again = self.makeCache()
        self.assertEqual((await again.getJob(jid(1)))["fun"], "test.ping")
        self.assertEqual((await again.getReturns(jid(1)))["a"]["return"], "r")
        await again.storeJob(jid(2), load(), ["a"])
        self.assertEqual(len(await again.listJobs()), 2)

    async def test_closeFinishesQueuedWork(self) -> None:
        """
        Writes called before C{close} are committed before the file is
        closed, even when C{close} is called without waiting for them.
        """
        cache = self.makeCache()
        writes = [
            cache.storeReturn(jid(1), f"m{i}", {"return": i, "retcode": 0, "success": True})
            for i in range(50)
        ]
        await cache.close()
        await gatherResults(writes)
        self.assertEqual(len(self.rows("returns")), 50)

    async def test_closedCacheRefuses(self) -> None:
        """
        Every operation called after C{close} fails with L{JobCacheClosed};
        closing again succeeds.
        """
        cache = self.makeCache()
        await cache.close()
        await cache.close()
        for d in [
            cache.storeJob(jid(1), load(), ["a"]),
            cache.storeReturn(jid(1), "a", {"return": 1}),
            cache.getJob(jid(1)),
            cache.getReturns(jid(1)),
            cache.listJobs(),
            cache.prune(0),
        ]:
            self.failureResultOf(d, JobCacheClosed)

    async def test_closedAtShutdown(self) -> None:
        """
        The cache registers a trigger before reactor shutdown that flushes
        queued writes and closes it; C{close} removes the trigger.
        """
        fakeReactor = _RecordingReactor()
        cache = SQLiteJobCache(self.path, fakeReactor, clock=self.clock)
        self.addCleanup(cache.close)
        [(phase, event, trigger)] = fakeReactor.triggers.values()
        self.assertEqual((phase, event), ("before", "shutdown"))
        stored = cache.storeJob(jid(1), load(), ["a"])
        await trigger()
        await stored
        self.assertEqual(len(self.rows("jobs")), 1)
        self.failureResultOf(cache.getJob(jid(1)), JobCacheClosed)

        fakeReactor.triggers.clear()
        other = SQLiteJobCache(self.mktemp(), fakeReactor, clock=self.clock)
        self.addCleanup(other.close)
        self.assertEqual(len(fakeReactor.triggers), 1)
        await other.close()
        self.assertEqual(fakeReactor.triggers, {})

    # Duplicates -------------------------------------------------------------

    async def test_duplicateReturnIgnored(self) -> None:
        """
        A second return for the same job and minion does not replace the
        first, whether it comes in a later transaction or in the same batch.
        """
        cache = self.makeCache()
        first = {"return": "real", "retcode": 0, "success": True}
        forged = {"return": "forged", "retcode": 1, "success": False}
        await cache.storeReturn(jid(1), "a", first)
        await cache.storeReturn(jid(1), "a", forged)
        # One call to keep the thread busy, then two duplicates that share
        # the next batch.
        await gatherResults(
            [
                cache.storeReturn(jid(2), "x", first),
                cache.storeReturn(jid(2), "b", first),
                cache.storeReturn(jid(2), "b", forged),
            ]
        )
        self.assertEqual((await cache.getReturns(jid(1)))["a"]["return"], "real")
        self.assertEqual((await cache.getReturns(jid(2)))["b"]["return"], "real")
        self.assertEqual(len(self.rows("returns")), 3)

    async def test_duplicateJobKeepsFirst(self) -> None:
        """
        Storing a job id a second time keeps the first job.
        """
        cache = self.makeCache()
        await cache.storeJob(jid(1), load("test.ping"), ["a"])
        await cache.storeJob(jid(1), load("cmd.run"), ["b"])
        job = await cache.getJob(jid(1))
        self.assertEqual((job["fun"], job["minions"]), ("test.ping", ["a"]))

    # Validation -----------------------------------------------------------

    def test_invalidJidRefusedBeforeAnyQuery(self) -> None:
        """
        Every operation refuses a jid that is not exactly 20 digits with a
        L{ValueError} naming it, at once: nothing is queued for the database
        thread.
        """
        cache = self.makeCache()
        for bad in INVALID_JIDS:
            for d in [
                cache.storeJob(bad, load(), ["a"]),
                cache.storeReturn(bad, "a", {"return": 1}),
                cache.getJob(bad),
                cache.getReturns(bad),
            ]:
                failure = self.failureResultOf(d, ValueError)
                self.assertIn(repr(bad), str(failure.value))
                self.assertIn("jid", str(failure.value))
        self.assertEqual((cache.transactionCount, cache.rowsWritten), (0, 0))

    async def test_invalidJidsStoreNothing(self) -> None:
        """
        After refusing invalid jids, the tables are empty and intact.
        """
        cache = self.makeCache()
        for bad in INVALID_JIDS:
            self.failureResultOf(cache.storeJob(bad, load(), ["a"]), ValueError)
        await cache.close()
        self.assertEqual((self.rows("jobs"), self.rows("returns")), ([], []))

    def test_invalidMinionIdRefused(self) -> None:
        """
        A minion id that is not valid (a path, empty, not a string) is
        refused, as a returning minion or in a job's minion list.
        """
        cache = self.makeCache()
        for bad in ["../etc", "", "a b", None, 5, ".hidden"]:
            self.failureResultOf(cache.storeReturn(jid(1), bad, {"return": 1}), ValueError)
            self.failureResultOf(cache.storeJob(jid(1), load(), ["ok", bad]), ValueError)
        self.failureResultOf(cache.storeJob(jid(1), load(), "abc"), ValueError)
        self.failureResultOf(cache.storeJob(jid(1), load(), 5), ValueError)

    def test_invalidLoadRefused(self) -> None:
        """
        A load that is not a dict, or whose C{fun} is not a string, and a
        return that is not a dict are refused.
        """
        cache = self.makeCache()
        self.failureResultOf(cache.storeJob(jid(1), ["fun"], ["a"]), ValueError)
        self.failureResultOf(cache.storeJob(jid(1), {"fun": 5}, ["a"]), ValueError)
        self.failureResultOf(cache.storeJob(jid(1), {"arg": []}, ["a"]), ValueError)
        self.failureResultOf(cache.storeReturn(jid(1), "a", "text"), ValueError)

    def test_unserialisableValueRefused(self) -> None:
        """
        A return value msgpack cannot encode is refused with
        L{SerialError} (a L{ValueError}) when C{storeReturn} is called.
        """
        cache = self.makeCache()
        self.failureResultOf(cache.storeReturn(jid(1), "a", {"return": {1, 2}}), SerialError)
        self.failureResultOf(cache.storeJob(jid(1), load(arg=[object()]), ["a"]), SerialError)

    async def test_sqlMetacharactersAreData(self) -> None:
        """
        Quotes, semicolons and comment markers in a function name, a target,
        a minion id and a search pattern are stored and matched as data.
        """
        cache = self.makeCache()
        sly = "x';DROP-TABLE-jobs;--"
        await cache.storeJob(jid(1), load(fun="a'b\";--", tgt=sly), [sly])
        await cache.storeReturn(jid(1), sly, {"return": sly, "retcode": 0, "success": True})
        self.assertEqual((await cache.getJob(jid(1)))["minions"], [sly])
        self.assertEqual((await cache.getReturns(jid(1)))[sly]["return"], sly)
        self.assertEqual(len(await cache.listJobs(searchFunction="a'b\";--")), 1)
        self.assertEqual(len(await cache.listJobs(searchTarget="x';*")), 1)
        self.assertEqual(await cache.listJobs(searchFunction="' OR 1=1 --"), [])

    # listJobs -------------------------------------------------------------

    async def storeJobs(self, cache: SQLiteJobCache, jobs: list[tuple[str, Any]]) -> None:
        """
        Store one job per C{(fun, tgt)}, numbered from 1, one second apart.
        """
        for n, (fun, tgt) in enumerate(jobs, 1):
            await cache.storeJob(jid(n), load(fun, tgt), ["a"])
            self.clock.advance(1)

    async def listed(self, cache: SQLiteJobCache, **kwargs: Any) -> list[str]:
        """
        @return: the jids C{listJobs(**kwargs)} lists, in its order.
        """
        return [job["jid"] for job in await cache.listJobs(**kwargs)]

    async def test_listJobsNewestFirst(self) -> None:
        """
        Without filters, C{listJobs} lists every job, newest first, each
        shaped like C{getJob}'s.
        """
        cache = self.makeCache()
        await self.storeJobs(cache, [("test.ping", "*")] * 3)
        jobs = await cache.listJobs()
        self.assertEqual([job["jid"] for job in jobs], [jid(3), jid(2), jid(1)])
        self.assertEqual(jobs[0], await cache.getJob(jid(3)))

    async def test_listJobsSearchFunction(self) -> None:
        """
        C{searchFunction} is Salt's: an C{fnmatch} glob, a list of globs, or
        a comma-separated string of globs; a job matches if its function
        matches any, case-sensitively.
        """
        cache = self.makeCache()
        await self.storeJobs(
            cache,
            [("test.ping", "*"), ("test.echo", "*"), ("cmd.run", "*"), ("pkg.install", "*")],
        )
        self.assertEqual(await self.listed(cache, searchFunction="test.*"), [jid(2), jid(1)])
        self.assertEqual(await self.listed(cache, searchFunction="cmd.run"), [jid(3)])
        self.assertEqual(
            await self.listed(cache, searchFunction=["test.p*", "pkg.install"]), [jid(4), jid(1)]
        )
        self.assertEqual(
            await self.listed(cache, searchFunction="test.e*, cmd.run"), [jid(3), jid(2)]
        )
        self.assertEqual(await self.listed(cache, searchFunction="[!t]*.*"), [jid(4), jid(3)])
        self.assertEqual(await self.listed(cache, searchFunction="test.pin?"), [jid(1)])
        self.assertEqual(await self.listed(cache, searchFunction="TEST.*"), [])
        self.assertEqual(await self.listed(cache, searchFunction="test"), [])
        # Salt treats an empty filter as no filter.
        self.assertEqual(len(await self.listed(cache, searchFunction="")), 4)
        self.assertEqual(len(await self.listed(cache, searchFunction=[])), 4)

    async def test_listJobsSearchTarget(self) -> None:
        """
        C{searchTarget} globs are matched against the job's target as Salt
        does: a string target as a whole, a list target element by element.
        """
        cache = self.makeCache()
        await self.storeJobs(
            cache, [("test.ping", "web*"), ("test.ping", ["db1", "db2"]), ("test.ping", "*")]
        )
        self.assertEqual(await self.listed(cache, searchTarget="web*"), [jid(1)])
        self.assertEqual(await self.listed(cache, searchTarget="db2"), [jid(2)])
        self.assertEqual(await self.listed(cache, searchTarget="db*,web*"), [jid(2), jid(1)])
        self.assertEqual(await self.listed(cache, searchTarget="[*]"), [jid(3)])
        self.assertEqual(await self.listed(cache, searchTarget="web1"), [])

    async def test_listJobsFiltersCombine(self) -> None:
        """
        A job is listed only when it matches every filter given.
        """
        cache = self.makeCache()
        await self.storeJobs(
            cache, [("test.ping", "web*"), ("cmd.run", "web*"), ("test.ping", "db*")]
        )
        self.assertEqual(
            await self.listed(cache, searchFunction="test.*", searchTarget="web*"), [jid(1)]
        )
        self.assertEqual(
            await self.listed(cache, searchFunction="test.*", startTime=NOW + 1), [jid(3)]
        )

    async def test_listJobsTimeRange(self) -> None:
        """
        C{startTime} and C{endTime} bound the jobs' start times, both ends
        included, as POSIX seconds or as datetimes.
        """
        cache = self.makeCache()
        await self.storeJobs(cache, [("test.ping", "*")] * 5)
        self.assertEqual(await self.listed(cache, startTime=NOW + 3), [jid(5), jid(4)])
        self.assertEqual(await self.listed(cache, endTime=NOW + 1), [jid(2), jid(1)])
        self.assertEqual(
            await self.listed(cache, startTime=NOW + 1, endTime=NOW + 3), [jid(4), jid(3), jid(2)]
        )
        self.assertEqual(
            await self.listed(
                cache,
                startTime=datetime.fromtimestamp(NOW + 2),
                endTime=datetime.fromtimestamp(NOW + 2),
            ),
            [jid(3)],
        )
        self.assertEqual(await self.listed(cache, startTime=NOW + 10), [])

    async def test_listJobsLimit(self) -> None:
        """
        C{limit} keeps the newest jobs that match; C{0} lists none.
        """
        cache = self.makeCache()
        await self.storeJobs(cache, [("test.ping", "*"), ("cmd.run", "*")] * 3)
        self.assertEqual(await self.listed(cache, limit=2), [jid(6), jid(5)])
        self.assertEqual(
            await self.listed(cache, limit=2, searchFunction="test.*"), [jid(5), jid(3)]
        )
        self.assertEqual(await self.listed(cache, limit=0), [])
        self.assertEqual(len(await self.listed(cache, limit=100)), 6)

    def test_listJobsInvalidArguments(self) -> None:
        """
        Arguments of the wrong type or range are refused with L{ValueError}
        at once.
        """
        cache = self.makeCache()
        for kwargs in [
            {"limit": -1},
            {"limit": "5"},
            {"limit": True},
            {"searchFunction": 5},
            {"searchFunction": ["ok", 5]},
            {"searchTarget": {"a": 1}},
            {"startTime": "yesterday"},
            {"endTime": True},
        ]:
            self.failureResultOf(cache.listJobs(**kwargs), ValueError)

    # Pruning --------------------------------------------------------------

    async def test_prune(self) -> None:
        """
        C{prune} removes the jobs that started more than the given seconds
        ago with their returns, keeps the others, and counts the rows removed
        from both tables.
        """
        cache = self.makeCache()
        await cache.storeJob(jid(1), load(), ["a", "b"])
        await cache.storeReturn(jid(1), "a", {"return": 1})
        await cache.storeReturn(jid(1), "b", {"return": 1})
        self.clock.advance(3600)
        await cache.storeJob(jid(2), load(), ["a"])
        await cache.storeReturn(jid(2), "a", {"return": 2})
        self.clock.advance(1800)
        self.assertEqual(await cache.prune(3600), 3)
        self.assertIsNone(await cache.getJob(jid(1)))
        self.assertEqual(await cache.getReturns(jid(1)), {})
        self.assertIsNotNone(await cache.getJob(jid(2)))
        self.assertEqual(list(await cache.getReturns(jid(2))), ["a"])
        self.assertEqual(await cache.prune(3600), 0)

    async def test_pruneReturnsWithoutJob(self) -> None:
        """
        A return with no job is pruned once its jid (a timestamp) is older
        than the cutoff; a newer one is kept.
        """
        cache = self.makeCache()
        old, recent = "20200101000000000000", "20991231235959000000"
        await cache.storeReturn(old, "a", {"return": 1})
        await cache.storeReturn(recent, "a", {"return": 1})
        self.assertEqual(await cache.prune(3600), 1)
        self.assertEqual(await cache.getReturns(old), {})
        self.assertEqual(list(await cache.getReturns(recent)), ["a"])

    def test_pruneInvalidArgument(self) -> None:
        """
        C{prune} refuses a negative or non-numeric age.
        """
        cache = self.makeCache()
        for bad in [-1, "1", None, True]:
            self.failureResultOf(cache.prune(bad), ValueError)

    async def test_startPruning(self) -> None:
        """
        C{startPruning} prunes jobs older than C{keepJobsHours} at once, then
        every hour of the clock.
        """
        cache = self.makeCache(keepJobsHours=1)
        await cache.storeJob(jid(1), load(), ["a"])
        self.clock.advance(7200)
        await cache.storeJob(jid(2), load(), ["a"])
        cache.startPruning()
        self.assertIsNone(await cache.getJob(jid(1)))
        self.assertIsNotNone(await cache.getJob(jid(2)))
        # The next prune, an hour later, finds job 2 exactly one hour old.
        self.clock.advance(3600)
        self.assertIsNotNone(await cache.getJob(jid(2)))
        # Another hour: job 2 is now two hours old.
        self.clock.advance(3600)
        self.assertIsNone(await cache.getJob(jid(2)))

    async def test_keepJobsZeroKeepsForever(self) -> None:
        """
        With C{keepJobsHours=0} (Salt's C{keep_jobs: 0}), C{startPruning}
        schedules nothing and old jobs stay.
        """
        cache = self.makeCache(keepJobsHours=0)
        await cache.storeJob(jid(1), load(), ["a"])
        cache.startPruning()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.advance(10 * 365 * 86400)
        self.assertIsNotNone(await cache.getJob(jid(1)))

    async def test_closeStopsPruning(self) -> None:
        """
        C{close} stops the pruning schedule.
        """
        cache = self.makeCache(keepJobsHours=1)
        cache.startPruning()
        await cache.whenOpen()
        await cache.getJob(jid(1))
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        await cache.close()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    # Batching and size ----------------------------------------------------

    async def test_concurrentReturnsAreBatched(self) -> None:
        """
        Many C{storeReturn} calls made while a batch is being written are
        written together: far fewer transactions than calls, and every call's
        L{Deferred} fires once its return is committed.
        """
        cache = self.makeCache()
        await cache.whenOpen()
        before = cache.transactionCount
        calls = 500
        results = await gatherResults(
            [
                cache.storeReturn(jid(1), f"m{i}", {"return": i, "retcode": 0, "success": True})
                for i in range(calls)
            ]
        )
        self.assertEqual(results, [None] * calls)
        self.assertLessEqual(cache.transactionCount - before, 2)
        self.assertEqual(cache.rowsWritten, calls)
        self.assertEqual(len(await cache.getReturns(jid(1))), calls)

    async def test_failedBatchFailsItsCalls(self) -> None:
        """
        When a write transaction fails, every call in its batch fails with
        the error, nothing of the batch is stored, and the cache goes on.
        """
        cache = self.makeCache()
        await cache.whenOpen()
        connection = sqlite3.connect(self.path)
        connection.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON returns WHEN NEW.id = 'bad'"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        connection.close()
        # The first call keeps the thread busy; the next two share a batch.
        first = cache.storeReturn(jid(1), "first", {"return": 1})
        good = cache.storeReturn(jid(1), "good", {"return": 1})
        bad = cache.storeReturn(jid(1), "bad", {"return": 1})
        await first
        await self.assertFailure(good, sqlite3.IntegrityError)
        await self.assertFailure(bad, sqlite3.IntegrityError)
        await cache.storeReturn(jid(1), "later", {"return": 1})
        self.assertEqual(sorted(await cache.getReturns(jid(1))), ["first", "later"])

    async def test_largeReturn(self) -> None:
        """
        A 50 MB return is stored and read back intact.
        """
        cache = self.makeCache()
        big = os.urandom(1024) * (50 * 1024)
        await cache.storeReturn(jid(1), "a", {"return": big, "retcode": 0, "success": True})
        returned = (await cache.getReturns(jid(1)))["a"]["return"]
        self.assertEqual(len(returned), 50 * 1024 * 1024)
        self.assertTrue(returned == big)


class _HeldBackend(BatchingJobCache):
    """
    A L{BatchingJobCache} whose operations are recorded and end when the
    test says so: C{calls} holds C{(operation, args, Deferred)}.
    """

    def _startBackend(self) -> Deferred[None]:
        self.calls: list[tuple[str, tuple[Any, ...], Deferred[Any]]] = []
        return succeed(None)

    def _run(self, operation: str, *args: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.calls.append((operation, args, d))
        return d

    def _stopBackend(self) -> None:
        pass

    def batches(self) -> list[tuple[int, int]]:
        """
        @return: the jobs and returns of each C{writeBatch} so far.
        """
        return [(len(a[0]), len(a[1])) for op, a, _ in self.calls if op == "writeBatch"]

    def finish(self) -> None:
        """
        End the operation in progress.
        """
        [d] = [d for _, _, d in self.calls if not d.called]
        d.callback(None)


class QueueBoundTests(SynchronousTestCase):
    """
    The writes waiting for a batch are bounded in number and bytes: past
    that a write fails at once with L{JobCacheQueueFull} (a database that
    hangs does not grow the master without end).
    """

    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.reactor.advance(NOW)
        self.cache = _HeldBackend("unused", self.reactor)
        self.queue = self.cache._operations

    def store(self, minionId: str, value: Any = True) -> Deferred[None]:
        return self.cache.storeReturn(jid(1), minionId, {"return": value})

    def test_defaults(self) -> None:
        """
        By default at most L{MAX_QUEUED_ROWS} writes and
        L{MAX_QUEUED_BYTES} bytes wait.
        """
        self.assertEqual(
            (self.queue.maxQueuedRows, self.queue.maxQueuedBytes, self.queue.maxQueuedCalls),
            (MAX_QUEUED_ROWS, MAX_QUEUED_BYTES, MAX_QUEUED_CALLS),
        )

    def test_callsBounded(self) -> None:
        """
        Past C{maxQueuedCalls} other operations waiting (reads, a new job's
        reservation; the one in progress not counted), such an operation
        fails at once saying so; a flush and the close are still taken.
        Once one waiting starts, operations are taken again.
        """
        self.queue.maxQueuedCalls = 2
        inFlight = self.cache.getJob(jid(1))
        waiting = [self.cache.getJob(jid(2)), self.cache.getReturns(jid(3))]
        refused = self.cache.getJob(jid(4))
        message = str(self.failureResultOf(refused, JobCacheQueueFull).value)
        self.assertIn("2 operations wait already, at most 2 (getJob refused)", message)
        flushed = self.cache.flush()
        self.assertNoResult(flushed)
        self.assertEqual([op for op, _, _ in self.cache.calls], ["getJob"])
        self.cache.finish()
        self.successResultOf(inFlight)
        self.assertEqual(self.queue.queuedOperations, 1)
        taken = self.cache.getJob(jid(4))
        self.assertNoResult(taken)
        self.cache.finish()
        self.cache.finish()
        self.cache.finish()
        for d in [*waiting, taken, flushed]:
            self.successResultOf(d)
        self.assertEqual(self.queue.queuedOperations, 0)

    def test_rowsBounded(self) -> None:
        """
        Past C{maxQueuedRows} writes waiting (the batch being written is
        not counted), a write fails at once saying so; once the batch ends
        and the waiting writes start, writes are taken again.
        """
        self.queue.maxQueuedRows = 3
        inFlight = self.store("m0")
        waiting = [self.store(f"m{i}") for i in range(1, 4)]
        refused = self.store("m4")
        message = str(self.failureResultOf(refused, JobCacheQueueFull).value)
        self.assertIn("3 writes", message)
        self.assertEqual(self.cache.batches(), [(0, 1)])
        self.cache.finish()
        self.successResultOf(inFlight)
        self.reactor.advance(WRITE_INTERVAL)
        self.assertEqual(self.cache.batches(), [(0, 1), (0, 3)])
        self.assertEqual((self.queue.queuedRows, self.queue.queuedBytes), (0, 0))
        taken = self.store("m4")
        self.cache.finish()
        for d in waiting:
            self.successResultOf(d)
        self.assertNoResult(taken)

    def test_bytesBounded(self) -> None:
        """
        Past C{maxQueuedBytes} waiting, a write fails at once; a single
        write is taken whatever its size when none waits.
        """
        self.queue.maxQueuedBytes = 100
        self.store("m0")
        big = self.store("m1", "x" * 500)
        self.assertNoResult(big)
        self.failureResultOf(self.store("m2", "x" * 10), JobCacheQueueFull)
        self.assertEqual(self.queue.queuedRows, 1)


class WriteIntervalTests(SynchronousTestCase):
    """
    While writes keep coming, a write batch starts at most every
    C{writeInterval} seconds of the reactor (L{WRITE_INTERVAL} by default
    on a reactor that can schedule calls), so a job's returns share a
    transaction; reads, flushes and the close never wait for it.
    """

    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.reactor.advance(NOW)
        self.cache = _HeldBackend("unused", self.reactor)

    def store(self, n: int) -> list[Deferred[None]]:
        """
        Store C{n} returns of one job.
        """
        return [self.cache.storeReturn(jid(1), f"m{i}", {"return": True}) for i in range(n)]

    def test_defaultInterval(self) -> None:
        """
        On a reactor providing C{IReactorTime} the interval is
        L{WRITE_INTERVAL}; on one that does not (tests' fakes) it is 0.
        """
        self.assertEqual(self.cache._operations.writeInterval, WRITE_INTERVAL)
        self.assertEqual(_HeldBackend("unused", _RecordingReactor())._operations.writeInterval, 0)

    def test_firstWriteAtOnce(self) -> None:
        """
        A write after a quiet spell starts a batch at once.
        """
        self.store(1)
        self.assertEqual(self.cache.batches(), [(0, 1)])

    def test_followingWritesShareABatch(self) -> None:
        """
        The writes that come within C{writeInterval} of the last batch's
        start wait for it, then go in one batch; their L{Deferred}s fire
        when it commits.
        """
        self.store(1)
        self.cache.finish()
        results = self.store(20)
        self.reactor.advance(WRITE_INTERVAL / 2)
        self.assertEqual(self.cache.batches(), [(0, 1)])
        self.assertNoResult(results[0])
        self.reactor.advance(WRITE_INTERVAL / 2)
        self.assertEqual(self.cache.batches(), [(0, 1), (0, 20)])
        self.cache.finish()
        for d in results:
            self.assertIsNone(self.successResultOf(d))
        self.assertEqual(self.cache.rowsWritten, 21)

    def test_writesAfterTheIntervalAtOnce(self) -> None:
        """
        A write that comes when C{writeInterval} has passed since the last
        batch started goes at once.
        """
        self.store(1)
        self.cache.finish()
        self.reactor.advance(WRITE_INTERVAL)
        self.store(1)
        self.assertEqual(self.cache.batches(), [(0, 1), (0, 1)])

    def test_readDoesNotWait(self) -> None:
        """
        A read queued behind writes held back starts them at once (it must
        see them), then runs, and leaves no delayed call behind.
        """
        self.store(1)
        self.cache.finish()
        self.store(3)
        read = self.cache.getReturns(jid(1))
        self.assertEqual(self.cache.batches(), [(0, 1), (0, 3)])
        self.cache.finish()
        self.assertEqual([op for op, _, _ in self.cache.calls][-1], "getReturns")
        self.assertNoResult(read)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_flushDoesNotWait(self) -> None:
        """
        L{BatchingJobCache.flush} starts the writes held back at once and
        fires once they are written.
        """
        self.store(1)
        self.cache.finish()
        self.store(2)
        flushed = self.cache.flush()
        self.assertEqual(self.cache.batches(), [(0, 1), (0, 2)])
        self.assertNoResult(flushed)
        self.cache.finish()
        self.successResultOf(flushed)

    def test_closeDoesNotWait(self) -> None:
        """
        Closing writes what is held back at once, then closes.
        """
        self.store(1)
        self.cache.finish()
        stored = self.store(2)
        closed = self.cache.close()
        self.assertEqual(self.cache.batches(), [(0, 1), (0, 2)])
        self.cache.finish()
        self.cache.finish()
        self.successResultOf(closed)
        for d in stored:
            self.successResultOf(d)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_fullBatchDoesNotWait(self) -> None:
        """
        A full batch's worth of writes (L{MAX_BATCH_ROWS}) goes at once.
        """
        self.store(1)
        self.cache.finish()
        self.store(MAX_BATCH_ROWS)
        self.assertEqual(self.cache.batches(), [(0, 1), (0, MAX_BATCH_ROWS)])

    def test_zeroInterval(self) -> None:
        """
        With C{writeInterval=0} every batch starts as soon as the previous
        one ended, as before.
        """
        cache = _HeldBackend("unused", self.reactor, writeInterval=0)
        cache.storeReturn(jid(1), "a", {"return": 1})
        cache.finish()
        cache.storeReturn(jid(1), "b", {"return": 1})
        self.assertEqual(cache.batches(), [(0, 1), (0, 1)])
        self.assertEqual(self.reactor.getDelayedCalls(), [])
