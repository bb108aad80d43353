# -*- test-case-name: tests.test_master_core,tests.test_acl -*-
"""
Job publishing: the local client's C{publish}, targeting (against the
accepted ids as last listed) and the publisher ACL, a job's record (the
registry, the job cache, C{salt/job/<jid>/new}), and the publication
itself.

A publication is sealed once with the publication key (AES-256-GCM, which
every accepted minion holds) and written to each subscriber with an
HMAC-SHA256 under that subscription's own key (derived from the minion's
session and the connection's challenge): no RSA signature, and no minion
can forge a job for another (see L{salttwist.master.publisher}).
Targeting against the accepted ids already listed is done on the reactor:
a job's path has no thread hop. Grain words are matched against the grains
cache and pillar words (C{-I}, C{-J}, C{I@}, C{J@}) against the pillar cache
(L{salttwist.master.pillarcache.PillarCache}); a minion whose grains or
pillar are not cached is expected whenever the target may match it, and
decides for itself.
"""

from __future__ import annotations

import re
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger
from zope.interface import implementer

from salttwist import crypt, serial, wire
from salttwist.blocking import RunBlocking
from salttwist.interfaces import IEventBus, IJobCache
from salttwist.jid import JidGenerator
from salttwist.master.acl import FIND_JOB, AclRefused, Decision, PublisherAcl
from salttwist.master.grainscache import GrainsCache
from salttwist.master.interfaces import IJobPublisher, IMinionSession, ISessions
from salttwist.master.jobcache import JobCacheError
from salttwist.master.jobcachequeue import JobCacheQueueFull
from salttwist.master.jobs import JobRegistry
from salttwist.master.keys import PublicationKey
from salttwist.master.keywatch import AcceptedIds
from salttwist.master.pillarcache import PillarCache
from salttwist.targeting import TargetError, compileTarget, expandNodegroup

FUNCTION_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+\Z")
#: Targeting is done on the reactor, without a thread hop, when the accepted
#: ids are already listed and there are at most this many (matching a grain
#: target against 256 minions takes about a millisecond); else in a thread.
INLINE_TARGETING_MAX = 256
#: What targeting a publish gives (L{JobPublisher.clientPublish}): the
#: minions, the ACL's decision, and the accepted ids it matched (with the
#: generation of their listing) for the reactor to keep.
_Targeted = tuple[list[str], "Decision | None", tuple[int, frozenset[str]]]


def publishableTarget(tgt: Any, tgtType: str, nodegroups: dict[str, Any]) -> tuple[Any, str]:
    """
    The target as minions can match it: a nodegroup, and every C{N@} word
    of a compound target, rewritten as compound words (as Salt's
    LocalClient does), since minions do not know the master's nodegroups.

    @raise TargetError: if a nodegroup is invalid.
    """
    if tgtType == "nodegroup":
        return " ".join(expandNodegroup(tgt, nodegroups)), "compound"
    if tgtType == "compound":
        words = tgt.split() if isinstance(tgt, str) else list(tgt)
        if any(isinstance(w, str) and w.startswith("N@") for w in words):
            out: list[str] = []
            for word in words:
                if isinstance(word, str) and word.startswith("N@"):
                    out += ["(", *expandNodegroup(word[2:], nodegroups), ")"]
                else:
                    out.append(word)
            return " ".join(out), "compound"
    return tgt, tgtType


class JobNotStored(ValueError):
    """
    A job was refused because the job cache could not store it. A
    L{ValueError}: the master's request channel answers the client with its
    message.
    """


JID_ATTEMPTS = 100
"""
How many jids L{reserveJid} tries for one job before it is refused: each
one taken means another master made the same jid in the same microsecond.
"""

_log = Logger(namespace="salttwist.master.core.Master")


def reserveJid(
    jobCache: Any,
    jids: JidGenerator,
    load: dict[str, Any],
    minions: list[str],
    attempts: int = JID_ATTEMPTS,
) -> Deferred[str]:
    """
    Store a new job's row in a job cache the masters share, under a jid no
    other job holds: C{jobCache.reserveJob} (see
    L{salttwist.master.jobcache_pg.PostgresJobCache.reserveJob}) stores it
    unless the database already holds the jid for another job, made by
    another master in the same microsecond; then the job takes C{jids}'
    next jid (larger: its generator made the one taken) and tries again.
    So two masters never hand out one jid for two jobs. A job another master
    made (a replay from the broker) is stored with C{storeJob}, never here.

    @param load: the job's load; its C{jid} is replaced by the one taken.
    @return: a L{Deferred} firing with the jid once the row is committed,
        failing with L{JobNotStored} after C{attempts} jids taken, or with
        the job cache's error.
    """

    async def reserve() -> str:
        for _ in range(attempts):
            jid = load["jid"]
            if await jobCache.reserveJob(jid, load, minions):
                return str(jid)
            load["jid"] = jids.next()
            _log.warn(
                "jid {jid} is already another job's (another master made it in the same "
                "microsecond): this job takes {next}",
                jid=jid,
                next=load["jid"],
            )
        raise JobNotStored(f"{wire.JOB_REFUSED} {attempts} jids in a row were other jobs'")

    return Deferred.fromCoroutine(reserve())


@implementer(IJobPublisher)
class JobPublisher:
    """
    The master's job publishing room.

    @ivar publicationKey: the current publication key (rotated by
        L{salttwist.master.keywatch.KeyWatch}).
    @ivar jobCache: the job cache, or L{None}.
    @ivar pillarCache: each minion's last compiled pillar, for pillar
        targets (C{-I}, C{-J}, C{I@}, C{J@}); a minion without one there
        may match them.
    """

    # The master's namespace: log lines read as they always did.
    log = Logger(namespace="salttwist.master.core.Master")

    def __init__(
        self,
        config: dict[str, Any],
        bus: IEventBus,
        clock: Any,
        runBlocking: RunBlocking,
        sessions: ISessions,
        accepted: AcceptedIds,
        grainsCache: GrainsCache,
        acl: PublisherAcl,
        jobs: JobRegistry,
        jids: JidGenerator,
        jobCache: IJobCache | None,
        pillarCache: PillarCache | None = None,
    ) -> None:
        self.config = config
        self.bus = bus
        self.clock = clock
        self.runBlocking = runBlocking
        self._sessions = sessions
        # The same dict as the sessions room's (never replaced): which
        # targeted minions are connected is looked up per job.
        self._subscribers = sessions.subscribers
        self._accepted = accepted
        self.grainsCache = grainsCache
        self.acl = acl
        self.jobs = jobs
        self.jids = jids
        self.jobCache = jobCache
        self.pillarCache = PillarCache() if pillarCache is None else pillarCache
        self.publicationKey = PublicationKey()
        self._publicationCipher: tuple[PublicationKey, crypt.AesCipher] | None = None
        #: The fan-out to the other masters of a cluster
        #: (L{salttwist.cluster.fanout.ClusterFanout}), or L{None}.
        self.cluster: Any = None

    def clientPublish(
        self, proto: IMinionSession | None, load: dict[str, Any]
    ) -> Deferred[dict[str, Any]]:
        """
        C{publish}: the local client sends a job. The master works out which
        accepted minions are targeted, then seals, signs and broadcasts it.

        A publisher_acl session publishes as its authenticated user, and
        only what L{PublisherAcl.authorize} allows for the minions the
        target reaches; when that relied on a target restriction and the
        target depends on grains, the job is published to those minions by
        name, so no minion whose grains differ from the master's cache runs
        it too. The blacklist applies to every session, as in Salt.

        @return: C{{"jid": ..., "minions": [...]}}.
        @raise AclRefused: the ACL refused it (the message says why).
        """
        fun, arg = load.get("fun"), load.get("arg", [])
        tgt, tgtType = load.get("tgt"), load.get("tgt_type", "glob")
        if not isinstance(fun, str) or not FUNCTION_NAME.match(fun):
            raise ValueError(f"invalid function name {fun!r}")
        if not isinstance(arg, list):
            raise ValueError("arg must be a list")
        if not isinstance(tgtType, str):
            raise ValueError("tgt_type must be a string")
        nodegroups = self.config.get("nodegroups") or {}
        try:
            matcher = compileTarget(tgt, tgtType, nodegroups=nodegroups)
            # Minions do not know the nodegroups: they get them spelled out.
            published, publishedType = publishableTarget(tgt, tgtType, nodegroups)
        except TargetError as e:
            raise ValueError(f"invalid target: {e}") from e
        aclSession = getattr(proto, "clientAcl", False)
        if aclSession:
            user = proto.clientUser
        else:
            claimed = load.get("user")
            user = claimed if isinstance(claimed, str) else getattr(proto, "clientUser", None)
            user = user or "root"
        ownJobMinions = self._ownJobMinions(user, fun, arg) if aclSession else None
        grainsById = dict(self.grainsCache.grains)
        # Taken as it is now (targeting may run in a thread; each pillar is
        # decoded there when looked up) only for a pillar target: other
        # targets pay nothing for it.
        pillarById = self.pillarCache.byId() if matcher.usesPillar else None
        acl = self.acl
        accepted = self._accepted

        def expected() -> _Targeted:
            listing = accepted.list()
            generation, acceptedIds = listing
            minions = matcher.select(acceptedIds, grainsById, pillarById)
            if aclSession:
                ownFindJob = ownJobMinions is not None and set(minions) <= ownJobMinions
                decision = acl.authorize(user, fun, minions, grainsById, ownFindJob)
                return minions, decision, listing
            if acl.enabled:
                acl.checkBlacklist(user, fun)
            return minions, None, listing

        def authorized(result: _Targeted) -> Any:
            minions, decision, listing = result
            accepted.keep(*listing)
            target, targetType = published, publishedType
            if decision is not None:
                # An ACL user's job goes to exactly the minions the ACL was
                # checked for, by name: not to minions whose real grains
                # differ from the master's cache, nor to one accepted since.
                target, targetType = list(minions), "list"
            return self._publishTo(minions, fun, arg, target, targetType, user)

        def refused(failure: Any) -> Any:
            if failure.check(AclRefused):
                self.log.warn("publish refused: {why}", why=failure.value)
            return failure

        if aclSession or accepted.ids is None or len(accepted.ids) > INLINE_TARGETING_MAX:
            # The key store may be listed, the ACL may look up the system's
            # groups, or there are many minions to match: off the reactor.
            d = self.runBlocking(expected)
        else:
            d = maybeDeferred(expected)
        return d.addCallback(authorized).addErrback(refused)

    def _ownJobMinions(self, user: str, fun: str, arg: list[Any]) -> frozenset[str] | None:
        """
        For C{saltutil.find_job} about one job of C{user}'s that this master
        remembers (the local client asks silent minions about its own job):
        the minions that job targeted.
        """
        if fun != FIND_JOB or len(arg) != 1 or not isinstance(arg[0], str):
            return None
        job = self.jobs.get(arg[0])
        if job is None or job.load.get("user") != user:
            return None
        return job.minions

    def newJob(
        self, minions: list[str], fun: str, arg: list[Any], tgt: Any, tgtType: str, user: str
    ) -> dict[str, Any] | Deferred[dict[str, Any]]:
        """
        Give a new job its jid and record it: in the registry, in the job
        cache, and as C{salt/job/<jid>/new} on the bus.

        With a job cache the masters share (it has C{reserveJob}), the jid
        is reserved there first, as a published job's is (L{reserveJid}):
        another master may have made the same jid. The job is recorded
        only once its row is committed.

        @return: the job's load (what is published to the minions); with a
            shared job cache, a L{Deferred} firing with it once reserved,
            or failing with the job cache's error (nothing recorded then).
        """
        load = self._jobLoad(fun, arg, tgt, tgtType, user)
        jobCache = self.jobCache
        if jobCache is not None and getattr(jobCache, "reserveJob", None) is not None:

            def reserved(_: str) -> dict[str, Any]:
                self._recordJob(load, minions)
                return load

            return reserveJid(jobCache, self.jids, load, minions).addCallback(reserved)
        if jobCache is not None:
            self._cacheWrite(jobCache.storeJob(load["jid"], load, minions))
        self._recordJob(load, minions)
        return load

    def _jobLoad(
        self, fun: str, arg: list[Any], tgt: Any, tgtType: str, user: str
    ) -> dict[str, Any]:
        """
        A new job's load, with its new jid.
        """
        return {
            "jid": self.jids.next(),
            "fun": fun,
            "arg": arg,
            "tgt": tgt,
            "tgt_type": tgtType,
            "user": user,
            "ts": self.clock.seconds(),
        }

    def _recordJob(self, load: dict[str, Any], minions: list[str]) -> None:
        """
        Record a job in the registry and fire C{salt/job/<jid>/new}.
        """
        jid, fun, arg, tgt, tgtType, user = (
            load["jid"],
            load["fun"],
            load["arg"],
            load["tgt"],
            load["tgt_type"],
            load["user"],
        )
        self.jobs.add(jid, load, minions)
        self.bus.fire(
            f"salt/job/{jid}/new",
            {
                "jid": jid,
                "tgt": tgt,
                "tgt_type": tgtType,
                "fun": fun,
                "arg": arg,
                "minions": minions,
                "user": user,
            },
        )

    def _publishTo(
        self, minions: list[str], fun: str, arg: list[Any], tgt: Any, tgtType: str, user: str
    ) -> Deferred[dict[str, Any]] | dict[str, Any]:
        if not minions:
            return {"jid": "", "minions": []}
        cluster = self.cluster
        if cluster is not None:
            # A job the other masters cannot get is refused, saying why
            # (ClusterUnavailable), before it has a jid.
            cluster.checkJobs(fun, arg, tgt, minions)
        load = self._jobLoad(fun, arg, tgt, tgtType, user)
        jobCache = self.jobCache
        if jobCache is None:
            return self._publishRecorded(load, minions)
        # The job's row is committed before any minion gets the job and
        # before the client learns the jid: a master killed after that
        # leaves the job in the cache, so the other masters (or this one
        # restarted) take its returns. The flush lets the row's batch start
        # at once instead of after the write interval.
        if getattr(jobCache, "reserveJob", None) is not None:
            # A job cache the masters share: the database gives a jid to
            # one job only, as two masters may make the same jid.
            stored = reserveJid(jobCache, self.jids, load, minions)
        else:
            stored = jobCache.storeJob(load["jid"], load, minions)
            flush = getattr(jobCache, "flush", None)
            if flush is not None:
                flush()

        def notStored(failure: Any) -> Any:
            # The job cache's own error (its server is away), or a refusal
            # that already says why (no free jid), says it all in a line;
            # anything else gets its traceback.
            message = "job {jid} refused: the job cache did not store it: {error}"
            if failure.check(JobNotStored):
                self.log.error(message, jid=load["jid"], error=failure.getErrorMessage())
                return failure
            if failure.check(JobCacheError, JobCacheQueueFull):
                self.log.error(message, jid=load["jid"], error=failure.getErrorMessage())
            else:
                self.log.failure(message, failure, jid=load["jid"], error=failure.getErrorMessage())
            raise JobNotStored(
                f"{wire.JOB_REFUSED} the job cache could not store it ({failure.value})"
            )

        stored.addCallbacks(lambda _: self._publishRecorded(load, minions), notStored)
        return stored

    def _publishRecorded(
        self, load: dict[str, Any], minions: list[str]
    ) -> Deferred[dict[str, Any]]:
        """
        Record a job whose row the job cache holds (if there is one), publish
        it to this master's minions and to the cluster.

        @return: a L{Deferred} of what the client is answered.
        """
        self._recordJob(load, minions)
        jid = load["jid"]
        d = self.publish(load)
        # Which targeted minions could receive it: the client does not wait
        # for the others (Salt reports them as not connected). In a cluster
        # a minion may be on any master: every targeted one is waited for.
        cluster = self.cluster
        if cluster is not None:
            cluster.jobPublished(load, minions)
            connected = list(minions)
        else:
            subscribers = self._subscribers
            connected = [m for m in minions if m in subscribers]
        return d.addCallback(lambda _: {"jid": jid, "minions": minions, "connected": connected})

    def _cacheWrite(self, d: Deferred[None]) -> None:
        # The job cache batches writes off the reactor; nobody waits for them,
        # but a failure must be seen.
        d.addErrback(self._cacheWriteFailed)

    def _cacheWriteFailed(self, failure: Any) -> None:
        self.log.failure("job cache write failed", failure)

    def publish(self, load: dict[str, Any]) -> Deferred[None]:
        """
        Seal C{load} with the publication key and write it to every
        subscriber, with the MAC of that subscriber's subscription.

        This runs on the reactor: sealing is one AES-GCM pass and one
        SHA-256, and each subscriber costs one HMAC of 48 bytes (about
        2 us), where an RSA signature cost the master a millisecond per
        job and every minion a verification.

        @return: a L{Deferred} that has fired (or failed, if C{load} cannot
            be serialised).
        """
        return maybeDeferred(self._publishNow, load)

    def _publishNow(self, load: dict[str, Any]) -> None:
        publication = self.publicationKey
        kid = publication.kid
        cached = self._publicationCipher
        if cached is None or cached[0] is not publication:
            # The expanded AES key, made once per publication key.
            cached = self._publicationCipher = (publication, publication.cipher())
        blob = cached[1].encrypt(serial.dumps(load), wire.publicationAad(kid))
        prefix = wire.publicationFramePrefix(blob, kid)
        macMessage = wire.publicationMacMessage(kid, crypt.sha256(blob))
        acknowledgingPrefix = wire.acknowledgingFramePrefixes(prefix)
        self._sessions.deliver(prefix, acknowledgingPrefix, macMessage)
