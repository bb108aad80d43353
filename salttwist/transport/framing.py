# -*- test-case-name: tests.test_framing -*-
"""
Length-prefixed msgpack frames: a 4-byte big-endian length and one msgpack map.

The size limit is checked on the length header, before any of the body is
buffered (L{IntNStringReceiver.dataReceived} calls L{lengthLimitExceeded} as
soon as the header is read). A malformed or oversized frame closes that one
connection with a log line; nothing else is affected.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IPullProducer
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.protocols.basic import Int32StringReceiver, StringTooLongError
from zope.interface import implementer

from salttwist import serial
from salttwist.transport.frames import HEADER as _HEADER
from salttwist.transport.frames import PREAUTH_MAX_FRAME as PREAUTH_MAX_FRAME

#: Frames up to this size are sent with their header in one piece.
_JOIN_LIMIT = 256 * 1024
#: Seconds a peer has to authenticate (or subscribe) before the master closes
#: its connection: a slow sender or half-open connection holds nothing long.
PREAUTH_DEADLINE = 60.0


@functools.cache
def _directTransportTypes() -> tuple[type, ...]:
    # Imported when first needed: a command that never opens a socket
    # does not pay for these modules.
    from twisted.internet import tcp, unix

    return (tcp.Server, tcp.Client, unix.Server, unix.Client)


@implementer(IPullProducer)
class _DirectWriter:
    """
    Knows, through Twisted's public producer API, whether a socket
    transport's own buffer is empty, so that L{writeNow} may send at once.

    Registered as the transport's (pull) producer, it is told with
    C{resumeProducing} each time the transport has sent everything it
    buffered; L{writeNow} marks it busy whenever it hands the transport
    bytes to buffer. Every write of a connection that uses L{writeNow} goes
    through it (the frame protocols' do): bytes handed to C{transport.write}
    directly after it is attached are not seen.

    @ivar idle: whether the transport's buffer is empty.
    @ivar send: the socket's C{send}.
    """

    __slots__ = ("idle", "send", "sendmsg", "_transport")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self.send = transport.getHandle().send
        self.sendmsg = transport.getHandle().sendmsg
        self.idle = False

    def resumeProducing(self) -> None:
        """
        The transport sent all it had buffered. If it was asked to close
        meanwhile, let it: a registered producer holds the close back
        until it is unregistered.
        """
        self.idle = True
        if self._transport.disconnecting:
            self._transport.unregisterProducer()

    def stopProducing(self) -> None:
        """
        The connection is gone.
        """
        self.idle = False


def _attachWriter(transport: Any) -> _DirectWriter | None:
    """
    Register a L{_DirectWriter} on C{transport}, once per connection.

    @return: it, or L{None} if another producer is registered (then every
        write goes through C{transport.write}).
    """
    if transport.producer is not None:
        return None
    writer = _DirectWriter(transport)
    transport.registerProducer(writer, False)
    # Bytes written before it was attached may still be buffered: then the
    # transport waits to write (IReactorFDSet.getWriters; once per
    # connection), and the writer is told when they have gone.
    writer.idle = transport not in transport.reactor.getWriters()
    return writer


def noDelay(transport: Any) -> None:
    """
    Set C{TCP_NODELAY} on C{transport} if it is a TCP connection (a TLS
    one passes it to its TCP transport; others have nothing to set).

    Every frame is a whole message sent at once (L{writeNow}), and each
    side waits for the other's answer: with Nagle's algorithm a small
    frame sent while the previous one is not yet acknowledged (a job's
    return, then the next job's first file-server request) waits for the
    peer's delayed acknowledgement, about 40 ms on Linux, before it
    leaves.
    """
    setTcpNoDelay = getattr(transport, "setTcpNoDelay", None)
    if setTcpNoDelay is None:
        return
    try:
        setTcpNoDelay(True)
    except OSError:
        # A connection already gone: its next write finds that out.
        pass


def writeNow(transport: Any, data: bytes) -> None:
    """
    Write C{data} to C{transport}, sending it at once when that is safe.

    Twisted's socket transports buffer every write and send it when the
    reactor next finds the socket writable: two C{epoll_ctl} calls and a
    C{doWrite} for each small frame. A TCP or UNIX socket transport with
    nothing buffered (as its L{_DirectWriter} knows) gets C{data} with one
    C{send} here; what the socket does not take, and any other transport
    (TLS, in-memory), goes through C{transport.write} as before, so the
    order of the bytes never changes. An error is left for the transport
    to find and report on its next write. (salttwist sends no file
    descriptors over UNIX sockets, which would queue beside the buffer.)
    """
    if (
        type(transport) in _directTransportTypes()
        and transport.connected
        and not transport.disconnecting
    ):
        writer = transport.producer
        if writer.__class__ is not _DirectWriter:
            writer = _attachWriter(transport)
        if writer is not None:
            if writer.idle:
                try:
                    sent = writer.send(data)
                except OSError:
                    sent = 0
                if sent == len(data):
                    return
                data = data[sent:]
            writer.idle = False
    transport.write(data)


def writeNowParts(transport: Any, head: bytes, body: bytes) -> None:
    """
    L{writeNow} of C{head + body} without joining them: an idle socket
    transport gets both with one C{sendmsg} (one system call, one TCP
    segment train: with C{TCP_NODELAY} a separate small C{send} of the
    head would leave as a packet of its own); what the socket does not
    take goes through C{transport.write}, in order.
    """
    if (
        type(transport) in _directTransportTypes()
        and transport.connected
        and not transport.disconnecting
    ):
        writer = transport.producer
        if writer.__class__ is not _DirectWriter:
            writer = _attachWriter(transport)
        if writer is not None:
            if writer.idle:
                try:
                    sent = writer.sendmsg([head, body])
                except OSError:
                    sent = 0
                if sent == len(head) + len(body):
                    return
                if sent >= len(head):
                    head, body = b"", body[sent - len(head) :]
                else:
                    head = head[sent:]
            writer.idle = False
    if head:
        transport.write(head)
    transport.write(body)


def _bufferedWrite(transport: Any, data: bytes) -> None:
    transport.write(data)


class FrameProtocol(Int32StringReceiver):
    """
    A protocol exchanging msgpack maps in length-prefixed frames.

    Subclasses implement L{frameReceived}; they raise the size limit with
    L{setMaxFrame} once the peer is authenticated.

    @ivar peerName: a printable name of the peer for log lines.
    """

    log = Logger()
    MAX_LENGTH = PREAUTH_MAX_FRAME
    peerName = "?"
    #: Send each frame at once when the socket is idle (L{writeNow}): right
    #: for a connection that gets a frame now and then (a minion's reply, a
    #: publication). A connection that gets bursts of frames (an event
    #: subscriber) sets it false: Twisted's buffer then sends a burst with
    #: one system call.
    directWrites = True

    def __new__(cls, *args: Any, **kwargs: Any) -> FrameProtocol:
        # Every instance gets its own buffer, whatever its __init__ does.
        instance = super().__new__(cls)
        instance._buffer = bytearray()
        return instance

    def connectionMade(self) -> None:
        """
        Record the peer's address for log lines, and turn Nagle's
        algorithm off on a TCP connection (L{noDelay}).
        """
        noDelay(self.transport)
        peer = self.transport.getPeer()
        host = getattr(peer, "host", None)
        self.peerName = f"{host}:{getattr(peer, 'port', '?')}" if host is not None else "local"

    @property
    def _unprocessed(self) -> bytes:  # type: ignore[override]
        """
        The bytes received but not yet handed on (as Twisted's receiver
        names them).
        """
        return bytes(self._buffer)

    def dataReceived(self, data: bytes) -> None:
        """
        Cut the stream into frames. Twisted's L{IntNStringReceiver} joins
        its whole buffer to each new read, which is quadratic for a large
        frame (a 50 MB return arrives in thousands of reads); here the
        bytes are appended to one C{bytearray} and only the length header
        is looked at until the frame is complete. The limit is checked on
        the header, before the body is buffered.

        A read that is exactly one whole frame with nothing buffered (a
        minion's return, most reads of a busy master) is handed on without
        going through the buffer: the same checks, one copy fewer.
        """
        buffer = self._buffer
        if (
            not buffer
            and len(data) >= 4
            and not self.paused
            and not getattr(self.transport, "disconnecting", False)
        ):
            (length,) = _HEADER.unpack_from(data)
            if length + 4 == len(data) and length <= self.MAX_LENGTH:
                self.stringReceived(data[4:])
                return
        buffer += data
        offset = 0
        # Nothing behind a violation (or a close) is looked at, not even a
        # length header: one bad connection makes one log line.
        while (
            len(buffer) - offset >= 4
            and not self.paused
            and not getattr(self.transport, "disconnecting", False)
        ):
            (length,) = _HEADER.unpack_from(buffer, offset)
            if length > self.MAX_LENGTH:
                del buffer[:offset]
                self.lengthLimitExceeded(length)
                return
            end = offset + 4 + length
            if len(buffer) < end:
                if length > _JOIN_LIMIT:
                    self._readBigFrame(end - len(buffer))
                break
            if length > _JOIN_LIMIT:
                # One copy of a big frame's bytes, not two (a bytearray
                # slice, then bytes of it).
                with memoryview(buffer) as view:
                    packet = bytes(view[offset + 4 : end])
            else:
                packet = bytes(buffer[offset + 4 : end])
            offset = end
            if offset == len(buffer):
                # All handed on: the buffer is not kept while the frame is
                # handled (for a 50 MB return, 50 MB less at the peak).
                buffer.clear()
                offset = 0
            self.stringReceived(packet)
        if offset:
            del buffer[:offset]
        if not buffer and self._bigReads:
            self._readBigFrame(0)

    #: Whether the transport reads more than Twisted's 64 KiB at a time
    #: now (L{_readBigFrame}).
    _bigReads = False

    def _readBigFrame(self, missing: int) -> None:
        """
        While a big frame (a file's chunk, a large return) is arriving, let
        the socket transport read up to L{BIG_READ} bytes a call instead of
        Twisted's 64 KiB: 16 times fewer reads and appends for a 1 MiB
        chunk. Back to 64 KiB once the buffer is empty (C{missing} 0), so a
        small message never costs a big allocation.
        """
        transport = self.transport
        if not hasattr(transport, "bufferSize"):
            return
        if missing:
            transport.bufferSize = max(_DEFAULT_READ, min(missing, BIG_READ))
            self._bigReads = True
        else:
            transport.bufferSize = _DEFAULT_READ
            self._bigReads = False

    def setMaxFrame(self, size: int) -> None:
        """
        Change the largest frame accepted from now on.
        """
        self.MAX_LENGTH = size

    def stringReceived(self, data: bytes) -> None:
        """
        Decode one frame and hand the map to L{frameReceived}.

        Frames behind a violation (or a close) in the same read are dropped:
        L{IntNStringReceiver} keeps splitting its buffer after the connection
        started closing, and nothing a peer sends after breaking the protocol
        may be acted on (L{LineReceiver} checks C{transport.disconnecting} too).
        """
        if getattr(self.transport, "disconnecting", False):
            return
        try:
            message = serial.loads(data)
        except serial.SerialError as e:
            self.protocolViolation(f"malformed frame: {e}")
            return
        if not isinstance(message, dict):
            self.protocolViolation(f"frame is a {type(message).__name__}, not a map")
            return
        self.frameReceived(message)

    def lengthLimitExceeded(self, length: int) -> None:
        """
        Close the connection: the peer announced a frame over the limit.
        """
        self.protocolViolation(f"frame of {length} bytes exceeds the limit of {self.MAX_LENGTH}")

    def startDeadline(self, clock: Any, seconds: float = PREAUTH_DEADLINE) -> None:
        """
        Close the connection unless L{cancelDeadline} is called within
        C{seconds} on C{clock}.
        """
        self._deadline = clock.callLater(seconds, self._deadlinePassed, seconds)

    def cancelDeadline(self) -> None:
        """
        The peer authenticated in time (or the connection ended).
        """
        deadline = getattr(self, "_deadline", None)
        if deadline is not None and deadline.active():
            deadline.cancel()

    def _deadlinePassed(self, seconds: float) -> None:
        self.protocolViolation(f"did not authenticate within {seconds:g} seconds")

    def protocolViolation(self, reason: str) -> None:
        """
        Log C{reason} and drop this connection at once.
        """
        self.log.warn("closing connection from {peer}: {reason}", peer=self.peerName, reason=reason)
        self.transport.abortConnection()

    def sendFrame(self, message: dict[str, Any]) -> None:
        """
        Send one msgpack map.
        """
        self.sendString(serial.dumps(message))

    def sendString(self, string: bytes) -> None:
        """
        Send one length-prefixed frame (see L{writeNow}).
        """
        if len(string) >= 2**32:
            raise StringTooLongError(f"frame of {len(string)} bytes is over the 4-byte prefix")
        self.sendSealed(_HEADER.pack(len(string)), string)

    def sendSealed(self, head: bytes, blob: bytes) -> None:
        """
        Send one frame already encoded in two parts, its header C{head} and
        the rest C{blob} (as L{sendString} does, and see
        L{salttwist.transport.session.SessionCipher.sealFrameParts}): joined
        when small, else sent together with one C{sendmsg}
        (L{writeNowParts}) or written one after the other, so that a big
        frame is not copied to join them.
        """
        if len(blob) <= _JOIN_LIMIT:
            write = writeNow if self.directWrites else _bufferedWrite
            write(self.transport, head + blob)
        elif self.directWrites:
            writeNowParts(self.transport, head, blob)
        else:
            self.transport.write(head)
            self.transport.write(blob)

    def frameReceived(self, message: dict[str, Any]) -> None:
        """
        Handle one decoded frame. Override this.
        """
        raise NotImplementedError


#: The most bytes a socket read asks for while a big frame arrives.
BIG_READ = 1 << 20
#: Twisted's own read size (C{twisted.internet.tcp.Connection.bufferSize}).
_DEFAULT_READ = 1 << 16


class QuietFactory(Factory):
    """
    A factory that does not log every start and stop (one per minion
    connection attempt would flood the logs).
    """

    noisy = False


class _BuildingFactory(QuietFactory):
    """
    A L{QuietFactory} whose protocols are made by a callable, for protocols
    whose constructors take arguments (L{Factory.forProtocol} passes the
    same arguments to every protocol, and so would these; this spells it
    as a method rather than patching C{buildProtocol} on an instance).
    """

    def __init__(self, build: Callable[[], Protocol]) -> None:
        """
        @param build: called with no arguments for each connection.
        """
        self._build = build

    def buildProtocol(self, addr: Any) -> Protocol:
        """
        @return: a protocol from the callable, its C{factory} set to this.
        """
        proto = self._build()
        proto.factory = self
        return proto


def quietFactory(build: Callable[[], Protocol]) -> QuietFactory:
    """
    @return: a L{QuietFactory} whose protocols are made by C{build()}.
    """
    return _BuildingFactory(build)
