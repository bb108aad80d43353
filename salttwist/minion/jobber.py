# -*- test-case-name: tests.test_minion -*-
"""
The job side of a minion: check each publication (the MAC of this
subscription, the publication key, the load's shape), decide whether it
targets this minion, drop replays, run it, and hand its result to the
return side (L{salttwist.minion.returns.ReturnDelivery}).

L{Jobber} knows nothing of the connection's life: the minion hands it the
keys of each session (L{Jobber.subscribed}) and takes them back when the
session ends (L{Jobber.unsubscribed}).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredList
from twisted.logger import Logger

from salttwist import crypt, serial, wire
from salttwist.jid import isJid
from salttwist.minion.connection import MINION_LOG_NAMESPACE
from salttwist.minion.jobs import RunningJob, remember
from salttwist.minion.replay import ReplayGuard
from salttwist.modules.executor import Executor
from salttwist.targeting import TargetError, matchMinion
from salttwist.transport.reqclient import ReqClientProtocol

#: Seconds a stopping minion gives the commands of its jobs between
#: C{SIGTERM} and C{SIGKILL} (Salt's process manager waits likewise before
#: it kills the children that ignored its C{SIGTERM}; Salt has no option
#: for it). Salt's C{saltutil.term_job} has no such follow-up: the job's
#: commands get C{SIGTERM} only.
KILL_GRACE = 3.0


class Jobber:
    """
    Runs the publications that target this minion.

    @ivar req: the req protocol of the current subscription (whose returns
        the publications acknowledge), or L{None}.
    @ivar stopping: the minion stops: publications still bring
        acknowledgements, and run nothing.
    @ivar jobDone: called with each job's result and load (the return
        side's L{ReturnDelivery.jobDone}).
    """

    def __init__(
        self,
        minionId: str,
        executor: Executor,
        reactor: Any,
        jobDone: Callable[[dict[str, Any], dict[str, Any]], None],
        logJobs: bool,
    ) -> None:
        self.id = minionId
        # The minion's log lines keep the logger name they always had.
        self.log = Logger(namespace=MINION_LOG_NAMESPACE, source=self)
        self.executor = executor
        self.reactor = reactor
        self.jobDone = jobDone
        #: Whether the per-job info line is logged at all: a filtered-out
        #: Logger.info still builds and routes its event, a measurable
        #: share of a job's CPU.
        self.logJobs = logJobs
        self.replay = ReplayGuard(reactor)
        self.req: ReqClientProtocol | None = None
        self.stopping = False
        #: Jobs running.
        self.inFlight: set[Deferred[None]] = set()
        # The current publication key and the one before it: a publication
        # sealed just before a rotation may arrive just after it.
        self._pubKeys: dict[int, crypt.AesCipher] = {}
        self._kid: int | None = None
        self._rotateCipher: crypt.AesCipher | None = None
        #: The MAC of the current pub subscription's publications.
        self._publicationMac: crypt.HmacSha256 | None = None

    # -- sessions ------------------------------------------------------------

    def sessionKeys(self, kid: int, publicationKey: bytes, sessionKey: bytes) -> None:
        """
        A session was opened: take its publication key (generation C{kid})
        and derive the key that seals key rotations from C{sessionKey}.
        """
        self._kid = kid
        self._pubKeys = {kid: crypt.AesCipher(publicationKey)}
        self._rotateCipher = crypt.AesCipher(crypt.deriveKey(sessionKey, wire.ROTATE_CONTEXT))

    def subscribed(self, req: ReqClientProtocol, macKey: bytes, notBefore: float) -> None:
        """
        The pub subscription is confirmed: accept publications MACed with
        C{macKey}, stamped no earlier than C{notBefore} (master time).
        """
        # Nothing published before this subscription was meant for this
        # connection: a recorded publication replayed after a restart is
        # refused (within a small grace for a job published as we joined).
        self.replay.notBefore = notBefore
        self.req = req
        self._publicationMac = crypt.HmacSha256(macKey)

    def unsubscribed(self) -> None:
        """
        The subscription's connections closed.
        """
        self.req = None
        # A publication MACed for the closed subscription is not accepted
        # any more: above all, the request ids it acknowledges were those of
        # the closed req session, and the next session numbers its requests
        # from 1 again.
        self._publicationMac = None

    # -- running and stopping ------------------------------------------------------

    def whenIdle(self, grace: float, killGrace: float = KILL_GRACE) -> Deferred[Any] | None:
        """
        Let the running jobs end, as a stopping minion does: those still
        running after C{grace} seconds get C{SIGTERM} (L{terminateRunning}),
        and those still running C{killGrace} seconds after that get
        C{SIGKILL} (L{killRunning}). Only timers: nothing waits on the
        reactor.

        @return: L{None} if no job runs, else a L{Deferred} firing once every
            running job ended.
        """
        if not self.inFlight:
            return None
        timers = [
            self.reactor.callLater(grace, self.terminateRunning),
            self.reactor.callLater(grace + killGrace, self.killRunning),
        ]

        def finished(result: object) -> object:
            for timer in timers:
                if timer.active():
                    timer.cancel()
            return result

        return DeferredList(list(self.inFlight)).addCallback(finished)

    def terminateRunning(self) -> None:
        """
        Send C{SIGTERM} to every running job (to the process groups of the
        commands it runs; a job running no command is cancelled), as a
        stopping minion does once the grace is over.
        """
        self._stopRunning("SIGTERM", "the minion stops")

    def killRunning(self) -> None:
        """
        Kill every job still running (C{SIGKILL} to its commands' process
        groups, and the job cancelled), as a stopping minion does
        L{KILL_GRACE} seconds after L{terminateRunning}.
        """
        self._stopRunning("SIGKILL", "still running after SIGTERM; the minion stops")

    def _stopRunning(self, signalName: str, why: str) -> None:
        for job in list(self.executor.context.running.values()):
            self.log.warn(
                "minion {id}: sending {signal} to job {jid} ({fun}): {why}",
                id=self.id,
                signal=signalName,
                jid=job.load.get("jid"),
                fun=job.fun,
                why=why,
            )
            job.cancel(signalName)

    # -- publications ------------------------------------------------------------

    def publicationReceived(self, frame: dict[str, Any]) -> None:
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
            if self.stopping:
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
            # The minion's own grains and pillar (the pillar as last
            # delivered by the master, kept current in the context).
            context = self.executor.context
            if not matchMinion(
                self.id,
                load.get("tgt"),
                load.get("tgt_type", "glob"),
                grains=context.grains,
                pillar=context.pillar,
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
        # Run it (inline: this is the path of every job).
        fun, arg = load["fun"], load.get("arg", [])
        if self.logJobs:
            self.log.info(
                "minion {id}: running {fun} for job {jid}", id=self.id, fun=fun, jid=load["jid"]
            )
        jid = load["jid"]
        result = self.executor.call(fun, arg, jid)
        if not isinstance(result, Deferred):
            # It ran on the reactor and is done (test.ping): no Deferred,
            # and nothing could have seen it running.
            try:
                self.jobDone(result, load)
            except Exception:
                self.log.failure("minion {id}: the return of {jid}", id=self.id, jid=jid)
            return
        d = result
        context = self.executor.context
        job = RunningJob(load, d, self.reactor.seconds(), processes=context.processes)
        running = context.running
        running[jid] = job

        def ended(result: dict[str, Any]) -> dict[str, Any]:
            running.pop(jid, None)
            if job.killedBy is not None:
                remember(self.executor.context.killed, jid, job.killedBy)
                result = {
                    "return": f"The job was killed with {job.killedBy}",
                    "retcode": 1,
                    "success": False,
                }
            return result

        finished = d.addCallback(ended).addCallback(self.jobDone, load)
        self.inFlight.add(finished)
        finished.addErrback(
            lambda f: self.log.failure("minion {id}: the return of {jid}", f, id=self.id, jid=jid)
        )
        finished.addBoth(lambda _: self.inFlight.discard(finished))

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
