# -*- test-case-name: tests.test_minion,tests.test_minion_failover -*-
"""
The minion's connection to its master: authenticate on the req channel,
subscribe on the pub channel; what it runs is the job side's
(L{salttwist.minion.jobber}), what it sends back the return side's
(L{salttwist.minion.returns}).

The req connection is a L{ClientService}'s: it connects, and after a failure
or a lost connection waits as the minion's L{ReconnectPolicy} says (Salt's
C{recon_default}, C{recon_max}, C{recon_randomize}, or
C{acceptance_wait_time} while the key is pending). Each connection it makes
runs one attempt (L{Minion._attempt}): authenticate, then subscribe. Where
the minion is lives in its L{ConnectionMachine}; an attempt is over once
the machine has left its states, so an older attempt never acts on a newer
one.

Each attempt connects to the master its L{MasterList} names now: the one
master, or with C{master_type: failover} the next of the list after a
failure (L{Minion._moveOn}). A ready session is watched
(L{Minion._watch}): its master's answers every C{master_alive_interval}
seconds, and whether the first master is back (C{master_failback}).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from twisted.application.internet import ClientService
from twisted.internet.defer import Deferred, fail, maybeDeferred, succeed
from twisted.internet.error import ConnectionLost
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist import crypt, wire
from salttwist.events.bus import LocalEventBus
from salttwist.logs import infoLogged
from salttwist.minion.connection import (
    Attempt,
    AttemptFailed,
    ChannelEndpoint,
    ChannelFactory,
    ConnectTCP,
    ReconnectPolicy,
    newConnectionMachine,
)
from salttwist.minion.jobber import KILL_GRACE, Jobber
from salttwist.minion.masters import MasterAddress, MasterList, PinnedMasterCredentials
from salttwist.minion.pillar import MinionPillar
from salttwist.minion.pubclient import PubClientProtocol
from salttwist.minion.returns import PERSIST_AFTER, ReturnDelivery, StoredReturn
from salttwist.minion.returnsqueue import ReturnsQueue
from salttwist.modules.executor import Executor
from salttwist.pki.credentials import (  # MASTER_PUB_FILE is re-exported
    MASTER_PUB_FILE,  # noqa: F401
    AuthRefused,
    MasterIdentityError,
    MinionCredentials,
    authenticate,
)
from salttwist.transport.interfaces import ROLE_PUB, ROLE_REQ
from salttwist.transport.reqclient import ReqClientProtocol, RequestError

__all__ = [
    "ACKNOWLEDGEMENT_WAIT",
    "ANSWER_TIMEOUT",
    "AttemptFailed",
    "ConnectTCP",
    "MASTER_CONNECTED",
    "MASTER_DISCONNECTED",
    "MASTER_FAILBACK",
    "KILL_GRACE",
    "Minion",
    "PERSIST_AFTER",
    "STOP_GRACE",
    "SUBSCRIBE_GRACE",
    "StoredReturn",
]

#: Seconds before its subscription that a publication may be stamped and
#: still run (a job published while the minion was joining).
SUBSCRIBE_GRACE = 2.0
#: Seconds the minion waits for each answer of the master while connecting.
ANSWER_TIMEOUT = 30.0

#: Seconds a stopping minion (SIGTERM) gives its running jobs before it
#: sends them SIGTERM (then SIGKILL after L{KILL_GRACE}); see
#: L{Minion.shutdown}.
STOP_GRACE = 5.0

#: Seconds at most a stopping minion waits for the master to acknowledge
#: the returns it sent before it writes those still unacknowledged to disk:
#: a return sent just before SIGTERM is then not kept and sent again after
#: the next start. A master holds acknowledgements back for a next
#: publication (up to its C{ACK_DELAY}, 0.2 s), so the minion leaves the
#: pub channel first: the master then sends them at once.
ACKNOWLEDGEMENT_WAIT = 0.25

#: The tags Salt's minion fires on its own bus when its master connection
#: comes up and goes down (Salt's C{master_event(type=...)}), and when a
#: failover minion finds its first master back (C{master_failback}) and
#: leaves its current one for it.
MASTER_CONNECTED = "__master_connected"
MASTER_DISCONNECTED = "__master_disconnected"
MASTER_FAILBACK = "__master_failback"

#: The request a minion sends on its session every C{master_alive_interval}
#: seconds: any answer, an error too, proves the master alive (a master
#: that does not know the command answers that it is not available).
ALIVE_REQUEST = {"cmd": "_ping"}


class _QuietClientService(ClientService):
    """
    A L{ClientService} that leaves the logging of retries to the minion's
    L{ReconnectPolicy}, which says why it retries.
    """

    _log = Logger(observer=lambda event: None)


class Minion:
    """
    A minion's connection to its master.

    @ivar state: C{"stopped"}, C{"connecting"}, C{"waiting"} or C{"ready"}.
    @ivar jobber: the job side.
    @ivar returns: the return side.
    @ivar req: the req connection's protocol, while there is one.
    @ivar pub: the pub connection's protocol, while there is one.
    """

    log = Logger()

    def __init__(
        self,
        config: dict[str, Any],
        minionId: str,
        privateKey: Any,
        publicPem: bytes,
        executor: Executor,
        reactor: Any,
        connectTCP: ConnectTCP,
        runBlocking: Callable[..., Deferred],
        returnsQueue: ReturnsQueue | None = None,
        bus: LocalEventBus | None = None,
    ) -> None:
        self.config = config
        #: The minion's own event bus (Salt's C{minion_event_<hash>_*.ipc},
        #: served by L{salttwist.minion.service.MinionService}): it fires
        #: C{__master_connected} and C{__master_disconnected} there, with
        #: C{{"master": <its master>}}, as Salt's minion does.
        self.bus = bus if bus is not None else LocalEventBus()
        self.id = minionId
        self.executor = executor
        self.reactor = reactor
        self.connectTCP = connectTCP
        self.runBlocking = runBlocking
        self.req: ReqClientProtocol | None = None
        self.pub: PubClientProtocol | None = None
        self.returns = ReturnDelivery(minionId, reactor, returnsQueue)
        self.returns.writeLimit = config.get("req_write_buffer", self.returns.writeLimit)
        self.returns.memoryLimit = config.get("returns_memory_max", self.returns.memoryLimit)
        self.returns.retryFirst = config.get("return_retry_timer", self.returns.retryFirst)
        self.returns.retryMax = config.get("return_retry_timer_max", self.returns.retryMax)
        self.returns.errorTries = config.get("return_retry_tries", self.returns.errorTries)
        self.jobber = Jobber(minionId, executor, reactor, self.returns.jobDone, infoLogged(config))
        #: The minion's pillar, fetched over its session (C{context.pillar}).
        self.pillar = MinionPillar(minionId, executor.context, lambda: self.returns.req, reactor)
        #: Publications come on the req connection (the C{single_connection}
        #: option), not on a pub connection of their own.
        self.singleConnection = bool(config.get("single_connection", False))
        self._readyWaiters: list[Deferred[None]] = []
        #: The masters it may use and the one it uses or tries now (raises
        #: L{ValueError} for an entry of C{master} it cannot read).
        self.masters = MasterList(config)
        self._keyPair = (privateKey, publicPem)
        self._credentials: dict[MasterAddress, MinionCredentials] = {}
        #: The pending timer of the session's liveness check
        #: (C{master_alive_interval}) or failback probe (C{master_failback}).
        self._watchTimers: dict[str, Any] = {}
        maxFrame = config["max_frame_bytes"]
        self._reqFactory = ChannelFactory(lambda: ReqClientProtocol(maxFrame), ROLE_REQ)
        self._pubFactory = ChannelFactory(lambda: PubClientProtocol(maxFrame), ROLE_PUB)
        self._machine = newConnectionMachine()
        self.policy = ReconnectPolicy(config, minionId)
        endpoint = ChannelEndpoint(
            lambda: self.connectTCP,
            self.masterHost,
            self.masterPort,
            self._reqFactory,
            self._machine.connecting,
            self._notReached,
            where=lambda: (self.masterHost, self.masterPort),
        )
        # The handshake is started by prepareConnection but not awaited by
        # it: a connection lost while ClientService waits for
        # prepareConnection has no transition in its machine (Twisted
        # 26.10 raises NoTransition), and a master may close a connection
        # at any point of the handshake.
        self._service = _QuietClientService(
            endpoint,
            self._reqFactory,
            retryPolicy=self.policy,
            clock=reactor,
            prepareConnection=self._connectionMade,
        )

    @property
    def masterHost(self) -> str:
        """
        The host of the master the minion uses or tries now.
        """
        return self.masters.current.host

    @property
    def masterPort(self) -> int:
        """
        The req port of the master the minion uses or tries now.
        """
        return self.masters.current.port

    @property
    def credentials(self) -> MinionCredentials:
        """
        The minion's credentials for the master it tries now: with
        C{master_type: failover}, L{PinnedMasterCredentials} (a pin per
        master, or the cluster's shared one); else the single pinned key of
        C{minion_master.pub}.
        """
        address = self.masters.current
        credentials = self._credentials.get(address)
        if credentials is None:
            privateKey, publicPem = self._keyPair
            finger = self.config.get("master_finger") or ""
            pkiDir = self.config["pki_dir"]
            if self.masters.failover:
                credentials = PinnedMasterCredentials(
                    self.id, privateKey, publicPem, pkiDir, address, finger
                )
            else:
                credentials = MinionCredentials(self.id, privateKey, publicPem, pkiDir, finger)
            self._credentials[address] = credentials
        return credentials

    @property
    def state(self) -> str:
        """
        C{"stopped"}, C{"connecting"}, C{"waiting"} or C{"ready"}.
        """
        return self._machine.describe()

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """
        Begin connecting to the master.
        """
        if self._machine.start():
            self.returns.stopped = False
            if self.pillar.localCompile is not None:
                # Masterless pillar (file_client: local): compiled now.
                self.pillar.refresh(cleanCache=False, announce=False).addErrback(lambda _: None)
            self._service.startService()

    def stop(self) -> None:
        """
        Close every connection and stop retrying; the returns the master
        has not acknowledged are written to disk (see L{shutdown} to wait
        for that).
        """
        self.returns.saveUnacknowledged()
        self._stopWatching()
        self._machine.stop()
        self.returns.stop()
        self._closeConnections()
        if self._service.running:
            self._service.stopService()
        self.returns.acknowledgementsSettled()

    def shutdown(self, grace: float = STOP_GRACE, killGrace: float = KILL_GRACE) -> Deferred[None]:
        """
        Stop for good, as on SIGTERM: take no new job; give the running ones
        C{grace} seconds, then send C{SIGTERM} to those still running (their
        commands' process trees) and C{SIGKILL} to those still running
        C{killGrace} seconds later (a command that ignores C{SIGTERM}); the
        return of a job stopped so says so; then L{stop}. The returns sent
        get up to L{ACKNOWLEDGEMENT_WAIT} seconds to be acknowledged; the
        result fires once every return the master has not acknowledged is
        on disk: the req channel stays up until then, so a return the master
        acknowledged meanwhile is not kept, and the others are sent after
        the next start (a duplicate is refused by the master, so each is
        stored once).
        """
        self.jobber.stopping = self.returns.stopping = True
        idle = self.jobber.whenIdle(grace, killGrace)
        if idle is None:
            return self._saveAfterAcknowledgements()
        self.log.info(
            "minion {id}: stopping; waiting up to {grace}s for {n} running jobs",
            id=self.id,
            grace=grace,
            n=len(self.jobber.inFlight),
        )
        return idle.addCallback(lambda _: self._saveAfterAcknowledgements())

    def _saveAfterAcknowledgements(self) -> Deferred[None]:
        """
        Wait up to L{ACKNOWLEDGEMENT_WAIT} seconds for the acknowledgements
        of the returns sent, write those still unacknowledged to disk, then
        L{stop}.
        """
        d: Deferred[None] = succeed(None)
        if self.returns.unacknowledged and self.returns.req is not None:
            d = self.returns.whenAcknowledged()
            timer = self.reactor.callLater(
                ACKNOWLEDGEMENT_WAIT, self.returns.acknowledgementsSettled
            )

            def settled(_: object) -> None:
                if timer.active():
                    timer.cancel()

            d.addCallback(settled)
            self._leavePublications()
        d.addCallback(lambda _: self.returns.saveUnacknowledged())
        return d.addCallback(lambda _: self.stop())

    def _leavePublications(self) -> None:
        """
        Close the pub connection of a minion that stops (it takes no job
        any more) and keep the req connection: the master sends the
        acknowledgements it held back for this subscription's next
        publication as soon as it sees the subscription end. With
        C{single_connection}, the minion says so on its session
        (C{_unsubscribe}) instead; a publication already on its way still
        brings acknowledgements, and runs nothing (L{Jobber.stopping}).
        """
        pub, self.pub = self.pub, None
        req = self.returns.req
        if pub is not None and pub.transport is not None:
            pub.transport.loseConnection()
        elif self.singleConnection and req is not None:
            req.request({"cmd": "_unsubscribe"}).addErrback(lambda _: None)

    def whenReady(self) -> Deferred[None]:
        """
        @return: a L{Deferred} that fires the next time the minion is
            authenticated and subscribed (at once if it is now).
        """
        d: Deferred[None] = Deferred()
        if self.returns.req is not None:
            d.callback(None)
        else:
            self._readyWaiters.append(d)
        return d

    # -- connections ---------------------------------------------------------

    def _notReached(self, reason: Exception) -> None:
        """
        The req connection could not be made (L{ClientService} retries).
        """
        failed = AttemptFailed(f"cannot reach the master at {self.masters.current} ({reason})")
        self._attemptFailed(Failure(failed))

    def _connectionMade(self, proxy: Any) -> None:
        """
        L{ClientService} made a req connection: authenticate on it, then
        subscribe (not awaited: see L{__init__}).
        """
        req = self._reqFactory.built
        attempt = Attempt(req)
        if not self._machine.connected(attempt):
            req.hello.addErrback(lambda _: None)
            req.transport.loseConnection()
            return
        self.req = req
        req.lost.addCallback(self._connectionLost, req)
        Deferred.fromCoroutine(self._attempt(attempt)).addErrback(self._attemptFailed, attempt)

    def _attemptFailed(self, failure: Failure, attempt: Attempt | None = None) -> None:
        """
        The attempt failed, or the minion lost its ready connection: close
        the connections; L{ClientService} tries again after the connection
        closed, as L{policy} says.
        """
        if attempt is not None and not attempt.live:
            return
        wasReady = self.returns.req is not None
        retryIn = getattr(failure.value, "retryIn", None)
        if failure.check(AttemptFailed):
            message = str(failure.value)
        elif failure.check(ConnectionLost):
            message = "lost the connection to the master"
        else:
            message = f"{type(failure.value).__name__}: {failure.value}"
        if getattr(failure.value, "pending", False):
            changed = self._machine.pending()
        else:
            changed = self._machine.failed()
        if not changed:
            return
        self._stopWatching()
        if wasReady:
            self.bus.fire(MASTER_DISCONNECTED, {"master": self.masterHost})
        if self.masters.failover:
            message, retryIn = self._moveOn(failure.value, message, retryIn)
        self.policy.reason = message
        self.policy.retryIn = retryIn
        self.returns.req = None
        self._closeConnections()
        # Disconnected: what the master has not acknowledged waits on disk.
        self.returns.saveUnacknowledged()
        self.returns.acknowledgementsSettled()

    def _moveOn(self, error: Any, message: str, retryIn: float | None) -> tuple[str, float | None]:
        """
        A failover minion's attempt failed or its session ended: choose the
        master it tries next (L{MasterList}).

        @return: the reason to log and the wait before the next attempt: at
            once to the next master within a round of the list, the back-off
            (or C{acceptance_wait_time} for a pending key) once every master
            failed in a row, the back-off and C{random_reauth_delay} spread
            after a lost session.
        """
        masters = self.masters
        left = masters.current
        if getattr(error, "failBack", False):
            masters.failBack()
            return message, retryIn
        if getattr(error, "lost", False):
            masters.sessionLost()
            return f"{message} ({left}); trying {masters.current} next", retryIn
        if masters.attemptFailed():
            return f"{message}; no master of {len(masters.order)} answered this round", retryIn
        return f"{message}; trying the next master, {masters.current}", 0.0

    def _closeConnections(self) -> None:
        for proto in (self.req, self.pub):
            if proto is not None and proto.transport is not None:
                proto.transport.loseConnection()
        self.req = self.pub = None
        self.returns.req = None
        self.jobber.unsubscribed()

    def _connectionLost(self, _: object, proto: object) -> None:
        if proto is not self.req and proto is not self.pub:
            # A connection this minion let go of (L{_leavePublications}).
            return
        delay = None
        lost = self.returns.req is not None
        if lost:
            delay = self._reauthDelay()
        self._attemptFailed(
            Failure(AttemptFailed("lost the connection to the master", delay, lost=lost))
        )

    def _reauthDelay(self) -> float:
        """
        @return: the wait after a lost session: the back-off, plus up to
            C{random_reauth_delay} seconds. A master restart (or death)
            drops every minion at once: this spreads their returns (Salt's
            option), so thousands of authentications do not arrive in one
            second.
        """
        spread = float(self.config.get("random_reauth_delay", 0))
        return self.policy.backoff() + random.uniform(0, spread)

    def _answer(self, d: Deferred) -> Deferred:
        """
        Bound the wait for one answer of the master, so a master that accepts
        connections but hangs cannot stall the minion forever.
        """
        return d.addTimeout(ANSWER_TIMEOUT, self.reactor)

    def _autosignGrains(self) -> dict[str, Any]:
        grains = self.executor.context.grains
        return {
            name: grains[name] for name in self.config.get("autosign_grains", []) if name in grains
        }

    # -- one attempt ---------------------------------------------------------

    async def _attempt(self, attempt: Attempt) -> None:
        req: ReqClientProtocol = attempt.req
        try:
            accepted = await authenticate(
                req,
                self.credentials,
                self.runBlocking,
                self._answer,
                autosignGrains=self._autosignGrains,
            )
        except AuthRefused as e:
            # Pending, rejected and denied keys wait for an admin: retry
            # every acceptance_wait_time; anything else backs off.
            if e.ret == "error":
                raise AttemptFailed(str(e)) from e
            wait = float(self.config["acceptance_wait_time"])
            raise AttemptFailed(str(e), wait, pending=True) from e
        except MasterIdentityError as e:
            raise AttemptFailed(str(e)) from e
        if not attempt.live:
            return
        self._machine.authenticated(attempt)
        sessionKey = accepted.sessionKey
        req.startSession(sessionKey)
        self.jobber.sessionKeys(accepted.kid, accepted.publicationKey, sessionKey)
        token = crypt.deriveKey(sessionKey, wire.PUB_TOKEN_CONTEXT)
        if self.singleConnection:
            # Publications on this connection (see the option in etc/minion).
            assert req.challenge is not None
            subscription: Any = req
            pubChallenge = req.challenge
            try:
                confirmation = await self._answer(req.request({"cmd": "_subscribe", "acks": True}))
            except RequestError as e:
                raise AttemptFailed(f"the master refused the subscription ({e})") from e
        else:
            pub = await self.connectTCP(self.masterHost, accepted.publishPort, self._pubFactory)
            if not attempt.live:
                # The req connection was lost while this one was being made; a
                # newer attempt may already own self.pub. Nobody will wait for
                # this connection's greeting, so its failure is expected.
                pub.hello.addErrback(lambda _: None)
                pub.transport.loseConnection()
                return
            self.pub = subscription = pub
            pub.lost.addCallback(self._connectionLost, pub)
            pubChallenge = await self._answer(pub.hello)
            mac = crypt.hmacSha256(token, wire.pubSubscribeMessage(pubChallenge, self.id))
            confirmation = {"ret": await self._answer(pub.subscribe(self.id, mac))}
            confirmation.update(pub.confirmation)
        if confirmation.get("ret") != "subscribed":
            raise AttemptFailed(
                f"the master refused the pub subscription ({confirmation.get('ret')!r})"
            )
        masterTime = confirmation.get("now")
        expected = (
            crypt.hmacSha256(
                token,
                wire.pubSubscribedMessage(pubChallenge, self.id, masterTime),  # type: ignore[arg-type]
            )
            if isinstance(masterTime, float)
            else b""
        )
        if not crypt.hmacEqual(expected, confirmation.get("mac")):  # type: ignore[arg-type]
            raise AttemptFailed("the master's subscription confirmation did not verify")
        if not attempt.live:
            return
        self._machine.subscribed(attempt)
        self.jobber.subscribed(
            req,
            crypt.deriveKey(token, wire.publicationMacContext(pubChallenge, self.id)),
            masterTime - SUBSCRIBE_GRACE,
        )
        subscription.onPublication = self.jobber.publicationReceived
        self.returns.req = req
        self.policy.failures = 0
        self.masters.connected()
        if self.masters.failover:
            self.log.info(
                "minion {id} authenticated and subscribed to its master {master}",
                id=self.id,
                master=str(self.masters.current),
            )
        else:
            self.log.info("minion {id} authenticated and subscribed to its master", id=self.id)
        self.bus.fire(MASTER_CONNECTED, {"master": self.masterHost})
        self._watch(attempt)
        self.sendGrains()
        # Its pillar, with the grains just sent (a failure is logged there).
        self.pillar.refresh(cleanCache=False, announce=False).addErrback(lambda _: None)
        self.returns.flush()
        waiters, self._readyWaiters = self._readyWaiters, []
        for waiter in waiters:
            waiter.callback(None)

    # -- watching the session ------------------------------------------------

    def _watch(self, attempt: Attempt) -> None:
        """
        Start the watches of the session C{attempt} made ready: its
        master's liveness every C{master_alive_interval} seconds (if above
        0), and, for a failover minion away from its first master with
        C{master_failback}, whether that master is back, every
        C{master_failback_interval} seconds (0: C{master_alive_interval},
        as Salt).
        """
        alive = float(self.config.get("master_alive_interval", 0))
        if alive > 0:
            self._later("alive", alive, self._checkAlive, attempt, alive)
        masters = self.masters
        if masters.failover and self.config.get("master_failback") and not masters.onPrimary:
            interval = float(self.config.get("master_failback_interval", 0)) or alive
            if interval > 0:
                self._later("failback", interval, self._probePrimary, attempt, interval)
            else:
                self.log.warn(
                    "minion {id}: master_failback is set but master_failback_interval and "
                    "master_alive_interval are 0: it never looks for {master} again",
                    id=self.id,
                    master=str(masters.primary),
                )

    def _later(self, name: str, delay: float, f: Callable[..., Any], *args: Any) -> None:
        self._watchTimers[name] = self.reactor.callLater(delay, f, *args)

    def _stopWatching(self) -> None:
        timers, self._watchTimers = self._watchTimers, {}
        for timer in timers.values():
            if timer.active():
                timer.cancel()

    def _checkAlive(self, attempt: Attempt, interval: float) -> None:
        """
        Send L{ALIVE_REQUEST} on the session: an answer within C{interval}
        seconds (an error answer too) proves the master alive, and the next
        check comes C{interval} seconds later; no answer ends the session
        (its connections are aborted, not closed: a hung master may never
        read what is left to write), and the minion moves on.
        """
        self._watchTimers.pop("alive", None)
        if not attempt.live:
            return
        req = attempt.req

        def answered(_: object) -> None:
            if attempt.live:
                self._later("alive", interval, self._checkAlive, attempt, interval)

        def silent(failure: Failure) -> None:
            if failure.check(RequestError):
                answered(None)
                return
            if not attempt.live:
                return
            protocols = [p for p in (self.req, self.pub) if p is not None]
            where = self.masters.current
            self._attemptFailed(
                Failure(
                    AttemptFailed(
                        f"the master at {where} did not answer for {interval:g}s "
                        "(master_alive_interval)",
                        self._reauthDelay(),
                        lost=True,
                    )
                ),
                attempt,
            )
            for proto in protocols:
                transport = proto.transport
                if transport is not None and hasattr(transport, "abortConnection"):
                    transport.abortConnection()

        maybeDeferred(req.request, ALIVE_REQUEST).addTimeout(interval, self.reactor).addCallbacks(
            answered, silent
        )

    def _probePrimary(self, attempt: Attempt, interval: float) -> None:
        """
        Look whether the first master is back (C{master_failback}): a req
        connection to it that it greets within C{interval} seconds (or
        L{ANSWER_TIMEOUT}) says so. Then fire C{__master_failback} on the
        minion's bus and leave the current master for it (what it has not
        acknowledged goes to disk, and is sent to the first master); else
        look again C{interval} seconds later.
        """
        self._watchTimers.pop("failback", None)
        if not attempt.live:
            return
        primary = self.masters.primary
        factory = ChannelFactory(
            lambda: ReqClientProtocol(self.config["max_frame_bytes"]), ROLE_REQ
        )

        def greeted(proto: Any) -> Deferred[Any]:
            def close(result: object) -> object:
                if proto.transport is not None:
                    proto.transport.loseConnection()
                return result

            hello = proto.hello.addTimeout(min(interval, ANSWER_TIMEOUT), self.reactor)
            return hello.addBoth(close)

        def back(_: object) -> None:
            if not attempt.live or self.masters.onPrimary:
                return
            self.log.info(
                "minion {id}: its first master {master} is back; failing back to it",
                id=self.id,
                master=str(primary),
            )
            self.bus.fire(MASTER_FAILBACK, {"master": primary.host})
            self._attemptFailed(
                Failure(
                    AttemptFailed(f"failing back to the first master {primary}", 0.0, failBack=True)
                ),
                attempt,
            )

        def away(_: Failure) -> None:
            if attempt.live:
                self._later("failback", interval, self._probePrimary, attempt, interval)

        connecting = maybeDeferred(self.connectTCP, primary.host, primary.port, factory)
        connecting.addCallback(greeted).addCallbacks(back, away)

    # -- the session's other uses --------------------------------------------

    def sendGrains(self) -> None:
        """
        Report this minion's grains to the master, for master-side grain
        targeting (at every authentication, and after grains change).
        """
        req = self.returns.req
        if req is None:
            return
        req.request({"cmd": "_grains", "grains": self.executor.context.grains}).addErrback(
            lambda failure: self.log.warn(
                "minion {id}: the master did not take its grains: {e}", id=self.id, e=failure.value
            )
        )

    def fireMaster(self, tag: str, data: Any) -> Deferred[dict[str, Any]]:
        """
        Send an event to the master's bus over this minion's session (Salt's
        C{_minion_event}); the master decides whether the tag is allowed.

        @return: a L{Deferred} firing with the master's answer, or failing
            with L{RequestError} if it refused the event, or with
            L{ConnectionError} if the minion is not connected.
        """
        req = self.returns.req
        if req is None:
            return fail(ConnectionError(f"minion {self.id} is not connected to its master"))
        return maybeDeferred(
            req.request, {"cmd": "_minion_event", "id": self.id, "tag": tag, "data": data}
        )

    def masterRequest(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        """
        Send one request over this minion's session (the file server's
        C{_file_*} and C{_serve_file}, see
        L{salttwist.fileserver.client.RemoteFileClient}).

        @return: a L{Deferred} firing with the master's answer, or failing
            with L{RequestError} carrying the master's error, or with
            L{ConnectionError} if the minion is not connected.
        """
        req = self.returns.req
        if req is None:
            return fail(ConnectionError(f"minion {self.id} is not connected to its master"))
        return maybeDeferred(req.request, payload)
