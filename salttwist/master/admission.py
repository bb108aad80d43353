# -*- test-case-name: tests.test_master_auth,tests.test_authtasks -*-
"""
Admission: who may open a session on the req channel.

L{Admission} answers C{_auth} (a minion: rate limits per address, a cap on
the authentications in flight, the bound on C{minions_pre}, the check in a
worker process or a thread, autosign) and C{_client_auth} (the local
client's MAC over the connection's challenge). It sees a connection only as
an L{IMinionSession}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from zope.interface import implementer

from salttwist import crypt, wire
from salttwist.blocking import RunBlocking
from salttwist.interfaces import IAutosignPolicy, IEventBus, IKeyStore
from salttwist.master.auth import (
    KEY_STORE_UNAVAILABLE,
    NONCE_BYTES,
    PENDING_FULL,
    Authenticator,
    AuthOutcome,
)
from salttwist.master.interfaces import IAdmission, IMinionSession
from salttwist.master.keys import MasterKeys, PublicationKey
from salttwist.master.ratelimit import LOG_INTERVAL, AuthRateLimiter
from salttwist.pki.keystore_pg import KeyStoreUnavailable
from salttwist.transport.framing import PREAUTH_DEADLINE
from salttwist.workers.batch import TaskBatcher

AUTHENTICATE_MANY_TASK = "salttwist.master.authtasks.authenticateMany"
#: While authentications keep coming, they go to the workers at most once
#: every this many seconds, together (and their replies under one
#: signature): see L{salttwist.workers.batch.TaskBatcher}'s C{holdFor}. One
#: after a quiet spell goes at once.
AUTH_BATCH_HOLD = 0.05
#: Authentications worked on at once; more are answered "busy" at once.
MAX_AUTH_IN_FLIGHT = 10000
#: Seconds at least between two counts of C{minions_pre} (after key events).
PENDING_RECOUNT_INTERVAL = 1.0
#: What a clear-text function gives: C{(reply, sessionKey or None, role,
#: minionId)}.
AuthResult = tuple[dict[str, Any], bytes | None, str | None, str | None]


@implementer(IAdmission)
class Admission:
    """
    The master's admission room.

    @ivar workers: the worker pool that checks authentication, or L{None}
        for threads (set once the pool is up).
    @ivar publishPort: the publish port told to minions in their reply.
    """

    # The master's namespace: log lines read as they always did.
    log = Logger(namespace="salttwist.master.core.Master")

    def __init__(
        self,
        config: dict[str, Any],
        masterKeys: MasterKeys,
        keyStore: IKeyStore,
        bus: IEventBus,
        runBlocking: RunBlocking,
        clock: Any,
        autosign: IAutosignPolicy,
        publicationKey: Callable[[], PublicationKey],
        workers: Any = None,
    ) -> None:
        """
        @param publicationKey: returns the current publication key (the job
            publisher's), sent to each minion accepted.
        """
        self.config = config
        self.masterKeys = masterKeys
        self.keyStore = keyStore
        self.bus = bus
        self.runBlocking = runBlocking
        self.clock = clock
        self.autosign = autosign
        self.workers = workers
        self._publicationKey = publicationKey
        self.publishPort: int = config["publish_port"]
        self._authInFlight = 0
        #: Per-address token buckets checked before any authentication work.
        self.authRate = AuthRateLimiter(
            config.get("auth_rate_limit", 10), config.get("auth_rate_burst", 100), clock
        )
        #: The most keys in C{minions_pre} (0: no cap).
        self.maxMinionsPre: int = config.get("max_minions_pre", 10000)
        #: Authentications worked on at once at most (C{max_auth_in_flight}).
        self.maxAuthInFlight: int = config.get("max_auth_in_flight", MAX_AUTH_IN_FLIGHT)
        #: Seconds a connection may take to authenticate (C{preauth_timeout}).
        self.preauthTimeout: float = config.get("preauth_timeout", PREAUTH_DEADLINE)
        # Keys in minions_pre as last counted plus those written since
        # (None: not counted yet). Only salt/key events (salttwist-key,
        # autosign) make it stale; they all take keys out of minions_pre, so
        # a stale count is too high, never too low.
        self._pendingCount: int | None = None
        self._pendingStale = False
        self._pendingCountedAt = float("-inf")
        self._pendingWaiters: list[Deferred[None]] = []
        self._pendingAddedWhileCounting = 0
        # Authentications in flight that may write a new pending key.
        self._pendingReserved = 0
        self._pendingFullRefused = 0
        self._pendingFullLogged: float | None = None
        self._storeDownRefused = 0
        self._storeDownLogged: float | None = None
        self._authBatcher: TaskBatcher | None = None
        self.authenticator = Authenticator(
            keyStore,
            masterKeys,
            publicationKey,
            lambda: self.publishPort,
        )

    def keysChanged(self, act: object) -> None:
        """
        A C{salt/key} event: unless it added a pending key, keys left
        C{minions_pre} (or may have), so count it again, lazily.
        """
        if act != "pend":
            self._pendingStale = True

    def clearAuth(self, proto: IMinionSession, load: dict[str, Any]) -> Deferred[AuthResult]:
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

        def storeDown(failure: Any) -> AuthOutcome:
            # The key store (PostgreSQL) cannot be reached: the minion is
            # told to retry, and the log says why, once in a while.
            failure.trap(KeyStoreUnavailable)
            return AuthOutcome({"ret": "error", "error": KEY_STORE_UNAVAILABLE})

        d = self._pendingRoom().addCallback(start)
        d.addCallback(autosign)
        d.addErrback(storeDown)

        def done(outcome: AuthOutcome) -> AuthResult:
            if any(t == "salt/key" and e.get("act") == "pend" for t, e in outcome.events):
                self._pendingAdded()
            if outcome.reply.get("error") == PENDING_FULL:
                self._logPendingFull()
            elif outcome.reply.get("error") == KEY_STORE_UNAVAILABLE:
                self._logStoreDown()
            why = outcome.reply.get("error")
            if self.workers is not None and str(why).startswith(("invalid minion id", "minion id")):
                # A worker's own log line does not reach the master's log.
                self.log.warn("auth from {peer} refused: {why}", peer=proto.peerName, why=why)
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
            if not failure.check(KeyStoreUnavailable):
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

    def _logStoreDown(self) -> None:
        """
        Log refusals while the key store is unavailable, at most once a
        minute, with the last error of the master's own store.
        """
        self._storeDownRefused += 1
        now = float(self.clock.seconds())
        if self._storeDownLogged is None or now - self._storeDownLogged >= LOG_INTERVAL:
            self.log.error(
                "authentications refused: the key store is unavailable ({reason}); "
                "{n} refused since the last such line; minions retry",
                reason=getattr(self.keyStore, "lastError", "") or "see the key store's messages",
                n=self._storeDownRefused,
            )
            self._storeDownLogged = now
            self._storeDownRefused = 0

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
        publication = self._publicationKey()
        return publication.key, publication.kid, self.publishPort

    async def _autosign(
        self, outcome: AuthOutcome, proto: IMinionSession, load: dict[str, Any]
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

    def clearClientAuth(self, proto: IMinionSession, load: dict[str, Any]) -> AuthResult:
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
