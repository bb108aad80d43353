# -*- test-case-name: tests.adversarial.test_jobs -*-
"""
A rogue or compromised minion (it holds an accepted key, a session and the
publication key) and an on-path attacker against publications, returns and
job ids.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from salttwist import crypt, serial, wire
from salttwist.config import loadMasterConfig, loadMinionConfig
from salttwist.interfaces import IJobCache
from salttwist.master.core import runSynchronously
from salttwist.master.jobcache import SQLiteJobCache
from salttwist.master.keys import MasterKeys
from salttwist.minion.core import Minion
from salttwist.pki.keystore import ACCEPTED
from salttwist.transport.reqclient import RequestError
from tests._loopback import MasterMinionNetwork
from tests.adversarial._support import (
    JID,
    MASTER_KEY,
    MASTER_PEM,
    MINION_KEYS,
    MINION_PEMS,
    ROOT_KEY,
    AttackedMaster,
)

#: Job ids a client (or a minion, in a return) might send instead of one.
HOSTILE_JIDS: list[Any] = [
    "../../../../etc/passwd",
    "20260101000000000001/../../x",
    "1' OR '1'='1",
    "20260101000000000001'; DROP TABLE jobs; --",
    "%",
    "*",
    "2" * 100000,
    "2026010100000000000",
    "202601010000000000001",
    "20260101000000000001\n",
    "\uff12" * 20,
    "\u0662" * 20,
    ["20260101000000000001"],
    {"jid": "20260101000000000001"},
    2026010100000000000,
    b"20260101000000000001",
    None,
    "",
]


class PublicationAttackTests(SynchronousTestCase):
    """
    A minion that holds the publication key still cannot make another
    minion run anything; nor can an on-path attacker replaying, stripping
    or tampering with publications (CVE-2017-7893, CVE-2022-22936 classes).
    """

    def setUp(self) -> None:
        """
        A master and a ready minion C{m1}; C{m2}'s key is accepted too (it
        is the rogue minion, so it knows the publication key).
        """
        root = os.path.abspath(self.mktemp())
        config = loadMasterConfig(
            root, overrides={"root_dir": root, "publish_port": 4505, "ret_port": 4506}
        )
        self.net = MasterMinionNetwork(config, MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY))
        self.master = self.net.master
        for minionId, pem in MINION_PEMS.items():
            self.net.keyStore.putKey(ACCEPTED, minionId, pem)
        self.minion = self.startMinion("m1")
        self.ran: list[str] = []
        call = self.minion.executor.call

        def recordingCall(fun: str, arg: list[Any], jid: str | None = None) -> Any:
            self.ran.append(fun)
            return call(fun, arg, jid)

        self.minion.executor.call = recordingCall  # type: ignore[method-assign]

    def startMinion(self, minionId: str) -> Minion:
        """
        Start C{minionId} and wait until it is subscribed.
        """
        root = os.path.abspath(self.mktemp())
        config = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": minionId,
                "master": "salt.test",
                "master_port": 4506,
                "recon_randomize": False,
            },
        )
        os.makedirs(config["pki_dir"], mode=0o700)
        crypt.writePrivateFile(
            os.path.join(config["pki_dir"], "minion.pem"),
            crypt.privateKeyToPem(MINION_KEYS[minionId]),
        )
        minion = self.net.buildMinion(config)
        self.addCleanup(minion.stop)
        ready = minion.whenReady()
        minion.start()
        self.net.flush()
        self.successResultOf(ready)
        return minion

    def load(self, jid: str = JID, fun: str = "cmd.run") -> dict[str, Any]:
        """
        A job load for C{m1}, stamped now.
        """
        return {
            "jid": jid,
            "fun": fun,
            "arg": ["id"],
            "tgt": "m1",
            "tgt_type": "glob",
            "user": "root",
            "ts": self.net.reactor.seconds(),
        }

    def seal(
        self, load: Any, macKey: crypt.HmacSha256 | None = None, kid: int | None = None
    ) -> dict[str, Any]:
        """
        Seal C{load} with the current publication key, as anyone holding it
        can, and MAC it with C{macKey} (by default the one of C{m1}'s
        subscription, as the master does).
        """
        publication = self.master.publicationKey
        kid = publication.kid if kid is None else kid
        if macKey is None:
            macKey = self.master.subscribers["m1"].publicationMac
        assert macKey is not None
        blob = publication.cipher().encrypt(serial.dumps(load), wire.publicationAad(kid))
        mac = macKey.mac(wire.publicationMacMessage(kid, crypt.sha256(blob)))
        return {"pub": blob, "kid": kid, "mac": mac}

    def inject(self, frame: dict[str, Any] | bytes) -> None:
        """
        Write a frame into C{m1}'s pub connection, as an on-path attacker or
        the master would, and deliver it.
        """
        data = frame if isinstance(frame, bytes) else serial.dumps(frame)
        self.master.subscribers["m1"].sendString(data)
        self.net.flush()

    def assertNothingRan(self) -> None:
        """
        Nothing ran on C{m1}, no return reached the master, and C{m1} is
        still connected.
        """
        self.assertEqual(self.ran, [])
        self.assertEqual(self.net.eventsTagged("salt/job/"), [])
        self.assertEqual(self.minion.state, "ready")
        self.assertIn("m1", self.master.subscribers)

    def test_forgedByMinionKey(self) -> None:
        """
        A publication sealed correctly with the publication key (which every
        accepted minion holds) but MACed with another key (that of the rogue
        C{m2}'s own subscription, or an attacker's) runs nowhere on C{m1}.
        """
        self.startMinion("m2")
        rogue = self.master.subscribers["m2"].publicationMac
        for macKey in (rogue, crypt.HmacSha256(os.urandom(32))):
            self.inject(self.seal(self.load(), macKey))
        self.assertNothingRan()

    def test_strippedOrClearText(self) -> None:
        """
        A publication with its MAC removed, emptied or swapped for one over
        other bytes, and a load sent as a clear-text map or as a master-MACed
        but unencrypted blob, runs nowhere.
        """
        frame = self.seal(self.load())
        macKey = self.master.subscribers["m1"].publicationMac
        assert macKey is not None
        for mac in (None, b"", macKey.mac(b"other")):
            self.inject(dict(frame, mac=mac))
        self.inject({k: v for k, v in frame.items() if k != "mac"})
        self.inject(dict(self.load(), kid=frame["kid"]))
        plain = serial.dumps(self.load())
        mac = macKey.mac(wire.publicationMacMessage(frame["kid"], crypt.sha256(plain)))
        self.inject({"pub": plain, "kid": frame["kid"], "mac": mac})
        self.assertNothingRan()

    def test_tampered(self) -> None:
        """
        Any one byte of a master-MACed publication flipped (nonce,
        ciphertext or tag) makes it run nowhere.
        """
        frame = self.seal(self.load())
        blob = frame["pub"]
        for i in (0, 12, len(blob) // 2, len(blob) - 1):
            changed = blob[:i] + bytes([blob[i] ^ 0x01]) + blob[i + 1 :]
            self.inject(dict(frame, pub=changed))
        self.assertNothingRan()

    def test_replayed(self) -> None:
        """
        A genuine publication injected again runs once; after two key
        rotations (the minion keeps only the current and previous key) the
        recorded bytes run nowhere, even with a fresh-looking kid.
        """
        data = serial.dumps(self.seal(self.load(fun="test.ping")))
        self.inject(data)
        self.inject(data)
        self.assertEqual(self.ran, ["test.ping"])
        self.master.rotatePublicationKey("test")
        self.master.rotatePublicationKey("test")
        self.net.flush()
        self.inject(data)
        self.assertEqual(self.ran, ["test.ping"])

    def test_replayedAfterMinionRestart(self) -> None:
        """
        A genuine publication recorded before the minion restarted is
        refused by the new minion process (whose replay memory is empty):
        its MAC belongs to the old subscription, and the master's MACed
        subscription confirmation says when the new one began
        (CVE-2022-22936 class).
        """
        self.net.reactor.advance(100)
        old = serial.dumps(self.seal(self.load(fun="test.ping")))
        self.minion.stop()
        self.net.flush()
        self.net.reactor.advance(30)
        again = self.startMinion("m1")
        ran: list[str] = []
        call = again.executor.call
        again.executor.call = lambda fun, arg, jid=None: ran.append(fun) or call(fun, arg, jid)  # type: ignore[method-assign]
        self.master.subscribers["m1"].sendString(old)
        self.net.flush()
        self.assertEqual(ran, [])
        fresh = serial.dumps(self.seal(dict(self.load(jid="2" * 20), fun="test.ping")))
        self.master.subscribers["m1"].sendString(fresh)
        self.net.flush()
        self.assertEqual(ran, ["test.ping"])

    def test_forgedSubscriptionConfirmation(self) -> None:
        """
        A subscription confirmation whose MAC does not verify (an on-path
        attacker setting the minion's clock floor) makes the minion refuse
        the subscription.
        """
        original = self.master.subscribedFrame

        def forged(proto: Any) -> dict[str, Any]:
            frame = original(proto)
            frame["now"] = frame["now"] - 1000.0
            return frame

        self.patch(self.master, "subscribedFrame", forged)
        root = os.path.abspath(self.mktemp())
        config = loadMinionConfig(
            root,
            overrides={"root_dir": root, "id": "m2", "master": "salt.test", "master_port": 4506},
        )
        os.makedirs(config["pki_dir"], mode=0o700)
        crypt.writePrivateFile(
            os.path.join(config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(MINION_KEYS["m2"])
        )
        minion = self.net.buildMinion(config)
        self.addCleanup(minion.stop)
        minion.start()
        self.net.flush()
        self.assertNotEqual(minion.state, "ready")

    def test_notTargetedNotRun(self) -> None:
        """
        A genuine publication targeted at another minion is not run by
        C{m1}, even though C{m1} can decrypt it.
        """
        self.inject(self.seal(dict(self.load(), tgt="m2")))
        self.assertNothingRan()

    def test_replayedAfterOneRotation(self) -> None:
        """
        After one key rotation (the minion still holds the previous key, so
        the recorded bytes still decrypt) a replayed genuine publication is
        refused by the jid guard; and a rogue minion re-sealing the recorded
        load under the new key, keeping the master's MAC, is refused on the
        MAC: it runs once in all.
        """
        load = self.load(fun="test.ping")
        frame = self.seal(load)
        self.inject(frame)
        self.assertEqual(self.ran, ["test.ping"])
        self.master.rotatePublicationKey("test")
        self.net.flush()
        self.assertIn(frame["kid"], self.minion.jobber._pubKeys)
        self.inject(frame)
        resealed = self.seal(load)
        self.inject(dict(resealed, mac=frame["mac"]))
        self.assertEqual(self.ran, ["test.ping"])

    def test_deletedKeyLosesNextPublication(self) -> None:
        """
        C{m1}'s key is deleted while it is connected (as salttwist-key does:
        the file goes, a C{salt/key} event fires): the next publication to
        every minion runs on C{m2} and not on C{m1}, and handed the new
        publication anyway, C{m1} cannot open it (the key was rotated).
        """
        macKey = self.master.subscribers["m1"].publicationMac
        other = self.startMinion("m2")
        ranOther: list[str] = []
        call = other.executor.call
        other.executor.call = lambda fun, arg, jid=None: ranOther.append(fun) or call(fun, arg, jid)  # type: ignore[method-assign]
        self.net.keyStore.deleteKey(ACCEPTED, "m1")
        self.net.bus.fire("salt/key", {"act": "delete", "id": "m1"})
        self.net.flush()
        self.assertNotIn("m1", self.master.subscribers)
        load = dict(self.load(fun="test.ping"), tgt="*")
        self.successResultOf(self.master.publish(load))
        self.net.flush()
        self.assertEqual(ranOther, ["test.ping"])
        self.assertEqual(self.ran, [])
        self.assertNotIn(self.master.publicationKey.kid, self.minion.jobber._pubKeys)
        self.minion.jobber.publicationReceived(self.seal(load, macKey))
        self.assertEqual(self.ran, [])


@implementer(IJobCache)
class RecordingJobCache:
    """
    An L{IJobCache} that records every call and answers with nothing.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def _record(self, name: str, *args: Any) -> Deferred[Any]:
        self.calls.append((name, args))
        return succeed(None)

    def storeJob(self, *args: Any) -> Deferred[None]:
        return self._record("storeJob", *args)

    def storeReturn(self, *args: Any) -> Deferred[None]:
        return self._record("storeReturn", *args)

    def getJob(self, *args: Any) -> Deferred[Any]:
        return self._record("getJob", *args)

    def getReturns(self, *args: Any) -> Deferred[Any]:
        self.calls.append(("getReturns", args))
        return succeed({})

    def listJobs(self, *args: Any, **kwargs: Any) -> Deferred[Any]:
        self.calls.append(("listJobs", args))
        return succeed([])

    def prune(self, *args: Any) -> Deferred[int]:
        self.calls.append(("prune", args))
        return succeed(0)


class ReturnAttackTests(AttackedMaster):
    """
    A rogue minion's returns (CVE-2024-38822 class: a minion answering for
    another) never reach the bus or the job cache over a real return.
    """

    def setUp(self) -> None:
        """
        A job for C{m1} only; C{m1} and the rogue C{m2} have sessions.
        """
        super().setUp()
        self.cache = RecordingJobCache()
        self.master.jobCache = self.cache
        self.master.jobs.add(JID, {"fun": "test.ping"}, ["m1"])
        self.victim = self.authMinion("m1")
        self.rogue = self.authMinion("m2")

    def send(self, client: Any, **load: Any) -> Deferred[Any]:
        """
        Send a C{_return} and deliver the answer.
        """
        payload = {"cmd": "_return", "jid": JID, "fun": "test.ping", "return": True}
        payload.update(load)
        d = client.request(payload)
        self.net.flush()
        if not d.called:
            self.deliverAcknowledgements()
        return d

    def stored(self) -> list[tuple[Any, ...]]:
        """
        @return: the arguments of every C{storeReturn} so far.
        """
        return [args for name, args in self.cache.calls if name == "storeReturn"]

    def test_spoofedAndUntargetedRefused(self) -> None:
        """
        C{m2} claiming C{m1}'s id, or returning under its own id for a job
        that did not target it, or for hostile jids, is refused with an
        error; nothing is fired or stored; then C{m1}'s real return is
        accepted and is the only one stored.
        """
        for load in (
            {"id": "m1", "return": "pwned"},
            {"id": "m2", "return": "pwned"},
            {"id": None, "return": "pwned"},
            {"id": ["m1"], "return": "pwned"},
        ):
            self.failureResultOf(self.send(self.rogue, **load), RequestError)
        for jid in HOSTILE_JIDS:
            self.failureResultOf(self.send(self.rogue, id="m2", jid=jid), RequestError)
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.assertEqual(self.stored(), [])
        self.assertFalse(self.rogue.lost.called)
        self.successResultOf(self.send(self.victim, id="m1", **{"return": "real"}))
        [(tag, data)] = self.eventsTagged("salt/job/")
        self.assertEqual((tag, data["return"]), (f"salt/job/{JID}/ret/m1", "real"))
        [(jid, minionId, ret)] = self.stored()
        self.assertEqual((jid, minionId, ret["return"]), (JID, "m1", "real"))

    def test_duplicateNeverOverwrites(self) -> None:
        """
        After C{m1}'s real return, a second return for the same job (from
        C{m1}'s session, or replayed by the rogue under C{m1}'s id) is
        refused; the stored and fired return is still the first.
        """
        self.successResultOf(self.send(self.victim, id="m1", **{"return": "real"}))
        self.failureResultOf(self.send(self.victim, id="m1", **{"return": "second"}), RequestError)
        self.failureResultOf(self.send(self.rogue, id="m1", **{"return": "forged"}), RequestError)
        self.assertEqual([d["return"] for _, d in self.eventsTagged("salt/job/")], ["real"])
        self.assertEqual([r["return"] for _, _, r in self.stored()], ["real"])

    def test_replayedSealedFrame(self) -> None:
        """
        C{m1}'s sealed C{_return} frame, recorded on the wire and injected
        again into its session, fails the session's counter check: the
        session is closed and the return is stored and fired once.
        """
        sent: list[bytes] = []
        sendSealed = self.victim.sendSealed

        def recording(head: bytes, blob: bytes) -> None:
            sent.append(head + blob)
            sendSealed(head, blob)

        self.victim.sendSealed = recording  # type: ignore[method-assign]
        self.successResultOf(self.send(self.victim, id="m1", **{"return": "real"}))
        server = self.master.sessions["m1"]
        server.dataReceived(sent[-1])
        self.net.flush()
        self.assertTrue(self.victim.lost.called)
        self.assertEqual([d["return"] for _, d in self.eventsTagged("salt/job/")], ["real"])
        self.assertEqual([r["return"] for _, _, r in self.stored()], ["real"])


class JobIdTests(SynchronousTestCase):
    """
    Job ids from clients are refused by the job cache and the C{jobs}
    runners before any query or path is built.
    """

    def test_jobCacheRefusesBeforeQuery(self) -> None:
        """
        L{SQLiteJobCache}'s C{getJob}, C{getReturns}, C{storeJob} and
        C{storeReturn} fail with L{ValueError} for each hostile jid without
        queueing any database work (the cache here has no database at all:
        reaching one would fail differently).
        """
        cache = SQLiteJobCache.__new__(SQLiteJobCache)
        queued: list[Any] = []
        cache._enqueue = lambda *a: queued.append(a)  # type: ignore[method-assign]
        cache._write = lambda *a: queued.append(a)  # type: ignore[method-assign]
        for jid in HOSTILE_JIDS:
            for d in (
                cache.getJob(jid),
                cache.getReturns(jid),
                cache.storeJob(jid, {"fun": "test.ping"}, ["m1"]),
                cache.storeReturn(jid, "m1", {"return": True}),
            ):
                self.failureResultOf(d, ValueError)
        self.assertEqual(queued, [])

    def test_runnersRefuseBeforeQuery(self) -> None:
        """
        C{jobs.list_job}, C{jobs.lookup_jid}, C{jobs.print_job} and
        C{jobs.exit_success}, called as the local client calls them,
        refuse each hostile jid with an error and never ask the job cache.
        """
        from twisted.internet.testing import MemoryReactorClock

        from salttwist.events.bus import LocalEventBus
        from salttwist.master.core import Master
        from salttwist.pki.keystore import InMemoryKeyStore

        root = os.path.abspath(self.mktemp())
        cache = RecordingJobCache()
        master = Master(
            loadMasterConfig(root, overrides={"root_dir": root}),
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            InMemoryKeyStore(),
            LocalEventBus(),
            runSynchronously,
            MemoryReactorClock(),
            jobCache=cache,
        )
        # A map in C{arg} is keyword arguments (Salt's convention), so
        # {"jid": <valid jid>} is a legitimate call and is left out here.
        hostile = [jid for jid in HOSTILE_JIDS if not isinstance(jid, dict)]
        for fun in ("jobs.list_job", "jobs.lookup_jid", "jobs.print_job", "jobs.exit_success"):
            for jid in hostile + [{"jid": "../../etc/passwd"}]:
                d = master.clientRunner(None, {"fun": fun, "arg": [jid]})  # type: ignore[arg-type]
                self.failureResultOf(d, ValueError)
        self.assertEqual(cache.calls, [])
