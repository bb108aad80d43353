# -*- test-case-name: tests.test_runners_jobs -*-
"""
Tests for L{salttwist.runners.jobs}, the C{jobs.*} runners.

Jobs are published and returned through a real L{Master} (in-memory key
store, L{runSynchronously}, a L{Clock}) whose job cache is L{FakeJobCache}:
an in-memory L{IJobCache} that answers at once and records how it was
asked. The runners are called as C{salttwist-run} calls them, through
L{Master.clientRunner} with Salt's wire arguments.
"""

from __future__ import annotations

import copy
import fnmatch
import os
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyClass

from salttwist import crypt
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.interfaces import IJobCache
from salttwist.jid import JidGenerator, isJid
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.minion.jobs import RunningJob
from salttwist.pki.keystore import ACCEPTED, InMemoryKeyStore
from salttwist.runners import RunnerContext, jobs

MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINIONS = ("minion1", "minion2", "minion3")
#: When the test jobs are published: every jid the master makes is this time,
#: bumped by a microsecond per jid.
PUBLISHED = datetime(2026, 11, 22, 1, 2, 3, 456789)
FIRST_JID = "20261122010203456789"


@implementer(IJobCache)
class FakeJobCache:
    """
    An in-memory job cache that answers at once.

    @ivar listCalls: the arguments of every C{listJobs} call.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.jobs: dict[str, dict[str, Any]] = {}
        self.returns: dict[str, dict[str, dict[str, Any]]] = {}
        self.listCalls: list[dict[str, Any]] = []

    def storeJob(self, jid: str, load: dict[str, Any], minions: Any) -> Deferred[None]:
        """
        Keep the job (the first one stored under a jid).
        """
        self.jobs.setdefault(
            jid,
            {
                "jid": jid,
                "fun": load["fun"],
                "arg": copy.deepcopy(load.get("arg", [])),
                "tgt": load.get("tgt"),
                "tgt_type": load.get("tgt_type"),
                "user": load.get("user"),
                "minions": list(minions),
                "start_time": float(self.clock.seconds()),
            },
        )
        return succeed(None)

    def storeReturn(self, jid: str, minionId: str, ret: dict[str, Any]) -> Deferred[None]:
        """
        Keep the first return of a minion for a job.
        """
        self.returns.setdefault(jid, {}).setdefault(
            minionId,
            {
                "return": copy.deepcopy(ret.get("return")),
                "retcode": ret.get("retcode"),
                "success": ret.get("success"),
                "time": float(self.clock.seconds()),
            },
        )
        return succeed(None)

    def getJob(self, jid: str) -> Deferred[dict[str, Any] | None]:
        """
        The job, or L{None}; an invalid jid fails as in the real cache.
        """
        if not isJid(jid):
            return fail(ValueError(f"invalid jid {jid!r}"))
        return succeed(copy.deepcopy(self.jobs.get(jid)))

    def getReturns(self, jid: str) -> Deferred[dict[str, dict[str, Any]]]:
        """
        The returns of a job by minion id.
        """
        if not isJid(jid):
            return fail(ValueError(f"invalid jid {jid!r}"))
        return succeed(copy.deepcopy(self.returns.get(jid, {})))

    def listJobs(
        self,
        searchFunction: Any = None,
        searchTarget: Any = None,
        startTime: Any = None,
        endTime: Any = None,
        limit: int | None = None,
    ) -> Deferred[list[dict[str, Any]]]:
        """
        Record the call, then filter as L{IJobCache.listJobs} says: globs
        (split at commas) on the function and target, bounds on the start
        time; newest first.
        """
        self.listCalls.append(
            {
                "searchFunction": searchFunction,
                "searchTarget": searchTarget,
                "startTime": startTime,
                "endTime": endTime,
                "limit": limit,
            }
        )

        def patterns(value: Any) -> list[str] | None:
            if not value:
                return None
            if isinstance(value, str):
                return [part.strip() for part in value.split(",")]
            return list(value)

        def seconds(value: Any) -> float | None:
            if value is None:
                return None
            return value.timestamp() if isinstance(value, datetime) else float(value)

        functions, targets = patterns(searchFunction), patterns(searchTarget)
        start, end = seconds(startTime), seconds(endTime)
        listed = []
        for job in sorted(
            self.jobs.values(), key=lambda j: (j["start_time"], j["jid"]), reverse=True
        ):
            tgts = job["tgt"] if isinstance(job["tgt"], list) else [job["tgt"]]
            if functions and not any(fnmatch.fnmatchcase(job["fun"], p) for p in functions):
                continue
            if targets and not any(
                isinstance(t, str) and fnmatch.fnmatchcase(t, p) for t in tgts for p in targets
            ):
                continue
            if start is not None and job["start_time"] < start:
                continue
            if end is not None and job["start_time"] > end:
                continue
            listed.append(copy.deepcopy(job))
        return succeed(listed[:limit] if limit is not None else listed)

    def prune(self, olderThanSeconds: float) -> Deferred[int]:
        """
        Remove nothing.
        """
        return succeed(0)

    def close(self) -> Deferred[None]:
        """
        Nothing to release.
        """
        return succeed(None)


verifyClass(IJobCache, FakeJobCache)


class FakeSubscriber:
    """
    A minion's pub connection, as much as the master and the runners use.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", host, 40000))
        self.frames: list[Any] = []
        self.publicationMac = crypt.HmacSha256(os.urandom(32))

    def sendString(self, data: bytes) -> None:
        """
        Keep a publication.
        """
        self.frames.append(data)

    def sendFrame(self, message: dict[str, Any]) -> None:
        """
        Keep a frame (a rotated publication key).
        """
        self.frames.append(message)


class FakeSession:
    """
    A minion's req session, as much as L{Master.minionReturn} uses.
    """

    def __init__(self, minionId: str) -> None:
        self.minionId = minionId


def makeMaster(
    testCase: SynchronousTestCase,
    keyStore: InMemoryKeyStore | None = None,
    runBlocking: Any = runSynchronously,
    jobCache: Any = None,
    withJobCache: bool = True,
    **overrides: Any,
) -> Master:
    """
    A master on a L{Clock} set to L{PUBLISHED}, with C{MINIONS} accepted,
    jids starting at L{FIRST_JID} and a L{FakeJobCache} (unless
    C{withJobCache} is false).
    """
    root = os.path.abspath(testCase.mktemp())
    config = loadMasterConfig(root, overrides={"root_dir": root, **overrides})
    if keyStore is None:
        keyStore = InMemoryKeyStore()
    for minionId in MINIONS:
        keyStore.putKey(ACCEPTED, minionId, MASTER_PEM)
    clock = Clock()
    clock.advance(PUBLISHED.timestamp())
    if withJobCache and jobCache is None:
        jobCache = FakeJobCache(clock)
    master = Master(
        config,
        MasterKeys(MASTER_KEY, MASTER_PEM, b"r" * 32),
        keyStore,
        LocalEventBus(),
        runBlocking,
        clock,
        jobCache=jobCache if withJobCache else None,
    )
    master.jids = JidGenerator(now=lambda: PUBLISHED)
    return master


def wireArgs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """
    Salt's wire form of C{args} and C{kwargs}.
    """
    return [*args, dict(kwargs, __kwarg__=True)] if kwargs else list(args)


class RunnerTestCase(SynchronousTestCase):
    """
    A master with three accepted minions and a job cache, and helpers to
    publish, return and run runners.
    """

    def setUp(self) -> None:
        """
        Build the master.
        """
        self.master = makeMaster(self)
        self.cache = self.master.jobCache

    def publish(self, fun: str, arg: list[Any] | None = None, tgt: Any = "*", **load: Any) -> str:
        """
        Publish a job as the local client does.

        @return: its jid.
        """
        reply = self.successResultOf(
            self.master.clientPublish(
                None,  # type: ignore[arg-type]
                {"fun": fun, "arg": arg or [], "tgt": tgt, "user": "alice", **load},
            )
        )
        return reply["jid"]

    def returnFrom(
        self, minionId: str, jid: str, value: Any, retcode: int = 0, success: bool = True
    ) -> None:
        """
        Deliver C{minionId}'s return for C{jid} as its session does.
        """
        self.master.minionReturn(
            FakeSession(minionId),  # type: ignore[arg-type]
            {"id": minionId, "jid": jid, "return": value, "retcode": retcode, "success": success},
        )

    def run_(self, fun: str, *args: Any, **kwargs: Any) -> Any:
        """
        Run a runner as C{salttwist-run} does.

        @return: its return.
        """
        reply = self.successResultOf(
            self.master.clientRunner(
                None,  # type: ignore[arg-type]
                {"fun": fun, "arg": wireArgs(args, kwargs)},
            )
        )
        return reply["return"]

    def runFails(self, fun: str, *args: Any, **kwargs: Any) -> str:
        """
        Run a runner that fails with L{ValueError}, which the req server
        sends to the client.

        @return: the error message.
        """
        d = self.master.clientRunner(
            None,  # type: ignore[arg-type]
            {"fun": fun, "arg": wireArgs(args, kwargs)},
        )
        return str(self.failureResultOf(d, ValueError).value)


class JidToTimeTests(SynchronousTestCase):
    """
    L{jobs._jidToTime} is Salt's C{jid_to_time}.
    """

    def test_format(self) -> None:
        """
        A jid reads as C{YYYY, Mon DD HH:MM:SS.ffffff}, English month names.
        """
        self.assertEqual(jobs._jidToTime(FIRST_JID), "2026, Nov 22 01:02:03.456789")
        self.assertEqual(jobs._jidToTime("20150316190000000001"), "2015, Mar 16 19:00:00.000001")

    def test_notAJid(self) -> None:
        """
        Anything else, including a month out of range, is the empty string.
        """
        for value in ("", "2015", "2015031619000000000x", "20151316190000000000"):
            self.assertEqual(jobs._jidToTime(value), "", value)


class ListJobsTests(RunnerTestCase):
    """
    C{jobs.list_jobs} lists the cached jobs in Salt's shape.
    """

    def test_shape(self) -> None:
        """
        Each job is listed under its jid with Salt's keys, oldest first; the
        target minions are not part of a listing.
        """
        ping = self.publish("test.ping")
        run = self.publish("cmd.run", ["echo hi", {"__kwarg__": True, "cwd": "/"}], "minion1")
        listed = self.run_("jobs.list_jobs")
        self.assertEqual(list(listed), [ping, run])
        self.assertEqual(
            listed,
            {
                ping: {
                    "Function": "test.ping",
                    "Arguments": [],
                    "Target": "*",
                    "Target-type": "glob",
                    "User": "alice",
                    "StartTime": "2026, Nov 22 01:02:03.456789",
                },
                run: {
                    "Function": "cmd.run",
                    "Arguments": ["echo hi", {"__kwarg__": True, "cwd": "/"}],
                    "Target": "minion1",
                    "Target-type": "glob",
                    "User": "alice",
                    "StartTime": "2026, Nov 22 01:02:03.456790",
                },
            },
        )

    def test_empty(self) -> None:
        """
        With no jobs cached the listing is empty.
        """
        self.assertEqual(self.run_("jobs.list_jobs"), {})

    def test_searchFunctionAndTarget(self) -> None:
        """
        C{search_function} and C{search_target} go to the cache as given;
        only the jobs matching both are listed.
        """
        self.publish("test.ping")
        echo = self.publish("test.echo", ["x"], "minion1")
        self.publish("cmd.run", ["ls"], "minion1")
        listed = self.run_("jobs.list_jobs", search_function="test.*", search_target="minion*")
        self.assertEqual(list(listed), [echo])
        self.assertEqual(self.cache.listCalls[-1]["searchFunction"], "test.*")
        self.assertEqual(self.cache.listCalls[-1]["searchTarget"], "minion*")

    def test_searchLists(self) -> None:
        """
        Lists of patterns are passed on as lists; a number the command line
        made of a pattern is its text again.
        """
        self.run_("jobs.list_jobs", search_function=["test.*", "cmd.run"], search_target=42)
        self.assertEqual(self.cache.listCalls[-1]["searchFunction"], ["test.*", "cmd.run"])
        self.assertEqual(self.cache.listCalls[-1]["searchTarget"], "42")

    def test_startAndEndTime(self) -> None:
        """
        C{start_time} and C{end_time} in Salt's format (seconds optional),
        ISO 8601, as a jid or as POSIX seconds are given to the cache as
        times; the bounds are inclusive.
        """
        jid = self.publish("test.ping")
        self.assertEqual(jid, FIRST_JID)
        cases = [
            ("2026, Nov 22 01:02", datetime(2026, 11, 22, 1, 2)),
            ("2026, nov 22 01:02:03.5", datetime(2026, 11, 22, 1, 2, 3, 500000)),
            ("2026, Nov 22", datetime(2026, 11, 22)),
            ("2026-11-22 01:02:03", datetime(2026, 11, 22, 1, 2, 3)),
            ("2026-11-22T01:02", datetime(2026, 11, 22, 1, 2)),
            (FIRST_JID, PUBLISHED),
            (int(FIRST_JID), PUBLISHED),
            (1700000000, 1700000000.0),
            (1700000000.5, 1700000000.5),
        ]
        for given, expected in cases:
            self.run_("jobs.list_jobs", start_time=given, end_time=given)
            call = self.cache.listCalls[-1]
            self.assertEqual((call["startTime"], call["endTime"]), (expected, expected), given)
        listed = self.run_("jobs.list_jobs", start_time=jid, end_time=jid)
        self.assertEqual(list(listed), [jid])
        self.assertEqual(self.run_("jobs.list_jobs", start_time="2026-11-22 01:02:04"), {})
        self.assertEqual(self.run_("jobs.list_jobs", end_time="2026, Nov 22 01:02:03"), {})

    def test_timeZone(self) -> None:
        """
        An ISO 8601 time with a zone keeps it.
        """
        self.run_("jobs.list_jobs", start_time="2026-11-22T01:02:03+00:00")
        start = self.cache.listCalls[-1]["startTime"]
        self.assertEqual(
            start.timestamp(), datetime.fromisoformat("2026-11-22T01:02:03Z").timestamp()
        )

    def test_badTimes(self) -> None:
        """
        A time that cannot be read fails the runner with a message naming
        the argument and the formats it takes.
        """
        for value in ("yesterday", "2026, Foo 22 01:02", "2026, Feb 30 01:02", True):
            message = self.runFails("jobs.list_jobs", start_time=value)
            self.assertIn("start_time", message)
        self.assertIn("ISO 8601", self.runFails("jobs.list_jobs", end_time="soon"))

    def test_searchMetadata(self) -> None:
        """
        A job's C{metadata=} keyword argument is its C{Metadata}, and
        C{search_metadata} keeps the jobs where any of its pairs matches.
        """
        tagged = self.publish("test.ping", [{"__kwarg__": True, "metadata": {"ticket": 7}}])
        self.publish("test.ping")
        listed = self.run_("jobs.list_jobs")
        self.assertEqual(listed[tagged]["Metadata"], {"ticket": 7})
        matched = self.run_("jobs.list_jobs", search_metadata={"ticket": 7, "other": 1})
        self.assertEqual(list(matched), [tagged])
        self.assertEqual(self.run_("jobs.list_jobs", search_metadata={"ticket": 8}), {})
        self.assertIn("search_metadata", self.runFails("jobs.list_jobs", search_metadata="x"))


class LookupJidTests(RunnerTestCase):
    """
    C{jobs.lookup_jid} gives each minion's return by minion id.
    """

    def test_returns(self) -> None:
        """
        The returns of the minions that returned, by id.
        """
        jid = self.publish("test.ping", tgt="minion[12]")
        self.returnFrom("minion1", jid, True)
        self.returnFrom("minion2", jid, {"nested": [1, 2]})
        self.assertEqual(
            self.run_("jobs.lookup_jid", jid), {"minion1": True, "minion2": {"nested": [1, 2]}}
        )

    def test_jidAsNumber(self) -> None:
        """
        The command line reads a jid as a number; it is looked up all the
        same.
        """
        jid = self.publish("test.ping", tgt="minion1")
        self.returnFrom("minion1", jid, True)
        self.assertEqual(self.run_("jobs.lookup_jid", int(jid)), {"minion1": True})

    def test_missing(self) -> None:
        """
        C{missing=True} adds the targeted minions that did not return;
        C{returned=False} leaves out the ones that did.
        """
        jid = self.publish("test.ping")
        self.returnFrom("minion2", jid, True)
        self.assertEqual(
            self.run_("jobs.lookup_jid", jid, missing=True),
            {
                "minion2": True,
                "minion1": "Minion did not return",
                "minion3": "Minion did not return",
            },
        )
        self.assertEqual(
            self.run_("jobs.lookup_jid", jid, returned=False, missing=True),
            {"minion1": "Minion did not return", "minion3": "Minion did not return"},
        )

    def test_unknown(self) -> None:
        """
        An unknown jid has no returns, as in Salt.
        """
        self.assertEqual(self.run_("jobs.lookup_jid", "20000101000000000000"), {})

    def test_invalid(self) -> None:
        """
        A value that is not a jid fails with a message saying so.
        """
        self.assertIn("invalid jid 'abc'", self.runFails("jobs.lookup_jid", "abc"))
        self.assertIn("invalid jid '123'", self.runFails("jobs.lookup_jid", 123))

    def test_noJobCache(self) -> None:
        """
        A master without a job cache says so.
        """
        self.master = makeMaster(self, withJobCache=False)
        self.assertEqual(self.runFails("jobs.lookup_jid", FIRST_JID), "the master has no job cache")

    def test_missingArgument(self) -> None:
        """
        Without a jid the runner reports invalid arguments.
        """
        self.assertIn(
            "Passed invalid arguments to jobs.lookup_jid", self.runFails("jobs.lookup_jid")
        )


class PrintJobTests(RunnerTestCase):
    """
    C{jobs.list_job} and C{jobs.print_job} show one job with its returns.
    """

    def test_printJob(self) -> None:
        """
        C{print_job} keys the job by jid: Salt's job keys, the targeted
        minions and each return with its retcode and success.
        """
        jid = self.publish("test.retcode", [3], "minion[12]")
        self.returnFrom("minion1", jid, True, retcode=3, success=False)
        self.assertEqual(
            self.run_("jobs.print_job", jid),
            {
                jid: {
                    "Function": "test.retcode",
                    "Arguments": [3],
                    "Target": "minion[12]",
                    "Target-type": "glob",
                    "User": "alice",
                    "Minions": ["minion1", "minion2"],
                    "StartTime": "2026, Nov 22 01:02:03.456789",
                    "Result": {"minion1": {"return": True, "retcode": 3, "success": False}},
                }
            },
        )

    def test_listJob(self) -> None:
        """
        C{list_job} has the same content with the jid as a key of its own.
        """
        jid = self.publish("test.ping", tgt="minion1")
        self.returnFrom("minion1", jid, True)
        listed = self.run_("jobs.list_job", jid)
        self.assertEqual(listed["jid"], jid)
        self.assertEqual(listed["Minions"], ["minion1"])
        self.assertEqual(
            listed["Result"], {"minion1": {"return": True, "retcode": 0, "success": True}}
        )

    def test_unknown(self) -> None:
        """
        An unknown jid gives Salt's error entry, its start time and no
        result.
        """
        jid = "20150316190000000001"
        self.assertEqual(
            self.run_("jobs.print_job", jid),
            {
                jid: {
                    "Error": "Cannot contact returner or no job with this jid",
                    "StartTime": "2015, Mar 16 19:00:00.000001",
                    "Result": {},
                }
            },
        )


class ExitSuccessTests(RunnerTestCase):
    """
    C{jobs.exit_success} tells, per minion, whether the job succeeded.
    """

    def test_exitSuccess(self) -> None:
        """
        A minion that returned a true value succeeded; one that returned a
        false value or did not return did not (Salt's test is the return).
        """
        jid = self.publish("test.echo", ["x"])
        self.returnFrom("minion1", jid, "x")
        self.returnFrom("minion2", jid, "")
        self.assertEqual(
            self.run_("jobs.exit_success", jid),
            {"minion1": True, "minion2": False, "minion3": False},
        )

    def test_unknown(self) -> None:
        """
        An unknown jid has no minions.
        """
        self.assertEqual(self.run_("jobs.exit_success", "20000101000000000000"), {})


class ActiveTests(RunnerTestCase):
    """
    C{jobs.active} asks every minion with C{saltutil.running} and lists the
    jobs the connected ones report running.
    """

    def setUp(self) -> None:
        """
        Connect minion1 and minion2; minion3 is down.
        """
        super().setUp()
        for minionId in ("minion1", "minion2"):
            self.master.subscribers[minionId] = FakeSubscriber()  # type: ignore[assignment]

    def startActive(self, user: str | None = None) -> tuple[Deferred[dict[str, Any]], str]:
        """
        Run C{jobs.active} as C{salttwist-run} does, up to where it waits
        for the minions.

        @return: the runner's reply to come, and the jid of the
            C{saltutil.running} job it published.
        """
        load: dict[str, Any] = {"fun": "jobs.active", "arg": []}
        if user is not None:
            load["user"] = user
        d = self.master.clientRunner(None, load)  # type: ignore[arg-type]
        asked = [j for j in self.master.jobs.recent() if j.load["fun"] == "saltutil.running"]
        self.assertTrue(asked, "jobs.active published no saltutil.running")
        return d, asked[-1].jid

    def running(self, *jids: str) -> list[dict[str, Any]]:
        """
        What a minion running the jobs C{jids} answers C{saltutil.running}:
        the minion's own L{RunningJob.info} of each.
        """
        answer = []
        for jid in jids:
            job = self.master.jobs.get(jid)
            assert job is not None
            answer.append(RunningJob(job.load, Deferred(), 0).info())
        return answer

    def answer(self, asked: str, answers: dict[str, Any]) -> None:
        """
        Deliver each minion's return to the C{saltutil.running} job C{asked}.
        """
        for minionId, value in answers.items():
            self.returnFrom(minionId, asked, value)

    def test_asks(self) -> None:
        """
        C{jobs.active} publishes C{saltutil.running} to every minion (C{*}),
        as the user who runs it, and waits for the connected ones to answer.
        """
        d, asked = self.startActive(user="bob")
        job = self.master.jobs.get(asked)
        assert job is not None
        self.assertEqual(
            {key: job.load[key] for key in ("fun", "arg", "tgt", "tgt_type", "user")},
            {"fun": "saltutil.running", "arg": [], "tgt": "*", "tgt_type": "glob", "user": "bob"},
        )
        self.assertEqual(len(self.master.subscribers["minion1"].frames), 1)  # type: ignore[union-attr]
        self.assertNoResult(d)
        self.returnFrom("minion1", asked, [])
        self.assertNoResult(d)
        self.returnFrom("minion2", asked, [])
        self.assertEqual(self.successResultOf(d)["return"], {})

    def test_runningPastTimeout(self) -> None:
        """
        A job published longer ago than the master's C{timeout} is listed
        while a minion reports it running, in Salt's shape: C{Running} each
        reporting minion with its pid, C{Returned} the minions that
        returned.
        """
        jid = self.publish("test.sleep", [60])
        self.returnFrom("minion2", jid, True)
        self.master.clock.advance(30)
        d, asked = self.startActive()
        self.answer(asked, {"minion1": self.running(jid), "minion2": []})
        self.assertEqual(
            self.successResultOf(d)["return"],
            {
                jid: {
                    "Function": "test.sleep",
                    "Arguments": [60],
                    "Target": "*",
                    "Target-type": "glob",
                    "User": "alice",
                    "StartTime": "2026, Nov 22 01:02:03.456789",
                    "Running": [{"minion1": os.getpid()}],
                    "Returned": ["minion2"],
                }
            },
        )

    def test_notReported(self) -> None:
        """
        A job no minion reports running is not listed, however recent and
        whoever has not returned for it.
        """
        self.publish("test.sleep", [60])
        d, asked = self.startActive()
        self.answer(asked, {"minion1": [], "minion2": []})
        self.assertEqual(self.successResultOf(d)["return"], {})

    def test_severalMinions(self) -> None:
        """
        Every minion reporting a job is listed under C{Running}, by id.
        """
        jid = self.publish("test.sleep", [60])
        d, asked = self.startActive()
        self.answer(asked, {"minion2": self.running(jid), "minion1": self.running(jid)})
        pid = os.getpid()
        reported = self.successResultOf(d)["return"]
        self.assertEqual(reported[jid]["Running"], [{"minion1": pid}, {"minion2": pid}])
        self.assertEqual(reported[jid]["Returned"], [])

    def test_several(self) -> None:
        """
        Several running jobs are listed oldest first.
        """
        first = self.publish("test.sleep", [10])
        second = self.publish("test.sleep", [20], "minion2")
        d, asked = self.startActive()
        self.answer(asked, {"minion1": self.running(first), "minion2": self.running(second, first)})
        self.assertEqual(list(self.successResultOf(d)["return"]), [first, second])

    def test_goneMinion(self) -> None:
        """
        A minion that is not connected is not waited for, and one that does
        not answer is waited for the master's C{timeout} seconds only: the
        jobs it may still be running are not listed. The runner then stops
        listening for answers.
        """
        jid = self.publish("test.sleep", [60])
        bus = self.master.bus
        assert isinstance(bus, LocalEventBus)
        subscriptions = bus.subscriptionCount()
        d, asked = self.startActive()
        self.returnFrom("minion2", asked, [])
        self.master.clock.advance(4.9)
        self.assertNoResult(d)
        self.master.clock.advance(0.1)
        self.assertEqual(self.successResultOf(d)["return"], {})
        self.assertEqual(bus.subscriptionCount(), subscriptions)
        self.assertEqual(self.master.clock.getDelayedCalls(), [])
        # A late answer is taken as a return and changes nothing.
        self.returnFrom("minion1", asked, self.running(jid))

    def test_timeoutOption(self) -> None:
        """
        The master's C{timeout} option sets how long the answers are awaited.
        """
        self.master = makeMaster(self, timeout=30)
        self.master.subscribers["minion1"] = FakeSubscriber()  # type: ignore[assignment]
        d, asked = self.startActive()
        self.master.clock.advance(29)
        self.assertNoResult(d)
        self.master.clock.advance(1)
        self.assertEqual(self.successResultOf(d)["return"], {})

    def test_noneConnected(self) -> None:
        """
        With no minion connected there is no one to wait for: nothing runs.
        """
        self.publish("test.sleep", [60])
        self.master.subscribers.clear()
        self.assertEqual(self.run_("jobs.active"), {})

    def test_notAList(self) -> None:
        """
        An answer that is not a list of jobs (an error, from a minion without
        C{saltutil.running}) and entries without a valid jid are skipped.
        """
        jid = self.publish("test.sleep", [60])
        d, asked = self.startActive()
        self.answer(
            asked,
            {
                "minion1": "'saltutil.running' is not available.",
                "minion2": [{"jid": "nope", "pid": 1}, "junk", *self.running(jid)],
            },
        )
        self.assertEqual(
            self.successResultOf(d)["return"][jid]["Running"], [{"minion2": os.getpid()}]
        )

    def test_unknownJob(self) -> None:
        """
        A job the master does not remember (it restarted since, say) is
        described by the minion's answer, and its C{Returned} comes from the
        job cache.
        """
        jid = "20261122000000000001"
        self.successResultOf(self.cache.storeReturn(jid, "minion2", {"return": True}))
        d, asked = self.startActive()
        self.answer(
            asked,
            {
                "minion1": [
                    {
                        "jid": jid,
                        "fun": "cmd.run",
                        "arg": ["sleep 100"],
                        "tgt": "minion*",
                        "tgt_type": "glob",
                        "user": "carol",
                        "pid": 4321,
                        "ret": "",
                    }
                ],
                "minion2": [],
            },
        )
        self.assertEqual(
            self.successResultOf(d)["return"],
            {
                jid: {
                    "Function": "cmd.run",
                    "Arguments": ["sleep 100"],
                    "Target": "minion*",
                    "Target-type": "glob",
                    "User": "carol",
                    "StartTime": "2026, Nov 22 00:00:00.000001",
                    "Running": [{"minion1": 4321}],
                    "Returned": ["minion2"],
                }
            },
        )

    def test_cancelled(self) -> None:
        """
        Cancelling the runner ends its wait: no timer is left and it stops
        listening for answers.
        """
        bus = self.master.bus
        assert isinstance(bus, LocalEventBus)
        subscriptions = bus.subscriptionCount()
        d, _ = self.startActive()
        d.cancel()
        self.failureResultOf(d)
        self.assertEqual(bus.subscriptionCount(), subscriptions)
        self.assertEqual(self.master.clock.getDelayedCalls(), [])


class SummaryJobCache(FakeJobCache):
    """
    A L{FakeJobCache} with C{listJobSummaries}, as the real caches have.

    @ivar summaryCalls: the arguments of every C{listJobSummaries} call.
    """

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.summaryCalls: list[dict[str, Any]] = []

    def listJobSummaries(self, **kwargs: Any) -> Deferred[list[tuple[Any, ...]]]:
        """
        The jobs C{listJobs} lists, as C{(jid, fun, arg, tgt, tgt_type,
        user)}.
        """
        self.summaryCalls.append(kwargs)
        listed: list[list[dict[str, Any]]] = []
        self.listJobs(**kwargs).addCallback(listed.append)
        self.listCalls.pop()
        return succeed(
            [(j["jid"], j["fun"], j["arg"], j["tgt"], j["tgt_type"], j["user"]) for j in listed[0]]
        )


class ListJobsSummaryTests(SynchronousTestCase):
    """
    C{jobs.list_jobs} reads a cache's C{listJobSummaries} when it has one
    (not the minions of every job), with the same result as from
    C{listJobs}.
    """

    def listed(self, cache: FakeJobCache, **kwargs: Any) -> Any:
        context = RunnerContext(master=SimpleNamespace(jobCache=cache))  # type: ignore[arg-type]
        return self.successResultOf(Deferred.fromCoroutine(jobs.list_jobs(context, **kwargs)))

    def test_sameListing(self) -> None:
        """
        Both caches, holding the same jobs, give the same listing; the one
        with C{listJobSummaries} is asked with it only, filters included.
        """
        clock = Clock()
        plain, summarising = FakeJobCache(clock), SummaryJobCache(clock)
        jobsStored = [
            ("20261122010203456789", "test.ping", [], "*", "glob", "alice"),
            ("20261122010203456790", "cmd.run", ["ls"], ["a", "b"], "list", None),
            (
                "20261122020000000001",
                "test.echo",
                [{"__kwarg__": True, "metadata": {"k": "v"}}],
                "web*",
                None,
                "bob",
            ),
            ("20261122020000000002", "test.arg", [], None, "glob", "root"),
        ]
        for jid, fun, arg, tgt, tgtType, user in jobsStored:
            for cache in (plain, summarising):
                cache.storeJob(
                    jid, {"fun": fun, "arg": arg, "tgt": tgt, "tgt_type": tgtType, "user": user}, []
                )
            clock.advance(1)
        for kwargs in ({}, {"search_function": "test.*"}, {"search_metadata": {"k": "v"}}):
            self.assertEqual(self.listed(summarising, **kwargs), self.listed(plain, **kwargs))
        self.assertEqual(summarising.listCalls, [])
        self.assertEqual(len(summarising.summaryCalls), 3)
        self.assertEqual(summarising.summaryCalls[1]["searchFunction"], "test.*")
        full = self.listed(summarising)
        self.assertEqual(list(full), [row[0] for row in jobsStored])
        self.assertEqual(full["20261122020000000001"]["Metadata"], {"k": "v"})
        self.assertEqual(full["20261122010203456790"]["User"], "root")
        self.assertEqual(full["20261122020000000002"]["Target"], "unknown-target")

    def test_startTimes(self) -> None:
        """
        The listing's C{StartTime}s are L{jobs._jidToTime}'s, an hour's
        prefix made once: jids of one hour, of others, and values that are
        not jids (empty).
        """
        startTime = jobs._ListedStartTime()
        for jid in (
            "20261122010203456789",
            "20261122015959999999",
            "20261122020000000000",
            "20150316190000000001",
            "20261322010203456789",
            "2026112201020345678x",
            "2026112201020345678",
            "２0261122010203456789",
            "",
        ):
            self.assertEqual(startTime(jid), jobs._jidToTime(jid), jid)
