# -*- test-case-name: tests.test_frames -*-
"""
The frame format of every salttwist connection, without Twisted: a 4-byte
big-endian length and one msgpack map.

L{salttwist.transport.framing.FrameProtocol} speaks it on the reactor;
L{FrameReader} cuts frames out of a byte stream for blocking code (the
C{salttwist} command's direct client, L{salttwist.client.direct}), which
must not pay for importing Twisted.
"""

from __future__ import annotations

import struct
from typing import Any

from salttwist import serial

__all__ = ["HEADER", "PREAUTH_MAX_FRAME", "FrameError", "FrameReader", "encodeFrame"]

#: Frames accepted before a peer has authenticated: enough for an auth request
#: carrying an 8192-bit key, far too small to hurt.
PREAUTH_MAX_FRAME = 64 * 1024
#: The length header of a frame.
HEADER = struct.Struct("!I")


class FrameError(ValueError):
    """
    The peer broke the frame format: a frame over the limit, or one that
    is not a well-formed msgpack map.
    """


def encodeFrame(message: dict[str, Any]) -> bytes:
    """
    @return: C{message} as one frame, header included.
    @raise salttwist.serial.SerialError: if C{message} cannot be serialised.
    """
    body = serial.dumps(message)
    if len(body) >= 2**32:
        raise serial.SerialError(f"frame of {len(body)} bytes is over the 4-byte prefix")
    return HEADER.pack(len(body)) + body


class FrameReader:
    """
    Cuts the frames out of a byte stream, checking each length header
    against the limit before the body is buffered.

    @ivar maxFrame: the largest frame accepted; raise it once the peer
        has authenticated.
    """

    def __init__(self, maxFrame: int = PREAUTH_MAX_FRAME) -> None:
        self.maxFrame = maxFrame
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """
        Add C{data} to the stream.

        @return: the frames it completed, decoded, in order.
        @raise FrameError: if a frame is over the limit or malformed; the
            stream is unusable after that.
        """
        buffer = self._buffer
        buffer += data
        frames: list[dict[str, Any]] = []
        offset = 0
        while len(buffer) - offset >= 4:
            (length,) = HEADER.unpack_from(buffer, offset)
            if length > self.maxFrame:
                raise FrameError(f"frame of {length} bytes exceeds the limit of {self.maxFrame}")
            end = offset + 4 + length
            if len(buffer) < end:
                break
            try:
                message = serial.loads(bytes(buffer[offset + 4 : end]))
            except serial.SerialError as e:
                raise FrameError(f"malformed frame: {e}") from e
            if not isinstance(message, dict):
                raise FrameError(f"frame is a {type(message).__name__}, not a map")
            frames.append(message)
            offset = end
        if offset:
            del buffer[:offset]
        return frames
