# -*- test-case-name: tests.test_master_core -*-
"""
Tests for L{salttwist.master.core}, L{salttwist.master.reqserver},
L{salttwist.master.publisher} and L{salttwist.master.jobs}: the master's
req and pub channels driven by real client protocols in memory.
"""

from __future__ import annotations

import inspect
import os
import struct
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, serial, wire
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.jid import isJid
from salttwist.master import publishing
from salttwist.master.auth import NONCE_BYTES
from salttwist.master.core import ACK_DELAY, Master, runSynchronously
from salttwist.master.jobs import JobRegistry
from salttwist.master.keys import MasterKeys
from salttwist.master.publisher import PubServerFactory, PubServerProtocol
from salttwist.master.reqserver import (
    CLEAR_FUNCS,
    CLIENT_FUNCS,
    MINION_FUNCS,
    ROLE_FUNCS,
    TRANSIENT_FUNCS,
    ReqServerFactory,
    ReqServerProtocol,
)
from salttwist.minion.pubclient import PubClientProtocol
from salttwist.pki.keystore import ACCEPTED, InMemoryKeyStore
from salttwist.transport.framing import PREAUTH_DEADLINE, PREAUTH_MAX_FRAME
from salttwist.transport.reqclient import ReqClientProtocol, RequestError
from tests._loopback import Loopback

# Key generation is slow: these serve every test of the module.
MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINION_KEYS = {"m1": crypt.generatePrivateKey(), "m2": crypt.generatePrivateKey()}
ROOT_KEY = os.urandom(32)
JID = "20260101000000000001"

#: The methods of L{Master} the wire may reach, and nothing else.
INTENDED_HANDLERS = {
    "clearAuth",
    "clearClientAuth",
    "minionReturn",
    "minionGrains",
    "minionEvent",
    "minionPing",
    "sessionSubscribe",
    "sessionUnsubscribe",
    "clientPublish",
    "clientRunner",
    "fileEnvs",
    "fileList",
    "dirList",
    "fileHash",
    "fileHashes",
    "fileHashMany",
    "serveFiles",
    "serveFile",
    "fileRecv",
    "minionPillar",
    "masterOpts",
}


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


class DeferredRunner:
    """
    A C{runBlocking} that runs nothing until told to, standing for a thread
    that has not finished yet.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[Deferred, Any, tuple, dict]] = []

    def __call__(self, f: Any, *args: Any, **kwargs: Any) -> Deferred:
        d: Deferred = Deferred()
        self.calls.append((d, f, args, kwargs))
        return d

    def runAll(self) -> None:
        """
        Run every call so far and fire its L{Deferred}.
        """
        calls, self.calls = self.calls, []
        for d, f, args, kwargs in calls:
            d.callback(f(*args, **kwargs))


class MasterTestCase(SynchronousTestCase):
    """
    A master with an in-memory key store, a recorded event bus, and helpers
    that connect real req and pub clients to it in memory.
    """

    def setUp(self) -> None:
        """
        Make the master, with C{m1} and C{m2} accepted.
        """
        self.master = self.makeMaster(runSynchronously)
        for minionId, key in MINION_KEYS.items():
            self.master.keyStore.putKey(ACCEPTED, minionId, crypt.publicKeyToPem(key.public_key()))
        self.net = Loopback(self.master.clock)

    def makeMaster(self, runBlocking: Any) -> Master:
        """
        @return: a master recording its events in C{self.events}.
        """
        root = self.mktemp()
        config = loadMasterConfig(root, overrides={"root_dir": root})
        bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        return Master(
            config,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            InMemoryKeyStore(),
            bus,
            runBlocking,
            MemoryReactorClock(),
        )

    def eventsTagged(self, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        """
        @return: the events so far whose tag starts with C{prefix}.
        """
        return [(tag, data) for tag, data in self.events if tag.startswith(prefix)]

    def connectReq(self) -> tuple[ReqClientProtocol, ReqServerProtocol]:
        """
        Connect a req client and deliver the master's greeting.
        """
        server = ReqServerFactory(self.master).buildProtocol(None)
        client = ReqClientProtocol()
        self.net.connect(server, client)
        self.net.flush()
        return client, server

    def authMinion(self, minionId: str) -> tuple[ReqClientProtocol, ReqServerProtocol, bytes]:
        """
        Authenticate C{minionId} as a minion does and open its session.

        @return: the client, the master's protocol and the session key.
        """
        client, server = self.connectReq()
        challenge = server.challenge
        key = MINION_KEYS[minionId]
        pem = crypt.publicKeyToPem(key.public_key())
        nonce = os.urandom(NONCE_BYTES)
        load = {
            "cmd": "_auth",
            "id": minionId,
            "pub": pem,
            "nonce": nonce,
            "sig": crypt.sign(key, wire.authRequestMessage(challenge, nonce, minionId, pem)),
        }
        d = client.sendClear(load)
        self.net.flush()
        reply = self.successResultOf(d)
        self.assertEqual(reply["ret"], "accepted")
        sessionKey = wire.unpackReplyKeys(crypt.rsaDecrypt(key, reply["keys"]))[1]
        client.startSession(sessionKey)
        return client, server, sessionKey

    def authClient(self) -> tuple[ReqClientProtocol, ReqServerProtocol]:
        """
        Authenticate as the local client, with the root key.
        """
        client, server = self.connectReq()
        nonce = os.urandom(NONCE_BYTES)
        mac = crypt.hmacSha256(ROOT_KEY, wire.clientAuthMessage(server.challenge, nonce))
        d = client.sendClear({"cmd": "_client_auth", "nonce": nonce, "mac": mac})
        self.net.flush()
        self.assertEqual(self.successResultOf(d), {"ret": "ok"})
        client.startSession(
            crypt.deriveKey(ROOT_KEY, wire.clientSessionContext(server.challenge, nonce))
        )
        return client, server

    def connectPub(self) -> tuple[PubClientProtocol, PubServerProtocol, list[dict[str, Any]]]:
        """
        Connect a pub client and deliver the master's greeting.

        @return: the client, the master's protocol, and the list the
            client's publications are appended to.
        """
        server = PubServerFactory(self.master).buildProtocol(None)
        client = PubClientProtocol(self.master.maxFrameBytes)
        received: list[dict[str, Any]] = []
        client.onPublication = received.append
        self.net.connect(server, client)
        self.net.flush()
        return client, server, received

    def subscribe(
        self,
        minionId: Any,
        sessionKey: bytes,
        challenge: bytes | None = None,
        acknowledgements: bool = True,
    ) -> tuple[PubClientProtocol, PubServerProtocol, list[dict[str, Any]], str]:
        """
        Subscribe on a new pub connection with a MAC keyed from
        C{sessionKey} over C{challenge} (the connection's by default),
        asking for acknowledgements with publications unless told not to.

        @return: as L{connectPub}, plus the master's answer.
        """
        client, server, received = self.connectPub()
        token = crypt.deriveKey(sessionKey, wire.PUB_TOKEN_CONTEXT)
        signed = server.challenge if challenge is None else challenge
        mac = crypt.hmacSha256(token, wire.pubSubscribeMessage(signed, minionId))
        d = client.subscribe(minionId, mac, acknowledgements)
        self.net.flush()
        return client, server, received, self.successResultOf(d)

    def request(self, client: ReqClientProtocol, payload: dict[str, Any]) -> Deferred:
        """
        Send a session request and deliver the answer.
        """
        d = client.request(payload)
        self.net.flush()
        if not d.called:
            # The acknowledgement of a return is held up to ACK_DELAY.
            self.master.clock.advance(ACK_DELAY)
            self.net.flush()
        return d

    def requestError(self, client: ReqClientProtocol, payload: dict[str, Any]) -> str:
        """
        Send a session request the master must refuse.

        @return: the error message.
        """
        return str(self.failureResultOf(self.request(client, payload), RequestError).value)


def expectedPublicationMac(sessionKey: bytes, challenge: bytes, minionId: str) -> crypt.HmacSha256:
    """
    The MAC a subscription made with C{sessionKey} on the pub connection
    greeted with C{challenge} expects on its publications, derived here
    independently of the master.
    """
    token = crypt.deriveKey(sessionKey, wire.PUB_TOKEN_CONTEXT)
    return crypt.HmacSha256(crypt.deriveKey(token, wire.publicationMacContext(challenge, minionId)))


def assertPublicationMac(
    case: SynchronousTestCase, frame: dict[str, Any], macKey: crypt.HmacSha256
) -> None:
    """
    C{frame} is a publication whose MAC verifies under C{macKey}, over the
    acknowledgements it carries too, if any.
    """
    message = wire.publicationMacMessage(frame["kid"], crypt.sha256(frame["pub"]))
    if "ack" in frame:
        case.assertEqual(sorted(frame), ["ack", "kid", "mac", "pub"])
        message += wire.publicationAcksMessage(frame["ack"])
    else:
        case.assertEqual(sorted(frame), ["kid", "mac", "pub"])
    case.assertTrue(crypt.hmacEqual(macKey.mac(message), frame["mac"]))


class GreetingTests(MasterTestCase):
    """
    The master speaks first on both channels, with a fresh challenge.
    """

    def test_reqHello(self) -> None:
        """
        A req connection is greeted with C{hello}, a 32-byte challenge and
        the protocol version; each connection gets its own challenge.
        """
        challenges = []
        for _ in range(2):
            proto = ReqServerFactory(self.master).buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
            [hello] = readFrames(transport.value())
            self.assertEqual(hello["cmd"], "hello")
            self.assertIsInstance(hello["challenge"], bytes)
            self.assertEqual(len(hello["challenge"]), 32)
            self.assertEqual(hello["challenge"], proto.challenge)
            self.assertEqual(hello["version"], 1)
            challenges.append(hello["challenge"])
        self.assertNotEqual(challenges[0], challenges[1])

    def test_pubHello(self) -> None:
        """
        A pub connection is greeted with C{hello} and a 32-byte challenge.
        """
        proto = PubServerFactory(self.master).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        [hello] = readFrames(transport.value())
        self.assertEqual(hello, {"cmd": "hello", "challenge": proto.challenge})
        self.assertEqual(len(proto.challenge), 32)

    def test_clientSeesChallenge(self) -> None:
        """
        L{ReqClientProtocol.hello} fires with the challenge the master sent.
        """
        client, server = self.connectReq()
        self.assertEqual(self.successResultOf(client.hello), server.challenge)


class DeadlineTests(MasterTestCase):
    """
    A peer that does not authenticate in time is closed (slow senders,
    half-open connections); an authenticated one is not.
    """

    def test_silentReqPeerClosed(self) -> None:
        """
        A req connection that never authenticates is closed after
        L{PREAUTH_DEADLINE} seconds, with a log line.
        """
        client, _ = self.connectReq()
        self.master.clock.advance(PREAUTH_DEADLINE - 1)
        self.net.flush()
        self.assertFalse(client.lost.called)
        self.master.clock.advance(1)
        self.net.flush()
        self.assertTrue(client.lost.called)

    def test_authenticatedKept(self) -> None:
        """
        Authenticated sessions and subscriptions outlive the deadline.
        """
        client, _, sessionKey = self.authMinion("m1")
        pub, _, _, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        self.master.clock.advance(PREAUTH_DEADLINE * 3)
        self.net.flush()
        self.assertFalse(client.lost.called)
        self.assertFalse(pub.lost.called)

    def test_silentPubPeerClosed(self) -> None:
        """
        A pub connection that never subscribes is closed too.
        """
        server = PubServerFactory(self.master).buildProtocol(None)
        client = PubClientProtocol(1 << 20)
        self.net.connect(server, client)
        self.net.flush()
        self.master.clock.advance(PREAUTH_DEADLINE)
        self.net.flush()
        self.assertTrue(client.lost.called)


class DispatchTests(MasterTestCase):
    """
    Only the allow-lists of L{salttwist.master.reqserver} reach L{Master}.
    """

    def test_tablesAreExactlyTheIntendedOnes(self) -> None:
        """
        The four dispatch tables are exactly the current ones, each name
        maps to a public method of L{Master} that is an intended wire
        handler, and no other public method of L{Master} (L{Master.publish},
        L{Master.subscribe}, the session hooks) is reachable from the wire.
        Adding a name to a table must be a deliberate change to this test.
        """
        self.assertEqual(CLEAR_FUNCS, {"_auth": "clearAuth", "_client_auth": "clearClientAuth"})
        fileAndPillar = {
            "_file_envs": "fileEnvs",
            "_file_list": "fileList",
            "_dir_list": "dirList",
            "_file_hash": "fileHash",
            "_file_hashes": "fileHashes",
            "_file_hash_many": "fileHashMany",
            "_serve_files": "serveFiles",
            "_serve_file": "serveFile",
            "_file_recv": "fileRecv",
            "_pillar": "minionPillar",
            "_master_opts": "masterOpts",
        }
        self.assertEqual(
            MINION_FUNCS,
            {
                "_return": "minionReturn",
                "_grains": "minionGrains",
                "_minion_event": "minionEvent",
                "_ping": "minionPing",
                "_subscribe": "sessionSubscribe",
                "_unsubscribe": "sessionUnsubscribe",
                **fileAndPillar,
            },
        )
        self.assertEqual(
            TRANSIENT_FUNCS,
            {"_return": "minionReturn", "_minion_event": "minionEvent", **fileAndPillar},
        )
        self.assertEqual(CLIENT_FUNCS, {"publish": "clientPublish", "runner": "clientRunner"})
        self.assertEqual(
            ROLE_FUNCS,
            {"minion": MINION_FUNCS, "transient": TRANSIENT_FUNCS, "client": CLIENT_FUNCS},
        )
        # The master's methods are its rooms' own, bound in the instance.
        master = self.master
        publicMethods = {
            name
            for name, value in inspect.getmembers(master, inspect.ismethod)
            if not name.startswith("_")
        }
        self.assertEqual(
            publicMethods,
            INTENDED_HANDLERS
            | {
                "publish",
                "sessionStarted",
                "sessionEnded",
                "subscribe",
                "unsubscribe",
                "subscribedFrame",
                "holdingReplies",
                "sendHeldReplies",
            }
            | {"rotatePublicationKey", "cutOff", "keyEvent", "reconcileKeys", "authenticate"},
        )
        reachable = set()
        for table in (CLEAR_FUNCS, MINION_FUNCS, TRANSIENT_FUNCS, CLIENT_FUNCS):
            for command, method in table.items():
                self.assertIsInstance(command, str)
                self.assertIn(method, publicMethods, command)
                self.assertIn(method, INTENDED_HANDLERS, command)
                reachable.add(method)
        self.assertEqual(reachable, INTENDED_HANDLERS)
        self.assertEqual(reachable & (publicMethods - INTENDED_HANDLERS), set())

    def test_clearCommandOutsideAllowList(self) -> None:
        """
        A clear-text command that is not in L{CLEAR_FUNCS} (a session
        command, a Master method name, a dunder, a non-string) is refused
        with an error frame and the connection is closed; the master does
        nothing.
        """
        for cmd in ("_return", "publish", "__init__", "clearAuth", "minionReturn", None, 5):
            proto = ReqServerFactory(self.master).buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
            transport.clear()
            proto.dataReceived(
                frameBytes({"cmd": cmd, "id": "m1", "jid": JID, "fun": "test.ping", "tgt": "*"})
            )
            [reply] = readFrames(transport.value())
            self.assertEqual(reply["ret"], "error", cmd)
            self.assertIn("not available without a session", reply["error"])
            self.assertTrue(transport.disconnecting, cmd)
            self.assertIsNone(proto.role)
        self.assertEqual(self.events, [])
        self.assertEqual(self.master.sessions, {})

    def test_oversizedPreauthHeader(self) -> None:
        """
        A length header over the pre-authentication limit closes the
        connection at once, before any body arrives.
        """
        for factory in (ReqServerFactory, PubServerFactory):
            proto = factory(self.master).buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
            transport.clear()
            proto.dataReceived(struct.pack("!I", PREAUTH_MAX_FRAME + 1))
            self.assertTrue(transport.disconnected, factory)
            self.assertEqual(transport.value(), b"")

    def test_malformedFrame(self) -> None:
        """
        A frame that is not msgpack, or not a map, closes the connection
        without a reply.
        """
        for body in (b"\xc1", serial.dumps([1, 2])):
            proto = ReqServerFactory(self.master).buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
            transport.clear()
            proto.dataReceived(struct.pack("!I", len(body)) + body)
            self.assertTrue(transport.disconnected)
            self.assertEqual(transport.value(), b"")

    def test_minionCannotPublish(self) -> None:
        """
        In a minion session, C{publish} is answered "not available to a
        minion" and no job is published.
        """
        client, _, _ = self.authMinion("m1")
        error = self.requestError(
            client, {"cmd": "publish", "tgt": "*", "fun": "cmd.run", "arg": ["id"]}
        )
        self.assertIn("not available to a minion", error)
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.assertFalse(client.lost.called)

    def test_minionCannotCallOtherNames(self) -> None:
        """
        In a minion session, clear-text commands and L{Master} method names
        are refused too.
        """
        client, _, _ = self.authMinion("m1")
        for cmd in ("_auth", "clientPublish", "publish", "subscribe", "__class__", None):
            self.assertIn("not available to a minion", self.requestError(client, {"cmd": cmd}))

    def test_minionPing(self) -> None:
        """
        C{_ping} in a minion session (C{master_alive_interval}'s check) is
        answered C{{"ret": True}}, fires nothing and leaves the session up;
        a local-client session may not send it.
        """
        client, _, _ = self.authMinion("m1")
        self.events.clear()
        reply = self.successResultOf(self.request(client, {"cmd": "_ping"}))
        self.assertIs(reply["ret"], True)
        self.assertEqual(self.events, [])
        self.assertFalse(client.lost.called)
        other, _ = self.authClient()
        self.assertIn("not available to a client", self.requestError(other, {"cmd": "_ping"}))

    def test_clientCannotReturn(self) -> None:
        """
        In a local-client session, C{_return} is answered "not available to a
        client".
        """
        self.master.jobs.add(JID, {}, ["m1"])
        client, _ = self.authClient()
        error = self.requestError(client, {"cmd": "_return", "id": "m1", "jid": JID})
        self.assertIn("not available to a client", error)
        self.assertEqual(self.eventsTagged("salt/job/"), [])

    def test_frameDuringAuthentication(self) -> None:
        """
        A second clear-text frame sent while authentication runs closes the
        connection.
        """
        runner = DeferredRunner()
        self.master = self.makeMaster(runner)
        proto = ReqServerFactory(self.master).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        transport.clear()
        proto.dataReceived(frameBytes({"cmd": "_auth", "id": "m1"}))
        self.assertEqual(len(runner.calls), 1)
        proto.dataReceived(frameBytes({"cmd": "_auth", "id": "m1"}))
        self.assertTrue(transport.disconnected)
        self.assertEqual(len(runner.calls), 1)

    def test_peerLeftDuringAuthentication(self) -> None:
        """
        When the peer leaves before its authentication finishes, it gets no
        reply and no session is started.
        """
        runner = DeferredRunner()
        self.master = self.makeMaster(runner)
        key = MINION_KEYS["m1"]
        pem = crypt.publicKeyToPem(key.public_key())
        self.master.keyStore.putKey(ACCEPTED, "m1", pem)
        client, server = self.connectReq()
        nonce = os.urandom(NONCE_BYTES)
        message = wire.authRequestMessage(server.challenge, nonce, "m1", pem)
        d = client.sendClear(
            {
                "cmd": "_auth",
                "id": "m1",
                "pub": pem,
                "nonce": nonce,
                "sig": crypt.sign(key, message),
            }
        )
        self.net.flush()
        client.transport.loseConnection()
        self.net.flush()
        self.failureResultOf(d)
        runner.runAll()
        self.assertIsNone(server.role)
        self.assertEqual(self.master.sessions, {})


class MinionReturnTests(MasterTestCase):
    """
    Tests for C{_return} in a minion session (L{Master.minionReturn}).
    """

    def setUp(self) -> None:
        """
        Open a session for C{m1}; record job L{JID} targeting C{m1} and C{m2}.
        """
        super().setUp()
        self.client, self.server, _ = self.authMinion("m1")
        self.master.jobs.add(JID, {"jid": JID, "fun": "test.ping"}, ["m1", "m2"])

    def returnLoad(self, **overrides: Any) -> dict[str, Any]:
        """
        @return: a valid return of C{m1} for L{JID}, with C{overrides}.
        """
        load = {
            "cmd": "_return",
            "id": "m1",
            "jid": JID,
            "fun": "test.ping",
            "fun_args": [],
            "return": True,
            "retcode": 0,
            "success": True,
        }
        load.update(overrides)
        return load

    def test_validReturn(self) -> None:
        """
        A return for a job that targeted the session's minion is
        acknowledged and fires C{salt/job/<jid>/ret/<id>} carrying the return,
        retcode and success.
        """
        d = self.request(self.client, self.returnLoad(**{"return": {"a": 1}, "retcode": 3}))
        self.assertEqual(self.successResultOf(d), {"ret": True, "rid": 1})
        [(tag, data)] = self.eventsTagged("salt/job/")
        self.assertEqual(tag, f"salt/job/{JID}/ret/m1")
        self.assertEqual(data["id"], "m1")
        self.assertEqual(data["jid"], JID)
        self.assertEqual(data["fun"], "test.ping")
        self.assertEqual(data["return"], {"a": 1})
        self.assertEqual(data["retcode"], 3)
        self.assertEqual(data["success"], True)

    def test_sessionFrameEncodings(self) -> None:
        """
        A session frame is taken in any msgpack encoding of its map, as
        before the master read the usual one without decoding it (a key
        written as str 8, a short blob's length as bin 16); one with a
        byte after its map is malformed and closes the connection.
        """
        session = self.client._session
        assert session is not None
        jid2 = "20260101000000000002"
        self.master.jobs.add(jid2, {"jid": jid2, "fun": "test.ping"}, ["m1"])

        def send(data: bytes) -> None:
            self.server.dataReceived(struct.pack("!I", len(data)) + data)

        blob = session.seal(self.returnLoad(rid=1))["enc"]
        send(b"\x81\xd9\x03enc\xc4" + bytes([len(blob)]) + blob)
        blob = session.seal(self.returnLoad(rid=2, jid=jid2))["enc"]
        send(b"\x81\xa3enc\xc5" + len(blob).to_bytes(2, "big") + blob)
        self.assertEqual(self.master.jobs.get(JID).returned, {"m1"})
        self.assertEqual(self.master.jobs.get(jid2).returned, {"m1"})
        self.assertFalse(self.server.transport.disconnecting)
        send(serial.dumps(session.seal({"cmd": "_grains", "grains": {}})) + b"\x00")
        self.assertTrue(self.server.transport.disconnecting)

    def test_returnClaimingAnotherId(self) -> None:
        """
        A return whose C{id} is not the session's minion is refused, fires no
        event, and does not use up the other minion's return.
        """
        for claimed in ("m2", "M1", None, ["m1"]):
            error = self.requestError(self.client, self.returnLoad(id=claimed))
            self.assertIn("does not match the session", error)
        self.assertEqual(self.eventsTagged("salt/job/"), [])
        self.assertEqual(self.master.jobs.get(JID).returned, set())

    def test_unknownJid(self) -> None:
        """
        A return for a jid the master never published (or not a string) is
        refused with no event.
        """
        for jid in ("20260101000000000002", None, 42, [JID]):
            self.assertIn(
                "return refused", self.requestError(self.client, self.returnLoad(jid=jid))
            )
        self.assertEqual(self.eventsTagged("salt/job/"), [])

    def test_untargetedMinion(self) -> None:
        """
        A return for a job that did not target the minion is refused with no
        event.
        """
        other = "20260101000000000009"
        self.master.jobs.add(other, {}, ["m2"])
        error = self.requestError(self.client, self.returnLoad(jid=other))
        self.assertIn("was not targeted", error)
        self.assertEqual(self.eventsTagged("salt/job/"), [])

    def test_duplicateReturn(self) -> None:
        """
        A second return of one minion for one job is refused; only the first
        fires an event.
        """
        self.successResultOf(self.request(self.client, self.returnLoad()))
        error = self.requestError(self.client, self.returnLoad(**{"return": False}))
        self.assertIn("already returned", error)
        [(_, data)] = self.eventsTagged("salt/job/")
        self.assertEqual(data["return"], True)

    def test_sessionSurvivesRefusals(self) -> None:
        """
        A refused return is an error reply, not a protocol violation: the
        session stays open and a valid return after it is accepted.
        """
        self.requestError(self.client, self.returnLoad(id="m2"))
        self.successResultOf(self.request(self.client, self.returnLoad()))
        self.assertEqual(len(self.eventsTagged(f"salt/job/{JID}/ret/m1")), 1)
        self.assertIs(self.master.sessions["m1"], self.server)

    def test_unexpectedErrorAnswered(self) -> None:
        """
        A session function that fails with an unexpected exception (not a
        refusal) is answered C{internal error in <cmd>}, logged with its
        traceback, and the session stays open; with C{master_stats} on as
        well as off.
        """

        def broken(proto: object, load: object) -> dict[str, Any]:
            raise RuntimeError("disk on fire")

        original = self.master.minionReturn
        for stats in (False, True):
            self.master.config["master_stats"] = stats
            self.master.minionReturn = broken  # type: ignore[method-assign]
            error = self.requestError(self.client, self.returnLoad())
            self.assertIn("internal error in _return", error)
            [failure] = self.flushLoggedErrors(RuntimeError)
            self.assertEqual(str(failure.value), "disk on fire")
        self.master.minionReturn = original  # type: ignore[method-assign]
        self.assertEqual(
            self.successResultOf(self.request(self.client, self.returnLoad()))["ret"], True
        )


class ClientPublishTests(MasterTestCase):
    """
    Tests for C{publish} in a local-client session (L{Master.clientPublish})
    and the broadcast to subscribers.
    """

    def setUp(self) -> None:
        """
        Open sessions and pub subscriptions for C{m1} and C{m2}, and a local
        client session.
        """
        super().setUp()
        self.received = {}
        self.macKeys = {}
        for minionId in ("m1", "m2"):
            _, _, sessionKey = self.authMinion(minionId)
            _, server, received, answer = self.subscribe(minionId, sessionKey)
            self.assertEqual(answer, "subscribed")
            self.received[minionId] = received
            self.macKeys[minionId] = expectedPublicationMac(sessionKey, server.challenge, minionId)
        self.client, _ = self.authClient()
        self.events.clear()

    def test_invalidRequests(self) -> None:
        """
        An invalid function name, target type, target or a non-list C{arg}
        is answered with an error; nothing is published or fired.
        """
        good = {"cmd": "publish", "tgt": "*", "fun": "test.ping", "arg": []}
        cases = [
            ({"fun": "test"}, "invalid function name"),
            ({"fun": "../x.y"}, "invalid function name"),
            ({"fun": "test.ping;id"}, "invalid function name"),
            ({"fun": 5}, "invalid function name"),
            ({"tgt_type": 5}, "tgt_type must be a string"),
            ({"tgt_type": "nosuch"}, "invalid target"),
            ({"tgt": ""}, "invalid target"),
            ({"tgt": 5}, "invalid target"),
            ({"arg": "x"}, "arg must be a list"),
            ({"arg": {"a": 1}}, "arg must be a list"),
        ]
        for change, message in cases:
            self.assertIn(message, self.requestError(self.client, dict(good, **change)))
        self.assertEqual(self.events, [])
        self.assertEqual(self.received, {"m1": [], "m2": []})

    def test_publishToAll(self) -> None:
        """
        Publishing to C{*} answers a 20-digit jid and both accepted minions,
        fires C{salt/job/<jid>/new}, and writes the same signed, sealed frame
        to every subscriber.
        """
        d = self.request(
            self.client,
            {"cmd": "publish", "tgt": "*", "fun": "test.echo", "arg": ["hi"], "user": "alice"},
        )
        reply = self.successResultOf(d)
        jid = reply["jid"]
        self.assertTrue(isJid(jid), jid)
        self.assertEqual(reply["minions"], ["m1", "m2"])
        [(tag, data)] = self.events
        self.assertEqual(tag, f"salt/job/{jid}/new")
        data.pop("_stamp")
        self.assertEqual(
            data,
            {
                "jid": jid,
                "tgt": "*",
                "tgt_type": "glob",
                "fun": "test.echo",
                "arg": ["hi"],
                "minions": ["m1", "m2"],
                "user": "alice",
            },
        )
        [frame] = self.received["m1"]
        [other] = self.received["m2"]
        # One sealed blob for all, each with its own subscription's MAC.
        self.assertEqual(other["pub"], frame["pub"])
        self.assertNotEqual(other["mac"], frame["mac"])
        assertPublicationMac(self, frame, self.macKeys["m1"])
        assertPublicationMac(self, other, self.macKeys["m2"])
        publication = self.master.publicationKey
        self.assertEqual(frame["kid"], publication.kid)
        load = serial.loads(
            publication.cipher().decrypt(frame["pub"], wire.publicationAad(frame["kid"]))
        )
        self.assertEqual(load["jid"], jid)
        self.assertEqual(load["fun"], "test.echo")
        self.assertEqual(load["arg"], ["hi"])
        self.assertEqual(load["tgt"], "*")
        self.assertEqual(self.master.jobs.get(jid).minions, frozenset({"m1", "m2"}))

    def test_userDefaultsToRoot(self) -> None:
        """
        A publish without a string C{user} is attributed to C{root}.
        """
        reply = self.successResultOf(
            self.request(
                self.client, {"cmd": "publish", "tgt": "m1", "fun": "test.ping", "user": 5}
            )
        )
        self.assertEqual(reply["minions"], ["m1"])
        [(_, data)] = self.events
        self.assertEqual(data["user"], "root")

    def publishAll(self) -> list[str]:
        """
        Publish C{test.ping} to C{*}.

        @return: the minions the master expects.
        """
        d = self.request(self.client, {"cmd": "publish", "tgt": "*", "fun": "test.ping"})
        return self.successResultOf(d)["minions"]

    def countListings(self) -> list[str]:
        """
        Count the key store's listings of accepted keys from now on.

        @return: a list that grows by one entry per listing.
        """
        listings: list[str] = []
        store = self.master.keyStore
        real = store.listKeys

        def listKeys(state: str) -> list[str]:
            if state == ACCEPTED:
                listings.append(state)
            return real(state)

        store.listKeys = listKeys  # type: ignore[method-assign]
        return listings

    def test_acceptedKeysListedOnce(self) -> None:
        """
        Publications reuse the accepted ids listed for an earlier one: the
        key store is not listed again for each job.
        """
        listings = self.countListings()
        self.assertEqual(self.publishAll(), ["m1", "m2"])
        self.assertEqual(self.publishAll(), ["m1", "m2"])
        self.assertEqual(len(listings), 1)

    def test_keyEventListsAgain(self) -> None:
        """
        After a C{salt/key} event (a key accepted, deleted ...) the next
        publication lists the key store again and targets what it holds.
        """
        self.publishAll()
        listings = self.countListings()
        self.master.keyStore.putKey(
            ACCEPTED, "m3", crypt.publicKeyToPem(MINION_KEYS["m1"].public_key())
        )
        self.assertEqual(self.publishAll(), ["m1", "m2"])
        self.master.keyEvent("salt/key", {"act": "accept", "id": "m3"})
        self.assertEqual(self.publishAll(), ["m1", "m2", "m3"])
        self.assertEqual(len(listings), 1)

    def test_reconcileRefreshes(self) -> None:
        """
        The periodic reconciliation (run when the accepted-keys directory
        changed, whatever changed it) lists the store and its listing is
        what the next publication targets.
        """
        self.publishAll()
        self.master.keyStore.deleteKey(ACCEPTED, "m2")
        self.master.reconcileKeys()
        listings = self.countListings()
        self.assertEqual(self.publishAll(), ["m1"])
        self.assertEqual(listings, [])

    def test_newSessionOfUnlistedMinion(self) -> None:
        """
        A minion that authenticates although it was not in the last listing
        (auto_accept put its key in place without a C{salt/key} event) makes
        the next publication list the store again and target it.
        """
        self.publishAll()
        MINION_KEYS["m3"] = MINION_KEYS["m1"]
        self.addCleanup(MINION_KEYS.pop, "m3")
        self.master.keyStore.putKey(
            ACCEPTED, "m3", crypt.publicKeyToPem(MINION_KEYS["m3"].public_key())
        )
        listings = self.countListings()
        self.authMinion("m3")
        self.assertEqual(self.publishAll(), ["m1", "m2", "m3"])
        self.assertEqual(len(listings), 1)

    def test_listingOlderThanKeyChangeNotKept(self) -> None:
        """
        A listing that began before a key change is used for its own
        publication but not remembered: the next publication lists again.
        """
        generation, ids = self.master.keyWatch.accepted.list()
        self.master.keyEvent("salt/key", {"act": "accept", "id": "m3"})
        self.master.keyWatch.accepted.keep(generation, ids)
        listings = self.countListings()
        self.publishAll()
        self.assertEqual(len(listings), 1)

    def test_targetMatchingNothing(self) -> None:
        """
        A target that matches no accepted minion answers no minions; nothing
        is published or fired.
        """
        reply = self.successResultOf(
            self.request(self.client, {"cmd": "publish", "tgt": "db*", "fun": "test.ping"})
        )
        self.assertEqual(reply["minions"], [])
        self.assertEqual(self.events, [])
        self.assertEqual(self.received, {"m1": [], "m2": []})


class SwitchableRunner(DeferredRunner):
    """
    A C{runBlocking} that runs work at once until C{hold} is set, then
    keeps it until told to (L{DeferredRunner}).
    """

    hold = False

    def __call__(self, f: Any, *args: Any, **kwargs: Any) -> Deferred:
        if not self.hold:
            return runSynchronously(f, *args, **kwargs)
        return super().__call__(f, *args, **kwargs)


class JobPathTests(MasterTestCase):
    """
    A job's path through the master has no thread hop: targeting against
    the accepted ids already listed, and signing the publication, are done
    on the reactor.
    """

    def setUp(self) -> None:
        """
        A master whose C{runBlocking} can be held; C{m1} and C{m2}
        subscribed; a local client session.
        """
        self.runner = SwitchableRunner()
        self.master = self.makeMaster(self.runner)
        for minionId, key in MINION_KEYS.items():
            self.master.keyStore.putKey(ACCEPTED, minionId, crypt.publicKeyToPem(key.public_key()))
        self.net = Loopback(self.master.clock)
        self.received = {}
        self.macKeys = {}
        for minionId in ("m1", "m2"):
            _, _, sessionKey = self.authMinion(minionId)
            _, server, self.received[minionId], _ = self.subscribe(minionId, sessionKey)
            self.macKeys[minionId] = expectedPublicationMac(sessionKey, server.challenge, minionId)
        self.client, _ = self.authClient()

    def publish(self) -> Deferred:
        """
        Publish C{test.ping} to C{*} from the client session.
        """
        return self.request(self.client, {"cmd": "publish", "tgt": "*", "fun": "test.ping"})

    def test_listedIdsNoThread(self) -> None:
        """
        Once the accepted ids are listed, a publish is answered and
        broadcast with nothing run through C{runBlocking}.
        """
        self.successResultOf(self.publish())
        self.runner.hold = True
        reply = self.successResultOf(self.publish())
        self.assertEqual(reply["minions"], ["m1", "m2"])
        self.assertEqual(self.runner.calls, [])
        self.assertEqual([len(r) for r in self.received.values()], [2, 2])

    def test_unlistedIdsInThread(self) -> None:
        """
        When the accepted ids must be listed again (a key changed), the
        listing and targeting run through C{runBlocking}: the publish waits
        for it.
        """
        self.successResultOf(self.publish())
        self.master.keyEvent("salt/key", {"act": "accept", "id": "m3"})
        self.assertPublishWaitsForRunner()

    def assertPublishWaitsForRunner(self) -> None:
        """
        A publish waits until C{runBlocking} runs its work, then targets
        both minions.
        """
        self.runner.hold = True
        d = self.publish()
        self.assertNoResult(d)
        self.runner.runAll()
        self.net.flush()
        self.assertEqual(self.successResultOf(d)["minions"], ["m1", "m2"])

    def test_manyMinionsInThread(self) -> None:
        """
        With more accepted ids than C{INLINE_TARGETING_MAX}, targeting runs
        through C{runBlocking}.
        """
        self.successResultOf(self.publish())
        self.patch(publishing, "INLINE_TARGETING_MAX", 1)
        self.assertPublishWaitsForRunner()

    def test_publishSealsOnTheReactor(self) -> None:
        """
        L{Master.publish} seals, MACs and writes the frame to every
        subscriber before it returns, without C{runBlocking}.
        """
        self.runner.hold = True
        d = self.master.publish({"jid": "2" * 20, "fun": "test.ping", "tgt": "*"})
        self.successResultOf(d)
        self.assertEqual(self.runner.calls, [])
        self.net.flush()
        [frame] = self.received["m1"]
        assertPublicationMac(self, frame, self.macKeys["m1"])


class HeldAcknowledgementTests(MasterTestCase):
    """
    The acknowledgement of a minion's return is held back: sent with the
    minion's next publication, before any other reply of its session, or
    L{ACK_DELAY} seconds after the return at the latest.
    """

    def setUp(self) -> None:
        """
        C{m1} authenticated and subscribed, a local client session, and a
        job L{JID} targeting C{m1}.
        """
        super().setUp()
        self.minion, self.server, self.sessionKey = self.authMinion("m1")
        self.received = self.subscribe("m1", self.sessionKey)[2]
        self.client, _ = self.authClient()
        self.master.jobs.add(JID, {"jid": JID, "fun": "test.ping"}, ["m1"])

    def sendReturn(self, jid: str = JID) -> Deferred:
        """
        Send C{m1}'s return for C{jid} and deliver what the master sends at
        once.
        """
        d = self.minion.request(
            {"cmd": "_return", "id": "m1", "jid": jid, "fun": "test.ping", "return": True}
        )
        self.net.flush()
        return d

    def test_heldUntilAckDelay(self) -> None:
        """
        The return is taken (its event fired) at once; its acknowledgement
        comes L{ACK_DELAY} seconds later.
        """
        d = self.sendReturn()
        self.assertEqual(len(self.eventsTagged(f"salt/job/{JID}/ret/m1")), 1)
        self.assertNoResult(d)
        self.master.clock.advance(ACK_DELAY / 2)
        self.net.flush()
        self.assertNoResult(d)
        self.master.clock.advance(ACK_DELAY / 2)
        self.net.flush()
        self.assertEqual(self.successResultOf(d), {"ret": True, "rid": 1})

    def test_heldWithMasterStats(self) -> None:
        """
        With C{master_stats} on, the acknowledgement is held back as well,
        and the return is counted as a request answered at once.
        """
        self.master.config["master_stats"] = True
        d = self.sendReturn()
        self.assertNoResult(d)
        self.assertEqual(self.master.requestStats.peek()["_return"], {"mean": 0.0, "runs": 1})
        self.master.clock.advance(ACK_DELAY)
        self.net.flush()
        self.assertEqual(self.successResultOf(d), {"ret": True, "rid": 1})

    def publishNow(self) -> None:
        """
        Publish a job through the local client and deliver it.
        """
        self.successResultOf(
            self.request(self.client, {"cmd": "publish", "tgt": "*", "fun": "test.ping"})
        )

    def test_carriedByTheNextPublication(self) -> None:
        """
        The next publication carries the held acknowledgements of a minion
        that asked for that, in its MAC too, without waiting for
        L{ACK_DELAY}: nothing is sent on the req connection for them (not
        even once the timer is due), and the minion's req client takes them
        from the publication.
        """
        self.master.jobs.add("3" * 20, {"jid": "3" * 20, "fun": "test.ping"}, ["m1"])
        first, second = self.sendReturn(), self.sendReturn("3" * 20)
        self.publishNow()
        [frame] = self.received
        self.assertEqual(frame["ack"], [1, 2])
        assertPublicationMac(self, frame, self.master.subscribers["m1"].publicationMac)
        self.assertEqual(self.master.sessionsRoom._replyHolders, {})
        self.master.clock.advance(ACK_DELAY)
        self.net.flush()
        self.assertNoResult(first)
        self.minion.acknowledged(frame["ack"])
        self.assertEqual(self.successResultOf(first), {"ret": True, "rid": 1})
        self.assertEqual(self.successResultOf(second), {"ret": True, "rid": 2})

    def test_sentWithTheNextPublication(self) -> None:
        """
        A minion that did not ask for acknowledgements with its
        publications gets them on its req connection right after the next
        publication, without waiting for L{ACK_DELAY}.
        """
        self.received = self.subscribe("m1", self.sessionKey, acknowledgements=False)[2]
        d = self.sendReturn()
        self.assertNoResult(d)
        self.publishNow()
        [frame] = self.received
        assertPublicationMac(self, frame, self.master.subscribers["m1"].publicationMac)
        self.assertNotIn("ack", frame)
        self.assertEqual(self.successResultOf(d), {"ret": True, "rid": 1})
        self.assertEqual(self.master.sessionsRoom._replyHolders, {})

    def test_notCarriedForAnotherSession(self) -> None:
        """
        A subscription proved with another session of the minion does not
        carry the acknowledgements of its current session (the minion would
        take them for its old session's): they go on the req connection.
        """
        old = self.server
        self.minion, self.server, sessionKey = self.authMinion("m1")
        self.received = self.subscribe("m1", sessionKey)[2]
        # The master drops a minion's subscription when its session changes;
        # were one left behind, it would still not carry the new session's.
        self.master.subscribers["m1"].session = old
        d = self.sendReturn()
        self.publishNow()
        self.assertNotIn("ack", self.received[-1])
        self.assertEqual(self.successResultOf(d), {"ret": True, "rid": 1})

    def test_notCarriedUnlessPlain(self) -> None:
        """
        Held replies go on the req connection, not with the publication,
        when one is more than C{{"ret": True}} or its request id is not a
        number the frame can carry (a minion picks its own).
        """
        d = self.sendReturn()
        self.server._held.append({"ret": True, "rid": "x"})
        self.publishNow()
        self.assertNotIn("ack", self.received[-1])
        self.assertEqual(self.successResultOf(d), {"ret": True, "rid": 1})
        for extra in ({"ret": True, "rid": 2, "jid": JID}, {"ret": False, "rid": 2}):
            self.server._held = [{"ret": True, "rid": 1}, extra]
            self.assertEqual(self.server.takeHeldAcknowledgements(), [])
            self.assertEqual(len(self.server._held), 2)
        tooMany = range(1, wire.MAX_PUBLICATION_ACKS + 2)
        self.server._held = [{"ret": True, "rid": n} for n in tooMany]
        self.assertEqual(self.server.takeHeldAcknowledgements(), [])
        self.server._held.pop()
        self.assertEqual(len(self.server.takeHeldAcknowledgements()), wire.MAX_PUBLICATION_ACKS)
        self.assertEqual(self.server._held, [])

    def test_otherReplyNotHeld(self) -> None:
        """
        A reply that is not a return's acknowledgement (here a refusal) is
        sent at once, after the acknowledgements held (in the order the
        session's counters require), and the session goes on.
        """
        held = self.sendReturn()
        refused = self.sendReturn(jid="3" * 20)
        self.assertEqual(self.successResultOf(held), {"ret": True, "rid": 1})
        self.failureResultOf(refused, RequestError)
        self.master.jobs.add("4" * 20, {"jid": "4" * 20, "fun": "test.ping"}, ["m1"])
        again = self.request(
            self.minion,
            {"cmd": "_return", "id": "m1", "jid": "4" * 20, "fun": "test.ping", "return": 1},
        )
        self.assertEqual(self.successResultOf(again), {"ret": True, "rid": 3})
        self.assertTrue(self.server.transport.connected)

    def test_transientRepliesNotHeld(self) -> None:
        """
        A return that makes its own jid (C{req}, from C{salttwist-call}) is
        answered at once: its caller waits for the jid.
        """
        d = self.minion.request(
            {"cmd": "_return", "id": "m1", "jid": "req", "fun": "test.ping", "return": True}
        )
        self.net.flush()
        self.assertTrue(isJid(self.successResultOf(d)["jid"]))

    def test_sentWhenTheSubscriptionEnds(self) -> None:
        """
        When the minion's pub connection closes (a stopping minion leaves
        the pub channel), the acknowledgements held for its next
        publication are sent on its req connection at once.
        """
        d = self.sendReturn()
        self.assertNoResult(d)
        self.master.subscribers["m1"].transport.loseConnection()
        self.net.flush()
        self.assertEqual(self.successResultOf(d), {"ret": True, "rid": 1})
        self.assertEqual(self.master.sessionsRoom._replyHolders, {})
        self.assertNotIn("m1", self.master.subscribers)

    def test_dueOldestFirst(self) -> None:
        """
        The timer sends the held replies that are due, oldest first, and
        comes back when the oldest of the others is due: a session that
        sent its held replies (before a reply sent at once) and holds a new
        one is due L{ACK_DELAY} after that one, not after the first.
        """
        other, otherServer, otherKey = self.authMinion("m2")
        self.subscribe("m2", otherKey)
        self.master.jobs.add("3" * 20, {"jid": "3" * 20, "fun": "test.ping"}, ["m1", "m2"])
        self.master.jobs.add("4" * 20, {"jid": "4" * 20, "fun": "test.ping"}, ["m1"])
        first = self.sendReturn()
        self.master.clock.advance(ACK_DELAY / 4)
        # A refusal is sent at once, with the held acknowledgement before it.
        refused = self.sendReturn(jid="5" * 20)
        self.assertEqual(self.successResultOf(first), {"ret": True, "rid": 1})
        self.failureResultOf(refused, RequestError)
        self.master.clock.advance(ACK_DELAY / 4)
        fromOther = other.request(
            {"cmd": "_return", "id": "m2", "jid": "3" * 20, "fun": "test.ping", "return": True}
        )
        self.net.flush()
        self.master.clock.advance(ACK_DELAY / 4)
        again = self.sendReturn("4" * 20)
        self.net.flush()
        self.assertEqual(list(self.master.sessionsRoom._replyHolders), [otherServer, self.server])
        self.master.clock.advance(ACK_DELAY * 3 / 4)
        self.net.flush()
        self.assertEqual(self.successResultOf(fromOther), {"ret": True, "rid": 1})
        self.assertNoResult(again)
        self.assertEqual(list(self.master.sessionsRoom._replyHolders), [self.server])
        self.master.clock.advance(ACK_DELAY / 4)
        self.net.flush()
        self.assertEqual(self.successResultOf(again), {"ret": True, "rid": 3})
        self.assertEqual(self.master.sessionsRoom._replyHolders, {})

    def test_connectionLost(self) -> None:
        """
        Acknowledgements held for a session that ends are dropped with it.
        """
        d = self.sendReturn()
        self.server.transport.loseConnection()
        self.net.flush()
        self.failureResultOf(d)
        self.assertEqual(self.master.sessionsRoom._replyHolders, {})
        self.master.clock.advance(ACK_DELAY)
        self.net.flush()


class PubSubscriptionTests(MasterTestCase):
    """
    Tests for pub-channel subscriptions (L{Master.subscribe}).
    """

    def assertRefused(self, client: PubClientProtocol, answer: str) -> None:
        """
        The subscription was refused and its connection closed.
        """
        self.assertEqual(answer, "refused")
        self.assertTrue(client.lost.called)
        self.assertEqual(self.master.subscribers, {})
        self.assertEqual(self.eventsTagged("salt/minion/"), [])

    def test_subscribe(self) -> None:
        """
        A MAC keyed from the minion's live session over this connection's
        challenge subscribes it and fires C{salt/minion/<id>/start}.
        """
        _, _, sessionKey = self.authMinion("m1")
        client, server, _, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        self.assertIs(self.master.subscribers["m1"], server)
        self.assertFalse(client.lost.called)
        [(tag, data)] = self.eventsTagged("salt/minion/")
        self.assertEqual(tag, "salt/minion/m1/start")
        self.assertEqual(data["id"], "m1")

    def test_wrongMac(self) -> None:
        """
        A MAC from another key, over another challenge, or from another
        minion's session is refused and the connection closed.
        """
        _, _, key1 = self.authMinion("m1")
        _, _, key2 = self.authMinion("m2")
        client, _, _, answer = self.subscribe("m1", os.urandom(32))
        self.assertRefused(client, answer)
        client, _, _, answer = self.subscribe("m1", key1, challenge=os.urandom(32))
        self.assertRefused(client, answer)
        client, _, _, answer = self.subscribe("m1", key2)
        self.assertRefused(client, answer)

    def test_noSession(self) -> None:
        """
        A minion without a live req session cannot subscribe.
        """
        client, _, _, answer = self.subscribe("m1", os.urandom(32))
        self.assertRefused(client, answer)

    def test_invalidId(self) -> None:
        """
        An invalid minion id is refused and the connection closed.
        """
        for minionId in ("../x", "", None, 7):
            client, _, _, answer = self.subscribe(minionId, os.urandom(32))
            self.assertRefused(client, answer)

    def test_notSubscribeFirst(self) -> None:
        """
        A first frame other than C{subscribe} closes the connection.
        """
        proto = PubServerFactory(self.master).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        transport.clear()
        proto.dataReceived(frameBytes({"cmd": "ping"}))
        self.assertTrue(transport.disconnected)
        self.assertEqual(transport.value(), b"")

    def test_sessionEndClosesSubscription(self) -> None:
        """
        When a minion's req session ends, the master closes its pub
        subscription and forgets both.
        """
        req, _, sessionKey = self.authMinion("m1")
        pub, _, _, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        req.transport.loseConnection()
        self.net.flush()
        self.assertTrue(pub.lost.called)
        self.assertEqual(self.master.sessions, {})
        self.assertEqual(self.master.subscribers, {})

    def test_newSessionReplacesOld(self) -> None:
        """
        A minion that authenticates again replaces its older session, which
        the master closes.
        """
        old, oldServer, _ = self.authMinion("m1")
        new, newServer, _ = self.authMinion("m1")
        self.assertTrue(old.lost.called)
        self.assertFalse(new.lost.called)
        self.assertIs(self.master.sessions["m1"], newServer)

    def test_newSessionClosesOldSubscription(self) -> None:
        """
        When a minion authenticates again, the pub subscription made with
        its old session is closed at once, not left open until it subscribes
        again (it may never do so).
        """
        _, _, sessionKey = self.authMinion("m1")
        pub, _, _, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        self.authMinion("m1")
        self.assertTrue(pub.lost.called)
        self.assertEqual(self.master.subscribers, {})

    def test_resubscribeReplacesOld(self) -> None:
        """
        A second subscription of one minion replaces and closes the first.
        """
        _, _, sessionKey = self.authMinion("m1")
        first, _, _, _ = self.subscribe("m1", sessionKey)
        second, server, _, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        self.assertTrue(first.lost.called)
        self.assertIs(self.master.subscribers["m1"], server)


class SessionSubscriptionTests(MasterTestCase):
    """
    Tests for subscriptions on a minion's req session (C{_subscribe}, the
    minion's C{single_connection}, L{Master.sessionSubscribe}).
    """

    def sessionSubscribe(
        self, minionId: str = "m1"
    ) -> tuple[ReqClientProtocol, ReqServerProtocol, bytes, list[dict[str, Any]]]:
        """
        Authenticate C{minionId} and subscribe on its session.

        @return: the client, the master's protocol, the session key and
            the list the client's publications are appended to.
        """
        client, server, sessionKey = self.authMinion(minionId)
        received: list[dict[str, Any]] = []
        reply = self.successResultOf(self.request(client, {"cmd": "_subscribe", "acks": True}))
        client.onPublication = received.append
        token = crypt.deriveKey(sessionKey, wire.PUB_TOKEN_CONTEXT)
        self.assertEqual(reply["ret"], "subscribed")
        self.assertTrue(
            crypt.hmacEqual(
                reply["mac"],
                crypt.hmacSha256(
                    token, wire.pubSubscribedMessage(server.challenge, minionId, reply["now"])
                ),
            )
        )
        return client, server, sessionKey, received

    def sendReturn(self, client: ReqClientProtocol) -> Deferred:
        """
        Send C{m1}'s return of a job L{JID} targeting it.
        """
        self.master.jobs.add(JID, {"jid": JID, "fun": "test.ping"}, ["m1"])
        d = client.request(
            {"cmd": "_return", "id": "m1", "jid": JID, "fun": "test.ping", "return": True}
        )
        self.net.flush()
        return d

    def test_publicationsOnTheSession(self) -> None:
        """
        The session becomes the minion's subscriber: publications come on
        its connection, MACed with a key from the session's pub token and
        the req connection's challenge, and C{salt/minion/<id>/start} is
        fired.
        """
        _, server, sessionKey, received = self.sessionSubscribe()
        self.assertIs(self.master.subscribers["m1"], server)
        self.assertEqual(
            [tag for tag, _ in self.eventsTagged("salt/minion/")], ["salt/minion/m1/start"]
        )
        self.successResultOf(self.master.publish({"jid": "1" * 20, "fun": "test.ping", "tgt": "*"}))
        self.net.flush()
        [frame] = received
        assertPublicationMac(
            self, frame, expectedPublicationMac(sessionKey, server.challenge, "m1")
        )

    def test_acknowledgementsInPublications(self) -> None:
        """
        The acknowledgement of a return sent on the session comes in the
        next publication on that same connection.
        """
        client, server, sessionKey, received = self.sessionSubscribe()
        returned = self.sendReturn(client)
        self.assertNoResult(returned)
        self.successResultOf(self.master.publish({"jid": "2" * 20, "fun": "test.ping", "tgt": "*"}))
        self.net.flush()
        self.assertEqual(received[-1]["ack"], [2])
        client.acknowledged(received[-1]["ack"])
        self.assertEqual(self.successResultOf(returned)["ret"], True)

    def test_unsubscribe(self) -> None:
        """
        C{_unsubscribe} ends the subscription, and the replies held for the
        next publication are sent at once; the session stays.
        """
        client, server, _, received = self.sessionSubscribe()
        returned = self.sendReturn(client)
        self.assertNoResult(returned)
        unsubscribed = client.request({"cmd": "_unsubscribe"})
        self.net.flush()
        self.assertEqual(self.successResultOf(returned)["ret"], True)
        self.assertEqual(self.successResultOf(unsubscribed)["ret"], True)
        self.assertEqual(self.master.subscribers, {})
        self.assertIs(self.master.sessions["m1"], server)

    def test_onlyTheCurrentSession(self) -> None:
        """
        A session that is not the minion's current one (replaced by a
        newer authentication) cannot subscribe; a transient session or a
        client session cannot call C{_subscribe} at all.
        """
        self.assertRaises(
            ValueError, self.master.sessionSubscribe, ReqServerProtocol(self.master), {}
        )
        client, _ = self.authClient()
        self.assertIn("_subscribe", self.requestError(client, {"cmd": "_subscribe"}))
        self.assertEqual(self.master.subscribers, {})

    def test_sessionEndEndsSubscription(self) -> None:
        """
        When the session's connection closes, its subscription ends with it.
        """
        client, _, _, _ = self.sessionSubscribe()
        client.transport.loseConnection()
        self.net.flush()
        self.assertEqual(self.master.subscribers, {})
        self.assertEqual(self.master.sessions, {})

    def test_pubSubscriptionReplacesButKeepsSession(self) -> None:
        """
        A pub-connection subscription made with the same session replaces
        the session subscription without closing the session; a session
        subscription closes a pub connection it replaces.
        """
        client, server, sessionKey, _ = self.sessionSubscribe()
        pub, pubServer, _, answer = self.subscribe("m1", sessionKey)
        self.assertEqual(answer, "subscribed")
        self.assertIs(self.master.subscribers["m1"], pubServer)
        self.assertFalse(client.lost.called)
        self.successResultOf(self.request(client, {"cmd": "_subscribe"}))
        self.assertIs(self.master.subscribers["m1"], server)
        self.assertTrue(pub.lost.called)
        self.assertFalse(client.lost.called)


class JobRegistryTests(SynchronousTestCase):
    """
    Tests for L{JobRegistry}.
    """

    def test_forgetsOldest(self) -> None:
        """
        Beyond C{maxJobs}, the oldest jobs are forgotten first, and a return
        for a forgotten job is refused as unknown.
        """
        jobs = JobRegistry(maxJobs=3)
        jids = [f"2026010100000000000{i}" for i in range(5)]
        for jid in jids:
            jobs.add(jid, {"jid": jid}, ["m1"])
        self.assertIsNone(jobs.get(jids[0]))
        self.assertIsNone(jobs.get(jids[1]))
        for jid in jids[2:]:
            self.assertEqual(jobs.get(jid).jid, jid)
        self.assertIn("unknown job", jobs.checkReturn(jids[0], "m1"))
        self.assertIsNone(jobs.checkReturn(jids[4], "m1"))
