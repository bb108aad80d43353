# -*- test-case-name: tests.test_master_core -*-
"""
The master's state and the handlers the req and pub channels dispatch to.

Protocols parse bytes and call one method here; everything the master knows
(sessions, subscribers, recent jobs, keys) lives on L{Master}. Blocking or
CPU-heavy work goes elsewhere: authentication to the worker processes (or
C{runBlocking} until they are up), key-store listings to C{runBlocking} (a
thread), job-cache writes to the cache's own thread or worker. Signing a
publication (an RSA signature of about a millisecond that holds the GIL,
so a thread would not let the reactor run meanwhile) and targeting against
the accepted ids already listed are done on the reactor: a job's path has
no thread hop.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.logger import Logger

from salttwist import crypt, serial, wire
from salttwist.args import parseArgs
from salttwist.blocking import RunBlocking, runSynchronously  # noqa: F401 (re-exported)
from salttwist.daemon import StartupError
from salttwist.interfaces import IAutosignPolicy, IEventBus, IJobCache, IKeyStore
from salttwist.jid import JidGenerator, isJid
from salttwist.master.acl import FIND_JOB, AclRefused, Decision, PublisherAcl, SystemUserDatabase
from salttwist.master.auth import NONCE_BYTES, PENDING_FULL, Authenticator, AuthOutcome
from salttwist.master.grainscache import GrainsCache
from salttwist.master.jobs import JobRegistry
from salttwist.master.keys import MasterKeys, PublicationKey
from salttwist.master.maintenance import RequestStats
from salttwist.master.ratelimit import LOG_INTERVAL, AuthRateLimiter, EventRateLimiter
from salttwist.pki.autosign import buildAutosignPolicy
from salttwist.pki.ids import InvalidMinionId, validateMinionId
from salttwist.runners import RunnerContext, WorkerPlacement, loadRunners, workerPlacement
from salttwist.targeting import (
    TargetError,
    checkMinions,
    expandNodegroup,
    validateTarget,
)
from salttwist.transport.framing import PREAUTH_DEADLINE
from salttwist.workers.batch import TaskBatcher

if TYPE_CHECKING:
    from salttwist.master.publisher import PubServerProtocol
    from salttwist.master.reqserver import ReqServerProtocol

AUTHENTICATE_MANY_TASK = "salttwist.master.authtasks.authenticateMany"
#: While authentications keep coming, they go to the workers at most once
#: every this many seconds, together (and their replies under one
#: signature): see L{salttwist.workers.batch.TaskBatcher}'s C{holdFor}. One
#: after a quiet spell goes at once.
AUTH_BATCH_HOLD = 0.05
#: The worker tasks that run runners marked L{salttwist.runners.inWorker}.
RUN_RUNNER_TASK = "salttwist.master.runnertasks.runRunner"
RUN_IDEMPOTENT_RUNNER_TASK = "salttwist.master.runnertasks.runIdempotentRunner"
#: Exceptions a runner raises in a worker that the master raises again as
#: themselves, so the client gets the same answer as from the master.
_RUNNER_ERRORS: dict[str, type[Exception]] = {"ValueError": ValueError, "TypeError": TypeError}
#: Authentications worked on at once; more are answered "busy" at once.
MAX_AUTH_IN_FLIGHT = 10000
#: Seconds at least between two counts of C{minions_pre} (after key events).
PENDING_RECOUNT_INTERVAL = 1.0
FUNCTION_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+\Z")
#: The jid a minion puts in a return the master did not publish
#: (C{salttwist-call}); the master gives it a real jid (Salt's C{req}).
REQ_JID = "req"
#: Targeting is done on the reactor, without a thread hop, when the accepted
#: ids are already listed and there are at most this many (matching a grain
#: target against 256 minions takes about a millisecond); else in a thread.
INLINE_TARGETING_MAX = 256
#: Seconds at most the acknowledgement of a job's return is held back
#: (L{Master.holdingReplies}): while jobs keep coming, each minion gets its
#: acknowledgements inside its next publication frame (or on its req
#: connection right after, if it did not ask for that), in the same wake-up;
#: otherwise they go this long after the return came, well before the
#: minion would keep the return on disk (its C{PERSIST_AFTER}, 1 s). Long
#: enough for a busy master's next publication to come first (jobs a few
#: hundred milliseconds apart): an acknowledgement sent alone costs the
#: master a seal and a write, and the minion a wake-up. A minion that stops
#: does not wait for it: it leaves the pub channel, and the master sends
#: what it holds for a subscription that ends at once (L{unsubscribe}).
ACK_DELAY = 0.2
#: What targeting a publish gives (L{Master.clientPublish}): the minions,
#: the ACL's decision, and the accepted ids it matched (with the generation
#: of their listing) for the reactor to keep.
_Targeted = tuple[list[str], "Decision | None", tuple[int, frozenset[str]]]
#: Transient sessions (C{salttwist-call}) kept per minion id; opening one
#: more closes the oldest.
MAX_TRANSIENT_SESSIONS = 16
#: The longest tag a minion may fire (as the event pull socket's limit).
MAX_EVENT_TAG = 512
#: The most bytes a minion event's data may take, serialised (Salt's
#: C{max_event_size} default): every bus subscriber may queue it.
MAX_EVENT_DATA_BYTES = 1048576
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
AuthResult = tuple[dict[str, Any], bytes | None, str | None, str | None]


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


def minionTagProblem(minionId: str, tag: object) -> str | None:
    """
    The tag rule for events a minion sends (C{_minion_event}): it must not
    forge the master's own events. A tag is a string of 1 to
    L{MAX_EVENT_TAG} characters without control characters; under C{salt/}
    only C{salt/minion/<the sender's id>/...} is allowed. Every other tag
    (C{myco/deploy/done}) is the minion's own business.

    @return: L{None} if C{minionId} may fire C{tag}, else why not.
    """
    if not isinstance(tag, str) or not tag:
        return "the tag must be a non-empty string"
    if len(tag) > MAX_EVENT_TAG:
        return f"the tag is longer than {MAX_EVENT_TAG} characters"
    if _CONTROL.search(tag):
        return "the tag holds control characters"
    own = f"salt/minion/{minionId}/"
    if tag.startswith("salt/") and not tag.startswith(own):
        return f"tags under salt/ are the master's; a minion may only fire {own}... among them"
    return None


class Master:
    """
    The master's shared state.

    @ivar sessions: authenticated minion req sessions by minion id.
    @ivar transients: the transient sessions (C{salttwist-call}) of each
        minion id, oldest first; they never replace or close C{sessions}.
    @ivar subscribers: the connection each subscribed minion receives its
        publications on, by minion id: its pub connection, or its req
        session's own for a minion with C{single_connection}
        (L{sessionSubscribe}).
    """

    log = Logger()

    def __init__(
        self,
        config: dict[str, Any],
        masterKeys: MasterKeys,
        keyStore: IKeyStore,
        bus: IEventBus,
        runBlocking: RunBlocking,
        clock: Any,
        grainsCache: GrainsCache | None = None,
        autosign: IAutosignPolicy | None = None,
        jobCache: IJobCache | None = None,
        workers: Any = None,
    ) -> None:
        self.config = config
        self.masterKeys = masterKeys
        self.keyStore = keyStore
        self.bus = bus
        self.runBlocking = runBlocking
        self.clock = clock
        self.maxFrameBytes: int = config["max_frame_bytes"]
        self.publicationKey = PublicationKey()
        self._publicationCipher: tuple[PublicationKey, crypt.AesCipher] | None = None
        self.publishPort: int = config["publish_port"]
        self.sessions: dict[str, ReqServerProtocol] = {}
        self.transients: dict[str, dict[ReqServerProtocol, None]] = {}
        self.subscribers: dict[str, PubServerProtocol | ReqServerProtocol] = {}
        self.grainsCache = grainsCache or GrainsCache(None, runBlocking)
        self.jobCache = jobCache
        self._authInFlight = 0
        #: Per-address token buckets checked before any authentication work.
        self.authRate = AuthRateLimiter(
            config.get("auth_rate_limit", 10), config.get("auth_rate_burst", 100), clock
        )
        #: Per-minion token buckets for the events minions fire on the bus.
        self.eventRate = EventRateLimiter(
            config.get("minion_event_rate_limit", 100),
            config.get("minion_event_rate_burst", 1000),
            clock,
        )
        #: The most keys in C{minions_pre} (0: no cap).
        self.maxMinionsPre: int = config.get("max_minions_pre", 10000)
        #: Seconds a connection may take to authenticate (C{preauth_timeout}).
        self.preauthTimeout: float = config.get("preauth_timeout", PREAUTH_DEADLINE)
        #: Authentications worked on at once at most (C{max_auth_in_flight}).
        self.maxAuthInFlight: int = config.get("max_auth_in_flight", MAX_AUTH_IN_FLIGHT)
        # Keys in minions_pre as last counted plus those written since
        # (None: not counted yet). Only salt/key events (salttwist-key,
        # autosign) make it stale; they all take keys out of minions_pre, so
        # a stale count is too high, never too low.
        self._pendingCount: int | None = None
        self._pendingStale = False
        #: The accepted minion ids as last listed (for targeting a
        #: publication without listing thousands of keys each time), and
        #: the generation it belongs to: every C{salt/key} event starts a
        #: new one, and a listing begun in an older one is not kept.
        self._acceptedIds: frozenset[str] | None = None
        self._acceptedGeneration = 0
        self._pendingCountedAt = float("-inf")
        self._pendingWaiters: list[Deferred[None]] = []
        self._pendingAddedWhileCounting = 0
        # Authentications in flight that may write a new pending key.
        self._pendingReserved = 0
        self._pendingFullRefused = 0
        self._pendingFullLogged: float | None = None
        #: The worker pool that checks authentication, or L{None} for threads.
        self.workers = workers
        self._authBatcher: TaskBatcher | None = None
        self.runners = loadRunners()
        self.jobs = JobRegistry()
        #: The sessions holding replies back (L{holdingReplies}), with when
        #: each began to, oldest first; and the delayed call that sends
        #: those held for L{ACK_DELAY}.
        self._replyHolders: dict[ReqServerProtocol, float] = {}
        self._replyTimer: Any = None
        #: Req-channel requests handled per command, for C{master_stats}.
        self.requestStats = RequestStats()
        self.jids = JidGenerator()
        self.authenticator = Authenticator(
            keyStore,
            masterKeys,
            lambda: self.publicationKey,
            lambda: self.publishPort,
        )
        self.autosign = autosign or buildAutosignPolicy(config, clock, runBlocking=runBlocking)
        try:
            #: Who besides the master's own user may publish what.
            self.acl = PublisherAcl.fromConfig(config, SystemUserDatabase())
        except ValueError as e:
            raise StartupError(f"{config.get('conf_file', 'the master config')}: {e}") from e
        bus.subscribe(["salt/key"], self.keyEvent)

    # -- clear-text functions -------------------------------------------------

    def clearAuth(self, proto: ReqServerProtocol, load: dict[str, Any]) -> Deferred[AuthResult]:
        """
        C{_auth}: a minion authenticates (off the reactor thread).

        At most C{max_auth_in_flight} (L{MAX_AUTH_IN_FLIGHT}) authentications
        are worked on at once, and each source address may spend
        C{auth_rate_burst} tokens at once and C{auth_rate_limit} per second
        on authentications that do not end I{accepted} (pending, rejected,
        denied, failed; accepted minions behind one NAT address are never
        throttled): beyond that a request is answered
        "busy" before any RSA or disk work (the minion backs off and
        retries), so a flood of authentications cannot queue unbounded work;
        established sessions are not affected.

        A new id is added to C{minions_pre} only while fewer than
        C{max_minions_pre} keys are pending there (counting the
        authentications in flight that may add one), else it is refused with
        nothing written; the worker that checks the request is told so.
        """
        if not self.authRate.allow(proto.peerName):
            return succeed(
                (
                    {
                        "ret": "error",
                        "error": "master busy: too many authentications from your address; "
                        "retry later",
                    },
                    None,
                    None,
                    None,
                )
            )
        if self._authInFlight >= self.maxAuthInFlight:
            self.log.warn(
                "authentication from {peer} refused: {n} already in progress",
                peer=proto.peerName,
                n=self._authInFlight,
            )
            return succeed(
                (
                    {"ret": "error", "error": "master busy: too many authentications; retry later"},
                    None,
                    None,
                    None,
                )
            )
        self._authInFlight += 1
        reserved = False

        def start(room: bool) -> Deferred[AuthOutcome]:
            nonlocal reserved
            if room:
                reserved = True
                self._pendingReserved += 1
            return self.authenticate(load, proto.challenge, proto.peerName, room)

        def autosign(outcome: AuthOutcome) -> Any:
            if not outcome.undecided:
                # Decided already (most requests): no coroutine for nothing.
                return outcome
            return Deferred.fromCoroutine(self._autosign(outcome, proto, load))

        d = self._pendingRoom().addCallback(start)
        d.addCallback(autosign)

        def done(outcome: AuthOutcome) -> AuthResult:
            if any(t == "salt/key" and e.get("act") == "pend" for t, e in outcome.events):
                self._pendingAdded()
            if outcome.reply.get("error") == PENDING_FULL:
                self._logPendingFull()
            for tag, data in outcome.events:
                self.bus.fire(tag, data)
            role = None
            if outcome.sessionKey is not None:
                role = "transient" if load.get("transient") is True else "minion"
            return outcome.reply, outcome.sessionKey, role, outcome.minionId

        def finished(result: Any) -> Any:
            self._authInFlight -= 1
            if reserved:
                self._pendingReserved -= 1
            if isinstance(result, tuple) and result[0].get("ret") != "accepted":
                # Only a request found not to be an accepted minion's spends
                # the address's tokens (see AuthRateLimiter.charge); one the
                # master failed to check (its own error, logged) does not:
                # a master bug must not lock out every minion behind an
                # address. The in-flight cap still bounds that work.
                self.authRate.charge(proto.peerName)
            return result

        return d.addCallback(done).addBoth(finished)

    def _pendingRoom(self) -> Deferred[bool]:
        """
        May one more authentication add a key to C{minions_pre}? Counts the
        directory off the reactor the first time, and again (at most every
        L{PENDING_RECOUNT_INTERVAL} seconds, in the background) after a
        C{salt/key} event made the count stale; never per request.
        """
        if self.maxMinionsPre <= 0:
            return succeed(True)

        def room(_: object = None) -> bool:
            assert self._pendingCount is not None
            return self._pendingCount + self._pendingReserved < self.maxMinionsPre

        if self._pendingCount is None:
            return self._countPending().addCallback(room)
        if (
            self._pendingStale
            and not self._pendingWaiters
            and self.clock.seconds() - self._pendingCountedAt >= PENDING_RECOUNT_INTERVAL
        ):
            self._countPending().addErrback(lambda _: None)
        return succeed(room())

    def _countPending(self) -> Deferred[None]:
        """
        Count C{minions_pre} (one count at a time; later callers wait for it).
        """
        waiter: Deferred[None] = Deferred()
        self._pendingWaiters.append(waiter)
        if len(self._pendingWaiters) > 1:
            return waiter
        self._pendingStale = False
        self._pendingAddedWhileCounting = 0
        self._pendingCountedAt = float(self.clock.seconds())

        def counted(n: int) -> None:
            # Keys written while the directory was read may or may not be
            # in n: count them again (too high is safe, too low is not).
            self._pendingCount = n + self._pendingAddedWhileCounting
            waiters, self._pendingWaiters = self._pendingWaiters, []
            for w in waiters:
                w.callback(None)

        def failed(failure: Any) -> None:
            self.log.failure("counting the keys in minions_pre failed", failure)
            self._pendingStale = True
            waiters, self._pendingWaiters = self._pendingWaiters, []
            for w in waiters:
                w.errback(failure)

        self.runBlocking(lambda: len(self.keyStore.listKeys("minions_pre"))).addCallbacks(
            counted, failed
        )
        return waiter

    def _pendingAdded(self) -> None:
        """
        An authentication wrote a new key to C{minions_pre}.
        """
        if self._pendingCount is not None:
            self._pendingCount += 1
        if self._pendingWaiters:
            self._pendingAddedWhileCounting += 1

    def _logPendingFull(self) -> None:
        """
        Log refusals for a full C{minions_pre}, at most once a minute.
        """
        self._pendingFullRefused += 1
        now = float(self.clock.seconds())
        if self._pendingFullLogged is None or now - self._pendingFullLogged >= LOG_INTERVAL:
            self.log.warn(
                "new minion ids refused: {max} keys pending in minions_pre (max_minions_pre); "
                "{n} refused since the last such line; accept, reject or delete pending keys",
                max=self.maxMinionsPre,
                n=self._pendingFullRefused,
            )
            self._pendingFullLogged = now
            self._pendingFullRefused = 0

    def authenticate(
        self,
        load: dict[str, Any],
        challenge: bytes,
        peer: str,
        allowNewPending: bool = True,
    ) -> Deferred[AuthOutcome]:
        """
        Check one C{_auth} request off the reactor: in a worker process when
        the master has a worker pool, else in a thread.

        @param allowNewPending: whether an unknown id may be added to
            C{minions_pre} (see L{Authenticator.authenticate}).
        """
        if self.workers is None:
            return self.runBlocking(
                self.authenticator.authenticate, load, challenge, peer, allowNewPending
            )
        # Through a batcher: requests that come while others are checked
        # (or within AUTH_BATCH_HOLD of the last call) go together in one
        # task call, and their replies under one RSA signature; in an auth
        # storm the per-call cost was about that of the check itself.
        batcher = self._authBatcher
        if batcher is None or batcher.pool is not self.workers:
            batcher = self._authBatcher = TaskBatcher(
                self.workers,
                AUTHENTICATE_MANY_TASK,
                self._authBatchArguments,
                clock=self.clock,
                holdFor=AUTH_BATCH_HOLD,
            )
        d = batcher.run(load, challenge, peer, allowNewPending)
        return d.addCallback(AuthOutcome.fromFields)

    def _authBatchArguments(self) -> tuple[bytes, int, int]:
        """
        @return: what every request of a batch of authentications is
            answered with: the publication key and its id, and the publish
            port, current when the batch is sent.
        """
        publication = self.publicationKey
        return publication.key, publication.kid, self.publishPort

    async def _autosign(
        self, outcome: AuthOutcome, proto: ReqServerProtocol, load: dict[str, Any]
    ) -> AuthOutcome:
        """
        For a pending key no admin has decided on, ask the autosign policy
        (on the reactor thread: it may spawn a process or make a request).
        Accepted: the key moves to C{minions} and the request is checked
        again, now as an accepted minion. Rejected: it moves to
        C{minions_rejected}. Either way a C{salt/key} event names the policy
        that decided; a pending decision is added to the C{salt/auth} event.
        """
        if not outcome.undecided or outcome.minionId is None or outcome.pem is None:
            return outcome
        minionId = outcome.minionId
        context = {"peer": proto.peerName, "autosign_grains": load.get("autosign_grains")}
        decision = await self.autosign.decide(minionId, outcome.pem, context)
        why = {"policy": decision.policy, "reason": decision.reason}
        if decision.verdict == "pending":
            for tag, data in outcome.events:
                if tag == "salt/auth":
                    data.update(why)
            return outcome
        target = "minions" if decision.verdict == "accept" else "minions_rejected"
        moved = await self.runBlocking(self.keyStore.moveKey, minionId, "minions_pre", target)
        if not moved:
            # An admin (or another connection) changed the key meanwhile:
            # their decision stands; this request stays pending.
            return outcome
        act = "accept" if decision.verdict == "accept" else "reject"
        events = [*outcome.events, ("salt/key", {"act": act, "id": minionId, **why})]
        if decision.verdict == "reject":
            return AuthOutcome({"ret": "rejected"}, minionId, events=events)
        again = await self.authenticate(load, proto.challenge, proto.peerName)
        again.events[:0] = events
        return again

    def clearClientAuth(self, proto: ReqServerProtocol, load: dict[str, Any]) -> AuthResult:
        """
        C{_client_auth}: the local client proves it can read a key by a MAC
        over this connection's challenge (and the C{user} it names, if
        any); the session key is derived from both, so the key itself never
        crosses the wire.

        Which key: the one of the named user if C{publisher_acl} gave that
        user one, else the root key. The session's user
        (C{proto.clientUser}) is what the key proves: a publisher_acl key
        proves its user, whose publishes the ACL then checks
        (C{proto.clientAcl}); the root key proves the master's own user or
        root, who may name themselves (Salt's C{sudo_<user>}) and publish
        anything.
        """
        nonce, mac, user = load.get("nonce"), load.get("mac"), load.get("user")
        userKey = self.masterKeys.userKeys.get(user) if isinstance(user, str) else None
        key = userKey if userKey is not None else self.masterKeys.rootKey
        if (
            (user is None or isinstance(user, str))
            and isinstance(nonce, bytes)
            and len(nonce) == NONCE_BYTES
        ):
            message = wire.clientAuthMessage(proto.challenge, nonce, user)
            if crypt.hmacEqual(crypt.hmacSha256(key, message), mac):  # type: ignore[arg-type]
                proto.clientUser = user if user is not None else "root"
                proto.clientAcl = userKey is not None
                sessionKey = crypt.deriveKey(key, wire.clientSessionContext(proto.challenge, nonce))
                return {"ret": "ok"}, sessionKey, "client", None
        self.log.warn(
            "local client authentication from {peer} as {user!r} failed",
            peer=proto.peerName,
            user=user,
        )
        return {"ret": "error", "error": "client authentication failed"}, None, None, None

    # -- sessions and subscriptions -----------------------------------------

    def sessionStarted(self, proto: ReqServerProtocol) -> None:
        """
        A req session opened; a minion's replaces any older one of its id.

        A transient session (C{salttwist-call} beside the minion daemon) is
        kept apart: it replaces nothing, so the daemon stays connected and
        subscribed, and it cannot subscribe itself. At most
        L{MAX_TRANSIENT_SESSIONS} are kept per minion; the oldest goes.
        """
        if proto.role == "transient" and proto.minionId is not None:
            transients = self.transients.setdefault(proto.minionId, {})
            transients[proto] = None
            while len(transients) > MAX_TRANSIENT_SESSIONS:
                oldest = next(iter(transients))
                del transients[oldest]
                oldest.transport.loseConnection()
            return
        if proto.role != "minion" or proto.minionId is None:
            return
        if self._acceptedIds is not None and proto.minionId not in self._acceptedIds:
            # Accepted since the last listing (auto_accept fires no
            # salt/key event): the next publication must target it.
            self._forgetAcceptedIds()
        old = self.sessions.get(proto.minionId)
        self.sessions[proto.minionId] = proto
        if old is not None and old is not proto:
            self.log.info(
                "minion {id} re-authenticated; closing its old session", id=proto.minionId
            )
            old.transport.loseConnection()
            # The old session's pub subscription goes with it: the minion
            # subscribes again with a token from its new session.
            subscriber = self.subscribers.pop(proto.minionId, None)
            if subscriber is not None:
                subscriber.transport.loseConnection()

    def sessionEnded(self, proto: ReqServerProtocol) -> None:
        """
        A req session closed: its pub subscription ends with it.
        """
        minionId = proto.minionId
        if proto.role == "transient" and minionId is not None:
            transients = self.transients.get(minionId, {})
            transients.pop(proto, None)
            if not transients:
                self.transients.pop(minionId, None)
            return
        self._replyHolders.pop(proto, None)
        if minionId is None or self.sessions.get(minionId) is not proto:
            return
        del self.sessions[minionId]
        subscriber = self.subscribers.pop(minionId, None)
        if subscriber is not None:
            subscriber.transport.loseConnection()

    def holdingReplies(self, proto: ReqServerProtocol) -> None:
        """
        C{proto} holds replies back (the acknowledgements of returns, see
        L{salttwist.master.reqserver.HELD_REPLIES}): they go with the next
        publication (L{_publishNow}), or L{ACK_DELAY} seconds from now,
        whichever comes first.
        """
        holders = self._replyHolders
        # Oldest first: a holder that sent its replies meanwhile (before a
        # reply sent at once) goes to the end again.
        holders.pop(proto, None)
        holders[proto] = self.clock.seconds()
        if self._replyTimer is None:
            self._replyTimer = self.clock.callLater(ACK_DELAY, self._sendDueReplies)

    def _sendDueReplies(self) -> None:
        """
        Send the replies held for L{ACK_DELAY} seconds; come back when the
        oldest of the others is due. The holders are kept oldest first, so
        this looks at the due ones and one more, not at every holder.
        """
        self._replyTimer = None
        now = self.clock.seconds()
        holders = self._replyHolders
        due = []
        for proto, since in holders.items():
            if since + ACK_DELAY > now + 1e-6:
                break
            due.append(proto)
        for proto in due:
            if holders.pop(proto, None) is not None:
                proto.sendHeld()
        oldest = next(iter(holders.values()), None)
        if oldest is not None:
            self._replyTimer = self.clock.callLater(oldest + ACK_DELAY - now, self._sendDueReplies)

    def sendHeldReplies(self) -> None:
        """
        Send every reply held back now (after a publication: each minion
        then reads them when it wakes up for the publication).
        """
        holders, self._replyHolders = self._replyHolders, {}
        for proto in holders:
            proto.sendHeld()

    def subscribe(self, proto: PubServerProtocol, minionId: object, mac: object) -> str | None:
        """
        A minion asks for publications.

        @return: its id if the MAC proves it holds the current session of
            that id, else L{None}.
        """
        try:
            validId = validateMinionId(minionId)
        except InvalidMinionId as e:
            self.log.warn("pub subscription from {peer} refused: {e}", peer=proto.peerName, e=e)
            return None
        session = self.sessions.get(validId)
        key = session.sessionKey if session is not None else None
        if key is None:
            self.log.warn("pub subscription for {id} refused: no session", id=validId)
            return None
        token = crypt.deriveKey(key, wire.PUB_TOKEN_CONTEXT)
        expected = crypt.hmacSha256(token, wire.pubSubscribeMessage(proto.challenge, validId))
        if not crypt.hmacEqual(expected, mac):  # type: ignore[arg-type]
            self.log.warn("pub subscription for {id} refused: bad proof", id=validId)
            return None
        proto.session = session
        self._addSubscriber(validId, proto, token)
        return validId

    def sessionSubscribe(self, proto: ReqServerProtocol, load: dict[str, Any]) -> dict[str, Any]:
        """
        C{_subscribe}: a minion with C{single_connection} asks for its
        publications on this req session's connection instead of a pub
        connection. The session itself is the proof; the publications'
        MAC key derives from the session's pub token and this connection's
        challenge, as on a pub connection. With C{"acks": True}, the
        acknowledgements of its returns come with its publications.

        @return: the confirmation of L{subscribedFrame}.
        @raise ValueError: if this is not the minion's current session.
        """
        minionId = proto.minionId
        key = proto.sessionKey
        if minionId is None or key is None or self.sessions.get(minionId) is not proto:
            raise ValueError("only a minion's current session can subscribe")
        proto.carriesAcknowledgements = load.get("acks") is True
        self._addSubscriber(minionId, proto, crypt.deriveKey(key, wire.PUB_TOKEN_CONTEXT))
        return self.subscribedFrame(proto)

    def sessionUnsubscribe(self, proto: ReqServerProtocol, load: dict[str, Any]) -> dict[str, Any]:
        """
        C{_unsubscribe}: a stopping minion with C{single_connection} takes
        no more jobs (as closing its pub connection says otherwise); the
        replies held for its next publication are sent now.
        """
        if self.subscribers.get(proto.minionId) is proto:  # type: ignore[arg-type]
            self.unsubscribe(proto)
        return {"ret": True}

    def _addSubscriber(
        self, minionId: str, proto: PubServerProtocol | ReqServerProtocol, token: bytes
    ) -> None:
        """
        Make C{proto} the connection C{minionId}'s publications go to, with
        their MAC keyed from the session's pub C{token} and C{proto}'s
        challenge; close a pub connection it replaces, and fire Salt's
        C{salt/minion/<id>/start}.
        """
        proto.publicationMac = crypt.HmacSha256(
            crypt.deriveKey(token, wire.publicationMacContext(proto.challenge, minionId))
        )
        old = self.subscribers.get(minionId)
        self.subscribers[minionId] = proto
        if old is not None and old is not proto and old is not self.sessions.get(minionId):
            old.transport.loseConnection()
        self.bus.fire(
            f"salt/minion/{minionId}/start",
            {
                "id": minionId,
                "cmd": "_minion_event",
                "data": f"Minion {minionId} started at {time.ctime()}",
            },
        )

    def subscribedFrame(self, proto: PubServerProtocol | ReqServerProtocol) -> dict[str, Any]:
        """
        The confirmation of a subscription: the master's clock now, MACed
        with the minion's pub token, so the minion refuses any publication
        stamped earlier (a recorded one replayed after it restarted).
        """
        assert proto.minionId is not None
        session = self.sessions[proto.minionId]
        token = crypt.deriveKey(session.sessionKey, wire.PUB_TOKEN_CONTEXT)  # type: ignore[arg-type]
        now = float(self.clock.seconds())
        mac = crypt.hmacSha256(
            token, wire.pubSubscribedMessage(proto.challenge, proto.minionId, now)
        )
        return {"ret": "subscribed", "now": now, "mac": mac}

    def unsubscribe(self, proto: PubServerProtocol | ReqServerProtocol) -> None:
        """
        A pub connection closed (or a minion with C{single_connection}
        unsubscribed). The replies its session holds back for a next
        publication are sent now: none will come on this connection (a
        stopping minion leaves the pub channel while it waits for the
        acknowledgements of its last returns).
        """
        if proto.minionId is not None and self.subscribers.get(proto.minionId) is proto:
            del self.subscribers[proto.minionId]
        session = proto.session
        if session is not None and self._replyHolders.pop(session, None) is not None:
            session.sendHeld()

    # -- trust taken back ----------------------------------------------------

    def rotatePublicationKey(self, reason: str) -> None:
        """
        Make a new publication key and hand it to every subscribed minion
        over the pub connection, sealed with a key derived from that
        minion's own session key: no RSA operation and no reconnect per
        minion. Minions without a session get it when they authenticate.
        """
        old = self.publicationKey
        new = PublicationKey(kid=old.kid + 1)
        self.publicationKey = new
        for minionId, subscriber in list(self.subscribers.items()):
            session = self.sessions.get(minionId)
            sessionKey = session.sessionKey if session is not None else None
            if sessionKey is None:
                subscriber.transport.loseConnection()
                continue
            wrap = crypt.AesCipher(crypt.deriveKey(sessionKey, wire.ROTATE_CONTEXT))
            blob = wrap.encrypt(serial.dumps({"key": new.key}), wire.rotationAad(new.kid))
            subscriber.sendFrame({"rotate": blob, "kid": new.kid})
        self.log.info(
            "publication key rotated to {kid} ({reason}); sent to {n} minions",
            kid=new.kid,
            reason=reason,
            n=len(self.subscribers),
        )

    def cutOff(self, minionId: str) -> bool:
        """
        Close the session, transient sessions and pub subscription of
        C{minionId}.

        @return: whether it had any.
        """
        session = self.sessions.pop(minionId, None)
        subscriber = self.subscribers.pop(minionId, None)
        transients = list(self.transients.pop(minionId, {}))
        for proto in (session, subscriber, *transients):
            if proto is not None:
                proto.transport.loseConnection()
        if session is not None or subscriber is not None or transients:
            self.log.warn("minion {id} is no longer accepted: cut off", id=minionId)
            return True
        return False

    def _connectedIds(self) -> set[str]:
        return set(self.sessions) | set(self.subscribers) | set(self.transients)

    def _connectionsOf(self, minionId: str) -> tuple[Any, ...]:
        return (
            self.sessions.get(minionId),
            self.subscribers.get(minionId),
            frozenset(self.transients.get(minionId, ())),
        )

    def keyEvent(self, tag: str, data: dict[str, Any]) -> None:
        """
        A C{salt/key} event (from salttwist-key, through the pull socket):
        check the key store at once, and rotate the publication key when a
        key was rejected or deleted.
        """
        act = data.get("act")
        self._forgetAcceptedIds()
        if act != "pend":
            # Keys left minions_pre (or may have): count it again, lazily.
            self._pendingStale = True
        if act == "delete" and isinstance(data.get("id"), str):
            with contextlib.suppress(InvalidMinionId):
                self.grainsCache.forget(data["id"])
        if act in ("reject", "delete"):
            done = "deleted" if act == "delete" else "rejected"
            self.reconcileKeys(rotateReason=f"key {data.get('id')!r} {done}")

    def _forgetAcceptedIds(self) -> None:
        """
        The accepted keys may have changed: list them again when next
        needed.
        """
        self._acceptedIds = None
        self._acceptedGeneration += 1

    def _listAcceptedIds(self) -> tuple[int, frozenset[str]]:
        """
        The accepted minion ids, from the last listing if no key changed
        since (blocking: may list the key store).

        @return: the generation the ids belong to, and the ids.
        """
        generation, cached = self._acceptedGeneration, self._acceptedIds
        if cached is not None:
            return generation, cached
        return generation, frozenset(self.keyStore.listKeys("minions"))

    def _keepAcceptedIds(self, generation: int, ids: frozenset[str]) -> None:
        """
        Remember C{ids} (listed in C{generation}) unless a key changed since.
        """
        if generation == self._acceptedGeneration:
            self._acceptedIds = ids

    def reconcileKeys(self, rotateReason: str | None = None) -> Deferred[None]:
        """
        Cut off every connected minion whose key is no longer accepted (on
        disk, whatever changed it), then rotate the publication key if one
        was cut off or C{rotateReason} asks for it. Runs every second, so
        the master acts on key changes within a second even without events.
        """

        # Only connections that existed before the key store was read may be
        # judged by what it said: a minion accepted and authenticated while
        # the directory was being listed must not be cut off.
        before = {m: self._connectionsOf(m) for m in self._connectedIds()}
        # Called when the key store changed: whatever was remembered is old.
        self._forgetAcceptedIds()
        generation = self._acceptedGeneration

        def accepted(_: object) -> frozenset[str]:
            return frozenset(self.keyStore.listKeys("minions"))

        def compare(acceptedIds: frozenset[str]) -> None:
            self._keepAcceptedIds(generation, acceptedIds)
            gone = [
                m
                for m, protos in before.items()
                if m not in acceptedIds and self._connectionsOf(m) == protos
            ]
            cut = [m for m in gone if self.cutOff(m)]
            if cut or rotateReason is not None:
                self.rotatePublicationKey(rotateReason or f"cut off {', '.join(sorted(cut))}")

        return self.runBlocking(accepted, None).addCallback(compare)

    # -- session functions ----------------------------------------------------

    def minionReturn(
        self, proto: ReqServerProtocol, load: dict[str, Any]
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
        return self._acceptReturn(minionId, jid, load)

    def _checkReturn(self, jid: str, minionId: str) -> None:
        problem = self.jobs.checkReturn(jid, minionId)
        if problem is not None:
            self.log.warn("return from {id} refused: {problem}", id=minionId, problem=problem)
            raise ValueError(f"return refused: {problem}")

    async def _lateReturn(self, minionId: str, jid: str, load: dict[str, Any]) -> dict[str, Any]:
        assert self.jobCache is not None
        job = await self.jobCache.getJob(jid)
        if job is not None and self.jobs.get(jid) is None:
            returned = await self.jobCache.getReturns(jid)
            if self.jobs.get(jid) is None:
                known = self.jobs.add(jid, job, list(job.get("minions") or []))
                known.returned.update(returned)
        self._checkReturn(jid, minionId)
        return self._acceptReturn(minionId, jid, load)

    def _reqReturn(self, minionId: str, load: dict[str, Any]) -> dict[str, Any]:
        """
        A return with jid C{req}, as Salt's master handles it: allocate a
        jid, record the job (C{fun}, C{arg} from C{fun_args}, C{tgt} the
        minion's id, C{tgt_type} C{list}, C{user}) in the registry and the
        job cache, fire C{salt/job/<jid>/new}, then take the return as one
        for that job (C{salt/job/<jid>/ret/<id>}).

        @return: C{{"ret": True, "jid": jid}}.
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
        jid = self._newJob([minionId], fun, arg, minionId, "list", user)["jid"]
        self._checkReturn(jid, minionId)
        return dict(self._acceptReturn(minionId, jid, load), jid=jid)

    def minionEvent(self, proto: ReqServerProtocol, load: dict[str, Any]) -> dict[str, Any]:
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
        self.bus.fire(tag, {"id": minionId, "tag": tag, "data": data, "cmd": "_minion_event"})
        return {"ret": True}

    def _acceptReturn(self, minionId: str, jid: str, load: dict[str, Any]) -> dict[str, Any]:
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
        self.bus.fire(f"salt/job/{jid}/ret/{minionId}", event)
        if self.jobCache is not None:
            self._cacheWrite(self.jobCache.storeReturn(jid, minionId, event))
        return {"ret": True}

    def minionGrains(
        self, proto: ReqServerProtocol, load: dict[str, Any]
    ) -> Deferred[dict[str, Any]]:
        """
        C{_grains}: a minion reports its grains, kept for master-side grain
        targeting. Only the session's own grains can be set.
        """
        assert proto.minionId is not None
        d = self.grainsCache.update(proto.minionId, load.get("grains"))  # type: ignore[arg-type]
        return d.addCallback(lambda _: {"ret": True})

    def clientPublish(
        self, proto: ReqServerProtocol, load: dict[str, Any]
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
            validateTarget(tgt, tgtType, nodegroups=nodegroups)
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
        acl = self.acl

        def expected() -> _Targeted:
            listing = self._listAcceptedIds()
            generation, acceptedIds = listing
            minions = checkMinions(
                acceptedIds,
                tgt,
                tgtType,
                grainsById=grainsById,
                nodegroups=nodegroups,
            )
            if aclSession:
                ownFindJob = ownJobMinions is not None and set(minions) <= ownJobMinions
                decision = acl.authorize(user, fun, minions, grainsById, ownFindJob)
                return minions, decision, listing
            if acl.enabled:
                acl.checkBlacklist(user, fun)
            return minions, None, listing

        def authorized(result: _Targeted) -> Any:
            minions, decision, listing = result
            self._keepAcceptedIds(*listing)
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

        if aclSession or self._acceptedIds is None or len(self._acceptedIds) > INLINE_TARGETING_MAX:
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

    def _newJob(
        self, minions: list[str], fun: str, arg: list[Any], tgt: Any, tgtType: str, user: str
    ) -> dict[str, Any]:
        """
        Give a new job its jid and record it: in the registry, in the job
        cache, and as C{salt/job/<jid>/new} on the bus.

        @return: the job's load (what is published to the minions).
        """
        jid = self.jids.next()
        load = {
            "jid": jid,
            "fun": fun,
            "arg": arg,
            "tgt": tgt,
            "tgt_type": tgtType,
            "user": user,
            "ts": self.clock.seconds(),
        }
        self.jobs.add(jid, load, minions)
        if self.jobCache is not None:
            self._cacheWrite(self.jobCache.storeJob(jid, load, minions))
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
        return load

    def _publishTo(
        self, minions: list[str], fun: str, arg: list[Any], tgt: Any, tgtType: str, user: str
    ) -> Deferred[dict[str, Any]] | dict[str, Any]:
        if not minions:
            return {"jid": "", "minions": []}
        load = self._newJob(minions, fun, arg, tgt, tgtType, user)
        jid = load["jid"]
        d = self.publish(load)
        # Which targeted minions could receive it: the client does not wait
        # for the others (Salt reports them as not connected).
        connected = [m for m in minions if m in self.subscribers]
        return d.addCallback(lambda _: {"jid": jid, "minions": minions, "connected": connected})

    def clientRunner(
        self, proto: ReqServerProtocol, load: dict[str, Any]
    ) -> Deferred[dict[str, Any]]:
        """
        C{runner}: the local client runs a runner function in the master
        (Salt's C{salt-run}). Fires C{salt/run/<jid>/new} and
        C{salt/run/<jid>/ret}.

        @return: C{{"jid": ..., "return": ...}}.
        """
        fun, arg = load.get("fun"), load.get("arg", [])
        if not isinstance(fun, str) or not FUNCTION_NAME.match(fun):
            raise ValueError(f"invalid runner name {fun!r}")
        if not isinstance(arg, list):
            raise ValueError("arg must be a list")
        if getattr(proto, "clientAcl", False):
            refusal = self.acl.refuseRunner(proto.clientUser, fun)
            self.log.warn("runner refused: {why}", why=refusal)
            raise refusal
        function = self.runners.get(fun)
        if function is None:
            raise ValueError(f"'{fun}' is not available.")
        user = load.get("user") if isinstance(load.get("user"), str) else "root"
        jid = self.jids.next()
        self.bus.fire(f"salt/run/{jid}/new", {"fun": fun, "arg": arg, "jid": jid, "user": user})
        args, kwargs = parseArgs(arg)

        def done(value: Any) -> dict[str, Any]:
            self.bus.fire(
                f"salt/run/{jid}/ret",
                {"fun": fun, "jid": jid, "user": user, "return": value, "success": True},
            )
            return {"jid": jid, "return": value}

        def failed(failure: Any) -> Any:
            self.bus.fire(
                f"salt/run/{jid}/ret",
                {
                    "fun": fun,
                    "jid": jid,
                    "user": user,
                    "return": str(failure.value),
                    "success": False,
                },
            )
            if failure.check(TypeError):
                raise ValueError(f"Passed invalid arguments to {fun}: {failure.value}")
            return failure

        placement = workerPlacement(function)
        if placement is not None and self._runnerMayUseWorker(placement, args, kwargs):
            d = Deferred.fromCoroutine(self._runnerInWorker(fun, placement, args, kwargs))
        else:
            d = maybeDeferred(function, RunnerContext(self, user), *args, **kwargs)
        return d.addCallbacks(done, failed)

    def _jobCachePath(self) -> str | None:
        """
        @return: the job cache's SQLite file, if it has one a worker can
            read.
        """
        path = getattr(self.jobCache, "path", None)
        return path if isinstance(path, str) else None

    def _runnerMayUseWorker(
        self, placement: WorkerPlacement, args: list[Any], kwargs: dict[str, Any]
    ) -> bool:
        """
        Whether a runner marked L{salttwist.runners.inWorker} runs in a
        worker this time: the master has workers, the job cache is readable
        there if the runner needs it, and its C{accepts} says yes.
        """
        if self.workers is None:
            return False
        if placement.needsJobCache and self._jobCachePath() is None:
            return False
        if placement.accepts is None:
            return True
        try:
            return bool(placement.accepts(*args, **kwargs))
        except Exception:
            # Bad arguments: the runner in the master reports them.
            return False

    async def _runnerInWorker(
        self, fun: str, placement: WorkerPlacement, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        """
        Run a runner in a worker process. A worker that dies or hangs fails
        it with a L{ValueError} saying so (after one retry for an
        idempotent runner), which the client sees as the runner's error.
        """
        from salttwist.workers import TaskError, WorkerError

        path = None
        if placement.needsJobCache:
            path = self._jobCachePath()
            flush = getattr(self.jobCache, "flush", None)
            if flush is not None:
                # The worker reads the file: let it see every write so far.
                await flush()
        name = RUN_IDEMPOTENT_RUNNER_TASK if placement.idempotent else RUN_RUNNER_TASK
        try:
            return await self.workers.run(name, fun, args, kwargs, self.config, path)
        except TaskError as e:
            local = _RUNNER_ERRORS.get(e.typeName)
            if local is None:
                raise
            raise local(e.message) from e
        except WorkerError as e:
            raise ValueError(f"runner {fun} did not complete: {e}") from e

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
        # Each minion's acknowledgements held back go with its publication:
        # in the frame itself if it asked for that and they all fit, else
        # on its req connection right after. Either way it reads them in the
        # wake-up the publication causes.
        holders = self._replyHolders
        for minionId, subscriber in list(self.subscribers.items()):
            mac = subscriber.publicationMac
            session = self.sessions.get(minionId)
            holding = session is not None and holders.pop(session, None) is not None
            rids = (
                session.takeHeldAcknowledgements()  # type: ignore[union-attr]
                if holding and subscriber.carriesAcknowledgements and subscriber.session is session
                else None
            )
            if rids:
                subscriber.sendString(
                    acknowledgingPrefix(rids)
                    + mac.mac(macMessage + wire.publicationAcksMessage(rids))  # type: ignore[union-attr]
                )
            else:
                subscriber.sendString(prefix + mac.mac(macMessage))  # type: ignore[union-attr]
            if holding:
                session.sendHeld()  # type: ignore[union-attr]
        self.sendHeldReplies()
