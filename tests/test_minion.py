# -*- test-case-name: tests.test_minion -*-
"""
Tests for L{salttwist.minion.core}: a whole master and minion connected in
memory (L{tests._loopback.MasterMinionNetwork}), with time driven by a
L{MemoryReactorClock}.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, serial, wire
from salttwist.config import loadMasterConfig, loadMinionConfig
from salttwist.daemon import StartupError
from salttwist.master.core import ACK_DELAY, runSynchronously
from salttwist.master.keys import MasterKeys, PublicationKey
from salttwist.minion.core import (
    ACKNOWLEDGEMENT_WAIT,
    KILL_GRACE,
    MASTER_PUB_FILE,
    STOP_GRACE,
    Minion,
)
from salttwist.modules.executor import EX_UNAVAILABLE
from salttwist.pki.keystore import ACCEPTED, PENDING, REJECTED
from salttwist.transport.reqclient import ReqClientProtocol
from tests._loopback import MasterMinionNetwork

# Key generation is slow: these serve every test of the module.
MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())
OTHER_KEY = crypt.generatePrivateKey()
OTHER_PEM = crypt.publicKeyToPem(OTHER_KEY.public_key())
ROOT_KEY = os.urandom(32)

REQ_PORT = 4506
PUB_PORT = 4505
ACCEPTANCE_WAIT = 10.0


class MinionTestCase(SynchronousTestCase):
    """
    A master on a L{MasterMinionNetwork}, helpers to add minions to it, and
    the log events of the test.

    @cvar minionOptions: options every minion of the test gets (the
        C{SingleConnection...} subclasses run a class's tests with
        C{single_connection}).
    """

    minionOptions: dict[str, Any] = {}

    def setUp(self) -> None:
        """
        Make the master and start recording log events.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(
            root,
            overrides={"root_dir": root, "publish_port": PUB_PORT, "ret_port": REQ_PORT},
        )
        self.net = MasterMinionNetwork(config, MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY))
        self.master = self.net.master
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def makeMinion(
        self,
        minionId: str = "m1",
        prepare: Callable[[str], None] | None = None,
        **overrides: Any,
    ) -> Minion:
        """
        Build a minion (not started) whose key pair is L{MINION_KEY}, with
        deterministic back-off (no jitter): 1 s doubling up to 10 s.

        @param prepare: called with the C{pki_dir} once the key is in it,
            before the minion is built.
        """
        root = os.path.abspath(self.mktemp())
        options = {
            "root_dir": root,
            "id": minionId,
            "master": "salt.test",
            "master_port": REQ_PORT,
            "acceptance_wait_time": ACCEPTANCE_WAIT,
            "recon_default": 1000,
            "recon_max": 10000,
            "recon_randomize": False,
            "random_reauth_delay": 0,
        }
        options.update(self.minionOptions)
        options.update(overrides)
        config = loadMinionConfig(root, overrides=options)
        os.makedirs(config["pki_dir"], mode=0o700)
        crypt.writePrivateFile(
            os.path.join(config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(MINION_KEY)
        )
        if prepare is not None:
            prepare(config["pki_dir"])
        minion = self.net.buildMinion(config)
        self.addCleanup(minion.stop)
        return minion

    def readyMinion(self, minionId: str = "m1", **overrides: Any) -> Minion:
        """
        Accept the minion's key on the master, start it, and wait until it is
        authenticated and subscribed.
        """
        self.net.keyStore.putKey(ACCEPTED, minionId, MINION_PEM)
        minion = self.makeMinion(minionId, **overrides)
        ready = minion.whenReady()
        minion.start()
        self.net.flush()
        self.successResultOf(ready)
        self.assertEqual(minion.state, "ready")
        return minion

    def connectionPorts(self) -> list[int]:
        """
        @return: the ports a minion of this test connects to, in order.
        """
        if self.minionOptions.get("single_connection"):
            return [REQ_PORT]
        return [REQ_PORT, PUB_PORT]

    def pinnedPath(self, minion: Minion) -> str:
        """
        @return: where C{minion} pins its master's key.
        """
        return os.path.join(minion.config["pki_dir"], MASTER_PUB_FILE)

    def logged(self, text: str) -> list[str]:
        """
        @return: the log messages so far that contain C{text}.
        """
        messages = [formatEvent(event) for event in self.logs]
        return [message for message in messages if text in message]

    def returns(self, minionId: str = "m1") -> list[dict[str, Any]]:
        """
        @return: the data of every C{salt/job/<jid>/ret/<minionId>} event.
        """
        return [
            data
            for tag, data in self.net.eventsTagged("salt/job/")
            if tag.endswith(f"/ret/{minionId}")
        ]

    def publish(self, fun: str, arg: list[Any] | None = None, tgt: Any = "*", **kw: Any) -> str:
        """
        Publish a job as the local client does, and deliver it.

        @return: its jid.
        """
        load = {"tgt": tgt, "fun": fun, "arg": arg or [], **kw}
        reply = self.successResultOf(self.master.clientPublish(None, load))
        self.net.flush()
        return reply["jid"]

    def spyOnJobs(self, minion: Minion) -> list[str]:
        """
        @return: a list that receives the name of every function C{minion}
            runs from now on.
        """
        ran: list[str] = []
        call = minion.executor.call

        def recordingCall(fun: str, arg: list[Any], jid: str | None = None) -> Any:
            ran.append(fun)
            return call(fun, arg, jid)

        minion.executor.call = recordingCall  # type: ignore[method-assign]
        return ran


class AuthenticationTests(MinionTestCase):
    """
    The minion's authentication loop against the master's key states.
    """

    def test_pendingThenAccepted(self) -> None:
        """
        An unknown minion's key is put in C{minions_pre}; the minion retries
        every C{acceptance_wait_time}; once an admin accepts the key it
        becomes ready at its next attempt, pins the master's key in
        C{pki_dir/minion_master.pub} and subscribes.
        """
        minion = self.makeMinion()
        ready = minion.whenReady()
        minion.start()
        self.net.flush()
        self.assertEqual(self.net.keyStore.getKey(PENDING, "m1"), MINION_PEM)
        self.assertEqual(minion.state, "waiting")
        self.assertNoResult(ready)
        self.assertEqual(self.net.attempts, [REQ_PORT])
        self.assertFalse(os.path.exists(self.pinnedPath(minion)))
        self.assertTrue(self.logged("has not accepted this minion's key yet"))

        self.net.advance(ACCEPTANCE_WAIT - 0.5)
        self.assertEqual(self.net.attempts, [REQ_PORT])
        self.net.advance(0.5)
        self.assertEqual(self.net.attempts, [REQ_PORT, REQ_PORT])
        self.assertEqual(minion.state, "waiting")
        self.assertNoResult(ready)

        self.net.keyStore.moveKey("m1", PENDING, ACCEPTED)
        self.net.advance(ACCEPTANCE_WAIT)
        self.assertIsNone(self.successResultOf(ready))
        self.assertEqual(minion.state, "ready")
        self.assertEqual(self.net.attempts, [REQ_PORT, REQ_PORT, REQ_PORT, PUB_PORT])
        with open(self.pinnedPath(minion), "rb") as f:
            self.assertEqual(f.read(), MASTER_PEM)
        self.assertIn("m1", self.master.sessions)
        self.assertIn("m1", self.master.subscribers)
        self.assertEqual(len(self.net.eventsTagged("salt/minion/m1/start")), 1)

    def test_whenReadyWhileReady(self) -> None:
        """
        L{Minion.whenReady} fires at once when the minion is ready.
        """
        minion = self.readyMinion()
        self.assertIsNone(self.successResultOf(minion.whenReady()))

    def test_rejected(self) -> None:
        """
        A rejected minion is not subscribed and tries again after
        C{acceptance_wait_time}.
        """
        self.net.keyStore.putKey(REJECTED, "m1", MINION_PEM)
        minion = self.makeMinion()
        minion.start()
        self.net.flush()
        self.assertEqual(minion.state, "waiting")
        self.assertTrue(self.logged("the master rejected this minion's key"))
        self.net.advance(ACCEPTANCE_WAIT)
        self.assertEqual(self.net.attempts, [REQ_PORT, REQ_PORT])
        self.assertEqual(self.master.subscribers, {})

    def test_pinnedKeyDiffers(self) -> None:
        """
        If C{minion_master.pub} holds another key than the master's, the
        minion refuses the master's reply: it does not subscribe, keeps the
        pinned file, says why, and tries again after a back-off.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.makeMinion()
        os.makedirs(minion.config["pki_dir"], exist_ok=True)
        with open(self.pinnedPath(minion), "wb") as f:
            f.write(OTHER_PEM)
        ready = minion.whenReady()
        minion.start()
        self.net.flush()
        self.assertNoResult(ready)
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(self.net.attempts, [REQ_PORT])
        self.assertEqual(self.master.subscribers, {})
        self.assertEqual(self.master.sessions, {})
        # The log line names both fingerprints, so an admin can compare.
        [line] = self.logged("not the pinned")
        self.assertIn(crypt.fingerprint(MASTER_PEM), line)
        self.assertIn(crypt.fingerprint(OTHER_PEM), line)
        self.net.advance(1.0)
        self.assertEqual(self.net.attempts, [REQ_PORT, REQ_PORT])
        self.assertNoResult(ready)
        with open(self.pinnedPath(minion), "rb") as f:
            self.assertEqual(f.read(), OTHER_PEM)

    def test_masterFingerMismatch(self) -> None:
        """
        If C{master_finger} is set and the master's key has another
        fingerprint, the minion refuses it, pins nothing, and tries again
        later.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.makeMinion(master_finger=crypt.fingerprint(OTHER_PEM))
        ready = minion.whenReady()
        minion.start()
        self.net.flush()
        self.assertNoResult(ready)
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(self.master.subscribers, {})
        self.assertFalse(os.path.exists(self.pinnedPath(minion)))
        [line] = self.logged("not master_finger")
        self.assertIn(crypt.fingerprint(MASTER_PEM), line)
        self.assertIn(crypt.fingerprint(OTHER_PEM), line)
        self.net.advance(1.0)
        self.assertEqual(self.net.attempts, [REQ_PORT, REQ_PORT])
        self.assertNoResult(ready)

    def test_masterFingerMatches(self) -> None:
        """
        A C{master_finger} equal to the master key's fingerprint (in any
        case) is accepted.
        """
        minion = self.readyMinion(master_finger=crypt.fingerprint(MASTER_PEM).upper())
        with open(self.pinnedPath(minion), "rb") as f:
            self.assertEqual(f.read(), MASTER_PEM)


class JobTests(MinionTestCase):
    """
    Jobs published by the master run on the minion and return through the
    req channel to the master's bus.
    """

    def test_pingReturns(self) -> None:
        """
        C{test.ping} published to C{*} runs on the minion, and
        C{salt/job/<jid>/ret/<id>} with return C{True} arrives on the
        master's bus.
        """
        self.readyMinion()
        jid = self.publish("test.ping")
        [ret] = self.returns()
        self.assertEqual(ret["jid"], jid)
        self.assertEqual(ret["fun"], "test.ping")
        self.assertIs(ret["return"], True)
        self.assertEqual(ret["retcode"], 0)
        self.assertIs(ret["success"], True)
        self.assertEqual(len(self.net.eventsTagged(f"salt/job/{jid}/ret/m1")), 1)

    def test_jobLineOnlyAtInfo(self) -> None:
        """
        The minion logs "running <fun> for job <jid>" when its level shows
        info lines, and does not even build that event otherwise.
        """
        self.patch(os, "environ", {})
        quiet = self.readyMinion(log_level="warning")
        self.assertFalse(quiet.jobber.logJobs)
        self.publish("test.ping")
        self.assertEqual(self.logged("running test.ping"), [])
        quiet.stop()
        chatty = self.readyMinion("m1", log_level="info")
        self.assertTrue(chatty.jobber.logJobs)
        jid = self.publish("test.ping")
        self.assertEqual(
            self.logged("running test.ping"), [f"minion m1: running test.ping for job {jid}"]
        )

    def test_arguments(self) -> None:
        """
        Positional and keyword arguments reach the function.
        """
        self.readyMinion()
        self.publish("test.arg", [1, "two", {"__kwarg__": True, "three": 3}])
        [ret] = self.returns()
        self.assertEqual(ret["return"], {"args": [1, "two"], "kwargs": {"three": 3}})

    def test_grainsReported(self) -> None:
        """
        A minion reports its grains to the master when it becomes ready.
        """
        minion = self.readyMinion()
        self.assertEqual(self.master.grainsCache.grains["m1"], minion.executor.context.grains)

    def test_grainsChangeReported(self) -> None:
        """
        A job that sets a grain makes the minion report its grains again, so
        master-side grain targeting sees the new value.
        """
        self.readyMinion()
        self.publish("grains.setval", ["role", "db"])
        self.net.flush()
        self.assertEqual(self.master.grainsCache.grains["m1"]["role"], "db")

    def test_jobAndReturnCached(self) -> None:
        """
        A published job and its return are written to the master's job cache.
        """
        stored: list[tuple[Any, ...]] = []

        class Recorder:
            def storeJob(self, *args: Any) -> Deferred[None]:
                stored.append(("job", *args))
                # Stored: the publication waits for it (d339a9f).
                return succeed(None)

            def storeReturn(self, *args: Any) -> Deferred[None]:
                stored.append(("ret", *args))
                return Deferred()

        self.master.jobCache = Recorder()  # type: ignore[assignment]
        self.readyMinion()
        jid = self.publish("test.ping")
        self.assertEqual([(kind, args[0]) for kind, *args in stored], [("job", jid), ("ret", jid)])
        self.assertEqual(stored[0][3], ["m1"])
        self.assertEqual(stored[1][2], "m1")
        self.assertIs(stored[1][3]["return"], True)

    def test_unknownFunction(self) -> None:
        """
        A function the minion does not have returns retcode 254 and
        C{success} false through the whole path.
        """
        self.readyMinion()
        self.publish("nosuch.function")
        [ret] = self.returns()
        self.assertEqual(ret["retcode"], EX_UNAVAILABLE)
        self.assertIs(ret["success"], False)
        self.assertEqual(ret["return"], "'nosuch.function' is not available.")

    def test_unsendableReturn(self) -> None:
        """
        A function whose value cannot be serialised still answers its job:
        the return says why, with retcode 1, instead of being lost.
        """
        minion = self.readyMinion()
        minion.executor.functions["test.unsendable"] = lambda: object()
        self.publish("test.unsendable")
        [ret] = self.returns()
        self.assertEqual(ret["retcode"], 1)
        self.assertIs(ret["success"], False)
        self.assertIn("cannot be sent", ret["return"])

    def test_textReturns(self) -> None:
        """
        ASCII text and bytes are sent as they are (without being encoded
        once more to check them); text that cannot be UTF-8 (a lone
        surrogate) is still caught and answered as unsendable.
        """
        minion = self.readyMinion()
        values = {
            "test.ascii": "a" * 70000,
            "test.bytes": b"\xff" * 10,
            "test.utf8": "\u00e9t\u00e9",
        }
        for name, value in values.items():
            minion.executor.functions[name] = lambda value=value: value
            self.publish(name)
            ret = self.returns()[-1]
            self.assertEqual((ret["return"], ret["retcode"]), (value, 0))
        minion.executor.functions["test.surrogate"] = lambda: "a\udc80"
        self.publish("test.surrogate")
        ret = self.returns()[-1]
        self.assertEqual(ret["retcode"], 1)
        self.assertIn("cannot be sent", ret["return"])

    def test_notTargeted(self) -> None:
        """
        A publication whose target does not match the minion is ignored.
        """
        self.net.keyStore.putKey(ACCEPTED, "m2", OTHER_PEM)
        minion = self.readyMinion()
        ran = self.spyOnJobs(minion)
        self.publish("test.ping", tgt="m2")
        self.publish("test.ping", tgt="m2,m3", tgt_type="list")
        self.assertEqual(ran, [])
        self.assertEqual(len(self.net.eventsTagged("salt/job/")), 2)
        self.assertEqual([tag for tag, _ in self.net.events if "/ret/" in tag], [])


class PublicationVettingTests(MinionTestCase):
    """
    The minion drops every publication that is not sealed with the current
    publication key, MACed for its subscription by its master, and fresh; it
    runs nothing and logs why.
    """

    def setUp(self) -> None:
        """
        Make a ready minion and spy on the functions it runs.
        """
        super().setUp()
        self.minion = self.readyMinion()
        self.ran = self.spyOnJobs(self.minion)

    def jobLoad(self, **overrides: Any) -> dict[str, Any]:
        """
        Record a job targeting C{m1} on the master (so a return for it would
        be accepted) and return its load.
        """
        jid = self.master.jids.next()
        load = {
            "jid": jid,
            "fun": "test.ping",
            "arg": [],
            "tgt": "*",
            "tgt_type": "glob",
            "user": "root",
            "ts": self.net.reactor.seconds(),
        }
        load.update(overrides)
        self.master.jobs.add(jid, load, ["m1"])
        return load

    def seal(
        self,
        load: Any,
        kid: int | None = None,
        macKey: crypt.HmacSha256 | None = None,
        tamper: bool = False,
        remac: bool = True,
        acks: Any = None,
        macAcks: list[int] | None = None,
    ) -> dict[str, Any]:
        """
        Seal C{load} and MAC it for C{m1}'s subscription as L{Master.publish}
        does.

        @param kid: claim and bind this key generation instead of the
            current one.
        @param macKey: MAC with this key instead of the subscription's.
        @param tamper: flip one bit of the ciphertext; then MAC the changed
            ciphertext if C{remac}, else keep the original MAC.
        @param acks: the frame's C{ack} field, if not L{None}.
        @param macAcks: the acknowledgements the MAC covers, if not
            L{None}.
        """
        publication = self.master.publicationKey
        kid = publication.kid if kid is None else kid
        if macKey is None:
            macKey = self.master.subscribers["m1"].publicationMac
        assert macKey is not None

        def mac(blob: bytes) -> bytes:
            message = wire.publicationMacMessage(kid, crypt.sha256(blob))
            if macAcks is not None:
                message += wire.publicationAcksMessage(macAcks)
            return macKey.mac(message)

        blob = publication.cipher().encrypt(serial.dumps(load), wire.publicationAad(kid))
        tag = mac(blob)
        if tamper:
            blob = blob[:-1] + bytes([blob[-1] ^ 1])
            if remac:
                tag = mac(blob)
        frame = {"pub": blob, "kid": kid, "mac": tag}
        if acks is not None:
            frame["ack"] = acks
        return frame

    def deliver(self, frame: dict[str, Any] | bytes) -> None:
        """
        Write one frame (a map, or its encoded bytes) on the minion's pub
        subscription, from the master's side, and deliver it.
        """
        data = frame if isinstance(frame, bytes) else serial.dumps(frame)
        self.master.subscribers["m1"].sendString(data)
        self.net.flush()

    def assertDropped(self, frame: dict[str, Any] | bytes, reason: str) -> None:
        """
        Delivering C{frame} runs nothing, sends no return, keeps the minion
        ready and subscribed, and logs a drop naming C{reason}.
        """
        self.deliver(frame)
        self.assertEqual(self.ran, [])
        self.assertEqual(self.returns(), [])
        self.assertEqual(self.minion.state, "ready")
        self.assertIn("m1", self.master.subscribers)
        self.assertTrue(
            [m for m in self.logged("dropped") if reason in m],
            f"no drop logged for {reason!r}",
        )

    def test_valid(self) -> None:
        """
        A publication sealed and MACed here as the master does it runs (the
        control for the tests below).
        """
        self.deliver(self.seal(self.jobLoad()))
        self.assertEqual(self.ran, ["test.ping"])
        self.assertEqual(len(self.returns()), 1)

    def test_tamperedCiphertext(self) -> None:
        """
        A ciphertext changed in transit is dropped: with the original MAC it
        fails the subscription's check; MACed again by the master it still
        fails to authenticate under the publication key.
        """
        load = self.jobLoad()
        self.assertDropped(self.seal(load, tamper=True, remac=False), "MAC does not verify")
        self.assertDropped(self.seal(load, tamper=True), "does not authenticate")

    def test_macOfAnotherSubscription(self) -> None:
        """
        A publication MACed with a key other than this subscription's (the
        key of an earlier subscription, another minion's, or one derived
        from this minion's session for another pub connection) is dropped.
        """
        session = self.master.sessions["m1"].sessionKey
        token = crypt.deriveKey(session, wire.PUB_TOKEN_CONTEXT)
        otherConnection = crypt.HmacSha256(
            crypt.deriveKey(token, wire.publicationMacContext(b"c" * 32, "m1"))
        )
        for key in (otherConnection, crypt.HmacSha256(b"k" * 32)):
            self.assertDropped(self.seal(self.jobLoad(), macKey=key), "MAC does not verify")

    def test_strippedMac(self) -> None:
        """
        A publication without a MAC, with an empty one or with one of
        another type, is dropped.
        """
        frame = self.seal(self.jobLoad())
        del frame["mac"]
        self.assertDropped(frame, "MAC does not verify")
        for junk in (b"", "x" * 32, 7):
            frame["mac"] = junk
            self.assertDropped(frame, "MAC does not verify")

    def test_wrongKid(self) -> None:
        """
        A publication for another publication key generation is dropped,
        even when MACed by the master.
        """
        kid = self.master.publicationKey.kid
        self.assertDropped(self.seal(self.jobLoad(), kid=kid + 1), "is not known")
        frame = self.seal(self.jobLoad())
        frame["kid"] = kid + 1
        self.assertDropped(frame, "is not known")

    def test_replay(self) -> None:
        """
        The same publication bytes delivered twice run once: the second copy
        is dropped as already received.
        """
        data = serial.dumps(self.seal(self.jobLoad()))
        self.deliver(data)
        self.deliver(data)
        self.assertEqual(self.ran, ["test.ping"])
        self.assertEqual(len(self.returns()), 1)
        self.assertTrue(self.logged("was already received"))

    def test_stale(self) -> None:
        """
        A publication stamped far from the minion's clock is dropped.
        """
        self.net.advance(3600)
        self.assertDropped(self.seal(self.jobLoad(ts=1.0)), "away from this minion's clock")
        self.assertDropped(self.seal(self.jobLoad(ts="now")), "has no timestamp")

    def test_acknowledgements(self) -> None:
        """
        A publication that acknowledges this minion's returns counts only if
        its MAC covers the acknowledgements: added, changed or malformed
        ones drop the publication and acknowledge nothing; MACed ones
        acknowledge the return and the job runs.
        """
        self.deliver(self.seal(self.jobLoad()))
        [rid] = self.minion.req._waiting  # the first return, not acknowledged
        self.ran.clear()
        load = self.jobLoad()

        def assertDropped(frame: dict[str, Any], reason: str) -> None:
            self.deliver(frame)
            self.assertEqual(self.ran, [])
            self.assertTrue([m for m in self.logged("dropped") if reason in m], reason)

        assertDropped(self.seal(load, acks=[rid]), "MAC does not verify")
        assertDropped(self.seal(load, acks=[rid], macAcks=[rid + 1]), "MAC does not verify")
        for bad in ([], [0], [True], ["1"], [2**63], rid, [1] * (wire.MAX_PUBLICATION_ACKS + 1)):
            assertDropped(self.seal(load, acks=bad, macAcks=[rid]), "acknowledgement")
        self.assertEqual(list(self.minion.req._waiting), [rid])
        self.assertEqual(len(self.minion.returns.unacknowledged), 1)
        self.deliver(self.seal(load, acks=[rid, 99], macAcks=[rid, 99]))
        self.assertEqual(self.ran, ["test.ping"])
        self.assertNotIn(rid, self.minion.req._waiting)
        self.assertEqual(len(self.minion.returns.unacknowledged), 1)

    def test_acknowledgementsOfAClosedSubscription(self) -> None:
        """
        Once the connections close, a publication MACed for the closed
        subscription acknowledges nothing, even while the next session
        (whose request ids start at 1 again) is being set up and before it
        has subscribed: the closed subscription's key is forgotten with it.
        """
        self.deliver(self.seal(self.jobLoad()))
        [rid] = self.minion.req._waiting
        frame = self.seal(self.jobLoad(), acks=[rid], macAcks=[rid])
        self.net.closeAll()
        self.assertEqual(self.minion.state, "waiting")
        # As the next session would be, with a request of the same id
        # waiting, just before its pub subscription is made.
        nextSession = ReqClientProtocol()
        waiting: Deferred[Any] = Deferred()
        nextSession._waiting[rid] = waiting
        self.minion.jobber.req = nextSession
        self.minion.jobber.publicationReceived(frame)
        self.assertNoResult(waiting)
        self.minion.jobber.req = None

    def test_clearTextLoad(self) -> None:
        """
        A load sent in clear text is dropped, as a bare map and even as a
        master-MACed, unencrypted blob.
        """
        load = self.jobLoad()
        kid = self.master.publicationKey.kid
        self.assertDropped(load, "is not bytes")
        self.assertDropped(dict(load, kid=kid), "is not bytes")
        plain = serial.dumps(load)
        macKey = self.master.subscribers["m1"].publicationMac
        assert macKey is not None
        tag = macKey.mac(wire.publicationMacMessage(kid, crypt.sha256(plain)))
        self.assertDropped({"pub": plain, "kid": kid, "mac": tag}, "does not authenticate")


class ReconnectTests(MinionTestCase):
    """
    The minion reconnects with back-off after losing or failing to reach its
    master, and keeps its returns meanwhile.
    """

    def test_reconnectAfterLoss(self) -> None:
        """
        When its connections are lost, the minion waits a back-off delay,
        connects and authenticates again, and becomes ready.
        """
        minion = self.readyMinion()
        self.net.closeAll()
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(self.master.sessions, {})
        self.assertEqual(self.master.subscribers, {})
        ready = minion.whenReady()
        attempts = len(self.net.attempts)
        self.net.advance(0.9)
        self.assertEqual(len(self.net.attempts), attempts)
        self.net.advance(0.1)
        self.assertIsNone(self.successResultOf(ready))
        self.assertEqual(self.net.attempts[attempts:], self.connectionPorts())
        self.assertIn("m1", self.master.sessions)
        self.assertIn("m1", self.master.subscribers)
        self.assertTrue(self.logged("lost the connection to the master"))
        self.publish("test.ping")
        self.assertEqual(len(self.returns()), 1)

    def test_backoffGrows(self) -> None:
        """
        Failed connection attempts are retried after delays that double
        (1 s, 2 s, 4 s) until one succeeds.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.makeMinion()
        self.net.refuse = 3
        minion.start()
        self.net.flush()
        self.assertEqual(self.net.attempts, [REQ_PORT])
        self.assertTrue(self.logged("cannot reach the master"))
        for delay, attempts in ((1.0, 2), (2.0, 3), (4.0, 4)):
            self.net.advance(delay - 0.01)
            self.assertEqual(self.net.attempts.count(REQ_PORT), attempts - 1)
            self.net.advance(0.01)
            self.assertEqual(self.net.attempts.count(REQ_PORT), attempts)
        self.assertEqual(minion.state, "ready")

    def test_backoffJitter(self) -> None:
        """
        With C{recon_randomize}, the first retry comes between half and all
        of C{recon_default}.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.makeMinion(recon_randomize=True, recon_default=2000)
        self.net.refuse = 1
        minion.start()
        self.net.flush()
        [call] = self.net.reactor.getDelayedCalls()
        self.assertTrue(1.0 <= call.getTime() - self.net.reactor.seconds() <= 2.0)

    def test_returnsQueuedWhileDisconnected(self) -> None:
        """
        A job that finishes while the master is unreachable keeps its return,
        which is sent once the minion has reconnected.
        """
        minion = self.readyMinion()
        jid = self.publish("test.sleep", [5])
        self.net.closeAll()
        self.net.refuse = 2
        self.net.advance(1.0)  # first retry, refused
        self.net.advance(2.0)  # second retry, refused
        self.net.advance(2.0)  # the job finishes, five seconds after it started
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(len(minion.returns.pending), 1)
        self.assertEqual(self.returns(), [])
        self.net.advance(2.0)  # third retry, four seconds after the second
        self.assertEqual(minion.state, "ready")
        [ret] = self.returns()
        self.assertEqual(ret["jid"], jid)
        self.assertIs(ret["return"], True)
        self.assertEqual(len(minion.returns.pending), 0)

    def returnsOnDisk(self, minion: Minion) -> list[str]:
        """
        The names of the returns C{minion} keeps on disk.
        """
        directory = os.path.join(minion.config["cachedir"], "returns")
        return sorted(os.listdir(directory)) if os.path.isdir(directory) else []

    def test_returnKeptOnDiskUntilAcknowledged(self) -> None:
        """
        A return is written to C{cachedir/returns} before it is sent and
        removed once the master acknowledged it.
        """
        minion = self.readyMinion()
        self.publish("test.sleep", [5])
        self.net.closeAll()
        self.net.refuse = 100
        self.net.advance(5.0)
        [name] = self.returnsOnDisk(minion)
        self.assertTrue(name.endswith(".ret"))
        self.net.refuse = 0
        self.net.advance(10.0)
        self.assertEqual(len(self.returns()), 1)
        self.net.advance(ACK_DELAY)
        self.assertEqual(self.returnsOnDisk(minion), [])

    def holdRequests(self, minion: Minion) -> list[tuple[dict[str, Any], Deferred[Any]]]:
        """
        Make C{minion}'s requests on its session wait for the test: each is
        recorded with the L{Deferred} the test fires as the master's answer.
        """
        assert minion.req is not None
        held: list[tuple[dict[str, Any], Deferred[Any]]] = []

        def request(payload: dict[str, Any]) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((payload, d))
            return d

        minion.req.request = request  # type: ignore[method-assign]
        return held

    def holdBlocking(self, minion: Minion) -> list[tuple[Deferred[Any], Any, tuple[Any, ...]]]:
        """
        Make the disk work of C{minion}'s returns queue wait for the test.
        """
        assert minion.returns.returnsQueue is not None
        held: list[tuple[Deferred[Any], Any, tuple[Any, ...]]] = []

        def hold(function: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            held.append((d, function, args))
            return d

        minion.returns.returnsQueue._runBlocking = hold  # type: ignore[method-assign]
        return held

    def test_acknowledgedReturnNeverWritten(self) -> None:
        """
        A return the master acknowledges within C{persistAfter} seconds is
        sent at once and never written to disk: no file, no work in a
        thread.
        """
        minion = self.readyMinion()
        blocking = self.holdBlocking(minion)
        jid = self.publish("test.ping", [])
        self.net.flush()
        [ret] = self.returns()
        self.assertEqual(ret["jid"], jid)
        # The master acknowledges it within ACK_DELAY.
        self.net.advance(ACK_DELAY)
        self.net.advance(minion.returns.persistAfter * 2)
        self.assertEqual(blocking, [])
        self.assertEqual(self.returnsOnDisk(minion), [])

    def test_unacknowledgedReturnWritten(self) -> None:
        """
        A return the master has not acknowledged C{persistAfter} seconds
        after it was sent is written to disk, and removed once the master
        acknowledges it.
        """
        minion = self.readyMinion()
        requests = self.holdRequests(minion)
        self.publish("test.ping", [])
        [(payload, answer)] = requests
        self.assertEqual(payload["cmd"], "_return")
        self.net.advance(minion.returns.persistAfter - 0.1)
        self.assertEqual(self.returnsOnDisk(minion), [])
        self.net.advance(0.1)
        [name] = self.returnsOnDisk(minion)
        self.assertTrue(name.endswith(".ret"))
        answer.callback({"ret": "ok"})
        self.assertEqual(self.returnsOnDisk(minion), [])

    def persistTimers(self, minion: Minion) -> list[Any]:
        """
        @return: the delayed calls that would write C{minion}'s
            unacknowledged returns to disk.
        """
        persistDue = minion.returns.persistDue
        return [c for c in self.net.reactor.getDelayedCalls() if c.func == persistDue]

    def test_onePersistTimerForManyReturns(self) -> None:
        """
        One timer serves every unacknowledged return (a cancelled timer per
        job would still wake the reactor up when due): each return is
        written C{persistAfter} seconds after it was sent, and the timer
        goes once none is left to write.
        """
        minion = self.readyMinion()
        self.holdRequests(minion)
        for _ in range(3):
            self.publish("test.ping", [])
            self.assertEqual(len(self.persistTimers(minion)), 1)
            self.net.advance(0.25)
        self.assertEqual(self.returnsOnDisk(minion), [])
        self.net.advance(minion.returns.persistAfter - 0.75)
        self.assertEqual(len(self.returnsOnDisk(minion)), 1)
        self.net.advance(0.25)
        self.assertEqual(len(self.returnsOnDisk(minion)), 2)
        self.net.advance(0.25)
        self.assertEqual(len(self.returnsOnDisk(minion)), 3)
        self.assertEqual(self.persistTimers(minion), [])

    def test_acknowledgedReturnsShareOneTimer(self) -> None:
        """
        Returns the master acknowledges leave at most one pending persist
        timer, however many jobs ran, and nothing is written.
        """
        minion = self.readyMinion()
        for _ in range(5):
            self.publish("test.ping", [])
            self.net.advance(ACK_DELAY)
        self.assertLessEqual(len(self.persistTimers(minion)), 1)
        self.net.advance(minion.returns.persistAfter)
        self.assertEqual(self.persistTimers(minion), [])
        self.assertEqual(self.returnsOnDisk(minion), [])

    def test_returnWrittenWhileAcknowledged(self) -> None:
        """
        When the master acknowledges a return while its copy is being
        written, the copy is removed once the write finished.
        """
        minion = self.readyMinion()
        requests = self.holdRequests(minion)
        blocking = self.holdBlocking(minion)
        self.publish("test.ping", [])
        self.net.advance(minion.returns.persistAfter)
        d, write, args = blocking.pop(0)
        requests[0][1].callback({"ret": "ok"})
        self.assertEqual(blocking, [])
        d.callback(write(*args))
        self.assertEqual(len(self.returnsOnDisk(minion)), 1)
        d, remove, args = blocking.pop(0)
        d.callback(remove(*args))
        self.assertEqual(self.returnsOnDisk(minion), [])
        self.assertEqual(blocking, [])

    def test_connectionLostWritesReturn(self) -> None:
        """
        A return whose acknowledgement is lost with the connection is
        written to disk at once, without waiting C{persistAfter}.
        """
        minion = self.readyMinion()
        self.holdRequests(minion)
        self.publish("test.ping", [])
        self.assertEqual(self.returnsOnDisk(minion), [])
        self.net.refuse = 100
        self.net.closeAll()
        self.assertEqual(len(self.returnsOnDisk(minion)), 1)

    def test_shutdownWritesUnacknowledged(self) -> None:
        """
        L{Minion.shutdown} writes the returns the master has not
        acknowledged within C{ACKNOWLEDGEMENT_WAIT} to disk before it fires,
        and then stops.
        """
        minion = self.readyMinion()
        self.holdRequests(minion)
        blocking = self.holdBlocking(minion)
        self.publish("test.ping", [])
        done = minion.shutdown()
        self.assertNoResult(done)
        self.net.advance(ACKNOWLEDGEMENT_WAIT - 0.01)
        self.assertEqual(blocking, [])
        self.net.advance(0.01)
        d, write, args = blocking.pop(0)
        d.callback(write(*args))
        self.successResultOf(done)
        self.assertEqual(minion.state, "stopped")
        self.assertEqual(len(self.returnsOnDisk(minion)), 1)

    def test_shutdownWaitsForHeldAcknowledgement(self) -> None:
        """
        A return sent just before L{Minion.shutdown}, whose acknowledgement
        the master holds back for a next publication (up to C{ACK_DELAY}),
        is not written to disk: the stopping minion leaves the pub channel,
        the master sends what it held for that subscription at once, and
        the minion stops without waiting out C{ACK_DELAY}.
        """
        minion = self.readyMinion()
        blocking = self.holdBlocking(minion)
        self.publish("test.ping", [])
        self.assertEqual(len(minion.returns.unacknowledged), 1)
        done = minion.shutdown()
        self.assertNoResult(done)
        self.assertIsNone(minion.pub)
        self.net.flush()
        self.successResultOf(done)
        self.assertNotIn(minion.id, self.master.subscribers)
        self.assertEqual(minion.state, "stopped")
        self.assertEqual(blocking, [])
        self.assertEqual(self.returnsOnDisk(minion), [])

    def test_acknowledgedByTheNextPublication(self) -> None:
        """
        The master acknowledges a return with the minion's next
        publication, in the frame itself: the minion reads nothing on its
        req connection for it.
        """
        minion = self.readyMinion()
        frames: list[dict[str, Any]] = []
        reqFrames: list[dict[str, Any]] = []
        assert minion.req is not None
        subscription: Any = minion.pub or minion.req
        onPublication = subscription.onPublication
        subscription.onPublication = lambda frame: (frames.append(frame), onPublication(frame))
        sessionFrame = minion.req._sessionFrame
        minion.req._sessionFrame = lambda frame: (reqFrames.append(frame), sessionFrame(frame))  # type: ignore[method-assign, func-returns-value]
        self.publish("test.ping", [])
        [rid] = minion.req._waiting
        second = self.publish("test.ping", [])
        self.assertEqual(frames[-1]["ack"], [rid])
        [(stored, ret)] = minion.returns.unacknowledged.items()
        self.assertEqual(ret["jid"], second)
        self.assertEqual(reqFrames, [])

    def test_shutdownTakesAcknowledgementFromPublication(self) -> None:
        """
        A stopping minion runs no more jobs, but takes the acknowledgements
        a publication brings (one on its way while it leaves the pub
        channel; here it stays on it), and stops without waiting any
        longer.
        """
        minion = self.readyMinion()
        blocking = self.holdBlocking(minion)
        self.publish("test.ping", [])
        minion._leavePublications = lambda: None  # type: ignore[method-assign]
        done = minion.shutdown()
        self.assertNoResult(done)
        ran = self.spyOnJobs(minion)
        self.publish("test.ping", [])
        self.successResultOf(done)
        self.assertEqual(ran, [])
        self.assertEqual(blocking, [])
        self.assertEqual(self.returnsOnDisk(minion), [])

    def test_returnSurvivesMinionRestart(self) -> None:
        """
        A return still on disk when the minion stops is sent by the next
        minion process with the same cachedir, exactly once.
        """
        minion = self.readyMinion()
        jid = self.publish("test.sleep", [5])
        self.net.closeAll()
        self.net.refuse = 100
        self.net.advance(5.0)
        minion.stop()
        self.assertEqual(len(self.returnsOnDisk(minion)), 1)
        self.net.refuse = 0
        again = self.net.buildMinion(minion.config)
        self.addCleanup(again.stop)
        ready = again.whenReady()
        again.start()
        self.net.flush()
        self.successResultOf(ready)
        [ret] = self.returns()
        self.assertEqual(ret["jid"], jid)
        self.net.advance(ACK_DELAY)
        self.assertEqual(self.returnsOnDisk(again), [])

    def test_refusedReturnForgotten(self) -> None:
        """
        A return the master refuses (here: for a job it never sent) is not
        kept or sent again.
        """
        minion = self.readyMinion()
        minion.returns.jobDone(
            {"return": 1, "retcode": 0, "success": True}, {"jid": "2" * 20, "fun": "x.y"}
        )
        self.net.flush()
        self.assertEqual(self.returns(), [])
        self.assertEqual(self.returnsOnDisk(minion), [])
        self.assertEqual(len(minion.returns.pending), 0)

    def test_stopWhileConnecting(self) -> None:
        """
        A minion stopped while its req connection is being made closes that
        connection when it arrives, and its greeting's failure is handled
        (no "Unhandled error in Deferred").
        """
        minion = self.makeMinion()
        pending: Deferred[Any] = Deferred()
        made: list[Any] = []

        def slowConnect(host: str, port: int, factory: Any) -> Deferred[Any]:
            made.append(factory)
            return pending

        minion.connectTCP = slowConnect  # type: ignore[assignment]
        minion.start()
        minion.stop()
        proto = made[0].buildProtocol(None)
        from twisted.internet.testing import StringTransport

        transport = StringTransport()
        proto.makeConnection(transport)
        pending.callback(proto)
        self.assertTrue(transport.disconnecting)
        proto.connectionLost(None)
        self.assertIsNone(minion.req)
        self.assertEqual(minion.state, "stopped")

    def test_randomReauthDelay(self) -> None:
        """
        After losing an established connection the minion waits its back-off
        plus a random 0..random_reauth_delay seconds, so a master restart
        does not bring every minion back in the same second.
        """
        minion = self.readyMinion(random_reauth_delay=30)
        delays: list[float] = []
        real = self.net.reactor.callLater

        def recordingCallLater(delay: float, f: Any, *a: Any, **kw: Any) -> Any:
            delays.append(delay)
            return real(delay, f, *a, **kw)

        self.patch(self.net.reactor, "callLater", recordingCallLater)
        self.net.closeAll()
        self.net.flush()
        self.assertEqual(len(delays), 1)
        self.assertTrue(1.0 <= delays[0] <= 31.0, delays)
        self.assertEqual(minion.state, "waiting")

    def test_stopCancelsRetry(self) -> None:
        """
        A stopped minion does not retry.
        """
        minion = self.readyMinion()
        self.net.closeAll()
        minion.stop()
        attempts = len(self.net.attempts)
        self.net.advance(60)
        self.assertEqual(len(self.net.attempts), attempts)
        self.assertEqual(minion.state, "stopped")


class PubConnectionTests(MinionTestCase):
    """
    The pub connection of a minion without C{single_connection}, made after
    its req connection authenticated, against a req connection lost
    meanwhile.
    """

    def holdFirstPubConnection(self, minion: Minion) -> list[tuple[Deferred, str, int, Any]]:
        """
        Make C{minion}'s first pub connection wait until the test completes
        it with L{MasterMinionNetwork.connectTCP}.

        @return: the list that receives C{(deferred, host, port, factory)}
            of the held connection.
        """
        held: list[tuple[Deferred, str, int, Any]] = []

        def connectTCP(host: str, port: int, factory: Any) -> Deferred:
            if port == PUB_PORT and not held:
                d: Deferred = Deferred()
                held.append((d, host, port, factory))
                return d
            return self.net.connectTCP(host, port, factory)

        minion.connectTCP = connectTCP  # type: ignore[method-assign]
        return held

    def test_reqLostBeforePubGreeting(self) -> None:
        """
        If the req connection is lost after the pub connection is made but
        before the master's greeting on it is read, the attempt ends without
        an unhandled error, and the next attempt succeeds.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.makeMinion()
        held = self.holdFirstPubConnection(minion)
        minion.start()
        self.net.flush()
        [(late, host, port, factory)] = held
        [reqPump] = self.net.pumps
        pubClient = self.successResultOf(self.net.connectTCP(host, port, factory))
        late.callback(pubClient)
        reqPump.serverIO.loseConnection()
        self.net.flush()
        self.assertEqual(minion.state, "waiting")
        self.assertEqual(self.net.pumps, [])
        # No subscription was asked for, so nothing is left failed unwaited.
        self.assertNoResult(pubClient.subscribed)
        self.net.advance(1.0)
        self.assertEqual(minion.state, "ready")

    def test_latePubConnectionFromOldAttempt(self) -> None:
        """
        A pub connection that completes only after its attempt ended (the req
        connection was lost meanwhile, and a newer attempt succeeded) is
        closed and not adopted: the minion keeps its live subscription, and
        stopping the minion closes every connection it has.
        """
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.makeMinion()
        held = self.holdFirstPubConnection(minion)
        minion.start()
        self.net.flush()
        [(late, host, port, factory)] = held
        self.net.closeAll()
        self.net.advance(1.0)
        self.assertEqual(minion.state, "ready")
        live = minion.pub
        pubClient = self.successResultOf(self.net.connectTCP(host, port, factory))
        late.callback(pubClient)
        self.net.flush()
        self.assertIs(minion.pub, live)
        self.assertTrue(pubClient.lost.called)
        # The late connection's greeting failed, and that failure was handled.
        self.assertIsNone(self.successResultOf(pubClient.hello))
        self.assertEqual(minion.state, "ready")
        self.publish("test.ping")
        self.assertEqual(len(self.returns()), 1)
        minion.stop()
        self.assertTrue(live.transport.disconnecting)
        self.net.flush()
        self.assertEqual(self.net.pumps, [])
        self.assertEqual(self.master.subscribers, {})


class RotationTests(MinionTestCase):
    """
    Publication key rotation: connected minions get the new key over their
    session, a rejected or deleted minion is cut off and can read nothing
    published after the rotation.
    """

    def twoMinions(self) -> tuple[Minion, Minion]:
        """
        Two ready minions, C{m1} and C{m2}, with their own keys.
        """
        first = self.readyMinion("m1")
        self.net.keyStore.putKey(ACCEPTED, "m2", OTHER_PEM)
        second = self.makeMinion("m2")
        crypt.writePrivateFile(
            os.path.join(second.config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(OTHER_KEY)
        )
        second = self.net.buildMinion(second.config)
        self.addCleanup(second.stop)
        ready = second.whenReady()
        second.start()
        self.net.flush()
        self.successResultOf(ready)
        return first, second

    def test_rotationReachesConnectedMinions(self) -> None:
        """
        After a rotation every connected minion holds the new key without
        re-authenticating, and runs jobs sealed with it.
        """
        first, second = self.twoMinions()
        attempts = len(self.net.attempts)
        self.master.rotatePublicationKey("test")
        self.net.flush()
        kid = self.master.publicationKey.kid
        self.assertEqual((first.jobber._kid, second.jobber._kid), (kid, kid))
        self.assertEqual(len(self.net.attempts), attempts)
        self.publish("test.ping")
        self.assertEqual(len(self.returns("m1")), 1)
        self.assertEqual(len(self.returns("m2")), 1)

    def test_deletedMinionCutOffAndBlind(self) -> None:
        """
        Deleting a connected minion's key and reconciling cuts it off and
        rotates the key: the others keep running jobs without
        re-authenticating; the deleted one cannot decrypt a publication made
        after the rotation even if it is handed one.
        """
        first, second = self.twoMinions()
        attempts = len(self.net.attempts)
        self.net.keyStore.deleteKey(ACCEPTED, "m2")
        self.successResultOf(self.master.reconcileKeys())
        self.net.flush()
        self.assertNotIn("m2", self.master.sessions)
        self.assertNotIn("m2", self.master.subscribers)
        self.assertEqual(first.jobber._kid, self.master.publicationKey.kid)
        # Nobody reconnected (m2's retry waits for the clock, not advanced).
        self.assertEqual(len(self.net.attempts), attempts)
        self.publish("test.ping", tgt="*")
        self.assertEqual(len(self.returns("m1")), 1)
        self.assertEqual(self.returns("m2"), [])
        kid = self.master.publicationKey.kid
        self.assertNotIn(kid, second.jobber._pubKeys)
        blob = self.master.publicationKey.cipher().encrypt(b"x", wire.publicationAad(kid))
        for cipher in second.jobber._pubKeys.values():
            self.assertRaises(crypt.CryptError, cipher.decrypt, blob, wire.publicationAad(kid))

    def test_keyEventTriggersRotation(self) -> None:
        """
        A C{salt/key} event for a deleted key (as salttwist-key fires it)
        makes the master reconcile and rotate at once.
        """
        self.readyMinion("m1")
        kid = self.master.publicationKey.kid
        self.master.keyEvent("salt/key", {"act": "delete", "id": "ghost"})
        self.assertEqual(self.master.publicationKey.kid, kid + 1)
        self.master.keyEvent("salt/key", {"act": "accept", "id": "m9"})
        self.assertEqual(self.master.publicationKey.kid, kid + 1)

    def test_minionAcceptedDuringListingNotCutOff(self) -> None:
        """
        A minion whose session started after the key store was read is not
        judged by that stale listing.
        """
        listing: Deferred[set[str]] = Deferred()
        self.patch(self.master, "runBlocking", lambda f, *a: listing)
        reconciled = self.master.reconcileKeys()
        self.patch(self.master, "runBlocking", runSynchronously)
        self.readyMinion("m1")
        listing.callback(set())
        self.successResultOf(reconciled)
        self.assertIn("m1", self.master.sessions)

    def test_newSessionWithOlderKeyGeneration(self) -> None:
        """
        Key generations are per master and per session (docs/cluster.md,
        "The publication key across masters"): a minion that held
        generation 4 of its master's key and moves (a failover) to a master
        whose key is generation 1, another master's or a restarted one's,
        takes that key from its new session, runs the jobs sealed with it,
        and takes that master's next rotation (2), although 1 and 2 are
        not newer than the 4 it held.
        """
        minion = self.readyMinion("m1")
        for _ in range(3):
            self.master.rotatePublicationKey("test")
        self.net.flush()
        self.assertEqual(minion.jobber._kid, 4)
        self.net.closeAll()
        self.master.publicationKey = PublicationKey(kid=1)
        ready = minion.whenReady()
        self.net.advance(1.0)
        self.successResultOf(ready)
        self.assertEqual(minion.jobber._kid, 1)
        self.publish("test.ping")
        self.assertEqual(len(self.returns()), 1)
        self.master.rotatePublicationKey("test")
        self.net.flush()
        self.assertEqual(minion.jobber._kid, 2)
        self.assertFalse(self.logged("dropped a key rotation"))
        self.publish("test.ping")
        self.assertEqual(len(self.returns()), 2)

    def test_rotationOnlyNewer(self) -> None:
        """
        A rotation frame for a key that is not newer than the current one is
        dropped and logged.
        """
        minion = self.readyMinion("m1")
        session = self.master.sessions["m1"]
        kid = minion.jobber._kid
        assert kid is not None
        wrap = crypt.AesCipher(crypt.deriveKey(session.sessionKey, wire.ROTATE_CONTEXT))
        blob = wrap.encrypt(serial.dumps({"key": os.urandom(32)}), wire.rotationAad(kid))
        self.master.subscribers["m1"].sendFrame({"rotate": blob, "kid": kid})
        self.net.flush()
        self.assertEqual(minion.jobber._kid, kid)
        self.assertTrue(self.logged("dropped a key rotation"))

    def test_rotationSealedForAnotherSession(self) -> None:
        """
        A rotation frame not sealed with a key from this minion's session
        is dropped.
        """
        minion = self.readyMinion("m1")
        kid = minion.jobber._kid
        assert kid is not None
        wrap = crypt.AesCipher(crypt.deriveKey(os.urandom(32), wire.ROTATE_CONTEXT))
        blob = wrap.encrypt(serial.dumps({"key": os.urandom(32)}), wire.rotationAad(kid + 1))
        self.master.subscribers["m1"].sendFrame({"rotate": blob, "kid": kid + 1})
        self.net.flush()
        self.assertEqual(minion.jobber._kid, kid)
        self.assertTrue(self.logged("dropped a key rotation"))


class RunningJobTests(MinionTestCase):
    """
    The minion tracks the jobs it runs (saltutil.running, find_job) and can
    kill them (saltutil.kill_job).
    """

    def test_findAndKill(self) -> None:
        """
        A long job is listed by C{saltutil.running} and found by
        C{saltutil.find_job}; C{saltutil.kill_job} stops it and it returns
        that it was killed; afterwards find_job finds nothing.
        """
        minion = self.readyMinion()
        sleeper = self.publish("test.sleep", [100])
        self.publish("saltutil.find_job", [sleeper])
        self.publish("saltutil.running")
        found, running = self.returns()
        self.assertEqual(found["return"]["jid"], sleeper)
        self.assertEqual(found["return"]["fun"], "test.sleep")
        self.assertIn(sleeper, [job["jid"] for job in running["return"]])
        killer = self.publish("saltutil.kill_job", [sleeper])
        self.net.flush()
        byJid = {ret["jid"]: ret for ret in self.returns()}
        self.assertTrue(byJid[killer]["return"].startswith(f"Signal 9 sent to job {sleeper}"))
        self.assertEqual(byJid[sleeper]["return"], "The job was killed with SIGKILL")
        self.assertIs(byJid[sleeper]["success"], False)
        self.publish("saltutil.find_job", [sleeper])
        self.assertEqual(self.returns()[-1]["return"], {})
        # The kill is remembered, for a run that has not looked yet.
        self.assertEqual(minion.executor.context.killed, {sleeper: "SIGKILL"})

    def test_killUnknown(self) -> None:
        """
        Killing a job the minion is not running says so.
        """
        self.readyMinion()
        self.publish("saltutil.kill_job", ["20260101000000000000"])
        self.assertEqual(self.returns()[-1]["return"], "Job 20260101000000000000 was not found")

    def test_signalJobRefusesOtherSignals(self) -> None:
        """
        C{saltutil.signal_job} with a signal other than TERM/KILL is refused
        with a clear error.
        """
        self.readyMinion()
        self.publish("saltutil.signal_job", ["20260101000000000000", "SIGUSR1"])
        ret = self.returns()[-1]
        self.assertEqual(ret["retcode"], 1)
        self.assertIn("not supported", ret["return"])


class FakeJobProcesses:
    """
    Stands for a minion's L{JobProcesses
    <salttwist.modules._jobprocesses.JobProcesses>} whose jobs each run one
    command, process group C{4242}: records the signals it would send.

    @ivar onTerm: called with the jid when C{SIGTERM} is sent (the command
        ending on it), unless L{None} (the command ignores it).
    """

    def __init__(self, onTerm: Callable[[str], None] | None = None) -> None:
        self.sent: list[tuple[str, str]] = []
        self.onTerm = onTerm

    def kill(self, jid: str, signum: int) -> list[int]:
        name = signal.Signals(signum).name
        self.sent.append((jid, name))
        if name == "SIGTERM" and self.onTerm is not None:
            self.onTerm(jid)
        return [4242]


class StoppingMinionJobTests(MinionTestCase):
    """
    A minion told to stop (L{Minion.shutdown}, on SIGTERM) gives its
    running jobs C{STOP_GRACE} seconds, then sends their commands
    C{SIGTERM}, then C{SIGKILL} to those still running L{KILL_GRACE}
    seconds later; the reactor only ever holds timers.
    """

    def startJob(self, minion: Minion, processes: FakeJobProcesses) -> str:
        """
        Publish a long job and make it look like one running a command.

        @return: its jid.
        """
        jid = self.publish("test.sleep", [1000])
        job = minion.executor.context.running[jid]
        job.processes = processes
        return jid

    def test_commandIgnoringTermIsKilled(self) -> None:
        """
        A job whose command ignores C{SIGTERM} gets C{SIGTERM} after
        C{STOP_GRACE}, C{SIGKILL} L{KILL_GRACE} seconds later, and not
        before; its return says it was killed with C{SIGKILL}; the minion
        then stops.
        """
        minion = self.readyMinion()
        processes = FakeJobProcesses()
        jid = self.startJob(minion, processes)
        done = minion.shutdown()
        self.net.advance(STOP_GRACE - 0.01)
        self.assertEqual(processes.sent, [])
        self.net.advance(0.01)
        self.assertEqual(processes.sent, [(jid, "SIGTERM")])
        self.assertIn(jid, minion.executor.context.running)
        self.net.advance(KILL_GRACE - 0.01)
        self.assertEqual(processes.sent, [(jid, "SIGTERM")])
        self.assertNoResult(done)
        self.net.advance(0.01)
        self.assertEqual(processes.sent, [(jid, "SIGTERM"), (jid, "SIGKILL")])
        self.assertNotIn(jid, minion.executor.context.running)
        self.net.flush()
        self.net.advance(ACKNOWLEDGEMENT_WAIT)
        self.successResultOf(done)
        self.assertEqual(minion.state, "stopped")
        [ret] = [r for r in self.returns() if r["jid"] == jid]
        self.assertEqual(ret["return"], "The job was killed with SIGKILL")

    def test_commandEndingOnTermIsNotKilled(self) -> None:
        """
        A job whose command ends on C{SIGTERM} returns that it was stopped
        with C{SIGTERM}; no C{SIGKILL} follows, and no timer is left.
        """
        minion = self.readyMinion()
        running = minion.executor.context.running
        processes = FakeJobProcesses(onTerm=lambda jid: running[jid].deferred.cancel())
        jid = self.startJob(minion, processes)
        done = minion.shutdown()
        self.net.advance(STOP_GRACE)
        self.assertEqual(processes.sent, [(jid, "SIGTERM")])
        self.assertNotIn(jid, running)
        self.net.flush()
        self.net.advance(ACKNOWLEDGEMENT_WAIT)
        self.successResultOf(done)
        self.net.advance(KILL_GRACE)
        self.assertEqual(processes.sent, [(jid, "SIGTERM")])
        [ret] = [r for r in self.returns() if r["jid"] == jid]
        self.assertEqual(ret["return"], "The job was killed with SIGTERM")

    def test_jobWithoutCommandCancelledOnTerm(self) -> None:
        """
        A job running no command (C{test.sleep}) has nothing to send
        C{SIGTERM} to: it is stopped once C{STOP_GRACE} is over.
        """
        minion = self.readyMinion()
        jid = self.publish("test.sleep", [1000])
        done = minion.shutdown()
        self.net.advance(STOP_GRACE)
        self.assertNotIn(jid, minion.executor.context.running)
        self.net.flush()
        self.net.advance(ACKNOWLEDGEMENT_WAIT)
        self.successResultOf(done)
        [ret] = [r for r in self.returns() if r["jid"] == jid]
        self.assertEqual(ret["return"], "The job was killed with SIGTERM")


class TargetingTests(MinionTestCase):
    """
    Grain, compound and nodegroup targets through master and minions: the
    master expects exactly the minions that run the job.
    """

    def setUp(self) -> None:
        """
        Two ready minions: m1 with grain role=web, m2 with role=db.
        """
        super().setUp()
        self.master.config["nodegroups"] = {"webs": "G@role:web", "all": "N@webs or L@m2"}
        self.first = self.readyMinion("m1", grains={"role": "web"})
        self.net.keyStore.putKey(ACCEPTED, "m2", OTHER_PEM)
        config = self.makeMinion("m2", grains={"role": "db"}).config
        crypt.writePrivateFile(
            os.path.join(config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(OTHER_KEY)
        )
        self.second = self.net.buildMinion(config)
        self.addCleanup(self.second.stop)
        ready = self.second.whenReady()
        self.second.start()
        self.net.flush()
        self.successResultOf(ready)

    def expectAndRun(self, tgt: Any, tgtType: str) -> tuple[list[str], list[str]]:
        """
        Publish C{test.ping} to C{tgt}.

        @return: the minions the master expected, and those that returned.
        """
        reply = self.successResultOf(
            self.master.clientPublish(None, {"tgt": tgt, "tgt_type": tgtType, "fun": "test.ping"})  # type: ignore[arg-type]
        )
        self.net.flush()
        returned = sorted(
            tag.rsplit("/", 1)[1]
            for tag, _ in self.net.eventsTagged(f"salt/job/{reply['jid']}/ret/")
        )
        return reply["minions"], returned

    def test_grain(self) -> None:
        """
        A grain target is expected of, and run by, the matching minion only.
        """
        self.assertEqual(self.expectAndRun("role:web", "grain"), (["m1"], ["m1"]))

    def test_compound(self) -> None:
        """
        A compound target mixing grains, globs and not.
        """
        self.assertEqual(
            self.expectAndRun("G@role:db or m1 and not G@role:web", "compound"), (["m2"], ["m2"])
        )

    def test_nodegroups(self) -> None:
        """
        Nodegroups (also nested, and inside a compound) are spelled out for
        the minions, which run exactly what the master expected.
        """
        self.assertEqual(self.expectAndRun("webs", "nodegroup"), (["m1"], ["m1"]))
        self.assertEqual(self.expectAndRun("all", "nodegroup"), (["m1", "m2"], ["m1", "m2"]))
        self.assertEqual(self.expectAndRun("N@webs and not m2", "compound"), (["m1"], ["m1"]))

    def test_badTargetNamesPosition(self) -> None:
        """
        A malformed compound target is refused with the position of the
        problem.
        """
        error = self.assertRaises(
            ValueError,
            self.master.clientPublish,
            None,  # type: ignore[arg-type]
            {"tgt": "web* and ( m1", "tgt_type": "compound", "fun": "test.ping"},
        )
        self.assertIn("position", str(error))


class SingleConnectionJobTests(JobTests):
    """
    L{JobTests} with minions that receive their publications on the req
    connection (C{single_connection}).
    """

    minionOptions = {"single_connection": True}


class SingleConnectionVettingTests(PublicationVettingTests):
    """
    L{PublicationVettingTests} with C{single_connection}.
    """

    minionOptions = {"single_connection": True}


class SingleConnectionReconnectTests(ReconnectTests):
    """
    L{ReconnectTests} with C{single_connection}.
    """

    minionOptions = {"single_connection": True}


class SingleConnectionRotationTests(RotationTests):
    """
    L{RotationTests} with C{single_connection}.
    """

    minionOptions = {"single_connection": True}


class SingleConnectionTests(MinionTestCase):
    """
    A minion with C{single_connection} holds one connection to its master.
    """

    minionOptions = {"single_connection": True}

    def test_oneConnection(self) -> None:
        """
        The minion connects to C{master_port} only; the master's subscriber
        for it is its req session, which gets its jobs and acknowledges its
        returns in the next publication.
        """
        minion = self.readyMinion()
        self.assertEqual(self.net.attempts, [REQ_PORT])
        self.assertEqual(len(self.net.pumps), 1)
        self.assertIsNone(minion.pub)
        self.assertIs(self.master.subscribers["m1"], self.master.sessions["m1"])
        self.publish("test.ping")
        self.assertEqual(len(minion.returns.unacknowledged), 1)
        self.publish("test.ping")
        self.assertEqual(len(self.returns()), 2)
        self.assertEqual(len(minion.returns.unacknowledged), 1)

    def test_defaultTwoConnections(self) -> None:
        """
        Without the option (Salt's way), the minion connects to both ports.
        """
        self.readyMinion(single_connection=False)
        self.assertEqual(self.net.attempts, [REQ_PORT, PUB_PORT])
        self.assertEqual(len(self.net.pumps), 2)


class PkiStartTests(MinionTestCase):
    """
    A minion checks its C{pki_dir} before it loads or makes its key
    (L{salttwist.daemon.checkMinionPki}): one that other users could read
    or change stops it from starting, with the file and the fix named.
    """

    def assertRefused(self, prepare: Callable[[str], None], text: str) -> None:
        """
        Building a minion whose C{pki_dir} C{prepare} changed raises a
        L{StartupError} whose message holds C{text}, and leaves no public
        key made.
        """
        e = self.assertRaises(StartupError, self.makeMinion, prepare=prepare)
        self.assertIn(text, str(e))

    def test_asCreated(self) -> None:
        """
        A C{pki_dir} as the minion leaves it (0700, C{minion.pem} 0600, the
        master's key pinned 0644) passes at the next start.
        """
        minion = self.readyMinion()
        pki = minion.config["pki_dir"]
        self.assertTrue(os.path.exists(os.path.join(pki, MASTER_PUB_FILE)))
        again = self.net.buildMinion(minion.config)
        self.assertEqual(again.id, "m1")

    def test_looseKeyRefused(self) -> None:
        """
        A C{minion.pem} readable by others stops the minion.
        """
        self.assertRefused(
            lambda pki: os.chmod(os.path.join(pki, "minion.pem"), 0o644),
            "minion.pem has mode 644, which lets group or others read or change it; "
            "run chmod go-rwx",
        )

    def test_loosePkiDirRefused(self) -> None:
        """
        A C{pki_dir} that others may list stops the minion.
        """
        self.assertRefused(lambda pki: os.chmod(pki, 0o755), "has mode 755")

    def test_writablePinnedKeyRefused(self) -> None:
        """
        A C{minion_master.pub} that others may write stops the minion.
        """

        def plant(pki: str) -> None:
            path = os.path.join(pki, MASTER_PUB_FILE)
            with open(path, "wb") as f:
                f.write(MASTER_PEM)
            os.chmod(path, 0o666)

        self.assertRefused(plant, f"{MASTER_PUB_FILE} has mode 666")
