# -*- test-case-name: tests.test_batch -*-
"""
Tests for L{salttwist.client.batch.runBatches}: Salt's batch mode as a
sliding window, driven by a client whose returns the tests deliver one by
one, and a L{Clock}.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.client.base import JobResult, MasterUnavailable
from salttwist.client.batch import runBatches


@dataclass
class _Job:
    """
    One job the batch published, whose returns and end the test decides.
    """

    minions: list[str]
    onReturn: Any
    ended: Deferred[JobResult]
    returns: dict[str, dict[str, Any]] = field(default_factory=dict)

    def returned(self, minionId: str, retcode: int = 0) -> None:
        data = {"return": True, "retcode": retcode}
        self.returns[minionId] = data
        self.onReturn(minionId, data)

    def end(self) -> None:
        silent = [m for m in self.minions if m not in self.returns]
        self.ended.callback(JobResult("2" * 20, self.minions, self.returns, silent))


class _Client:
    """
    A LocalClient whose ping answers at once from C{up} and whose other
    jobs wait for the test.
    """

    def __init__(self, up: list[str]) -> None:
        self.up = up
        self.jobs: list[_Job] = []

    def run(
        self,
        tgt: Any,
        fun: str,
        arg: list[Any],
        tgtType: str = "glob",
        timeout: float = 5.0,
        onPublished: Any = None,
        onReturn: Any = None,
        gatherJobTimeout: float = 10.0,
    ) -> Deferred[JobResult]:
        if fun == "test.ping":
            returns = {m: {"return": True, "retcode": 0} for m in self.up}
            return succeed(JobResult("1" * 20, list(self.up), returns))
        job = _Job(list(tgt), onReturn, Deferred())
        self.jobs.append(job)
        return job.ended

    def started(self) -> list[list[str]]:
        return [job.minions for job in self.jobs]


class SlidingWindowTests(SynchronousTestCase):
    """
    At most C{-b} minions run at a time; a place freed by a return (or by
    the end of a job without it) goes to the next minion at once.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.client = _Client([f"m{i}" for i in range(1, 6)])
        self.returned: list[str] = []

    def runBatches(self, size: int, **kwargs: Any) -> Deferred[tuple[JobResult, bool]]:
        return ensureDeferred(
            runBatches(
                self.client,
                self.clock,
                "m*",
                "cmd.run",
                ["ls"],
                "glob",
                (size, False),
                5.0,
                10.0,
                onReturn=lambda minionId, data: self.returned.append(minionId),
                **kwargs,
            )
        )

    def test_returnFreesItsPlace(self) -> None:
        """
        A return starts the next minion while the rest of its job still
        runs; the run ends when every job has ended.
        """
        d = self.runBatches(2)
        self.assertEqual(self.client.started(), [["m1", "m2"]])
        first = self.client.jobs[0]
        first.returned("m2")
        self.assertEqual(self.client.started(), [["m1", "m2"], ["m3"]])
        first.returned("m1")
        first.end()
        self.client.jobs[1].returned("m3")
        self.assertEqual(self.client.started(), [["m1", "m2"], ["m3"], ["m4"], ["m5"]])
        for job in self.client.jobs[1:]:
            for minionId in job.minions:
                if minionId not in job.returns:
                    job.returned(minionId)
            self.assertNoResult(d)
            job.end()
        combined, stopped = self.successResultOf(d)
        self.assertEqual(sorted(combined.returns), ["m1", "m2", "m3", "m4", "m5"])
        self.assertEqual(self.returned, ["m2", "m1", "m3", "m4", "m5"])
        self.assertFalse(stopped)

    def test_placesFreedTogetherShareAJob(self) -> None:
        """
        Places freed at the same moment (a job ending without two returns)
        start one job for the next minions together; its minions that did
        not return are missing.
        """
        d = self.runBatches(2)
        self.client.jobs[0].end()
        self.assertEqual(self.client.started(), [["m1", "m2"], ["m3", "m4"]])
        self.client.jobs[1].end()
        self.client.jobs[2].end()
        combined, stopped = self.successResultOf(d)
        self.assertEqual(self.client.started()[2], ["m5"])
        self.assertEqual(combined.missing, ["m1", "m2", "m3", "m4", "m5"])

    def test_batchWait(self) -> None:
        """
        With C{batchWait}, a freed place stays empty that many seconds.
        """
        d = self.runBatches(1, batchWait=2.0)
        self.client.jobs[0].returned("m1")
        self.client.jobs[0].end()
        self.assertEqual(len(self.client.jobs), 1)
        self.clock.advance(1.9)
        self.assertEqual(len(self.client.jobs), 1)
        self.clock.advance(0.1)
        self.assertEqual(self.client.started(), [["m1"], ["m2"]])
        for i in range(2, 6):
            self.client.jobs[-1].returned(f"m{i}")
            self.client.jobs[-1].end()
            self.clock.advance(2.0)
        self.assertEqual(len(self.successResultOf(d)[0].returns), 5)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_batchWaitPerPlace(self) -> None:
        """
        C{batchWait} holds each freed place on its own, as Salt's
        C{--batch-wait} ("after each job is done before freeing the
        slot"): the next minion starts that long after a return, while the
        rest of its job still runs.
        """
        d = self.runBatches(2, batchWait=2.0)
        self.client.jobs[0].returned("m1")
        self.clock.advance(1.0)
        self.assertEqual(len(self.client.jobs), 1)
        self.clock.advance(1.0)
        self.assertEqual(self.client.started(), [["m1", "m2"], ["m3"]])
        while not d.called:
            for job in self.client.jobs:
                for minionId in job.minions:
                    if minionId not in job.returns:
                        job.returned(minionId)
                if not job.ended.called:
                    job.end()
            self.clock.advance(2.0)
        self.assertEqual(len(self.successResultOf(d)[0].returns), 5)

    def test_failhard(self) -> None:
        """
        With C{failhard}, no minion starts after a non-zero retcode; the
        jobs already running are waited for, and their returns kept.
        """
        d = self.runBatches(2, failhard=True)
        self.client.jobs[0].returned("m1", retcode=1)
        self.assertEqual(len(self.client.jobs), 1)
        self.assertNoResult(d)
        self.client.jobs[0].returned("m2")
        self.client.jobs[0].end()
        combined, stopped = self.successResultOf(d)
        self.assertTrue(stopped)
        self.assertEqual(sorted(combined.returns), ["m1", "m2"])

    def test_failhardMissing(self) -> None:
        """
        With C{failhard}, a minion that did not return stops the run too.
        """
        d = self.runBatches(2, failhard=True, batchWait=1.0)
        self.client.jobs[0].returned("m1")
        self.client.jobs[0].end()
        combined, stopped = self.successResultOf(d)
        self.assertTrue(stopped)
        self.assertEqual(combined.missing, ["m2"])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_jobFails(self) -> None:
        """
        A job that fails (the master went away) stops the window; the
        error is raised once the jobs still running have ended.
        """
        d = self.runBatches(2)
        self.client.jobs[0].returned("m1")
        self.assertEqual(len(self.client.jobs), 2)
        self.client.jobs[1].ended.errback(MasterUnavailable("gone"))
        self.assertNoResult(d)
        self.client.jobs[0].end()
        self.failureResultOf(d, MasterUnavailable)
        self.assertEqual(len(self.client.jobs), 2)
