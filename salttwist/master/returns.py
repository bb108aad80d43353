# -*- test-case-name: tests.test_master_core,tests.test_late_returns,tests.test_minion_events -*-
"""
The requests of minion sessions: job returns (checked against the job they
answer, looked up in the job cache for a job this master process did not
publish, or recorded as a new job for C{salttwist-call}'s jid C{req}),
grains and events.

This is the return path: a return that is answered at once builds no
L{Deferred}.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist import serial, wire
from salttwist.cluster.interfaces import ClusterUnavailable
from salttwist.interfaces import IEventBus, IJobCache
from salttwist.jid import isJid
from salttwist.master.grainscache import GrainsCache
from salttwist.master.interfaces import IJobPublisher, IMinionRequests, IMinionSession
from salttwist.master.jobcache import JobCacheError
from salttwist.master.jobcachequeue import JobCacheQueueFull
from salttwist.master.jobs import JobRegistry
from salttwist.master.publishing import FUNCTION_NAME
from salttwist.master.ratelimit import EventRateLimiter

#: The jid a minion puts in a return the master did not publish
#: (C{salttwist-call}); the master gives it a real jid (Salt's C{req}).
REQ_JID = "req"
#: Seconds between two log lines about returns answered "return not
#: stored" (each line counts those since the last one): while the job
#: cache's server is away every return is, and a line (or a traceback) for
#: each would flood the log.
NOT_STORED_LOG_INTERVAL = 10.0
#: The most returns remembered as fired (on the bus and to the other
#: masters) but not stored, so that the copy the minion sends again is only
#: stored (L{MinionRequests._acceptReturn}); past it the oldest are
#: forgotten, and their copies fired once more.
MAX_FIRED_NOT_STORED = 100000
#: The longest tag a minion may fire (as the event pull socket's limit).
MAX_EVENT_TAG = 512
#: The most bytes a minion event's data may take, serialised (Salt's
#: C{max_event_size} default): every bus subscriber may queue it.
MAX_EVENT_DATA_BYTES = 1048576
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _ownProgress(minionId: str, tag: str) -> bool:
    """
    Whether C{tag} is C{salt/job/<jid>/prog/<minionId>/<n>}: a state
    run's progress event of the sending minion.
    """
    parts = tag.split("/")
    return (
        len(parts) == 6
        and parts[:2] == ["salt", "job"]
        and isJid(parts[2])
        and parts[3] == "prog"
        and parts[4] == minionId
        and parts[5].isdigit()
    )


def _ownStateResult(minionId: str, tag: str) -> bool:
    """
    Whether C{tag} is C{salt/state_result/<jid>/<minionId>/<name>}: the
    event of a state with C{fire_event} run by the sending minion (the
    name may hold slashes: C{/etc/motd} makes C{...//etc/motd}).
    """
    parts = tag.split("/", 4)
    return (
        len(parts) == 5
        and parts[:2] == ["salt", "state_result"]
        and isJid(parts[2])
        and parts[3] == minionId
        and parts[4] != ""
    )


def minionTagProblem(minionId: str, tag: object) -> str | None:
    """
    The tag rule for events a minion sends (C{_minion_event}): it must not
    forge the master's own events. A tag is a string of 1 to
    L{MAX_EVENT_TAG} characters without control characters; under C{salt/}
    only C{salt/minion/<the sender's id>/...} and the progress of its own
    state runs, C{salt/job/<jid>/prog/<the sender's id>/<n>} (Salt's
    C{state_events}), and its states' C{fire_event} events,
    C{salt/state_result/<jid>/<the sender's id>/<name>}, are allowed.
    Every other tag (C{myco/deploy/done}) is the minion's own business.

    @return: L{None} if C{minionId} may fire C{tag}, else why not.
    """
    if not isinstance(tag, str) or not tag:
        return "the tag must be a non-empty string"
    if len(tag) > MAX_EVENT_TAG:
        return f"the tag is longer than {MAX_EVENT_TAG} characters"
    if _CONTROL.search(tag):
        return "the tag holds control characters"
    own = f"salt/minion/{minionId}/"
    if (
        tag.startswith("salt/")
        and not tag.startswith(own)
        and not _ownProgress(minionId, tag)
        and not _ownStateResult(minionId, tag)
    ):
        return f"tags under salt/ are the master's; a minion may only fire {own}... among them"
    return None


@implementer(IMinionRequests)
class MinionRequests:
    """
    The room of minion sessions' requests.

    @ivar jobCache: the job cache, or L{None}.
    """

    # The master's namespace: log lines read as they always did.
    log = Logger(namespace="salttwist.master.core.Master")

    def __init__(
        self,
        config: dict[str, Any],
        bus: IEventBus,
        clock: Any,
        jobs: JobRegistry,
        grainsCache: GrainsCache,
        publisher: IJobPublisher,
        jobCache: IJobCache | None,
    ) -> None:
        """
        @param publisher: records the jobs of C{salttwist-call}'s returns.
        """
        self.bus = bus
        self.clock = clock
        self.jobs = jobs
        self.grainsCache = grainsCache
        self._publisher = publisher
        self.jobCache = jobCache
        #: The fan-out to the other masters of a cluster
        #: (L{salttwist.cluster.fanout.ClusterFanout}), or L{None}.
        self.cluster: Any = None
        #: Per-minion token buckets for the events minions fire on the bus.
        self.eventRate = EventRateLimiter(
            config.get("minion_event_rate_limit", 100),
            config.get("minion_event_rate_burst", 1000),
            clock,
        )
        #: Returns answered "return not stored" since the last log line
        #: about them, and when that line was written.
        self._notStoredCount = 0
        self._notStoredLoggedAt = float("-inf")
        #: The (jid, minion) of returns fired but not stored (their write
        #: failed), oldest first: at most L{MAX_FIRED_NOT_STORED}.
        self._firedNotStored: dict[tuple[str, str], None] = {}

    def minionReturn(
        self, proto: IMinionSession, load: dict[str, Any]
    ) -> dict[str, Any] | Deferred[dict[str, Any]]:
        """
        C{_return}: a minion returns a job's result. The return must name the
        session's own id and a job that targeted it, once. A job this master
        process did not publish (it restarted while the minion held the
        return) is looked up in the job cache.

        A return with jid C{req} answers no published job: the minion ran a
        function by itself (C{salttwist-call}). The master makes a jid for
        it and records the job as well as the return (L{_reqReturn}). A
        transient session may send only those.
        """
        claimed, jid = load.get("id"), load.get("jid")
        minionId = proto.minionId
        if claimed != minionId:
            self.log.warn(
                "minion {id} sent a return claiming to be {claimed!r}; refused",
                id=minionId,
                claimed=claimed,
            )
            raise ValueError("the return's id does not match the session")
        assert minionId is not None
        if jid == REQ_JID:
            return self._reqReturn(minionId, load)
        if getattr(proto, "role", None) == "transient":
            raise ValueError(f"return refused: a transient session may only return jid {REQ_JID!r}")
        if not isJid(jid):
            raise ValueError("return refused: no valid jid")
        if self.jobs.get(jid) is None and self.jobCache is not None:
            return Deferred.fromCoroutine(self._lateReturn(minionId, jid, load))
        self._checkReturn(jid, minionId)
        return self._acknowledge(self._acceptReturn(minionId, jid, load), jid, minionId)

    def _checkReturn(self, jid: str, minionId: str) -> None:
        problem = self.jobs.checkReturn(jid, minionId)
        if problem is not None:
            self.log.warn("return from {id} refused: {problem}", id=minionId, problem=problem)
            raise ValueError(f"return refused: {problem}")

    async def _lateReturn(self, minionId: str, jid: str, load: dict[str, Any]) -> dict[str, Any]:
        """
        A return for a job this master process does not know: look the job
        and its returns up in the job cache first. A job cache that cannot
        answer (its server is away) refuses the return with
        L{wire.RETURN_NOT_STORED}, as a failed write does: the minion keeps
        it and sends it again (any other refusal makes the minion drop it).
        """
        assert self.jobCache is not None
        try:
            job = await self.jobCache.getJob(jid)
            if job is not None and self.jobs.get(jid) is None:
                returned = await self.jobCache.getReturns(jid)
                if self.jobs.get(jid) is None:
                    known = self.jobs.add(jid, job, list(job.get("minions") or []))
                    known.returned.update(returned)
        except Exception:
            self._notStored(Failure(), jid, minionId)
        self._checkReturn(jid, minionId)
        answer = self._acknowledge(self._acceptReturn(minionId, jid, load), jid, minionId)
        if isinstance(answer, Deferred):
            return await answer
        return answer

    def _reqReturn(
        self, minionId: str, load: dict[str, Any]
    ) -> dict[str, Any] | Deferred[dict[str, Any]]:
        """
        A return with jid C{req}, as Salt's master handles it: allocate a
        jid, record the job (C{fun}, C{arg} from C{fun_args}, C{tgt} the
        minion's id, C{tgt_type} C{list}, C{user}) in the registry and the
        job cache, fire C{salt/job/<jid>/new}, then take the return as one
        for that job (C{salt/job/<jid>/ret/<id>}).

        @return: C{{"ret": True, "jid": jid}}, once the return is stored.
        """
        fun, arg = load.get("fun"), load.get("fun_args", [])
        if not isinstance(fun, str) or not FUNCTION_NAME.match(fun):
            raise ValueError(f"return refused: invalid function name {fun!r}")
        if not isinstance(arg, list):
            raise ValueError("return refused: fun_args must be a list")
        # The minion's word for who ran salttwist-call is recorded, but
        # always beside its id ("alice@web1"), so it can never pass for a
        # master-side user (publisher_acl's find_job rights, the reactor's
        # "Reactor", root).
        claimed = load.get("user")
        if not isinstance(claimed, str) or not 0 < len(claimed) <= 256 or _CONTROL.search(claimed):
            claimed = "root"
        user = f"{claimed}@{minionId}"
        made = self._publisher.newJob([minionId], fun, arg, minionId, "list", user)
        if isinstance(made, Deferred):
            # A job cache the masters share reserves the jid first. If it
            # cannot, nothing was recorded or fired: the minion keeps the
            # return and sends it again (a new job then).
            return made.addCallbacks(
                lambda job: self._reqJobMade(minionId, job["jid"], load),
                lambda failure: self._notStored(failure, REQ_JID, minionId),
            )
        return self._reqJobMade(minionId, made["jid"], load)

    def _reqJobMade(
        self, minionId: str, jid: str, load: dict[str, Any]
    ) -> dict[str, Any] | Deferred[dict[str, Any]]:
        """
        Take a C{req} return as one for its new job C{jid} (L{_reqReturn}).
        """
        self._checkReturn(jid, minionId)
        answer = self._acknowledge(
            self._acceptReturn(minionId, jid, load, refuseWhenFull=False), jid, minionId
        )
        if isinstance(answer, Deferred):
            return answer.addCallback(lambda ret: dict(ret, jid=jid))
        return dict(answer, jid=jid)

    def minionPing(self, proto: IMinionSession, load: dict[str, Any]) -> dict[str, Any]:
        """
        C{_ping}: a minion with C{master_alive_interval} checks that its
        master answers on its session. Nothing is done.

        @return: C{{"ret": True}}.
        """
        return {"ret": True}

    def minionEvent(self, proto: IMinionSession, load: dict[str, Any]) -> dict[str, Any]:
        """
        C{_minion_event}: a minion fires an event on the master's bus
        (Salt's C{event.send}/C{event.fire_master}).

        The tag must pass L{minionTagProblem}: no minion may forge the
        master's events (C{salt/job/...}, C{salt/auth}, C{salt/key}, another
        minion's C{salt/minion/<id>/...}). The event's data is built by the
        master in Salt's shape: C{id} is always the session's minion id
        (whatever the load claims), C{tag}, C{data} (the minion's, at most
        L{MAX_EVENT_DATA_BYTES} serialised) and C{cmd}; the bus adds
        C{_stamp}. Each minion fires at most C{minion_event_rate_limit}
        events per second (after a burst of C{minion_event_rate_burst}).
        A refusal is logged and answered with the rule it broke (a minion
        over its rate is logged once a minute, see L{EventRateLimiter}).
        """
        minionId = proto.minionId
        assert minionId is not None
        tag, data = load.get("tag"), load.get("data")
        overRate = self.eventRate.take(minionId)
        if overRate is not None:
            raise ValueError(f"event refused: {overRate}")
        problem = minionTagProblem(minionId, tag)
        if problem is None:
            try:
                size = len(serial.dumps(data))
            except serial.SerialError as e:
                size, problem = 0, f"the data cannot be serialised: {e}"
            if size > MAX_EVENT_DATA_BYTES:
                problem = f"the data takes {size} bytes, more than {MAX_EVENT_DATA_BYTES}"
        if problem is not None:
            shown = tag[:80] + "..." if isinstance(tag, str) and len(tag) > 80 else tag
            self.log.warn(
                "event {tag!r} from minion {id} refused: {problem}",
                tag=shown,
                id=minionId,
                problem=problem,
            )
            raise ValueError(f"event refused: {problem}")
        assert isinstance(tag, str)
        claimed = load.get("id")
        if claimed is not None and claimed != minionId:
            self.log.warn(
                "minion {id} sent an event claiming to be {claimed!r}; sent as {id}",
                id=minionId,
                claimed=claimed,
            )
        event = {"id": minionId, "tag": tag, "data": data, "cmd": "_minion_event"}
        self.bus.fire(tag, event)
        if self.cluster is not None:
            self.cluster.eventFired(tag, event)
        return {"ret": True}

    def _acceptReturn(
        self, minionId: str, jid: str, load: dict[str, Any], refuseWhenFull: bool = True
    ) -> Deferred[None] | None:
        """
        Take a checked return: fire it on the bus, store it, send it to the
        cluster.

        @param refuseWhenFull: refuse the return with
            L{wire.RETURN_NOT_STORED} (the minion keeps it and sends it
            again) if the cluster's outgoing buffer has no room for it now
            (the broker away), before anything is done with it; else it is
            kept on this master only (a C{req} return: sent again, it would
            make another job).
        @return: the job cache's write (L{None} without a job cache), which
            the acknowledgement waits for (L{_acknowledge}).
        """
        cluster = self.cluster
        event = {
            "cmd": "_return",
            "id": minionId,
            "jid": jid,
            "fun": load.get("fun"),
            "fun_args": load.get("fun_args", []),
            "return": load.get("return"),
            "retcode": load.get("retcode", 0),
            "success": load.get("success", True),
        }
        if self._firedNotStored and (jid, minionId) in self._firedNotStored:
            # Sent again after its write failed: the bus and the other
            # masters had it the first time (a reactor must not act twice).
            if self.jobCache is None:
                return None
            return self.jobCache.storeReturn(jid, minionId, event)
        payload = None
        if cluster is not None:
            try:
                payload = cluster.returnMessage(event)
            except ClusterUnavailable as e:
                if refuseWhenFull:
                    job = self.jobs.get(jid)
                    if job is not None:
                        # The minion sends it again: not a duplicate then.
                        job.returned.discard(minionId)
                    raise ValueError(
                        f"{wire.RETURN_NOT_STORED}: the return of {minionId} for job {jid} "
                        f"cannot be sent to the other masters now: {e}; send it again later"
                    ) from e
        self.bus.fire(f"salt/job/{jid}/ret/{minionId}", event)
        stored = None
        if self.jobCache is not None:
            stored = self.jobCache.storeReturn(jid, minionId, event)
        if cluster is not None:
            cluster.returnAccepted(event, payload)
        return stored

    def _acknowledge(
        self, stored: Deferred[None] | None, jid: str, minionId: str
    ) -> dict[str, Any] | Deferred[dict[str, Any]]:
        """
        The answer to a return: only once the job cache holds it, so that a
        master killed before the write leaves the return with the minion
        (which sends it again, to this master or another). A failed write is
        refused with L{wire.RETURN_NOT_STORED}: the minion keeps the return
        and tries again later; the return, already fired, is remembered so
        that its copy is stored without being fired again.
        """
        if stored is None:
            return {"ret": True}

        def storedNow(_: object) -> dict[str, Any]:
            if self._firedNotStored:
                self._firedNotStored.pop((jid, minionId), None)
            return {"ret": True}

        def notStored(failure: Failure) -> dict[str, Any]:
            job = self.jobs.get(jid)
            if job is not None:
                # The minion sends it again: not a duplicate then.
                job.returned.discard(minionId)
            fired = self._firedNotStored
            if len(fired) >= MAX_FIRED_NOT_STORED:
                del fired[next(iter(fired))]
            fired[jid, minionId] = None
            self._notStored(failure, jid, minionId)

        return stored.addCallbacks(storedNow, notStored)

    def _notStored(self, failure: Failure, jid: str, minionId: str) -> NoReturn:
        """
        Refuse a return the job cache could not take (C{failure}) with
        L{wire.RETURN_NOT_STORED}, which tells the minion to keep it and
        send it again later. The message does not name the database (the
        master's log does: a line every L{NOT_STORED_LOG_INTERVAL} seconds
        at most, counting the returns refused meanwhile; with a traceback
        for a failure other than the job cache's own L{JobCacheError}).
        """
        self._notStoredCount += 1
        now = self.clock.seconds()
        if now >= self._notStoredLoggedAt + NOT_STORED_LOG_INTERVAL:
            count, self._notStoredCount = self._notStoredCount, 0
            self._notStoredLoggedAt = now
            message = (
                "{count} returns answered 'return not stored' (the minions send them "
                "again) since the last such line: the job cache failed: {error}"
            )
            if failure.check(JobCacheError, JobCacheQueueFull):
                self.log.error(message, count=count, error=failure.getErrorMessage())
            else:
                self.log.failure(message, failure, count=count, error=failure.getErrorMessage())
        raise ValueError(
            f"{wire.RETURN_NOT_STORED}: the master's job cache could not store the "
            f"return of {minionId} for job {jid}; send it again later"
        ) from failure.value

    def minionGrains(self, proto: IMinionSession, load: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        C{_grains}: a minion reports its grains, kept for master-side grain
        targeting. Only the session's own grains can be set.
        """
        assert proto.minionId is not None
        d = self.grainsCache.update(proto.minionId, load.get("grains"))  # type: ignore[arg-type]
        return d.addCallback(lambda _: {"ret": True})
