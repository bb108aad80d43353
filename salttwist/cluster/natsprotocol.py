# -*- test-case-name: tests.test_cluster_nats -*-
"""
NATS's client protocol on Twisted: the text protocol of C{nats-server}
(C{INFO}, C{CONNECT}, C{PUB}/C{HPUB}, C{SUB}, C{MSG}/C{HMSG}, C{PING}/
C{PONG}), with requests answered on one inbox subscription. Enough for
JetStream, whose API is requests to C{$JS.API.*} subjects.

A protocol parses bytes and hands each message to its subscription's
callback; it keeps no state across connections (the bus does).

Credentials (user and password, or a token) go in the C{CONNECT}; so does
the proof of an NKEY or JWT user (L{salttwist.cluster.natsauth}): the
server's C{INFO} C{nonce} signed with the user's seed. TLS
follows NATS's order: the server's C{INFO} comes in the clear, then the
client starts TLS (C{startTLS}) and sends everything else, C{CONNECT}
included, encrypted. A protocol given TLS options refuses a server that
does not offer TLS (rather than send credentials and jobs in the clear);
one without refuses a server that requires it, saying so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist.cluster.natsauth import NkeyAuth

#: The longest control line accepted from the server.
MAX_CONTROL_LINE = 4096
#: The largest message accepted from the server (NATS's default max_payload).
MAX_PAYLOAD = 8 * 1024 * 1024
#: The sid of the inbox subscription that receives replies to requests.
INBOX_SID = 1


class NatsError(Exception):
    """
    The server refused something (C{-ERR}, a JetStream API error, no
    responders), or the connection was lost before an answer.
    """


#: A message's callback: (subject, reply subject or None, status or None,
#: headers, payload).
MessageCallback = Callable[[str, "str | None", "str | None", dict[str, str], bytes], None]


def parseHeaders(block: bytes) -> tuple[str | None, dict[str, str]]:
    """
    Parse an C{HMSG}'s header block: C{NATS/1.0[ status[ text]]} then
    C{Key: value} lines.

    @return: the status (C{"503"}) or L{None}, and the headers.
    """
    lines = block.decode("utf-8", "replace").split("\r\n")
    first = lines[0].split(" ", 2)
    status = first[1] if len(first) > 1 and first[1] else None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip()] = value.strip()
    return status, headers


class NatsProtocol(Protocol):
    """
    One connection to a NATS server.

    @ivar ready: fires once the server answered the first C{PING} (the
        C{CONNECT} was accepted), fails if the connection is lost first.
    @ivar info: the server's C{INFO}.
    """

    log = Logger()

    def __init__(
        self,
        clock: Any,
        name: str,
        credentials: dict[str, str] | None = None,
        tlsOptions: Any = None,
        nkeyAuth: NkeyAuth | None = None,
        clientCertificate: bool = False,
    ) -> None:
        """
        @param credentials: C{CONNECT} fields: C{user} and C{pass}, or
            C{auth_token}; never logged.
        @param tlsOptions: an C{IOpenSSLClientConnectionCreator} (the
            server's certificate checked against the broker's host name):
            TLS is required. L{None}: plain TCP.
        @param nkeyAuth: the NKEY or JWT user to log in as (the server's
            C{nonce} is signed with its seed); never logged.
        @param clientCertificate: C{tlsOptions} present a client
            certificate (which a server may take as the login).
        """
        self._clock = clock
        self._name = name
        self._credentials = dict(credentials or {})
        self._tlsOptions = tlsOptions
        self._nkeyAuth = nkeyAuth
        self._clientCertificate = clientCertificate
        #: Why the connection is being closed by this side, if it is.
        self.failReason: str | None = None
        self.ready: Deferred[NatsProtocol] = Deferred()
        self.info: dict[str, Any] = {}
        self._buffer = bytearray()
        # (subject, sid, reply, header bytes, total bytes) of the message
        # whose payload is awaited.
        self._awaiting: tuple[str, int, str | None, int, int] | None = None
        self._subscriptions: dict[int, MessageCallback] = {}
        self._nextSid = INBOX_SID + 1
        self._inbox = "_INBOX." + os.urandom(8).hex()
        self._requests: dict[str, tuple[Deferred[tuple[str | None, bytes]], Any]] = {}
        self._nextRequest = 0
        self._pongs: list[Deferred[None]] = []
        self.lost = False
        self.onLost: Callable[[NatsProtocol, Failure], None] | None = None

    def connectionMade(self) -> None:
        """
        Send small messages at once (a job's or a return's publication
        waits for nothing else).
        """
        setNoDelay = getattr(self.transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)

    # -- receiving ---------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        """
        Parse control lines and message payloads.
        """
        buffer = self._buffer
        buffer += data
        while not self.lost:
            if self._awaiting is not None:
                subject, sid, reply, headerSize, total = self._awaiting
                if len(buffer) < total + 2:
                    return
                body = bytes(buffer[:total])
                del buffer[: total + 2]
                self._awaiting = None
                status, headers = None, {}
                if headerSize:
                    status, headers = parseHeaders(body[:headerSize])
                self._message(subject, sid, reply, status, headers, body[headerSize:])
                continue
            end = buffer.find(b"\r\n")
            if end < 0:
                if len(buffer) > MAX_CONTROL_LINE:
                    self._fail("the server sent a control line that is too long")
                return
            line = bytes(buffer[:end]).decode("utf-8", "replace")
            del buffer[: end + 2]
            self._controlLine(line)

    def _controlLine(self, line: str) -> None:
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "MSG" or op == "HMSG":
            self._messageHeader(op, rest.split())
        elif op == "PING":
            self.transport.write(b"PONG\r\n")
        elif op == "PONG":
            if self._pongs:
                self._pongs.pop(0).callback(None)
        elif op == "INFO":
            self._serverInfo(rest)
        elif op == "-ERR":
            self.log.warn("NATS server error: {error}", error=rest)
            if "permissions violation" not in rest.lower():
                # Every other -ERR closes the connection on the server's side
                # (an authorization violation: the credentials were refused).
                self._fail(f"the NATS server said {rest.strip()}")
        elif op == "+OK":
            pass
        else:
            self._fail(f"the NATS server sent an unknown operation {op!r}")

    def _messageHeader(self, op: str, words: list[str]) -> None:
        try:
            if op == "MSG":
                if len(words) not in (3, 4):
                    raise ValueError(words)
                headerSize, total = 0, int(words[-1])
            else:
                if len(words) not in (4, 5):
                    raise ValueError(words)
                headerSize, total = int(words[-2]), int(words[-1])
            sid = int(words[1])
            reply = words[2] if len(words) == (4 if op == "MSG" else 5) else None
        except ValueError:
            self._fail(f"the NATS server sent a bad {op} line")
            return
        if total > MAX_PAYLOAD or not 0 <= headerSize <= total:
            self._fail(f"the NATS server sent a message of {total} bytes")
            return
        self._awaiting = (words[0], sid, reply, headerSize, total)

    def _serverInfo(self, text: str) -> None:
        try:
            info = json.loads(text)
        except ValueError:
            self._fail("the NATS server sent a bad INFO")
            return
        first = not self.info
        self.info = info
        if not first:
            return
        offered = bool(info.get("tls_required") or info.get("tls_available"))
        if self._tlsOptions is not None:
            if not offered:
                self._fail("the broker does not offer TLS, and a tls:// URL requires it")
                return
            self.transport.startTLS(self._tlsOptions)
        elif info.get("tls_required"):
            self._fail("the broker requires TLS: give cluster_broker as a tls:// URL")
            return
        identified = self._credentials or self._nkeyAuth or self._clientCertificate
        if info.get("auth_required") and not identified:
            self._fail(
                "the broker requires credentials: give them in cluster_broker "
                "(nats://user:password@host or nats://token@host), or give "
                "cluster_broker_nkey, cluster_broker_creds or cluster_broker_cert"
            )
            return
        proof: dict[str, str] = {}
        if self._nkeyAuth is not None:
            nonce = info.get("nonce")
            if not isinstance(nonce, str) or not nonce:
                # A server sends a nonce only when it has NKEY or JWT users:
                # it would refuse the login, or take us as another user.
                self._fail(
                    "the broker sent no nonce to sign: it has no NKEY or JWT users, "
                    f"so the NKEY of {self._nkeyAuth.source} cannot log in to it"
                )
                return
            proof = self._nkeyAuth.connectFields(nonce)
        connect = {
            "verbose": False,
            "pedantic": False,
            "lang": "python-twisted",
            "version": "salttwist",
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "echo": False,
            "name": self._name,
            "tls_required": self._tlsOptions is not None,
            **self._credentials,
            **proof,
        }
        self.transport.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\n")
        self.transport.write(f"SUB {self._inbox}.* {INBOX_SID}\r\n".encode())
        self.ping().addCallbacks(lambda _: self.ready.callback(self), lambda _: None)

    def _message(
        self,
        subject: str,
        sid: int,
        reply: str | None,
        status: str | None,
        headers: dict[str, str],
        body: bytes,
    ) -> None:
        if sid == INBOX_SID:
            token = subject.rsplit(".", 1)[-1]
            waiting = self._requests.pop(token, None)
            if waiting is not None:
                d, timeout = waiting
                if timeout.active():
                    timeout.cancel()
                d.callback((status, body))
            return
        callback = self._subscriptions.get(sid)
        if callback is not None:
            callback(subject, reply, status, headers, body)

    # -- sending -----------------------------------------------------------

    def publish(
        self,
        subject: str,
        payload: bytes,
        reply: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """
        Send C{payload} on C{subject} (with C{headers} if any).
        """
        replyPart = f" {reply}" if reply else ""
        if headers:
            block = (
                "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
            ).encode()
            size = len(block)
            self.transport.writeSequence(
                [
                    f"HPUB {subject}{replyPart} {size} {size + len(payload)}\r\n".encode(),
                    block,
                    payload,
                    b"\r\n",
                ]
            )
        else:
            self.transport.writeSequence(
                [f"PUB {subject}{replyPart} {len(payload)}\r\n".encode(), payload, b"\r\n"]
            )

    def subscribe(self, subject: str, callback: MessageCallback) -> int:
        """
        Subscribe C{callback} to C{subject}.

        @return: the subscription's sid.
        """
        sid = self._nextSid
        self._nextSid += 1
        self._subscriptions[sid] = callback
        self.transport.write(f"SUB {subject} {sid}\r\n".encode())
        return sid

    def request(
        self,
        subject: str,
        payload: bytes,
        timeout: float,
        headers: dict[str, str] | None = None,
    ) -> Deferred[tuple[str | None, bytes]]:
        """
        Send a request and wait for its first reply.

        @return: a L{Deferred} firing with the reply's status (C{"503"}:
            no responders) and payload, or failing with L{NatsError} when
            C{timeout} seconds pass or the connection is lost first.
        """
        if self.lost:
            raise NatsError("not connected to the NATS server")
        self._nextRequest += 1
        token = str(self._nextRequest)
        d: Deferred[tuple[str | None, bytes]] = Deferred()

        def timedOut() -> None:
            if self._requests.pop(token, None) is not None:
                d.errback(NatsError(f"no answer to {subject} within {timeout} s"))

        self._requests[token] = (d, self._clock.callLater(timeout, timedOut))
        self.publish(subject, payload, f"{self._inbox}.{token}", headers)
        return d

    def ping(self) -> Deferred[None]:
        """
        Send a C{PING}.

        @return: a L{Deferred} firing on its C{PONG}.
        """
        d: Deferred[None] = Deferred()
        self._pongs.append(d)
        self.transport.write(b"PING\r\n")
        return d

    def pingsOutstanding(self) -> int:
        """
        @return: the C{PING}s not yet answered.
        """
        return len(self._pongs)

    # -- the end -------------------------------------------------------------

    def _fail(self, why: str) -> None:
        self.log.warn("closing the connection to the NATS server: {why}", why=why)
        if self.failReason is None:
            self.failReason = why
        self.transport.abortConnection()

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        """
        Fail everything still waiting for the server.
        """
        self.lost = True
        why = self.failReason or reason.getErrorMessage()
        error = NatsError(f"connection to the NATS server lost: {why}")
        requests, self._requests = self._requests, {}
        for d, timeout in requests.values():
            if timeout.active():
                timeout.cancel()
            d.errback(error)
        pongs, self._pongs = self._pongs, []
        for pong in pongs:
            pong.errback(error)
        if not self.ready.called:
            self.ready.errback(error)
        if self.onLost is not None:
            self.onLost(self, reason)
