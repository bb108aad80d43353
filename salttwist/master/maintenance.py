# -*- test-case-name: tests.test_presence,tests.test_master_stats -*-
"""
The master's periodic reports on its event bus, as Salt's C{Maintenance}
process and workers fire them.

  - L{PresenceEvents} (C{presence_events: True}), every C{loop_interval}
    seconds: C{salt/presence/change} with C{{"new": [...], "lost": [...]}}
    when the set of connected minions changed since the last run, then
    C{salt/presence/present} with C{{"present": [...]}}.
  - L{MasterStats} (C{master_stats: True}), every C{master_stats_event_iter}
    seconds: C{salt/master/stats} with what the master is doing (see
    L{MasterStats.collect}).

A minion is connected when it holds a live subscription to the pub channel
(L{salttwist.master.core.Master.subscribers}): exactly the minions a job can reach now, the same
knowledge C{manage.present} answers from. Salt, too, compares the connected
set once per loop rather than on every connection: a master restart that
brings back thousands of minions makes one C{change} event, not thousands.

Both are plain callables, run by a L{LoopingCall} of L{MasterService} on the
injected reactor, so tests drive them with a L{Clock}.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from salttwist.workers.stats import poolStats

if TYPE_CHECKING:
    from salttwist.events.bus import EventPublisherFactory
    from salttwist.master.interfaces import IMasterStatus

PRESENT_TAG = "salt/presence/present"
CHANGE_TAG = "salt/presence/change"
STATS_TAG = "salt/master/stats"


class RequestStats:
    """
    Req-channel requests handled per command since the last report, in
    Salt's shape: C{{cmd: {"mean": seconds, "runs": n}}}.
    """

    def __init__(self) -> None:
        self._stats: dict[str, dict[str, Any]] = {}

    def record(self, cmd: str, seconds: float) -> None:
        """
        One C{cmd} request took C{seconds} to answer (keep only allow-listed
        names: the table grows by one entry per name).
        """
        entry = self._stats.setdefault(cmd, {"mean": 0.0, "runs": 0})
        entry["runs"] += 1
        entry["mean"] += (seconds - entry["mean"]) / entry["runs"]

    def peek(self) -> dict[str, dict[str, Any]]:
        """
        @return: a copy of the figures since the last L{take}.
        """
        return {cmd: dict(entry) for cmd, entry in self._stats.items()}

    def take(self) -> dict[str, dict[str, Any]]:
        """
        @return: the figures since the last L{take}, and start again.
        """
        stats, self._stats = self._stats, {}
        return stats


def workerStats(master: IMasterStatus) -> dict[str, Any]:
    """
    The worker pool's figures (C{size}, C{busy}, C{idle}, C{queued},
    C{restarts}, C{completed}, C{failed}) and C{running}: whether the pool
    checks authentication. Until it is up, or if it cannot start, it does
    not (authentication runs in threads) and every figure is 0.
    """
    return poolStats(master.workers)


def jobsInFlight(master: IMasterStatus) -> int:
    """
    @return: how many jobs are running, as far as the master knows without
        asking the minions (C{jobs.active} asks them): a job published
        less than C{timeout} seconds ago that a connected minion it
        targeted has not answered yet.
    """
    now = master.clock.seconds()
    timeout = float(master.config["timeout"])
    count = 0
    for job in master.jobs.recent():
        published = job.load.get("ts")
        if not isinstance(published, (int, float)) or now - published >= timeout:
            continue
        if any(m in master.subscribers for m in job.minions - job.returned):
            count += 1
    return count


class PresenceEvents:
    """
    Fires Salt's presence events on each call.
    """

    def __init__(self, master: IMasterStatus) -> None:
        self._master = master
        self._present: set[str] = set()

    def __call__(self) -> None:
        """
        Compare the connected minions with the last call's: fire
        C{salt/presence/change} if they differ, then C{salt/presence/present}.
        """
        present = set(self._master.subscribers)
        new, lost = present - self._present, self._present - present
        self._present = present
        if new or lost:
            self._master.bus.fire(CHANGE_TAG, {"new": sorted(new), "lost": sorted(lost)})
        self._master.bus.fire(PRESENT_TAG, {"present": sorted(present)})


class MasterStats:
    """
    Fires C{salt/master/stats} on each call.

    @param clock: the master's clock, for C{time}.
    @param eventPublisher: the factory of the event bus's subscriber socket,
        for its subscribers and their queues (L{None}: not counted).
    """

    def __init__(
        self, master: IMasterStatus, clock: Any, eventPublisher: EventPublisherFactory | None = None
    ) -> None:
        self._master = master
        self._clock = clock
        self._eventPublisher = eventPublisher
        self._since = clock.seconds()

    def collect(self) -> dict[str, Any]:
        """
        @return: the event's data: C{time} (seconds since the last event)
            and C{stats} (req-channel requests per command, Salt's
            C{{"mean", "runs"}}) as Salt's, and C{workers}
            (L{workerStats}), C{minions} (connected), C{sessions} (minion
            req sessions), C{jobs} (in flight, see L{jobsInFlight}) and
            C{events} (L{EventPublisherFactory.stats}: C{subscriptions} on
            the bus, the socket's C{subscribers}, the events C{queued} for
            slow ones, their C{queued_bytes}, and those C{dropped}) and
            C{publications} (C{dropped}: since the master started, for
            minions that did not read them, see C{pub_write_buffer}). The
            request figures start again.
        """
        master = self._master
        now = self._clock.seconds()
        events = self._eventPublisher.stats() if self._eventPublisher is not None else {}
        data = {
            "time": now - self._since,
            "stats": master.requestStats.take(),
            "workers": workerStats(master),
            "minions": len(master.subscribers),
            "sessions": len(master.sessions),
            "jobs": jobsInFlight(master),
            "events": events,
            "publications": {"dropped": master.publicationsDropped},
        }
        self._since = now
        return data

    def __call__(self) -> None:
        """
        Fire one C{salt/master/stats} event.
        """
        self._master.bus.fire(STATS_TAG, self.collect())
