# -*- test-case-name: tests.test_master_rooms -*-
"""
Tests for L{salttwist.master.interfaces}: each room of the master provides
its interface, the protocols take what those interfaces say (a fake of one
room is enough to drive them), and the rooms see connections only through
L{IMinionSession} and L{ISubscriber}.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyClass, verifyObject

from salttwist import crypt, serial
from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.interfaces import IRunnerMaster
from salttwist.master.admission import Admission
from salttwist.master.core import Master
from salttwist.master.interfaces import (
    IAdmission,
    IJobPublisher,
    IKeyWatch,
    IMasterStatus,
    IMinionRequests,
    IMinionSession,
    IPubChannel,
    IReactorMaster,
    IReqChannel,
    IRunnerDispatch,
    ISessions,
    ISubscriber,
    ISubscriptions,
)
from salttwist.master.keys import MasterKeys
from salttwist.master.keywatch import KeyWatch
from salttwist.master.maintenance import RequestStats
from salttwist.master.publisher import PubServerFactory, PubServerProtocol
from salttwist.master.publishing import JobPublisher
from salttwist.master.reqserver import ReqServerFactory, ReqServerProtocol
from salttwist.master.returns import MinionRequests
from salttwist.master.runnerdispatch import RunnerDispatch
from salttwist.master.sessions import Sessions
from salttwist.pki.keystore import InMemoryKeyStore
from salttwist.transport.session import SessionCipher

MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())


def readFrames(data: bytes) -> list[dict[str, Any]]:
    """
    Split bytes written by a L{FrameProtocol} into its decoded frames.
    """
    frames = []
    while data:
        (length,) = struct.unpack("!I", data[:4])
        frames.append(serial.loads(data[4 : 4 + length]))
        data = data[4 + length :]
    return frames


def frameBytes(message: dict[str, Any]) -> bytes:
    """
    Encode one frame as a L{FrameProtocol} sends it.
    """
    body = serial.dumps(message)
    return struct.pack("!I", len(body)) + body


def makeMaster(testCase: SynchronousTestCase) -> Master:
    """
    @return: a master with an in-memory key store on a L{Clock}.
    """
    root = os.path.abspath(testCase.mktemp())
    return Master(
        loadMasterConfig(root, overrides={"root_dir": root}),
        MasterKeys(MASTER_KEY, MASTER_PEM, os.urandom(32)),
        InMemoryKeyStore(),
        LocalEventBus(),
        runSynchronously,
        Clock(),
    )


class RoomInterfaceTests(SynchronousTestCase):
    """
    Each room of a real L{Master} provides its interface.
    """

    def setUp(self) -> None:
        """
        A real master.
        """
        self.master = makeMaster(self)

    def test_admission(self) -> None:
        """
        L{Admission} provides L{IAdmission}.
        """
        self.assertIsInstance(self.master.admission, Admission)
        self.assertTrue(verifyObject(IAdmission, self.master.admission))

    def test_sessions(self) -> None:
        """
        L{Sessions} provides L{ISessions}, and L{IPubChannel} (with
        L{ISubscriptions}): a pub connection can be given the room alone.
        """
        room = self.master.sessionsRoom
        self.assertIsInstance(room, Sessions)
        self.assertTrue(verifyObject(ISessions, room))
        self.assertTrue(verifyObject(ISubscriptions, room))
        self.assertTrue(verifyObject(IPubChannel, room))

    def test_keyWatch(self) -> None:
        """
        L{KeyWatch} provides L{IKeyWatch}.
        """
        self.assertIsInstance(self.master.keyWatch, KeyWatch)
        self.assertTrue(verifyObject(IKeyWatch, self.master.keyWatch))

    def test_jobPublisher(self) -> None:
        """
        L{JobPublisher} provides L{IJobPublisher}.
        """
        self.assertIsInstance(self.master.jobPublisher, JobPublisher)
        self.assertTrue(verifyObject(IJobPublisher, self.master.jobPublisher))

    def test_minionRequests(self) -> None:
        """
        L{MinionRequests} provides L{IMinionRequests}.
        """
        self.assertIsInstance(self.master.minionRequests, MinionRequests)
        self.assertTrue(verifyObject(IMinionRequests, self.master.minionRequests))

    def test_runnerDispatch(self) -> None:
        """
        L{RunnerDispatch} provides L{IRunnerDispatch}.
        """
        self.assertIsInstance(self.master.runnerDispatch, RunnerDispatch)
        self.assertTrue(verifyObject(IRunnerDispatch, self.master.runnerDispatch))

    def test_master(self) -> None:
        """
        L{Master} provides both channel interfaces, L{IRunnerMaster}, and what
        the periodic reports and Salt's reactor read of it.
        """
        self.assertTrue(verifyObject(IReqChannel, self.master))
        self.assertTrue(verifyObject(IPubChannel, self.master))
        self.assertTrue(verifyObject(IRunnerMaster, self.master))
        self.assertTrue(verifyObject(IMasterStatus, self.master))
        self.assertTrue(verifyObject(IReactorMaster, self.master))

    def test_handlersAreTheRooms(self) -> None:
        """
        The handlers a req connection reaches on the master are the rooms'
        own bound methods: a request goes to its room with no call between.
        """
        master = self.master
        self.assertIs(master.clearAuth.__self__, master.admission)
        self.assertIs(master.minionReturn.__self__, master.minionRequests)
        self.assertIs(master.holdingReplies.__self__, master.sessionsRoom)
        self.assertIs(master.clientPublish.__self__, master.jobPublisher)
        self.assertIs(master.clientRunner.__self__, master.runnerDispatch)
        self.assertIs(master.keyEvent.__self__, master.keyWatch)

    def test_sharedSettingsReachEveryRoom(self) -> None:
        """
        Setting the worker pool, the job cache or C{runBlocking} on the
        master sets it on every room that uses it.
        """
        master = self.master
        pool, cache = object(), object()
        master.workers = pool
        master.jobCache = cache
        self.assertIs(master.admission.workers, pool)
        self.assertIs(master.runnerDispatch.workers, pool)
        for room in (master.jobPublisher, master.minionRequests, master.runnerDispatch):
            self.assertIs(room.jobCache, cache)
        self.assertIs(master.workers, pool)
        self.assertIs(master.jobCache, cache)


class ConnectionInterfaceTests(SynchronousTestCase):
    """
    The protocols provide what the rooms see of them.
    """

    def test_reqServerProtocol(self) -> None:
        """
        L{ReqServerProtocol} provides L{IMinionSession} and L{ISubscriber}
        (a minion with C{single_connection} subscribes on its session).
        """
        self.assertTrue(verifyClass(IMinionSession, ReqServerProtocol))
        self.assertTrue(verifyClass(ISubscriber, ReqServerProtocol))

    def test_pubServerProtocol(self) -> None:
        """
        L{PubServerProtocol} provides L{ISubscriber}.
        """
        self.assertTrue(verifyClass(ISubscriber, PubServerProtocol))


@implementer(IPubChannel)
class FakeSubscriptions:
    """
    A fake of the sessions room as a pub connection sees it: accepts one
    id, records what it is told.
    """

    def __init__(self) -> None:
        self.clock = Clock()
        self.preauthTimeout = 5.0
        self.calls: list[tuple[str, Any]] = []

    def subscribe(self, proto: Any, minionId: object, mac: object) -> str | None:
        self.calls.append(("subscribe", (minionId, mac)))
        return "m1" if mac == b"good" else None

    def subscribedFrame(self, proto: Any) -> dict[str, Any]:
        self.calls.append(("subscribedFrame", proto.minionId))
        return {"ret": "subscribed", "now": 1.0, "mac": b"m"}

    def unsubscribe(self, proto: Any) -> None:
        self.calls.append(("unsubscribe", proto.minionId))


verifyClass(IPubChannel, FakeSubscriptions)


class PubServerWithFakeRoomTests(SynchronousTestCase):
    """
    L{PubServerProtocol} driven through a L{StringTransport} with a fake of
    the one room it uses.
    """

    def setUp(self) -> None:
        """
        A pub connection to a L{FakeSubscriptions}.
        """
        self.room = FakeSubscriptions()
        self.proto = PubServerFactory(self.room).buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def test_subscribeAndUnsubscribe(self) -> None:
        """
        A subscribe frame is passed to the room; the room's confirmation is
        sent; when the connection closes the room is told.
        """
        [hello] = readFrames(self.transport.value())
        self.assertEqual(hello["cmd"], "hello")
        self.assertEqual(hello["challenge"], self.proto.challenge)
        self.transport.clear()
        self.proto.dataReceived(frameBytes({"cmd": "subscribe", "id": "m1", "mac": b"good"}))
        self.assertEqual(
            readFrames(self.transport.value()), [{"ret": "subscribed", "now": 1.0, "mac": b"m"}]
        )
        self.assertEqual(self.proto.minionId, "m1")
        self.proto.connectionLost(None)
        self.assertEqual(
            self.room.calls,
            [
                ("subscribe", ("m1", b"good")),
                ("subscribedFrame", "m1"),
                ("unsubscribe", "m1"),
            ],
        )

    def test_refused(self) -> None:
        """
        A subscription the room refuses is answered C{refused} and the
        connection closed; the room is not told of an unsubscription.
        """
        self.transport.clear()
        self.proto.dataReceived(frameBytes({"cmd": "subscribe", "id": "m1", "mac": b"bad"}))
        self.assertEqual(readFrames(self.transport.value()), [{"ret": "refused"}])
        self.assertTrue(self.transport.disconnecting)
        self.proto.connectionLost(None)
        self.assertEqual(self.room.calls, [("subscribe", ("m1", b"bad"))])


@implementer(IReqChannel)
class FakeReqChannel:
    """
    A req channel whose admission is a fake (a client proves nothing and
    gets a fixed session key) and whose other rooms record their calls.
    """

    def __init__(self, sessionKey: bytes) -> None:
        self.clock = Clock()
        self.config: dict[str, Any] = {}
        self.preauthTimeout = 5.0
        self.maxFrameBytes = 1 << 20
        self.requestStats = RequestStats()
        self.sessionKey = sessionKey
        self.calls: list[tuple[str, Any]] = []

    def clearAuth(self, proto: Any, load: Any) -> Deferred[Any]:
        return succeed(({"ret": "error", "error": "no minions here"}, None, None, None))

    def clearClientAuth(self, proto: Any, load: Any) -> Any:
        self.calls.append(("clearClientAuth", load.get("user")))
        return {"ret": "ok"}, self.sessionKey, "client", None

    def minionReturn(self, proto: Any, load: Any) -> Any:
        raise AssertionError("not a minion session")

    minionGrains = minionEvent = minionPing = sessionSubscribe = sessionUnsubscribe = minionReturn
    fileEnvs = fileList = dirList = fileHash = fileHashes = serveFile = fileRecv = minionReturn
    fileHashMany = serveFiles = minionReturn
    minionPillar = masterOpts = minionReturn

    def clientPublish(self, proto: Any, load: Any) -> Any:
        self.calls.append(("clientPublish", load["fun"]))
        return succeed({"jid": "1", "minions": []})

    def clientRunner(self, proto: Any, load: Any) -> Any:
        self.calls.append(("clientRunner", load["fun"]))
        return {"jid": "2", "return": True}

    def sessionStarted(self, proto: Any) -> None:
        self.calls.append(("sessionStarted", proto.role))

    def sessionEnded(self, proto: Any) -> None:
        self.calls.append(("sessionEnded", proto.role))

    def holdingReplies(self, proto: Any) -> None:
        self.calls.append(("holdingReplies", proto.role))


verifyClass(IReqChannel, FakeReqChannel)


class ReqServerWithFakeRoomTests(SynchronousTestCase):
    """
    L{ReqServerProtocol} driven through a L{StringTransport} with a fake
    admission and fake job rooms.
    """

    def test_clientSession(self) -> None:
        """
        The fake admission's session key opens the session; the session's
        requests reach the handlers the allow-list names, and the replies
        are sealed with that key; the channel hears of the session's start
        and end.
        """
        key = os.urandom(32)
        channel = FakeReqChannel(key)
        proto = ReqServerFactory(channel).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        transport.clear()
        proto.dataReceived(frameBytes({"cmd": "_client_auth", "user": "alice"}))
        self.assertEqual(readFrames(transport.value()), [{"ret": "ok"}])
        self.assertEqual(proto.role, "client")
        transport.clear()
        client = SessionCipher(key, isServer=False)
        proto.dataReceived(client.sealFrame({"cmd": "publish", "fun": "test.ping", "rid": 1}))
        proto.dataReceived(client.sealFrame({"cmd": "runner", "fun": "jobs.list", "rid": 2}))
        proto.dataReceived(client.sealFrame({"cmd": "_return", "rid": 3}))
        replies = [client.open(frame) for frame in readFrames(transport.value())]
        self.assertEqual(
            replies,
            [
                {"jid": "1", "minions": [], "rid": 1},
                {"jid": "2", "return": True, "rid": 2},
                {"rid": 3, "error": "'_return' is not available to a client session"},
            ],
        )
        proto.connectionLost(None)
        self.assertEqual(
            channel.calls,
            [
                ("clearClientAuth", "alice"),
                ("sessionStarted", "client"),
                ("clientPublish", "test.ping"),
                ("clientRunner", "jobs.list"),
                ("sessionEnded", "client"),
            ],
        )


@implementer(IMinionSession)
class FakeSession:
    """
    A minion's req session as the sessions room sees it: holds
    acknowledgements until taken or sent.
    """

    role = "minion"
    clientUser = None
    clientAcl = False
    challenge = b"c" * 32
    peerName = "10.0.0.1:1"
    sessionKey = b"k" * 32

    def __init__(self, minionId: str, held: list[int]) -> None:
        self.minionId = minionId
        self.transport = StringTransport()
        self.held = held
        self.sent: list[list[int]] = []

    def takeHeldAcknowledgements(self) -> list[int]:
        held, self.held = self.held, []
        return held

    def sendHeld(self) -> None:
        if self.held:
            self.sent.append(self.held)
        self.held = []


@implementer(ISubscriber)
class FakeSubscriber:
    """
    A connection publications are written to, recording them.
    """

    challenge = b"s" * 32

    def __init__(self, minionId: str, session: FakeSession, carriesAcknowledgements: bool) -> None:
        self.minionId = minionId
        self.session = session
        self.carriesAcknowledgements = carriesAcknowledgements
        self.publicationMac = crypt.HmacSha256(os.urandom(32))
        self.transport = StringTransport()
        self.strings: list[bytes] = []

    def sendString(self, data: bytes) -> None:
        self.strings.append(data)

    def sendFrame(self, message: dict[str, Any]) -> None:
        self.strings.append(serial.dumps(message))


verifyClass(IMinionSession, FakeSession)
verifyClass(ISubscriber, FakeSubscriber)


class SessionsWithFakeConnectionsTests(SynchronousTestCase):
    """
    The sessions room works on any L{IMinionSession} and L{ISubscriber}: it
    reaches into no protocol.
    """

    def test_deliverCarriesHeldAcknowledgements(self) -> None:
        """
        L{Sessions.deliver} writes the publication to every subscriber with
        its own MAC; the acknowledgements a session holds go inside the
        frame for a subscriber that asked for them, and are sent on the
        session for one that did not.
        """
        from salttwist import wire
        from salttwist.master.keywatch import AcceptedIds

        room = Sessions(LocalEventBus(), Clock(), AcceptedIds(InMemoryKeyStore()))
        carrying = FakeSession("m1", [7, 8])
        plain = FakeSession("m2", [9])
        for session, carries in ((carrying, True), (plain, False)):
            room.sessions[session.minionId] = session
            room.subscribers[session.minionId] = FakeSubscriber(session.minionId, session, carries)
            room.holdingReplies(session)
        blob = os.urandom(40)
        prefix = wire.publicationFramePrefix(blob, 1)
        macMessage = wire.publicationMacMessage(1, crypt.sha256(blob))
        room.deliver(prefix, wire.acknowledgingFramePrefixes(prefix), macMessage)
        [withAcks] = room.subscribers["m1"].strings  # type: ignore[attr-defined]
        frame = serial.loads(withAcks)
        self.assertEqual(frame["ack"], [7, 8])
        self.assertEqual(frame["pub"], blob)
        [alone] = room.subscribers["m2"].strings  # type: ignore[attr-defined]
        self.assertNotIn("ack", serial.loads(alone))
        self.assertEqual(carrying.sent, [])
        self.assertEqual(plain.sent, [[9]])
        self.assertEqual(room._replyHolders, {})
