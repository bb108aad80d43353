# -*- test-case-name: tests.test_reqclient -*-
"""
Tests for L{salttwist.transport.reqclient.ReqClientProtocol}, driven on a
L{StringTransport} with a server-side L{SessionCipher} playing the master.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from twisted.internet.error import ConnectionLost
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.transport.reqclient import ReqClientProtocol, RequestError
from salttwist.transport.session import SessionCipher

KEY = os.urandom(32)


def frame(message: dict[str, Any]) -> bytes:
    """
    @return: C{message} as one length-prefixed msgpack frame.
    """
    body = serial.dumps(message)
    return struct.pack("!I", len(body)) + body


def frames(data: bytes) -> list[dict[str, Any]]:
    """
    @return: the msgpack maps in C{data}.
    """
    out = []
    while data:
        (size,) = struct.unpack("!I", data[:4])
        out.append(serial.loads(data[4 : 4 + size]))
        data = data[4 + size :]
    return out


class ReqClientTests(SynchronousTestCase):
    """
    The client half of the req channel.
    """

    def setUp(self) -> None:
        """
        Connect a client to a string transport; the master greets it.
        """
        self.transport = StringTransport()
        self.proto = ReqClientProtocol(maxFrame=1 << 20)
        self.proto.makeConnection(self.transport)
        self.proto.dataReceived(frame({"cmd": "hello", "challenge": b"c" * 32}))

    def startSession(self) -> SessionCipher:
        """
        Open a session on both sides; return the master's cipher.
        """
        self.proto.startSession(KEY)
        return SessionCipher(KEY, isServer=True)

    def test_hello(self) -> None:
        """
        The master's greeting fires C{hello} with the challenge.
        """
        self.assertEqual(self.successResultOf(self.proto.hello), b"c" * 32)

    def test_clearRequest(self) -> None:
        """
        C{sendClear} sends one frame and fires with the next clear frame.
        """
        d = self.proto.sendClear({"cmd": "_auth"})
        self.assertEqual(frames(self.transport.value()), [{"cmd": "_auth"}])
        self.proto.dataReceived(frame({"ret": "pending"}))
        self.assertEqual(self.successResultOf(d), {"ret": "pending"})

    def test_requestsMatchReplies(self) -> None:
        """
        Session replies are matched to their requests by C{rid}, in any order.
        """
        server = self.startSession()
        first = self.proto.request({"cmd": "a"})
        second = self.proto.request({"cmd": "b"})
        sent = [server.open(f) for f in frames(self.transport.value())]
        self.assertEqual([p["cmd"] for p in sent], ["a", "b"])
        self.proto.dataReceived(frame(server.seal({"rid": sent[1]["rid"], "ok": 2})))
        self.proto.dataReceived(frame(server.seal({"rid": sent[0]["rid"], "ok": 1})))
        self.assertEqual(self.successResultOf(first)["ok"], 1)
        self.assertEqual(self.successResultOf(second)["ok"], 2)

    def test_errorReply(self) -> None:
        """
        A reply carrying C{error} fails the request with L{RequestError}.
        """
        server = self.startSession()
        d = self.proto.request({"cmd": "a"})
        [sent] = [server.open(f) for f in frames(self.transport.value())]
        self.proto.dataReceived(frame(server.seal({"rid": sent["rid"], "error": "no"})))
        self.assertEqual(str(self.failureResultOf(d, RequestError).value), "no")

    def test_sessionFrameNotDecodedTwice(self) -> None:
        """
        A sealed reply (a file chunk's, big) is opened straight from the
        frame's bytes: its outer map is not decoded first
        (L{frameReceived} never sees it); a reply that does not
        authenticate closes the connection.
        """
        server = self.startSession()
        d = self.proto.request({"cmd": "_serve_file"})
        [sent] = [server.open(f) for f in frames(self.transport.value())]
        self.patch(self.proto, "frameReceived", lambda message: self.fail("decoded"))
        chunk = os.urandom(300_000)
        self.proto.dataReceived(server.sealFrame({"rid": sent["rid"], "data": chunk}))
        self.assertEqual(self.successResultOf(d)["data"], chunk)
        self.proto.request({"cmd": "a"})
        sealed = bytearray(server.sealFrame({"rid": 99, "ok": 1}))
        sealed[-1] ^= 1
        self.proto.dataReceived(bytes(sealed))
        self.assertTrue(self.transport.disconnecting)

    def test_push(self) -> None:
        """
        A session payload without C{rid} goes to C{onPush}.
        """
        server = self.startSession()
        pushed: list[dict[str, Any]] = []
        self.proto.onPush = pushed.append
        self.proto.dataReceived(frame(server.seal({"cmd": "rotate"})))
        self.assertEqual(pushed, [{"cmd": "rotate"}])

    def test_publicationsOnceSubscribed(self) -> None:
        """
        Once the minion subscribed on its session (C{onPublication} set),
        the master's clear publication and rotation frames go to
        C{onPublication}, between sealed replies; before that, such a frame
        is a protocol violation that closes the connection.
        """
        self.assertEqual(self.proto.challenge, b"c" * 32)
        server = self.startSession()
        received: list[dict[str, Any]] = []
        self.proto.onPublication = received.append
        d = self.proto.request({"cmd": "_return"})
        [sent] = [server.open(f) for f in frames(self.transport.value())]
        publication = {"pub": b"blob", "kid": 1, "mac": b"m" * 32}
        self.proto.dataReceived(frame(publication) + frame({"rotate": b"r", "kid": 2}))
        self.proto.dataReceived(frame(server.seal({"rid": sent["rid"], "ret": True})))
        self.assertEqual(received, [publication, {"rotate": b"r", "kid": 2}])
        self.assertEqual(self.successResultOf(d)["ret"], True)
        self.assertFalse(self.transport.disconnecting)
        self.proto.onPublication = None
        self.proto.dataReceived(frame(publication))
        self.assertTrue(self.transport.disconnecting)

    def test_unknownRidCloses(self) -> None:
        """
        A reply to a request that was never made closes the connection.
        """
        server = self.startSession()
        self.proto.dataReceived(frame(server.seal({"rid": 99})))
        self.assertTrue(self.transport.disconnecting)

    def test_unserialisablePayload(self) -> None:
        """
        A payload that cannot be serialised raises at once and leaves no
        request waiting for an answer that will never come.
        """
        self.startSession()
        self.assertRaises(serial.SerialError, self.proto.request, {"cmd": "a", "x": object()})
        self.assertEqual(self.proto._waiting, {})
        self.assertEqual(self.transport.value(), b"")

    def test_lostFailsWaiters(self) -> None:
        """
        Losing the connection fails every waiting request with
        L{ConnectionLost} and fires C{lost}.
        """
        self.startSession()
        d = self.proto.request({"cmd": "a"})
        self.proto.connectionLost(None)
        self.failureResultOf(d, ConnectionLost)
        self.assertTrue(self.proto.lost.called)
