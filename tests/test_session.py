# -*- test-case-name: tests.test_session -*-
"""
Tests for L{salttwist.transport.session}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, serial
from salttwist.crypt import AesCipher
from salttwist.transport.frames import HEADER
from salttwist.transport.session import BIG_BLOB, SessionCipher, SessionError, sessionBlob


class SessionCipherTests(SynchronousTestCase):
    """
    A server and a client L{SessionCipher} on one key talk to each other and
    refuse frames that are not the next one from the other side.
    """

    def setUp(self) -> None:
        """
        Make a server and a client cipher sharing a fresh key.
        """
        self.key = crypt.newAesKey()
        self.server = SessionCipher(self.key, isServer=True)
        self.client = SessionCipher(self.key, isServer=False)

    def test_roundTripBothWays(self) -> None:
        """
        Payloads sealed by either side open on the other, in sequence.
        """
        for n in range(3):
            frame = self.client.seal({"cmd": "req", "n": n})
            self.assertEqual(self.server.open(frame), {"cmd": "req", "n": n})
            reply = self.server.seal({"ret": n, "data": b"\x00"})
            self.assertEqual(self.client.open(reply), {"ret": n, "data": b"\x00"})

    def test_frameShape(self) -> None:
        """
        A sealed frame is a map with only C{enc}, holding bytes that do not
        contain the payload in clear.
        """
        frame = self.client.seal({"cmd": "secret-command"})
        self.assertEqual(list(frame), ["enc"])
        self.assertIsInstance(frame["enc"], bytes)
        self.assertNotIn(b"secret-command", frame["enc"])

    def test_replay(self) -> None:
        """
        A frame opened once does not open a second time.
        """
        frame = self.client.seal({"n": 0})
        self.server.open(frame)
        self.assertRaises(SessionError, self.server.open, frame)

    def test_reorder(self) -> None:
        """
        The second frame does not open before the first.
        """
        self.client.seal({"n": 0})
        second = self.client.seal({"n": 1})
        self.assertRaises(SessionError, self.server.open, second)

    def test_dropped(self) -> None:
        """
        If a frame is dropped, the next one does not open either.
        """
        self.client.seal({"n": 0})
        self.assertRaises(SessionError, self.server.open, self.client.seal({"n": 1}))

    def test_refusalKeepsPosition(self) -> None:
        """
        A refused frame does not advance the receive counter: the frame
        expected next still opens.
        """
        first = self.client.seal({"n": 0})
        second = self.client.seal({"n": 1})
        self.assertRaises(SessionError, self.server.open, second)
        self.assertEqual(self.server.open(first), {"n": 0})
        self.assertEqual(self.server.open(second), {"n": 1})

    def test_reflection(self) -> None:
        """
        A frame cannot be reflected back to its sender: a client's frame does
        not open on another client, nor a server's on a server.
        """
        clientFrame = self.client.seal({"n": 0})
        self.assertRaises(SessionError, SessionCipher(self.key, isServer=False).open, clientFrame)
        serverFrame = self.server.seal({"n": 0})
        self.assertRaises(SessionError, SessionCipher(self.key, isServer=True).open, serverFrame)

    def test_otherKey(self) -> None:
        """
        A frame sealed under another session's key does not open.
        """
        other = SessionCipher(crypt.newAesKey(), isServer=False)
        self.assertRaises(SessionError, self.server.open, other.seal({"n": 0}))

    def test_tampered(self) -> None:
        """
        A frame with one bit flipped does not open.
        """
        frame = self.client.seal({"n": 0})
        blob = bytearray(frame["enc"])
        blob[-1] ^= 0x01
        self.assertRaises(SessionError, self.server.open, {"enc": bytes(blob)})

    def test_extraKeys(self) -> None:
        """
        A frame with keys besides C{enc} is refused, even if C{enc} is valid.
        """
        frame = dict(self.client.seal({"n": 0}), cmd="sneaky")
        self.assertRaises(SessionError, self.server.open, frame)

    def test_noEnc(self) -> None:
        """
        A frame without C{enc}, or whose C{enc} is not bytes, is refused.
        """
        self.assertRaises(SessionError, self.server.open, {})
        self.assertRaises(SessionError, self.server.open, {"cmd": "publish"})
        self.assertRaises(SessionError, self.server.open, {"enc": "text"})
        self.assertRaises(SessionError, self.server.open, {"enc": None})

    def test_shortBlob(self) -> None:
        """
        A blob too short to hold a nonce and a tag is refused.
        """
        self.assertRaises(SessionError, self.server.open, {"enc": b"short"})

    def _sealRaw(self, plaintext: bytes) -> dict[str, bytes]:
        """
        @return: a client-to-server frame for sequence 0 carrying
            C{plaintext} as the payload bytes.
        """
        aad = b"salttwist-req:c2s:" + (0).to_bytes(8, "big")
        return {"enc": AesCipher(self.key).encrypt(plaintext, aad)}

    def test_payloadNotMap(self) -> None:
        """
        A correctly sealed payload that is not a map is refused.
        """
        self.assertRaises(SessionError, self.server.open, self._sealRaw(serial.dumps([1, 2])))

    def test_payloadMalformed(self) -> None:
        """
        A correctly sealed payload that is not valid msgpack is refused.
        """
        self.assertRaises(SessionError, self.server.open, self._sealRaw(b"\xc1"))

    def test_payloadTooDeep(self) -> None:
        """
        A payload nested deeper than the cipher's C{maxDepth} is refused.
        """
        server = SessionCipher(self.key, isServer=True, maxDepth=2)
        frame = self._sealRaw(serial.dumps({"a": {"b": {"c": 1}}}))
        self.assertRaises(SessionError, server.open, frame)


class SessionFrameBytesTests(SynchronousTestCase):
    """
    L{SessionCipher.sealFrame} and L{sessionBlob} work on a session frame's
    encoded bytes, exactly as msgpack encodes and decodes its map.
    """

    #: Payload sizes whose blobs take msgpack's bin 8, bin 16 and bin 32.
    SIZES = (0, 200, 300, 70000)

    def setUp(self) -> None:
        """
        Make a server and a client cipher sharing a fresh key.
        """
        key = crypt.newAesKey()
        self.server = SessionCipher(key, isServer=True)
        self.client = SessionCipher(key, isServer=False)

    def test_sealFrameIsTheEncodedFrame(self) -> None:
        """
        L{SessionCipher.sealFrame} gives a length header and the msgpack of
        C{{"enc": blob}}, byte for byte as L{serial.dumps} encodes that map,
        and the blob opens to the payload, in sequence with L{seal}.
        """
        for size in self.SIZES:
            payload = {"data": b"x" * size}
            data = self.client.sealFrame(payload)
            (length,) = HEADER.unpack_from(data)
            self.assertEqual(length, len(data) - 4)
            frame = serial.loads(data[4:])
            self.assertEqual(list(frame), ["enc"])
            self.assertEqual(serial.dumps(frame), data[4:])
            self.assertEqual(self.server.open(frame), payload)
            self.assertEqual(self.server.open(self.client.seal({"n": size})), {"n": size})

    def test_sessionBlobOfEncodedFrames(self) -> None:
        """
        L{sessionBlob} of a sealed frame's msgpack is its blob, for every
        size of blob.
        """
        for size in self.SIZES:
            frame = self.client.seal({"data": b"x" * size})
            self.assertEqual(sessionBlob(serial.dumps(frame)), frame["enc"])

    def test_sessionBlobOfAnythingElse(self) -> None:
        """
        L{sessionBlob} is L{None} for bytes that are not exactly a one-entry
        map of C{enc} to bytes in msgpack's usual encoding: bytes after the
        map, a cut-off blob, other keys, a string instead of bytes, a key
        encoded as str 8, and too few bytes to tell. Those frames are decoded
        as any other.
        """
        encoded = serial.dumps(self.client.seal({"n": 1}))
        blob = serial.loads(encoded)["enc"]
        others = [
            encoded + b"\x00",
            encoded[:-1],
            serial.dumps({"enc": blob, "cmd": "x"}),
            serial.dumps({"enc": "text"}),
            serial.dumps({"end": blob}),
            b"\x81\xd9\x03enc\xc4" + bytes([len(blob)]) + blob,
            b"\x81\xa3enc\xc4",
            b"",
        ]
        for data in others:
            self.assertIsNone(sessionBlob(data), data[:12])

    def test_partsLeaveTheCiphertextAlone(self) -> None:
        """
        L{SessionCipher.sealFrameParts} puts the blob's nonce with the
        headers, so the second part is the ciphertext and tag exactly as
        AES-GCM made them; joined, they are one frame that opens.
        """
        payload = {"data": b"x" * 300000}
        head, sealed = self.client.sealFrameParts(payload)
        self.assertEqual(len(sealed), len(serial.dumps(payload)) + 16)
        self.assertEqual(len(head), 4 + 10 + 12)
        frame = serial.loads((head + sealed)[4:])
        self.assertEqual(self.server.open(frame), payload)

    def test_bigBlobIsAView(self) -> None:
        """
        The blob of a frame over L{BIG_BLOB} bytes is a view of the frame's
        bytes, not a copy, and opens as bytes would; a small one is bytes.
        """
        encoded = serial.dumps(self.client.seal({"data": b"x" * (BIG_BLOB + 1)}))
        blob = sessionBlob(encoded)
        self.assertIsInstance(blob, memoryview)
        self.assertIs(blob.obj, encoded)
        self.assertEqual(self.server.openBlob(blob), {"data": b"x" * (BIG_BLOB + 1)})
        small = sessionBlob(serial.dumps(self.client.seal({"n": 1})))
        self.assertIsInstance(small, bytes)
        self.assertEqual(self.server.openBlob(small), {"n": 1})

    def test_sessionBlobLongLengthForm(self) -> None:
        """
        A blob whose length is written in a longer form than needed (bin 16
        for a short blob) is still that blob, as msgpack decodes it.
        """
        blob = b"b" * 40
        data = b"\x81\xa3enc\xc5\x00\x28" + blob
        self.assertEqual(serial.loads(data), {"enc": blob})
        self.assertEqual(sessionBlob(data), blob)
