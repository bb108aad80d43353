# -*- test-case-name: tests.adversarial -*-
"""
Shared keys and helpers for the adversarial tests: a master driven in
memory, attacker connections on L{StringTransport}, frames built by hand.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, serial, wire
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master.auth import NONCE_BYTES
from salttwist.master.core import ACK_DELAY, Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.master.reqserver import ReqServerFactory, ReqServerProtocol
from salttwist.pki.keystore import ACCEPTED, InMemoryKeyStore
from salttwist.transport.reqclient import ReqClientProtocol
from tests._loopback import Loopback

# Key generation is slow: these serve every adversarial test.
MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
MINION_KEYS = {"m1": crypt.generatePrivateKey(), "m2": crypt.generatePrivateKey()}
MINION_PEMS = {m: crypt.publicKeyToPem(k.public_key()) for m, k in MINION_KEYS.items()}
ATTACKER_KEY = crypt.generatePrivateKey()
ATTACKER_PEM = crypt.publicKeyToPem(ATTACKER_KEY.public_key())
ROOT_KEY = os.urandom(32)
JID = "20260101000000000001"


def frameBytes(message: Any) -> bytes:
    """
    Encode C{message} as one length-prefixed frame.
    """
    return rawFrame(serial.dumps(message))


def rawFrame(body: bytes) -> bytes:
    """
    Prefix C{body} (any bytes, well-formed or not) with its length.
    """
    return struct.pack("!I", len(body)) + body


def readFrames(data: bytes) -> list[dict[str, Any]]:
    """
    Split what a L{FrameProtocol} wrote into its decoded frames.
    """
    frames = []
    while data:
        (length,) = struct.unpack("!I", data[:4])
        frames.append(serial.loads(data[4 : 4 + length]))
        data = data[4 + length :]
    return frames


def authLoad(challenge: bytes, minionId: Any, key: Any, pem: bytes | None = None) -> dict[str, Any]:
    """
    An C{_auth} request for C{minionId}, signed with C{key} over
    C{challenge} as a minion signs it.
    """
    pem = crypt.publicKeyToPem(key.public_key()) if pem is None else pem
    nonce = os.urandom(NONCE_BYTES)
    message = wire.authRequestMessage(challenge, nonce, minionId, pem)
    return {
        "cmd": "_auth",
        "id": minionId,
        "pub": pem,
        "nonce": nonce,
        "sig": crypt.sign(key, message),
    }


class AttackedMaster(SynchronousTestCase):
    """
    A master (in-memory key store, blocking work run synchronously, events
    recorded) with C{m1} and C{m2} accepted, and helpers to attack it.
    """

    def setUp(self) -> None:
        """
        Make the master.
        """
        root = os.path.abspath(self.mktemp())
        self.config = loadMasterConfig(root, overrides={"root_dir": root})
        self.keyStore = InMemoryKeyStore()
        for minionId, pem in MINION_PEMS.items():
            self.keyStore.putKey(ACCEPTED, minionId, pem)
        self.bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        self.master = Master(
            self.config,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            self.keyStore,
            self.bus,
            runSynchronously,
            MemoryReactorClock(),
        )
        self.net = Loopback(self.master.clock)

    def rawReq(self) -> tuple[ReqServerProtocol, StringTransport]:
        """
        An attacker's req connection: the master's protocol on a
        L{StringTransport}, greeting already cleared.
        """
        proto = ReqServerFactory(self.master).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        transport.clear()
        return proto, transport

    def connectReq(self) -> tuple[ReqClientProtocol, ReqServerProtocol]:
        """
        A real req client connected in memory, greeting delivered.
        """
        server = ReqServerFactory(self.master).buildProtocol(None)
        client = ReqClientProtocol()
        self.net.connect(server, client)
        self.net.flush()
        return client, server

    def authMinion(self, minionId: str) -> ReqClientProtocol:
        """
        Authenticate C{minionId} with its real key and open its session.
        """
        client, server = self.connectReq()
        d = client.sendClear(authLoad(server.challenge, minionId, MINION_KEYS[minionId]))
        self.net.flush()
        reply = self.successResultOf(d)
        self.assertEqual(reply["ret"], "accepted")
        client.startSession(
            wire.unpackReplyKeys(crypt.rsaDecrypt(MINION_KEYS[minionId], reply["keys"]))[1]
        )
        return client

    def deliverAcknowledgements(self) -> None:
        """
        Deliver what is on its way, then let L{ACK_DELAY} pass and deliver
        the acknowledgements of returns the master held back.
        """
        self.net.flush()
        self.master.clock.advance(ACK_DELAY)
        self.net.flush()

    def eventsTagged(self, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        """
        @return: the events so far whose tag starts with C{prefix}.
        """
        return [(tag, data) for tag, data in self.events if tag.startswith(prefix)]
