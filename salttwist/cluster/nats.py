# -*- test-case-name: tests.test_cluster_nats -*-
"""
The cluster's bus on NATS JetStream (L{NatsClusterBus}).

One JetStream stream per cluster, C{SALTTWIST_<cluster_id>}, file-stored,
holds the durable kinds on subjects C{salttwist.<cluster_id>.job} and
C{salttwist.<cluster_id>.ret}; each master has a durable push consumer per
kind (C{<member>_<kind>}, explicit acknowledgements), so what was sent
while it was away is delivered when it is back. A durable message is
published with a C{Nats-Msg-Id} header (the broker drops a copy sent again
after a lost acknowledgement) and stays in the L{Outbox} until JetStream
acknowledged storing it. Best-effort kinds are plain NATS messages on
C{salttwist.<cluster_id>.<kind>}.

The broker may want a login (L{brokerAddress}'s user and password or token,
an NKEY or a C{.creds} file: L{salttwist.cluster.natsauth}) and TLS, with a
client certificate (L{brokerTlsOptions}).

The connection is a L{ClientService} (reconnection with jittered back-off);
a C{PING} every C{pingInterval} seconds that is not answered twice in a row
drops it, so a broker that stops answering (a partition) is noticed even
when no TCP error comes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from twisted.application.internet import ClientService, backoffPolicy
from twisted.internet.defer import CancelledError, Deferred, TimeoutError, maybeDeferred, succeed
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Factory
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist.cluster.interfaces import (
    DEFAULT_MAX_PAYLOAD,
    DURABLE_KINDS,
    HEADER_ROOM,
    KINDS,
    ClusterUnavailable,
    IClusterBus,
    checkPublishable,
    tooLarge,
)
from salttwist.cluster.natsauth import loadNkeyAuth
from salttwist.cluster.natsprotocol import NatsError, NatsProtocol
from salttwist.cluster.outbox import Outbox
from salttwist.daemon import checkPrivatePath

#: What a cluster id and a member id may hold (they are parts of subject,
#: stream and consumer names).
NAME = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")
#: Seconds a JetStream API request or publication may wait for its answer.
REQUEST_TIMEOUT = 5.0
#: Seconds a new connection may take to be set up (the server's INFO, the
#: stream and the consumers).
SETUP_TIMEOUT = 10.0
#: Seconds before a connection whose set-up failed is dropped (and so
#: made again), doubling with each failure in a row up to SETUP_RETRY_MAX.
SETUP_RETRY_FIRST = 0.5
SETUP_RETRY_MAX = 30.0
#: Seconds before a publication refused by JetStream is sent again.
RETRY_DELAY = 1.0
#: Seconds a delivered durable message may stay unacknowledged before
#: JetStream delivers it again: short, since a master handles one on the
#: reactor at once, and a message pushed to a master that has just gone
#: (its subscription not yet gone on the server) waits this long to come
#: back; a copy delivered twice is dropped by jid.
ACK_WAIT = 5.0
#: Seconds JetStream keeps a durable message (a master away longer misses it).
STREAM_MAX_AGE = 3600.0
#: Seconds within which JetStream drops a copy of a message by its id.
DUPLICATE_WINDOW = 300.0
#: JetStream's error code for a stream name already in use.
STREAM_NAME_IN_USE = 10058
_NS = 1_000_000_000


BROKER_SCHEMES = ("nats", "tls")
"""
C{nats://}: plain TCP (TLS if the server requires it is refused: the URL
must say C{tls://}); C{tls://}: TLS required, the server's certificate
checked against the URL's host name.
"""


@dataclass(frozen=True)
class BrokerAddress:
    """
    Where the broker is and how to log in, from a C{cluster_broker} URL.

    @ivar url: the URL with its password or token masked, for messages.
    @ivar credentials: the C{CONNECT} fields (C{user} and C{pass}, or
        C{auth_token}); empty without userinfo.
    """

    host: str
    port: int
    tls: bool
    url: str
    credentials: dict[str, str] = field(default_factory=dict, repr=False)


def brokerAddress(url: str) -> BrokerAddress:
    """
    Read a C{nats://[user:password@|token@]host[:port]} or C{tls://...}
    URL (port 4222 by default; user, password and token percent-decoded).

    @raise ValueError: if C{url} is not one; the message never holds the
        password or token.
    """
    expected = "a nats://host:port or tls://host:port URL"
    try:
        parts = urlsplit(url)
        port = parts.port or 4222
    except ValueError as e:
        raise ValueError(f"the broker URL is not {expected} ({e})") from None
    if parts.scheme not in BROKER_SCHEMES or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"the broker URL is not {expected}")
    if parts.query or parts.fragment:
        raise ValueError(f"the broker URL is not {expected}: it has a query or fragment")
    credentials: dict[str, str] = {}
    shown = ""
    if parts.username is not None:
        user = unquote(parts.username)
        if parts.password is not None:
            credentials = {"user": user, "pass": unquote(parts.password)}
            shown = f"{user}:***@"
        else:
            credentials = {"auth_token": user}
            shown = "***@"
        if not all(credentials.values()):
            raise ValueError("the broker URL has an empty user, password or token")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return BrokerAddress(
        parts.hostname,
        port,
        parts.scheme == "tls",
        f"{parts.scheme}://{shown}{host}:{port}",
        credentials,
    )


def parseBrokerUrl(url: str) -> tuple[str, int]:
    """
    @return: the host and port of a broker URL (see L{brokerAddress}).
    @raise ValueError: if C{url} is not one.
    """
    address = brokerAddress(url)
    return address.host, address.port


def brokerTlsOptions(
    address: BrokerAddress,
    caFile: str | None = None,
    certFile: str | None = None,
    keyFile: str | None = None,
    runAs: str | None = None,
) -> Any:
    """
    Blocking (reads files): call it at start.

    @param caFile: a PEM file of the certificates that may sign the
        broker's (L{None}: the system's trusted authorities).
    @param certFile: a PEM file of this master's client certificate (and
        the intermediate certificates after it), for a broker that asks
        for one (C{tls { verify: true }}); with C{keyFile}.
    @param keyFile: a PEM file of the client certificate's private key,
        unencrypted; refused if others than its owner may read it.
    @param runAs: the C{user} option (who may own C{keyFile}).
    @return: the client TLS options for C{address}: its certificate must
        be valid for its host name, signed by C{caFile}'s or the system's
        authorities; or L{None} for a C{nats://} address.
    @raise ValueError: a file cannot be read or is not what it should be,
        or C{certFile} or C{keyFile} is given without the other, or
        without a C{tls://} address.
    @raise salttwist.daemon.StartupError: C{keyFile} may be read by others.
    """
    if (certFile is None) != (keyFile is None):
        raise ValueError("give cluster_broker_cert and cluster_broker_key together")
    if not address.tls:
        if certFile is not None:
            raise ValueError("cluster_broker_cert needs TLS: give cluster_broker as a tls:// URL")
        return None
    from twisted.internet import ssl

    trustRoot: Any = None
    if caFile is not None:
        pem = _readFile("cluster_broker_ca", caFile)
        try:
            trustRoot = ssl.trustRootFromCertificates(
                [ssl.Certificate.loadPEM(block) for block in _pemCertificates(pem)]
            )
        except (ValueError, ssl.SSL.Error) as e:
            raise ValueError(f"cluster_broker_ca {caFile}: not a PEM certificate file ({e})") from e
    if certFile is None or keyFile is None:
        return ssl.optionsForClientTLS(address.host, trustRoot=trustRoot)
    clientCertificate, chain = _clientCertificate(certFile, keyFile, runAs)
    return ssl.optionsForClientTLS(
        address.host,
        trustRoot=trustRoot,
        clientCertificate=clientCertificate,
        extraCertificateOptions={"extraCertChain": chain} if chain else None,
    )


def _readFile(option: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{option} {path} cannot be read: {e.strerror}") from e


def _clientCertificate(certFile: str, keyFile: str, runAs: str | None) -> tuple[Any, list[Any]]:
    """
    @return: the client certificate with its key, and the certificates
        that follow it in C{certFile} (its chain).
    """
    from cryptography.hazmat.primitives import serialization
    from twisted.internet import ssl

    checkPrivatePath(keyFile, 0o077, runAs=runAs)
    certPem = _readFile("cluster_broker_cert", certFile)
    keyPem = _readFile("cluster_broker_key", keyFile)
    try:
        certificates = [ssl.Certificate.loadPEM(block) for block in _pemCertificates(certPem)]
    except (ValueError, ssl.SSL.Error) as e:
        raise ValueError(f"cluster_broker_cert {certFile}: not a PEM certificate file ({e})") from e
    try:
        key = serialization.load_pem_private_key(keyPem, password=None)
    except TypeError:
        raise ValueError(
            f"cluster_broker_key {keyFile}: the key is encrypted; give it unencrypted (mode 0600)"
        ) from None
    except ValueError:
        # Not the parser's message: it could quote the file.
        raise ValueError(f"cluster_broker_key {keyFile}: not a PEM private key") from None
    publicOfKey = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    leaf = certificates[0].original.to_cryptography()
    publicOfCert = leaf.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if publicOfKey != publicOfCert:
        raise ValueError(
            f"cluster_broker_key {keyFile} is not the key of the certificate in "
            f"cluster_broker_cert {certFile}"
        )
    from OpenSSL import crypto

    keyPair = ssl.KeyPair(crypto.PKey.from_cryptography_key(key))  # type: ignore[arg-type]
    clientCertificate = ssl.PrivateCertificate.fromCertificateAndKeyPair(certificates[0], keyPair)
    return clientCertificate, [c.original for c in certificates[1:]]


def _loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _pemCertificates(pem: bytes) -> list[bytes]:
    end = b"-----END CERTIFICATE-----"
    blocks = [block.strip() + b"\n" + end + b"\n" for block in pem.split(end) if b"BEGIN" in block]
    if not blocks:
        raise ValueError("no certificate in it")
    return blocks


@implementer(IStreamClientEndpoint)
class _RecordingEndpoint:
    """
    An endpoint that tells the bus why a connection attempt failed (the
    reason jobs are refused with).
    """

    def __init__(self, endpoint: Any, bus: NatsClusterBus) -> None:
        self._endpoint = endpoint
        self._bus = bus

    def connect(self, factory: Any) -> Deferred[Any]:
        """
        Connect, recording a failure.
        """

        def failed(failure: Failure) -> Failure:
            self._bus._lastError = f"cannot connect: {failure.getErrorMessage()}"
            return failure

        return self._endpoint.connect(factory).addErrback(failed)  # type: ignore[no-any-return]


class _NatsFactory(Factory):
    def __init__(self, bus: NatsClusterBus) -> None:
        self._bus = bus

    def buildProtocol(self, addr: Any) -> NatsProtocol:
        bus = self._bus
        proto = NatsProtocol(
            bus._clock,
            f"salttwist-{bus.memberId}",
            bus._address.credentials,
            bus._tlsOptions,
            bus._nkeyAuth,
            bus._clientCertificate,
        )
        proto.onLost = self._bus._connectionLost
        self._bus._prepare(proto)
        return proto


@implementer(IClusterBus)
class NatsClusterBus:
    """
    A master's bus to the others, through NATS JetStream.

    @ivar outbox: the durable messages not yet acknowledged.
    """

    log = Logger()

    def __init__(
        self,
        reactor: Any,
        url: str,
        clusterId: str,
        memberId: str,
        maxMessages: int = 10000,
        maxBytes: int = 64 * 1024 * 1024,
        unreachableLimit: float = 10.0,
        pingInterval: float = 2.0,
        caFile: str | None = None,
        certFile: str | None = None,
        keyFile: str | None = None,
        nkeyFile: str | None = None,
        credsFile: str | None = None,
        runAs: str | None = None,
    ) -> None:
        """
        Blocking (reads the TLS and NKEY files): make it at start.

        @param url: see L{brokerAddress}.
        @param caFile: see L{brokerTlsOptions}.
        @param certFile: see L{brokerTlsOptions}.
        @param keyFile: see L{brokerTlsOptions}.
        @param nkeyFile: a file holding an NKEY user seed (C{SU...}),
            C{cluster_broker_nkey}; see L{loadNkeyAuth}.
        @param credsFile: a C{.creds} file (a user JWT and its seed),
            C{cluster_broker_creds}.
        @param runAs: the C{user} option (who may own the private files).
        @raise ValueError: a bad URL, file, cluster id or member id.
        @raise salttwist.daemon.StartupError: a private file (the client
            certificate's key, the seed, the C{.creds}) may be read by
            others than its owner.
        """
        self._address = address = brokerAddress(url)
        self._tlsOptions = brokerTlsOptions(address, caFile, certFile, keyFile, runAs)
        self._clientCertificate = certFile is not None
        for path in (nkeyFile, credsFile):
            if path:
                checkPrivatePath(path, 0o077, runAs=runAs)
        self._nkeyAuth = loadNkeyAuth(nkeyFile, credsFile)
        if self._nkeyAuth is not None and address.credentials:
            raise ValueError(
                "cluster_broker has a user, password or token, and an NKEY is given too: "
                "give one way to log in"
            )
        host, port = address.host, address.port
        for what, value in (("cluster id", clusterId), ("member id", memberId)):
            if not NAME.match(value):
                raise ValueError(
                    f"the {what} {value!r} may hold only letters, digits, '_' and '-' "
                    "(1 to 64 of them)"
                )
        #: The broker's URL without its password or token (for messages).
        self.url = address.url
        if address.credentials and not address.tls and not _loopback(address.host):
            self.log.warn(
                "cluster: the credentials of {url} cross the network in the clear: "
                "use a tls:// URL",
                url=self.url,
            )
        self.memberId = memberId
        self._clock = reactor
        self._prefix = f"salttwist.{clusterId}"
        self._stream = f"SALTTWIST_{clusterId}"
        self.outbox = Outbox(memberId, maxMessages, maxBytes, broker=self.url)
        self.unreachableLimit = unreachableLimit
        #: The broker's limit (its INFO's max_payload) less L{HEADER_ROOM}.
        self.maxPayload = DEFAULT_MAX_PAYLOAD - HEADER_ROOM
        self._handlers: dict[str, Callable[[bytes], Any]] = {}
        self._proto: NatsProtocol | None = None
        self._downSince = reactor.seconds()
        self._lastError = "not connected yet"
        self._dropReason: str | None = None
        self._setupFailures = 0
        self._dropLater: Any = None
        self._retry: Any = None
        self._pinger = LoopingCall(self._ping)
        self._pinger.clock = reactor
        self._pingInterval = pingInterval
        self._service = ClientService(
            _RecordingEndpoint(
                TCP4ClientEndpoint(reactor, host, port, timeout=REQUEST_TIMEOUT), self
            ),
            _NatsFactory(self),
            retryPolicy=backoffPolicy(initialDelay=0.5, maxDelay=5.0),
            clock=reactor,
        )

    @property
    def connected(self) -> bool:
        """
        Whether the bus is connected and set up.
        """
        return self._proto is not None

    def subject(self, kind: str) -> str:
        """
        @return: the subject of messages of C{kind}.
        """
        return f"{self._prefix}.{kind}"

    # -- IClusterBus ---------------------------------------------------------

    def subscribe(self, kind: str, handler: Callable[[bytes], Any]) -> None:
        """
        See L{IClusterBus.subscribe}.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown message kind {kind!r}")
        self._handlers[kind] = handler

    def start(self) -> None:
        """
        See L{IClusterBus.start}.
        """
        # The unreachable limit counts from the start, not from construction.
        self._downSince = self._clock.seconds()
        self._service.startService()
        self._pinger.start(self._pingInterval, now=False)

    def stop(self) -> Deferred[None]:
        """
        See L{IClusterBus.stop}.
        """
        if self._pinger.running:
            self._pinger.stop()
        for call in (self._retry, self._dropLater):
            if call is not None and call.active():
                call.cancel()
        return self._service.stopService()  # type: ignore[no-any-return]

    def publish(self, kind: str, payload: bytes) -> Deferred[None]:
        """
        See L{IClusterBus.publish}.
        """
        checkPublishable(kind, payload, self.maxPayload)
        if kind not in DURABLE_KINDS:
            proto = self._proto
            if proto is not None:
                proto.publish(self.subject(kind), payload)
            return succeed(None)
        pending = self.outbox.add(kind, payload)
        self._flush()
        return pending.acked

    def whyUnavailable(self) -> str | None:
        """
        See L{IClusterBus.whyUnavailable}.
        """
        full = self.outbox.whyFull()
        if full is not None:
            return full
        if self._proto is None:
            away = self._clock.seconds() - self._downSince
            if away >= self.unreachableLimit:
                return (
                    f"the cluster's broker {self.url} has been unreachable for {away:.0f} s "
                    f"({self._lastError}): jobs cannot reach the other masters"
                )
        return None

    # -- the connection --------------------------------------------------------

    async def _setUp(self, proto: NatsProtocol) -> None:
        await proto.ready
        await self._api(
            proto,
            f"$JS.API.STREAM.CREATE.{self._stream}",
            {
                "name": self._stream,
                "subjects": [self.subject(kind) for kind in DURABLE_KINDS],
                "retention": "limits",
                "storage": "file",
                "discard": "old",
                "max_age": int(STREAM_MAX_AGE * _NS),
                "duplicate_window": int(DUPLICATE_WINDOW * _NS),
                "num_replicas": 1,
            },
            allowed=(STREAM_NAME_IN_USE,),
        )
        for kind, handler in self._handlers.items():
            if kind in DURABLE_KINDS:
                durable = f"{self.memberId}_{kind}"
                deliver = f"_salttwist.deliver.{self._stream}.{durable}"
                await self._api(
                    proto,
                    f"$JS.API.CONSUMER.DURABLE.CREATE.{self._stream}.{durable}",
                    {
                        "stream_name": self._stream,
                        "config": {
                            "durable_name": durable,
                            "deliver_subject": deliver,
                            "deliver_policy": "new",
                            "ack_policy": "explicit",
                            "ack_wait": int(ACK_WAIT * _NS),
                            "max_ack_pending": 1000,
                            "filter_subject": self.subject(kind),
                            "replay_policy": "instant",
                        },
                    },
                )
                proto.subscribe(deliver, self._durableCallback(proto, kind, handler))
            else:
                proto.subscribe(self.subject(kind), self._volatileCallback(kind, handler))

    async def _api(
        self, proto: NatsProtocol, subject: str, body: dict[str, Any], allowed: tuple[int, ...] = ()
    ) -> dict[str, Any]:
        status, payload = await proto.request(subject, json.dumps(body).encode(), REQUEST_TIMEOUT)
        if status == "503":
            raise NatsError(f"JetStream is not enabled or not ready on {self.url} ({subject})")
        answer = json.loads(payload or b"{}")
        error = answer.get("error")
        if error and error.get("err_code") not in allowed:
            raise NatsError(f"JetStream refused {subject}: {error.get('description', error)}")
        return answer  # type: ignore[no-any-return]

    def _prepare(self, proto: NatsProtocol) -> None:
        """
        Set up a new connection: the stream, the consumers and the
        subscriptions, then send what the outbox holds. A set-up that fails
        drops the connection, and L{ClientService} connects again after a
        back-off. (Not C{prepareConnection}: Twisted 26.10's L{ClientService}
        leaves a connection whose preparation failed open, and fails on its
        later loss.)
        """

        def ready(_: object) -> None:
            if proto.lost:
                return
            self._proto = proto
            self._setupFailures = 0
            limit = proto.info.get("max_payload")
            if isinstance(limit, int) and limit > HEADER_ROOM:
                self.maxPayload = limit - HEADER_ROOM
            away = self._clock.seconds() - self._downSince
            self.log.info(
                "cluster: connected to the broker {url} (after {away:.1f} s)",
                url=self.url,
                away=away,
            )
            self._flush()

        def failed(failure: Failure) -> None:
            if failure.check(TimeoutError, CancelledError):
                self._lastError = f"the broker did not answer within {SETUP_TIMEOUT:.0f} s"
            else:
                self._lastError = failure.getErrorMessage()
            self.log.warn(
                "cluster: cannot set up the broker {url}: {error}",
                url=self.url,
                error=self._lastError,
            )
            if failure.check(TimeoutError, CancelledError):
                # No answer: made again at once (ClientService backs off).
                dropIfOpen()
                return
            # The broker answered, with an error (JetStream off, a stream
            # it refuses): dropped after a delay that doubles with each
            # such failure in a row, since a connection that succeeds resets
            # ClientService's own back-off.
            self._setupFailures += 1
            delay = min(SETUP_RETRY_MAX, SETUP_RETRY_FIRST * 2 ** (self._setupFailures - 1))
            self._dropLater = self._clock.callLater(delay, dropIfOpen)

        def dropIfOpen() -> None:
            if not proto.lost:
                proto.transport.abortConnection()

        setUp = Deferred.fromCoroutine(self._setUp(proto))
        # A broker behind a partition may accept the connection and never
        # answer: give the set-up the time of one request, then drop it.
        setUp.addTimeout(SETUP_TIMEOUT, self._clock).addCallbacks(ready, failed)

    def _connectionLost(self, proto: NatsProtocol, reason: Failure) -> None:
        if self._proto is not proto:
            return
        self._proto = None
        self._downSince = self._clock.seconds()
        self._lastError = self._dropReason or reason.getErrorMessage()
        self._dropReason = None
        self.outbox.disconnected()
        self.log.warn(
            "cluster: lost the broker {url} ({error}); reconnecting, {n} messages buffered",
            url=self.url,
            error=self._lastError,
            n=len(self.outbox),
        )

    def _ping(self) -> None:
        proto = self._proto
        if proto is None:
            return
        if proto.pingsOutstanding() >= 2:
            self._dropReason = "the broker stopped answering PINGs"
            self.log.warn("cluster: the broker {url} stopped answering; reconnecting", url=self.url)
            proto.transport.abortConnection()
            return
        proto.ping().addErrback(lambda _: None)

    # -- durable publication -----------------------------------------------

    def _flush(self) -> None:
        proto = self._proto
        if proto is None:
            return
        for pending in self.outbox.toSend():
            msgId = pending.msgId
            problem = tooLarge(len(pending.payload), self.maxPayload)
            if problem is not None:
                # The broker's limit is now below this message's size:
                # sending it would only close the connection, again and again.
                self.log.error("cluster: message {id} dropped: {why}", id=msgId, why=problem)
                self.outbox.drop(msgId, ClusterUnavailable(problem))
                continue
            d = proto.request(
                self.subject(pending.kind),
                pending.payload,
                REQUEST_TIMEOUT,
                headers={"Nats-Msg-Id": msgId},
            )
            d.addCallbacks(self._published, self._notPublished, (msgId,), None, (msgId,))

    def _published(self, reply: tuple[str | None, bytes], msgId: str) -> None:
        status, payload = reply
        error: Any = None
        if status == "503":
            error = "no JetStream stream answered"
        else:
            try:
                answer = json.loads(payload)
                error = answer.get("error")
            except ValueError:
                error = "a bad acknowledgement"
        if error:
            self._notPublished(Failure(NatsError(str(error))), msgId)
            return
        self.outbox.acknowledged(msgId)

    def _notPublished(self, failure: Failure, msgId: str) -> None:
        self.outbox.retry(msgId)
        if self._retry is None or not self._retry.active():
            # One line per retry, not per message: thousands may be in
            # flight when the broker goes.
            self.log.warn(
                "cluster: {n} messages not stored by the broker yet ({error}); sending them again",
                n=len(self.outbox),
                error=failure.getErrorMessage(),
            )
            self._retry = self._clock.callLater(RETRY_DELAY, self._flush)

    # -- delivery ------------------------------------------------------------

    def _durableCallback(
        self, proto: NatsProtocol, kind: str, handler: Callable[[bytes], Any]
    ) -> Any:
        def received(
            subject: str,
            reply: str | None,
            status: str | None,
            headers: dict[str, str],
            body: bytes,
        ) -> None:
            if status is not None or reply is None:
                return

            def handled(_: object) -> None:
                if not proto.lost:
                    proto.publish(reply, b"+ACK")

            def failed(failure: Failure) -> None:
                self.log.failure("cluster: the {kind} handler failed", failure, kind=kind)
                if not proto.lost:
                    proto.publish(reply, b"-NAK")

            maybeDeferred(handler, body).addCallbacks(handled, failed)

        return received

    def _volatileCallback(self, kind: str, handler: Callable[[bytes], Any]) -> Any:
        def received(
            subject: str,
            reply: str | None,
            status: str | None,
            headers: dict[str, str],
            body: bytes,
        ) -> None:
            try:
                handler(body)
            except Exception:
                self.log.failure("cluster: the {kind} handler failed", kind=kind)

        return received
