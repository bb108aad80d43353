# -*- test-case-name: tests.test_master_memory -*-
"""
How many bytes a connection's transport holds that its peer has not read
yet: what a stalled peer makes the master keep in memory.

Twisted's socket transports buffer every write the kernel does not take at
once, without bound; a protocol that writes to a peer that never reads (a
minion that subscribed and stopped reading, a client that sends requests
and reads no reply) grows the master by every byte it writes. Twisted has
no public figure for that buffer (a streaming producer is told only that it
passed C{bufferSize}, and a connection may have one producer, which
L{salttwist.transport.framing.writeNow} already is), so L{writeBacklog}
reads the transport's own counters: constant time, no copy, cheap enough
for every frame.
"""

from __future__ import annotations

from typing import Any


def writeBacklog(transport: Any) -> int:
    """
    @return: the bytes C{transport} holds, written and not yet handed to the
        kernel: for Twisted's socket transports (TCP, UNIX) their write
        buffer; for TLS (L{twisted.protocols.tls.TLSMemoryBIOProtocol}) the
        cleartext it waits to encrypt plus its socket's; for an in-memory
        L{twisted.internet.testing.StringTransport} all it was written and
        not cleared (a peer that never reads). Anything else reports 0: it
        is not bounded here.
    """
    try:
        # twisted.internet.abstract.FileDescriptor (TCP, UNIX): the buffer
        # being sent from offset, and the writes gathered since
        # (_tempDataLen). Plain attribute reads: this runs for every
        # publication to every subscriber. TLS's wrapper hands attributes it
        # lacks to the socket's transport: its ciphertext is counted here.
        return len(transport.dataBuffer) - transport.offset + transport._tempDataLen
    except AttributeError:
        return _otherBacklog(transport)


def _otherBacklog(transport: Any) -> int:
    """
    L{writeBacklog} of a transport that is not a socket's.
    """
    appSendBuffer = getattr(transport, "_appSendBuffer", None)
    if appSendBuffer is not None:
        # A few cleartext chunks at most (before the handshake, or while
        # OpenSSL wants to read); the ciphertext is in the socket's buffer.
        return sum(map(len, appSendBuffer)) + writeBacklog(getattr(transport, "transport", None))
    io = getattr(transport, "io", None)
    if io is not None and hasattr(io, "tell"):
        # StringTransport writes at the end of its BytesIO (clear() rewinds).
        return int(io.tell())
    return 0
