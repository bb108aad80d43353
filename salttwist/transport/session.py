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
from salttwist.symmetric import AesCipher, CryptError


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

    def open(self, frame: dict[str, Any]) -> dict[str, Any]:
        """
        @return: the payload of C{frame}.
        @raise SessionError: if it is not a sealed frame of this session in
            sequence, or its payload is not a map.
        """
        blob = frame.get("enc")
        if not isinstance(blob, bytes) or len(frame) != 1:
            raise SessionError("expected an encrypted session frame")
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
