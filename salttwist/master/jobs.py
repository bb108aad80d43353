# -*- test-case-name: tests.test_master_core -*-
"""
The jobs the master published recently, so a return can be checked against
the job it answers (which minions were targeted, who already returned).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Job:
    """
    One published job.
    """

    jid: str
    load: dict[str, Any]
    minions: frozenset[str]
    returned: set[str] = field(default_factory=set)


class JobRegistry:
    """
    The last C{maxJobs} published jobs, oldest forgotten first.
    """

    def __init__(self, maxJobs: int = 10000) -> None:
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._maxJobs = maxJobs

    def add(self, jid: str, load: dict[str, Any], minions: list[str]) -> Job:
        """
        Record a published job.
        """
        job = Job(jid, load, frozenset(minions))
        self._jobs[jid] = job
        while len(self._jobs) > self._maxJobs:
            self._jobs.popitem(last=False)
        return job

    def recent(self) -> list[Job]:
        """
        @return: the jobs remembered, oldest first.
        """
        return list(self._jobs.values())

    def get(self, jid: str) -> Job | None:
        """
        @return: the job C{jid}, or L{None} if unknown or forgotten.
        """
        return self._jobs.get(jid)

    def checkReturn(self, jid: str, minionId: str) -> str | None:
        """
        Record that C{minionId} returned for C{jid}.

        @return: L{None} if the return is acceptable, else why it is not.
        """
        job = self._jobs.get(jid)
        if job is None:
            return f"unknown job {jid}"
        if minionId not in job.minions:
            return f"minion {minionId} was not targeted by job {jid}"
        if minionId in job.returned:
            return f"minion {minionId} already returned for job {jid}"
        job.returned.add(minionId)
        return None
