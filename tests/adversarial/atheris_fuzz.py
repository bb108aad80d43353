# -*- test-case-name: tests.adversarial.test_atheris -*-
"""
Coverage-guided fuzzing (atheris, libFuzzer) of the parsers an attacker
reaches first: the frame decoder, msgpack with limits, the session
envelope, the target parser and the minion id check.

Run as a script; libFuzzer's own flags bound it, e.g.
C{python tests/adversarial/atheris_fuzz.py -runs=20000 -max_total_time=30}.
Each input is split by its first byte into one of the targets. A target
may fail only in its documented way; any other exception is a crash, which
libFuzzer reports with the input that caused it, and the process exits
non-zero. L{tests.adversarial.test_atheris} runs it, bounded, in the suite.
"""

from __future__ import annotations

import sys
from typing import Any

import atheris

# Imported before instrumenting, so only salttwist's own modules are
# instrumented (instrumenting Twisted and cryptography takes a minute).
import cryptography.hazmat.primitives.ciphers.aead  # noqa: F401
import msgpack  # noqa: F401
import twisted.internet.protocol  # noqa: F401
import twisted.logger  # noqa: F401
from twisted.internet.testing import StringTransport

with atheris.instrument_imports(include=["salttwist"]):
    from salttwist import serial
    from salttwist.pki.ids import InvalidMinionId, validateMinionId
    from salttwist.targeting import TARGET_TYPES, TargetError, compileTarget, matchMinion
    from salttwist.transport.framing import FrameProtocol
    from salttwist.transport.session import SessionCipher, SessionError

_KEY = b"k" * 32
_GRAINS = {"os": "Debian", "roles": ["web", "db"], "num": 3, "nested": {"a": {"b": "c"}}}
_NODEGROUPS = {"web": "web*", "mixed": "L@a,b or G@os:Debian"}


class _Frames(FrameProtocol):
    """
    A frame decoder that keeps what it decodes.
    """

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def frameReceived(self, message: dict[str, Any]) -> None:
        self.frames.append(message)


def _frames(data: bytes) -> None:
    # The stream is cut in three reads at offsets taken from its first bytes.
    proto = _Frames()
    proto.makeConnection(StringTransport())
    if len(data) < 2:
        proto.dataReceived(data)
        return
    first, second = sorted((data[0] % len(data), data[1] % len(data)))
    body = data[2:]
    for chunk in (body[:first], body[first:second], body[second:]):
        proto.dataReceived(chunk)
    for frame in proto.frames:
        assert isinstance(frame, dict)


def _serial(data: bytes) -> None:
    try:
        serial.loads(data)
    except serial.SerialError:
        pass


def _session(data: bytes) -> None:
    cipher = SessionCipher(_KEY, isServer=True)
    try:
        frame = serial.loads(data)
    except serial.SerialError:
        frame = {"box": data, "n": 0}
    if not isinstance(frame, dict):
        frame = {"box": data}
    try:
        cipher.open(frame)
    except SessionError:
        pass


def _target(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    tgtType = TARGET_TYPES[provider.ConsumeIntInRange(0, len(TARGET_TYPES) - 1)]
    tgt = provider.ConsumeUnicodeNoSurrogates(200)
    try:
        compileTarget(tgt, tgtType, _NODEGROUPS)
    except TargetError:
        return
    result = matchMinion("web1", tgt, tgtType, grains=_GRAINS, nodegroups=_NODEGROUPS)
    assert isinstance(result, bool)


def _minionId(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(300)
    try:
        validated = validateMinionId(text)
    except InvalidMinionId:
        return
    assert "/" not in validated and "\0" not in validated and validated not in (".", "..")


TARGETS = (_frames, _serial, _session, _target, _minionId)


def testOneInput(data: bytes) -> None:
    """
    One fuzzing input: its first byte picks the target, the rest is fed to it.
    """
    if not data:
        return
    TARGETS[data[0] % len(TARGETS)](data[1:])


def main() -> None:
    """
    Fuzz with libFuzzer's flags from the command line.
    """
    atheris.Setup(sys.argv, testOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
