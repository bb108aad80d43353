# -*- test-case-name: tests.test_minion -*-
"""
The minion's connection to its master: authenticate on the req channel,
subscribe on the pub channel, run what is published for it, send returns.

One attempt runs start to finish as a coroutine (L{Minion._attempt}); any
failure or lost connection ends the attempt and schedules the next one with
exponential back-off and jitter (Salt's C{recon_default}, C{recon_max},
C{recon_randomize}), or after C{acceptance_wait_time} while the key is
pending. Each attempt has a generation number, so callbacks from an older
attempt can never act on a newer one.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, fail, maybeDeferred, succeed
from twisted.internet.error import ConnectionLost
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from salttwist import crypt, serial, wire
from salttwist.events.bus import LocalEventBus
from salttwist.jid import isJid
from salttwist.logs import infoLogged
from salttwist.minion.auth import (  # MASTER_PUB_FILE is re-exported
    MASTER_PUB_FILE,  # noqa: F401
    AuthRefused,
    MasterIdentityError,
    MinionCredentials,
    authenticate,
)
from salttwist.minion.executor import Executor
from salttwist.minion.jobs import RunningJob
from salttwist.minion.pubclient import PubClientProtocol
from salttwist.minion.replay import ReplayGuard
from salttwist.minion.returnsqueue import ReturnsQueue
from salttwist.targeting import TargetError, matchMinion
from salttwist.transport.framing import quietFactory
from salttwist.transport.reqclient import ReqClientProtocol, RequestError, reqClientFactory

#: Seconds before its subscription that a publication may be stamped and
#: still run (a job published while the minion was joining).
SUBSCRIBE_GRACE = 2.0
#: Seconds the minion waits for each answer of the master while connecting.
ANSWER_TIMEOUT = 30.0

ConnectTCP = Callable[[str, int, Factory], Deferred]

#: Seconds a stopping minion (SIGTERM) gives its running jobs before it
#: kills them; see L{Minion.shutdown}.
STOP_GRACE = 5.0

#: Seconds a return may wait for the master's acknowledgement before the
#: minion writes it to its returns queue on disk. Most are acknowledged
#: within milliseconds and never touch the disk (no file, no fsync, no
#: thread per job); a return is written at once when the master is not
#: connected, when the connection is lost before the acknowledgement, and
#: when the minion stops. One timer serves all the returns waiting (not one
#: per return: a cancelled Twisted timer stays queued and still wakes the
#: reactor when it comes due, a wake-up per job for nothing).
PERSIST_AFTER = 1.0

#: Seconds at most a stopping minion waits for the master to acknowledge
#: the returns it sent before it writes those still unacknowledged to disk:
#: a return sent just before SIGTERM is then not kept and sent again after
#: the next start. A master holds acknowledgements back for a next
#: publication (up to its C{ACK_DELAY}, 0.2 s), so the minion leaves the
#: pub channel first: the master then sends them at once.
ACKNOWLEDGEMENT_WAIT = 0.25

#: The tags Salt's minion fires on its own bus when its master connection
#: comes up and goes down (Salt's C{master_event(type=...)}).
MASTER_CONNECTED = "__master_connected"
MASTER_DISCONNECTED = "__master_disconnected"


class AttemptFailed(Exception):
    """
    This connection attempt ended; C{retryIn} says when to try again
    (L{None} means the back-off decides).
    """

    def __init__(self, message: str, retryIn: float | None = None) -> None:
        super().__init__(message)
        self.retryIn = retryIn


class StoredReturn:
    """
    The on-disk copy of one return, written only if the master has not
    acknowledged the return soon enough (see L{PERSIST_AFTER}): the file is
    removed once the master has acknowledged the return and the write has
    finished, whichever comes last.

    @ivar writing: whether the write was started.
    @ivar due: when (reactor time) it is written if still unacknowledged.
    """

    __slots__ = ("name", "acknowledged", "writing", "due")

    def __init__(self, due: float = float("inf")) -> None:
        self.name: str | None = None
        self.acknowledged = False
        self.writing = False
        self.due = due

    def written(self, name: str, queue: ReturnsQueue | None) -> None:
        """
        The write finished as C{name}.
        """
        self.name = name
        if self.acknowledged and queue is not None:
            queue.remove(name)

    def delivered(self, queue: ReturnsQueue | None) -> None:
        """
        The master acknowledged (or refused) the return.
        """
        self.acknowledged = True
        if self.name is not None and queue is not None:
            queue.remove(self.name)


class Minion:
    """
    A minion's connection state and job handling.

    @ivar state: C{"stopped"}, C{"connecting"}, C{"waiting"} or C{"ready"}.
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
        self.privateKey = privateKey
        self.publicPem = publicPem
        self.executor = executor
        self.reactor = reactor
        self.connectTCP = connectTCP
        self.runBlocking = runBlocking
        self.state = "stopped"
        self.req: ReqClientProtocol | None = None
        self.pub: PubClientProtocol | None = None
        self.replay = ReplayGuard(reactor)
        #: (name on disk or None, return) waiting for the master.
        #: Returns not yet acknowledged by the master, oldest first, each
        #: with its file in the returns queue: a name (a return left by an
        #: earlier run), a L{StoredReturn} (written if the master does not
        #: acknowledge it soon), or L{None}.
        self.pendingReturns: deque[tuple[str | StoredReturn | None, dict[str, Any]]] = deque()
        self.returnsQueue = returnsQueue
        #: Seconds before an unacknowledged return is written to disk.
        self.persistAfter = PERSIST_AFTER
        #: Whether the per-job info line is logged at all: a filtered-out
        #: Logger.info still builds and routes its event, a measurable
        #: share of a job's CPU.
        self.logJobs = infoLogged(config)
        #: Publications come on the req connection (the C{single_connection}
        #: option), not on a pub connection of their own.
        self.singleConnection = bool(config.get("single_connection", False))
        #: The returns of this run the master has not acknowledged yet.
        self._unacknowledged: dict[StoredReturn, dict[str, Any]] = {}
        #: The delayed call that writes the unacknowledged returns that are
        #: due (L{_persistDue}), while one is scheduled.
        self._persistTimer: Any = None
        #: Who waits until no return is unacknowledged (L{shutdown}).
        self._acknowledgementWaiters: list[Deferred[None]] = []
        #: Returns being written to disk.
        self._writes: set[Deferred[None]] = set()
        #: Jobs running.
        self._inFlight: set[Deferred[None]] = set()
        self._stopping = False
        self._generation = 0
        self._failures = 0
        self._retryCall: Any = None
        # The current publication key and the one before it: a publication
        # sealed just before a rotation may arrive just after it.
        self._pubKeys: dict[int, crypt.AesCipher] = {}
        self._kid: int | None = None
        self._rotateCipher: crypt.AesCipher | None = None
        #: The MAC of the current pub subscription's publications.
        self._publicationMac: crypt.HmacSha256 | None = None
        self._readyWaiters: list[Deferred[None]] = []
        master = config["master"]
        self.masterHost: str = master if isinstance(master, str) else master[0]
        self.credentials = MinionCredentials(
            minionId, privateKey, publicPem, config["pki_dir"], config.get("master_finger") or ""
        )

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """
        Begin connecting to the master.
        """
        if self.state == "stopped":
            self._startAttempt()

    def stop(self) -> None:
        """
        Close every connection and stop retrying; the returns the master
        has not acknowledged are written to disk (see L{shutdown} to wait
        for that).
        """
        self._saveUnacknowledged()
        self.state = "stopped"
        self._generation += 1
        if self._retryCall is not None and self._retryCall.active():
            self._retryCall.cancel()
        if self._persistTimer is not None and self._persistTimer.active():
            self._persistTimer.cancel()
        self._persistTimer = None
        self._closeConnections()
        self._acknowledgementsSettled()

    def shutdown(self, grace: float = STOP_GRACE) -> Deferred[None]:
        """
        Stop for good, as on SIGTERM: take no new job; give the running ones
        C{grace} seconds, then kill those still running (their process
        trees), whose return then says so; then L{stop}. The returns sent
        get up to L{ACKNOWLEDGEMENT_WAIT} seconds to be acknowledged; the
        result fires once every return the master has not acknowledged is
        on disk: the req channel stays up until then, so a return the master
        acknowledged meanwhile is not kept, and the others are sent after
        the next start (a duplicate is refused by the master, so each is
        stored once).
        """
        self._stopping = True
        if not self._inFlight:
            return self._saveAfterAcknowledgements()
        self.log.info(
            "minion {id}: stopping; waiting up to {grace}s for {n} running jobs",
            id=self.id,
            grace=grace,
            n=len(self._inFlight),
        )
        timer = self.reactor.callLater(grace, self._killRunning)

        def finished(_: object) -> Deferred[None]:
            if timer.active():
                timer.cancel()
            return self._saveAfterAcknowledgements()

        return DeferredList(list(self._inFlight)).addCallback(finished)

    def _saveAfterAcknowledgements(self) -> Deferred[None]:
        """
        Wait up to L{ACKNOWLEDGEMENT_WAIT} seconds for the acknowledgements
        of the returns sent, write those still unacknowledged to disk, then
        L{stop}.
        """
        d: Deferred[None] = succeed(None)
        if self._unacknowledged and self.state == "ready" and self.req is not None:
            d = Deferred()
            self._acknowledgementWaiters.append(d)
            timer = self.reactor.callLater(ACKNOWLEDGEMENT_WAIT, self._acknowledgementsSettled)

            def settled(_: object) -> None:
                if timer.active():
                    timer.cancel()

            d.addCallback(settled)
            self._leavePublications()
        d.addCallback(lambda _: self._saveUnacknowledged())
        return d.addCallback(lambda _: self.stop())

    def _leavePublications(self) -> None:
        """
        Close the pub connection of a minion that stops (it takes no job
        any more) and keep the req connection: the master sends the
        acknowledgements it held back for this subscription's next
        publication as soon as it sees the subscription end. With
        C{single_connection}, the minion says so on its session
        (C{_unsubscribe}) instead; a publication already on its way still
        brings acknowledgements, and runs nothing (L{_stopping}).
        """
        pub, self.pub = self.pub, None
        if pub is not None and pub.transport is not None:
            pub.transport.loseConnection()
        elif self.singleConnection and self.state == "ready" and self.req is not None:
            self.req.request({"cmd": "_unsubscribe"}).addErrback(lambda _: None)

    def _acknowledgementsSettled(self) -> None:
        """
        Every return sent is acknowledged, or no more acknowledgement will
        come (the wait is over, or the connection is gone).
        """
        waiters, self._acknowledgementWaiters = self._acknowledgementWaiters, []
        for waiter in waiters:
            waiter.callback(None)

    def _killRunning(self) -> None:
        for job in list(self.executor.context.running.values()):
            self.log.warn(
                "minion {id}: killing job {jid} ({fun}): the minion stops",
                id=self.id,
                jid=job.load.get("jid"),
                fun=job.fun,
            )
            job.cancel("SIGTERM")

    def whenReady(self) -> Deferred[None]:
        """
        @return: a L{Deferred} that fires the next time the minion is
            authenticated and subscribed (at once if it is now).
        """
        d: Deferred[None] = Deferred()
        if self.state == "ready":
            d.callback(None)
        else:
            self._readyWaiters.append(d)
        return d

    def _startAttempt(self) -> None:
        self._generation += 1
        generation = self._generation
        self.state = "connecting"
        Deferred.fromCoroutine(self._attempt(generation)).addErrback(
            self._attemptFailed, generation
        )

    def _attemptFailed(self, failure: Any, generation: int) -> None:
        if generation != self._generation or self.state == "stopped":
            return
        retryIn = getattr(failure.value, "retryIn", None)
        if retryIn is None:
            retryIn = self._backoff()
        if failure.check(AttemptFailed):
            message = str(failure.value)
        elif failure.check(ConnectionLost):
            message = "lost the connection to the master"
        else:
            message = f"{type(failure.value).__name__}: {failure.value}"
        self.log.warn(
            # Not "message": the legacy log bridge reserves that key and
            # replaces it with () in the shared event.
            "minion {id}: {reason}; retrying in {delay:.1f}s",
            id=self.id,
            reason=message,
            delay=retryIn,
        )
        self._generation += 1
        self.state = "waiting"
        self._closeConnections()
        # Disconnected: what the master has not acknowledged waits on disk.
        self._saveUnacknowledged()
        self._acknowledgementsSettled()
        self._retryCall = self.reactor.callLater(retryIn, self._startAttempt)

    def _backoff(self) -> float:
        base = self.config["recon_default"] / 1000.0
        cap = max(base, self.config["recon_max"] / 1000.0)
        delay = min(cap, base * (2 ** min(self._failures, 16)))
        self._failures += 1
        if self.config["recon_randomize"]:
            delay = random.uniform(delay / 2, delay)
        return delay

    def _closeConnections(self) -> None:
        for proto in (self.req, self.pub):
            if proto is not None and proto.transport is not None:
                proto.transport.loseConnection()
        self.req = self.pub = None
        # A publication MACed for the closed subscription is not accepted
        # any more: above all, the request ids it acknowledges were those of
        # the closed req session, and the next session numbers its requests
        # from 1 again.
        self._publicationMac = None

    # -- one attempt ---------------------------------------------------------

    async def _attempt(self, generation: int) -> None:
        port = self.config["master_port"]
        maxFrame = self.config["max_frame_bytes"]
        try:
            req = await self.connectTCP(self.masterHost, port, reqClientFactory(maxFrame))
        except Exception as e:
            raise AttemptFailed(f"cannot reach the master at {self.masterHost}:{port} ({e})") from e
        if generation != self._generation:
            # The minion stopped while connecting: nobody waits for this
            # connection's greeting, so its failure is expected.
            req.hello.addErrback(lambda _: None)
            req.transport.loseConnection()
            return
        self.req = req
        req.lost.addCallback(self._connectionLost, generation, req)
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
            wait = None if e.ret == "error" else float(self.config["acceptance_wait_time"])
            raise AttemptFailed(str(e), wait) from e
        except MasterIdentityError as e:
            raise AttemptFailed(str(e)) from e
        sessionKey, publishPort = accepted.sessionKey, accepted.publishPort
        if generation != self._generation:
            return
        req.startSession(sessionKey)
        self._kid = accepted.kid
        self._pubKeys = {self._kid: crypt.AesCipher(accepted.publicationKey)}
        self._rotateCipher = crypt.AesCipher(crypt.deriveKey(sessionKey, wire.ROTATE_CONTEXT))
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
            pub = await self.connectTCP(
                self.masterHost, publishPort, quietFactory(lambda: PubClientProtocol(maxFrame))
            )
            if generation != self._generation:
                # The req connection was lost while this one was being made; a
                # newer attempt may already own self.pub. Nobody will wait for
                # this connection's greeting, so its failure is expected.
                pub.hello.addErrback(lambda _: None)
                pub.transport.loseConnection()
                return
            self.pub = subscription = pub
            pub.lost.addCallback(self._connectionLost, generation, pub)
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
        # Nothing published before this subscription was meant for this
        # connection: a recorded publication replayed after a restart is
        # refused (within a small grace for a job published as we joined).
        self.replay.notBefore = masterTime - SUBSCRIBE_GRACE
        if generation != self._generation:
            return
        self._publicationMac = crypt.HmacSha256(
            crypt.deriveKey(token, wire.publicationMacContext(pubChallenge, self.id))
        )
        subscription.onPublication = self._publicationReceived
        self.state = "ready"
        self._failures = 0
        self.log.info("minion {id} authenticated and subscribed to its master", id=self.id)
        self.bus.fire(MASTER_CONNECTED, {"master": self.masterHost})
        self.sendGrains()
        self._flushReturns()
        waiters, self._readyWaiters = self._readyWaiters, []
        for waiter in waiters:
            waiter.callback(None)

    def sendGrains(self) -> None:
        """
        Report this minion's grains to the master, for master-side grain
        targeting (at every authentication, and after grains change).
        """
        if self.state != "ready" or self.req is None:
            return
        self.req.request({"cmd": "_grains", "grains": self.executor.context.grains}).addErrback(
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
        if self.state != "ready" or self.req is None:
            return fail(ConnectionError(f"minion {self.id} is not connected to its master"))
        return maybeDeferred(
            self.req.request, {"cmd": "_minion_event", "id": self.id, "tag": tag, "data": data}
        )

    def _answer(self, d: Deferred) -> Deferred:
        """
        Bound the wait for one answer of the master, so a master that accepts
        connections but hangs cannot stall the minion forever.
        """
        return d.addTimeout(ANSWER_TIMEOUT, self.reactor)

    def _connectionLost(self, _: object, generation: int, proto: object) -> None:
        if proto is not self.req and proto is not self.pub:
            # A connection this minion let go of (L{_leavePublications}).
            return
        if generation == self._generation and self.state != "stopped":
            from twisted.python.failure import Failure

            delay = None
            if self.state == "ready":
                self.bus.fire(MASTER_DISCONNECTED, {"master": self.masterHost})
                # A master restart drops every minion at once: spread their
                # returns over random_reauth_delay seconds (Salt's option), so
                # thousands of authentications do not arrive in one second.
                spread = float(self.config.get("random_reauth_delay", 0))
                delay = self._backoff() + random.uniform(0, spread)
            failure = Failure(AttemptFailed("lost the connection to the master", delay))
            self._attemptFailed(failure, generation)

    def _autosignGrains(self) -> dict[str, Any]:
        grains = self.executor.context.grains
        return {
            name: grains[name] for name in self.config.get("autosign_grains", []) if name in grains
        }

    # -- publications and returns ------------------------------------------------

    def _publicationReceived(self, frame: dict[str, Any]) -> None:
        """
        Check, decrypt and vet one publication; run it if it targets us.
        The check is the HMAC of this subscription (see
        L{salttwist.master.publisher}): a SHA-256 and an HMAC, some
        microseconds.
        """
        if "rotate" in frame:
            self._rotationReceived(frame)
            return
        blob, mac, kid = frame.get("pub"), frame.get("mac"), frame.get("kid")
        publicationMac = self._publicationMac
        if publicationMac is None:
            return
        try:
            if not isinstance(blob, bytes):
                raise crypt.CryptError("the publication is not bytes")
            if type(kid) is not int or not 0 <= kid < 2**63:
                raise crypt.CryptError(f"publication key {kid!r} is not a key generation")
            message = wire.publicationMacMessage(kid, crypt.sha256(blob))
            acks = frame.get("ack")
            if acks is not None:
                try:
                    acks = wire.publicationAcks(acks)
                except ValueError as e:
                    raise crypt.CryptError(str(e)) from e
                message += wire.publicationAcksMessage(acks)
            if not crypt.hmacEqual(publicationMac.mac(message), mac):  # type: ignore[arg-type]
                raise crypt.CryptError("the publication's MAC does not verify")
            if acks is not None and self.req is not None:
                # The master has these returns (even while we stop).
                self.req.acknowledged(acks)
            if self._stopping:
                return
            cipher = self._pubKeys.get(kid)
            if cipher is None:
                raise crypt.CryptError(
                    f"publication key {kid!r} is not known (current: {self._kid})"
                )
            load = self._openPublication(cipher, kid, blob)
        except (crypt.CryptError, serial.SerialError) as e:
            self.log.warn("minion {id}: dropped a publication: {e}", id=self.id, e=e)
            return
        if (
            not isinstance(load, dict)
            or not isJid(load.get("jid"))
            or not isinstance(load.get("fun"), str)
        ):
            self.log.warn("minion {id}: dropped a malformed publication", id=self.id)
            return
        try:
            grains = self.executor.context.grains
            if not matchMinion(
                self.id, load.get("tgt"), load.get("tgt_type", "glob"), grains=grains
            ):
                return
        except TargetError as e:
            self.log.warn(
                "minion {id}: dropped publication {jid}: {e}", id=self.id, jid=load["jid"], e=e
            )
            return
        problem = self.replay.check(load["jid"], load.get("ts"))
        if problem is not None:
            self.log.warn(
                "minion {id}: dropped a publication: {problem}", id=self.id, problem=problem
            )
            return
        fun, arg = load["fun"], load.get("arg", [])
        if self.logJobs:
            self.log.info(
                "minion {id}: running {fun} for job {jid}", id=self.id, fun=fun, jid=load["jid"]
            )
        jid = load["jid"]
        result = self.executor.call(fun, arg)
        if not isinstance(result, Deferred):
            # It ran on the reactor and is done (test.ping): no Deferred,
            # and nothing could have seen it running.
            try:
                self._jobDone(result, load)
            except Exception:
                self.log.failure("minion {id}: the return of {jid}", id=self.id, jid=jid)
            return
        d = result
        job = RunningJob(load, d, self.reactor.seconds())
        running = self.executor.context.running
        running[jid] = job

        def ended(result: dict[str, Any]) -> dict[str, Any]:
            running.pop(jid, None)
            if job.killedBy is not None:
                result = {
                    "return": f"The job was killed with {job.killedBy}",
                    "retcode": 1,
                    "success": False,
                }
            return result

        finished = d.addCallback(ended).addCallback(self._jobDone, load)
        self._inFlight.add(finished)
        finished.addErrback(
            lambda f: self.log.failure("minion {id}: the return of {jid}", f, id=self.id, jid=jid)
        )
        finished.addBoth(lambda _: self._inFlight.discard(finished))

    def _openPublication(self, cipher: crypt.AesCipher, kid: int, blob: bytes) -> Any:
        """
        Decrypt and decode the load of a publication whose MAC verified.

        @raise crypt.CryptError: if C{blob} does not decrypt with C{cipher}.
        @raise serial.SerialError: if what it holds is not msgpack.
        """
        return serial.loads(cipher.decrypt(blob, wire.publicationAad(kid)))

    def _rotationReceived(self, frame: dict[str, Any]) -> None:
        """
        The master rotated the publication key and sent this minion the new
        one, sealed with a key derived from its session key: no RSA, no
        reconnect. Only a newer key is taken; the previous one is kept for
        publications already on their way.
        """
        blob, kid = frame.get("rotate"), frame.get("kid")
        try:
            if self._rotateCipher is None or self._kid is None:
                raise crypt.CryptError("no session")
            if not isinstance(kid, int) or isinstance(kid, bool) or kid <= self._kid:
                raise crypt.CryptError(f"key {kid!r} is not newer than {self._kid}")
            load = serial.loads(self._rotateCipher.decrypt(blob, wire.rotationAad(kid)))  # type: ignore[arg-type]
            key = load.get("key") if isinstance(load, dict) else None
            cipher = crypt.AesCipher(key)  # type: ignore[arg-type]
        except (crypt.CryptError, serial.SerialError) as e:
            self.log.warn("minion {id}: dropped a key rotation: {e}", id=self.id, e=e)
            return
        self._pubKeys = {self._kid: self._pubKeys[self._kid], kid: cipher}
        self._kid = kid
        self.log.info("minion {id}: publication key rotated to {kid}", id=self.id, kid=kid)

    def _jobDone(self, result: dict[str, Any], load: dict[str, Any]) -> None:
        value = result["return"]
        try:
            # Whether it can be sent at all: msgpack takes any bytes and any
            # ASCII text as they are, so a command's big output is not
            # encoded once more just to find that out.
            if not (
                value is True
                or value is False
                or value is None
                or type(value) is bytes
                or (type(value) is str and value.isascii())
            ):
                serial.dumps(value)
        except serial.SerialError as e:
            result = {
                "return": f"The minion function returned a value that cannot be sent: {e}",
                "retcode": 1,
                "success": False,
            }
        ret = {
            "cmd": "_return",
            "id": self.id,
            "jid": load["jid"],
            "fun": load["fun"],
            "fun_args": load.get("arg", []),
            **result,
        }
        if self.returnsQueue is None:
            self._queueReturn(None, ret)
            return None
        # Sent at once; written to disk only if the master does not
        # acknowledge it within persistAfter seconds (or is not connected):
        # the disk is not on the return's path, and most returns never
        # reach it. The file is removed once both the master acknowledged
        # and the write finished.
        stored = StoredReturn(self.reactor.seconds() + self.persistAfter)
        self._unacknowledged[stored] = ret
        self._queueReturn(stored, ret)
        if stored.acknowledged:
            return None
        if self.state != "ready" or self._stopping:
            self._persist(stored)
        elif self._persistTimer is None:
            self._persistTimer = self.reactor.callLater(self.persistAfter, self._persistDue)
        return None

    def _persistDue(self) -> None:
        """
        The persist timer fired: write every unacknowledged return that is
        due, and come back when the next one is (one timer for them all).
        """
        self._persistTimer = None
        now = self.reactor.seconds()
        nextDue = float("inf")
        for stored in list(self._unacknowledged):
            if stored.writing:
                continue
            if stored.due <= now:
                self._persist(stored)
            else:
                nextDue = min(nextDue, stored.due)
        if nextDue != float("inf") and self.state != "stopped":
            self._persistTimer = self.reactor.callLater(nextDue - now, self._persistDue)

    def _persist(self, stored: StoredReturn) -> None:
        """
        Start writing the return of C{stored} to disk, unless it is being or
        was written, or the master has it. L{_saveUnacknowledged} waits for
        the writes.
        """
        ret = self._unacknowledged.get(stored)
        if stored.writing or ret is None or self.returnsQueue is None:
            return
        stored.writing = True

        def persisted(name: str) -> None:
            stored.written(name, self.returnsQueue)

        def notPersisted(failure: Any) -> None:
            # The disk is full or gone: the return is still delivered from
            # memory (and kept there until the master has it).
            self.log.error(
                "minion {id}: cannot keep the return of {jid} on disk: {e}",
                id=self.id,
                jid=ret["jid"],
                e=failure.value,
            )

        writing = self.returnsQueue.persist(ret).addCallbacks(persisted, notPersisted)
        if not writing.called:
            self._writes.add(writing)
            writing.addBoth(lambda _: self._writes.discard(writing))

    def _saveUnacknowledged(self) -> Deferred[None]:
        """
        Write every return the master has not acknowledged to disk now.

        @return: a L{Deferred} that fires once they all are on disk.
        """
        for stored in list(self._unacknowledged):
            self._persist(stored)
        if not self._writes:
            return succeed(None)
        return DeferredList(list(self._writes)).addCallback(lambda _: None)

    def _queueReturn(self, name: str | StoredReturn | None, ret: dict[str, Any]) -> None:
        self.pendingReturns.append((name, ret))
        self._flushReturns()

    def _flushReturns(self) -> None:
        while self.state == "ready" and self.req is not None and self.pendingReturns:
            name, ret = self.pendingReturns.popleft()
            d = self.req.request(ret)
            d.addCallbacks(self._returnDelivered, self._returnFailed, (name,), None, (name, ret))

    def _returnDelivered(self, reply: Any, name: str | StoredReturn | None) -> None:
        if isinstance(name, StoredReturn):
            self._unacknowledged.pop(name, None)
            name.delivered(self.returnsQueue)
            if not self._unacknowledged and self._acknowledgementWaiters:
                self._acknowledgementsSettled()
        elif name is not None and self.returnsQueue is not None:
            self.returnsQueue.remove(name)

    def _returnFailed(
        self, failure: Any, name: str | StoredReturn | None, ret: dict[str, Any]
    ) -> None:
        if failure.check(RequestError):
            # Refused (a duplicate of a return the master has, or a job it
            # never sent us): sending it again would not change that.
            self.log.warn(
                "minion {id}: the master refused the return for {jid}: {e}",
                id=self.id,
                jid=ret["jid"],
                e=failure.value,
            )
            self._returnDelivered(None, name)
            return
        # The connection went away before the master answered: keep the
        # return and send it again after reconnecting. A duplicate is refused
        # by the master, so the job still gets exactly one return.
        self.pendingReturns.appendleft((name, ret))
