# -*- test-case-name: tests.test_session -*-
"""
The encrypted session of the req channel.

After authentication every frame is C{{"enc": blob}}, where C{blob} is the
msgpack payload sealed with AES-256-GCM under the per-session key. The
associated data names the direction and a per-direction counter, so a frame
cannot be reflected back to its sender, replayed, dropped or reordered within
the session without the next frame failing to authenticate.
"""

from __future__ import annotations

from typing import Any

from salttwist import serial
from salttwist.symmetric import BIG_CIPHERTEXT, NONCE_BYTES, TAG_BYTES, AesCipher, CryptError
from salttwist.transport.frames import HEADER

#: How msgpack (L{salttwist.serial.dumps}) starts a session frame: a map of
#: one entry whose key is the 3-character string C{enc}.
_FRAME_START = b"\x81\xa3enc"
#: msgpack's bin 8, bin 16 and bin 32 markers, and the bytes of their lengths.
_BIN8, _BIN16, _BIN32 = 0xC4, 0xC5, 0xC6


def _binHeader(size: int) -> bytes:
    # msgpack's bin header for C{size} bytes, as msgpack.packb writes it.
    if size < 0x100:
        return bytes((_BIN8, size))
    if size < 0x10000:
        return bytes((_BIN16,)) + size.to_bytes(2, "big")
    return bytes((_BIN32,)) + size.to_bytes(4, "big")


#: A blob larger than this is sliced as a view rather than copied
#: (L{sessionBlob}, L{salttwist.symmetric.AesCipher.decrypt}).
BIG_BLOB = BIG_CIPHERTEXT


def sessionBlob(data: bytes) -> bytes | memoryview | None:
    """
    The sealed blob of an encoded session frame, read without decoding the
    frame: C{data} must be exactly the msgpack C{{"enc": <bin>}} that
    L{SessionCipher.seal}'s frame serialises to, with nothing after it.

    @return: the blob (a view of C{data} when it is over L{BIG_BLOB}
        bytes), or L{None} for anything else (which the caller then
        decodes as any other frame, to accept or refuse it as before).
    """
    if len(data) < 7 or not data.startswith(_FRAME_START):
        return None
    marker = data[5]
    if marker == _BIN8:
        start = 7
        size = data[6]
    elif marker == _BIN16:
        start = 8
        size = int.from_bytes(data[6:8], "big")
    elif marker == _BIN32:
        start = 10
        size = int.from_bytes(data[6:10], "big")
    else:
        return None
    if start + size != len(data):
        return None
    if size > BIG_BLOB:
        # A view, not a copy: the blob is only decrypted.
        return memoryview(data)[start:]
    return data[start:]


class SessionError(ValueError):
    """
    Raised when a session frame does not open.
    """


class SessionCipher:
    """
    Seals and opens the frames of one req-channel session.
    """

    def __init__(self, key: bytes, isServer: bool, maxDepth: int = 64) -> None:
        self._cipher = AesCipher(key)
        self._sendLabel = b"salttwist-req:s2c:" if isServer else b"salttwist-req:c2s:"
        self._recvLabel = b"salttwist-req:c2s:" if isServer else b"salttwist-req:s2c:"
        self._sendSeq = 0
        self._recvSeq = 0
        self._maxDepth = maxDepth

    @property
    def key(self) -> bytes:
        """
        The session key (the pub-channel token and the key wrapping rotated
        publication keys are derived from it).
        """
        return self._cipher.key

    def seal(self, payload: dict[str, Any]) -> dict[str, bytes]:
        """
        @return: the frame carrying C{payload}.
        """
        aad = self._sendLabel + self._sendSeq.to_bytes(8, "big")
        self._sendSeq += 1
        return {"enc": self._cipher.encrypt(serial.dumps(payload), aad)}

    def sealFrame(self, payload: dict[str, Any]) -> bytes:
        """
        L{seal} C{payload} and encode its frame, length header included: the
        bytes L{salttwist.transport.frames.encodeFrame} makes of
        C{self.seal(payload)}, without serialising the frame's map.
        """
        head, blob = self.sealFrameParts(payload)
        return head + blob

    def sealFrameParts(self, payload: dict[str, Any]) -> tuple[bytes, bytes]:
        """
        L{sealFrame} in two parts: the length header, the map header and the
        blob's nonce, then the rest of the blob (the ciphertext and its
        tag): a big payload's frame can be sent without copying its
        ciphertext to join them.
        """
        plaintext = serial.dumps(payload)
        blobSize = NONCE_BYTES + len(plaintext) + TAG_BYTES
        start = _FRAME_START + _binHeader(blobSize)
        size = len(start) + blobSize
        if size >= 2**32:
            # Refused before it takes a place in the sequence.
            raise serial.SerialError(f"frame of {size} bytes is over the 4-byte prefix")
        aad = self._sendLabel + self._sendSeq.to_bytes(8, "big")
        nonce, sealed = self._cipher.encryptParts(plaintext, aad)
        self._sendSeq += 1
        # The blob is nonce + sealed; the nonce goes with the headers, so
        # a big payload's ciphertext is never copied to join them.
        return HEADER.pack(size) + start + nonce, sealed

    def open(self, frame: dict[str, Any]) -> dict[str, Any]:
        """
        @return: the payload of C{frame}.
        @raise SessionError: if it is not a sealed frame of this session in
            sequence, or its payload is not a map.
        """
        blob = frame.get("enc")
        if not isinstance(blob, bytes) or len(frame) != 1:
            raise SessionError("expected an encrypted session frame")
        return self.openBlob(blob)

    def openBlob(self, blob: bytes | memoryview) -> dict[str, Any]:
        """
        @return: the payload of the session frame C{{"enc": blob}} (see
            L{open} and L{sessionBlob}).
        @raise SessionError: as L{open}.
        """
        aad = self._recvLabel + self._recvSeq.to_bytes(8, "big")
        try:
            data = self._cipher.decrypt(blob, aad)
        except CryptError as e:
            raise SessionError(f"session frame rejected: {e}") from e
        self._recvSeq += 1
        try:
            payload = serial.loads(data, self._maxDepth)
        except serial.SerialError as e:
            raise SessionError(f"session payload: {e}") from e
        if not isinstance(payload, dict):
            raise SessionError("session payload is not a map")
        return payload
