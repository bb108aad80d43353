# -*- test-case-name: tests.test_transports -*-
"""
The C{tls} transport: the C{tcp} transport with TLS (pyOpenSSL) on top.

The application-level crypto stays on: authentication, session keys and
sealed, MACed publications work exactly as over plain TCP. TLS adds a
second layer that hides the traffic's shape (which minion ids, which
functions, which sizes) from the network, and keeps connections that do
not speak TLS away from the master's protocols.

Trust follows the master's RSA key, not a certificate authority:

  - On its first start with this transport, the master makes a self-signed
    certificate for its own key (C{pki_dir/master.pem}) and keeps it in
    C{pki_dir/master.crt}; a new certificate is made if the key changes.
  - A minion checks that the certificate carries the master key it pinned
    in C{pki_dir/minion_master.pub}, the same pin the authentication
    checks. Before the first authentication there is no pin yet: with
    C{master_finger} set, the certificate's key must have that
    fingerprint; without it, the minion trusts the key on first use, as
    Salt's minions do, and pins it when the master's signed authentication
    reply arrives (a certificate with another key is then refused from the
    next connection on).
  - The local client runs on the master's host and checks the certificate
    against the copy the master leaves in its C{sock_dir} (C{master.crt},
    mode 0644, rewritten at every start): the users C{publisher_acl} names
    can read that directory (they read the master's ports file there)
    but not C{pki_dir}.

A certificate with another key ends the handshake with
L{MasterKeyMismatch}, logged with both fingerprints. Host names and
expiry dates are not checked: the pinned key is the identity.

A master closes a connection whose TLS handshake has not finished
L{HANDSHAKE_TIMEOUT} seconds after it was accepted, with a log line that
points at the likely cause, a minion configured with another transport.

pyOpenSSL and Twisted's TLS modules are imported by the methods: the plugin
scan imports this module, and a command that does not use TLS starts its
reactor without pyOpenSSL.
"""

from __future__ import annotations

import datetime
import os
import secrets
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from twisted.internet.interfaces import (
    IOpenSSLClientConnectionCreator,
    IOpenSSLServerConnectionCreator,
    IStreamClientEndpoint,
    IStreamServerEndpoint,
)
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist import crypt
from salttwist.files import atomicWrite
from salttwist.transport.interfaces import ROLE_CLIENT, ITransport
from salttwist.transport.tcp import TCP

__all__ = [
    "CERT_FILE",
    "HANDSHAKE_TIMEOUT",
    "MasterKeyCheck",
    "MasterKeyMismatch",
    "TLS",
    "TLSTransport",
    "ensureMasterCertificate",
    "makeCertificate",
]

#: The master's certificate, in its C{pki_dir}; its key is C{master.pem}.
CERT_FILE = "master.crt"
#: The master's key pair, in its C{pki_dir}.
MASTER_KEY_FILE = "master.pem"
#: Where a minion pins its master's key (as L{salttwist.minion.core}).
PINNED_MASTER_FILE = "minion_master.pub"
#: Seconds an accepted connection has to finish its TLS handshake.
HANDSHAKE_TIMEOUT = 10.0
#: The certificate's subject: nothing checks it, it only names the thing.
CERT_NAME = "salttwist master"
#: RFC 5280 4.1.2.5: "no well-defined expiration date". The pinned key is
#: what is trusted; a certificate that expires would only stop a master.
NO_EXPIRY = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.UTC)

_log = Logger()


class MasterKeyMismatch(Exception):
    """
    The master's TLS certificate does not carry the key the client trusts.
    """


def makeCertificate(privateKey: Any, now: datetime.datetime | None = None) -> x509.Certificate:
    """
    Make a self-signed certificate for C{privateKey}.

    @param privateKey: the master's RSA private key.
    @param now: the start of its validity (an hour is taken off for clocks
        that are behind); the current time by default.
    @return: the certificate, signed with SHA-256, that never expires.
    """
    if now is None:
        now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CERT_NAME)])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(privateKey.public_key())
        .serial_number(int.from_bytes(secrets.token_bytes(16), "big") >> 1)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(NO_EXPIRY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(privateKey, hashes.SHA256())
    )


def _publicPem(publicKey: Any) -> bytes:
    """
    @return: C{publicKey} as the PEM salttwist pins and fingerprints.
    """
    return publicKey.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _loadMasterKey(pkiDir: str) -> Any:
    with open(os.path.join(pkiDir, MASTER_KEY_FILE), "rb") as f:
        return crypt.loadPrivateKey(f.read())


def _readCertificate(path: str) -> x509.Certificate | None:
    """
    @return: the certificate in C{path}, or L{None} if there is none or it
        does not parse.
    """
    try:
        with open(path, "rb") as f:
            return x509.load_pem_x509_certificate(f.read())
    except (OSError, ValueError):
        return None


def ensureMasterCertificate(pkiDir: str, now: datetime.datetime | None = None) -> x509.Certificate:
    """
    Make sure C{pkiDir/master.crt} is a certificate for the key in
    C{pkiDir/master.pem}: keep it if it is, else make one (mode 0644, it is
    public) and say so in the log. Blocking: the master calls it as it
    starts.

    @param now: passed to L{makeCertificate}.
    @return: the certificate.
    @raise OSError: C{master.pem} cannot be read or the certificate written.
    """
    privateKey = _loadMasterKey(pkiDir)
    path = os.path.join(pkiDir, CERT_FILE)
    existing = _readCertificate(path)
    if existing is not None and _publicPem(existing.public_key()) == _publicPem(
        privateKey.public_key()
    ):
        return existing
    certificate = makeCertificate(privateKey, now)
    atomicWrite(path, certificate.public_bytes(serialization.Encoding.PEM), 0o644)
    _log.info(
        "{why} the master's TLS certificate {path} for its key {finger}",
        why="made" if existing is None else "remade (the key changed)",
        path=path,
        finger=crypt.fingerprint(_publicPem(privateKey.public_key())),
    )
    return certificate


def _serverOptions(pkiDir: str) -> Any:
    """
    @return: the C{CertificateOptions} of the master's key and certificate.
    @raise OSError: either file is missing (L{TLSTransport.prepareMaster}
        was not called) or unreadable.
    """
    from OpenSSL import SSL, crypto
    from twisted.internet.ssl import CertificateOptions, TLSVersion

    privateKey = _loadMasterKey(pkiDir)
    certificate = _readCertificate(os.path.join(pkiDir, CERT_FILE))
    if certificate is None or _publicPem(certificate.public_key()) != _publicPem(
        privateKey.public_key()
    ):
        raise OSError(f"no TLS certificate for the master's key in {pkiDir}/{CERT_FILE}")
    key: Any = privateKey
    cert: Any = certificate
    try:
        # pyOpenSSL 24.3 and later take cryptography's objects (and deprecate
        # their own); older ones need theirs.
        SSL.Context(SSL.TLS_METHOD).use_certificate(certificate)
    except TypeError:
        key = crypto.PKey.from_cryptography_key(privateKey)
        cert = crypto.X509.from_cryptography(certificate)
    return CertificateOptions(privateKey=key, certificate=cert, raiseMinimumTo=TLSVersion.TLSv1_2)


class MasterKeyCheck:
    """
    What a client accepts as the master's key in its TLS certificate.

    @ivar pinned: the pinned public key PEM (canonical), or L{None}.
    @ivar pinnedPath: the file it came from, for messages.
    @ivar finger: the fingerprint the key must have when nothing is pinned
        (C{master_finger}), or C{""}: trust on first use.
    """

    def __init__(self, pinned: bytes | None, pinnedPath: str, finger: str = "") -> None:
        self.pinned = pinned
        self.pinnedPath = pinnedPath
        self.finger = finger.lower()

    @classmethod
    def forRole(cls, config: dict[str, Any], role: str) -> MasterKeyCheck:
        """
        The check of a minion (C{pki_dir/minion_master.pub}, else
        C{master_finger}, else first use) or, for L{ROLE_CLIENT}, of the
        local client (the key of the certificate the running master left in
        C{sock_dir/master.crt}, which must exist). Reads the pin now: call
        it for each connection.

        @raise OSError: the local client cannot read C{sock_dir/master.crt}.
        @raise crypt.CryptError: a pinned file does not hold a valid key.
        """
        if role == ROLE_CLIENT:
            path = os.path.join(config["sock_dir"], CERT_FILE)
            certificate = _readCertificate(path)
            if certificate is None:
                raise OSError(f"no readable TLS certificate of the master in {path}")
            return cls(crypt.canonicalPublicPem(_publicPem(certificate.public_key())), path)
        path = os.path.join(config["pki_dir"], PINNED_MASTER_FILE)
        try:
            with open(path, "rb") as f:
                pinned: bytes | None = crypt.canonicalPublicPem(f.read())
        except FileNotFoundError:
            pinned = None
        return cls(pinned, path, config.get("master_finger") or "")

    def problem(self, peerPem: bytes) -> str | None:
        """
        @param peerPem: the public key PEM of the master's certificate.
        @return: why that key is refused, or L{None} if it is accepted.
        """
        finger = crypt.fingerprint(peerPem)
        if self.pinned is not None:
            if peerPem == self.pinned:
                return None
            return (
                f"the master's TLS certificate has key {finger}, not the pinned "
                f"{crypt.fingerprint(self.pinned)} in {self.pinnedPath}; if the master "
                "was rebuilt on purpose, remove that file"
            )
        if self.finger and finger != self.finger:
            return f"the master's TLS certificate has key {finger}, not master_finger {self.finger}"
        return None


@implementer(IOpenSSLClientConnectionCreator)
class PinnedMasterCreator:
    """
    Client connections that accept only a master certificate whose key
    passes a L{MasterKeyCheck}.
    """

    def __init__(self, check: MasterKeyCheck, peer: str) -> None:
        """
        @param check: the key check.
        @param peer: C{host:port}, for log lines.
        """
        from twisted.internet.ssl import CertificateOptions, TLSVersion

        self.check = check
        self.peer = peer
        self._options = CertificateOptions(raiseMinimumTo=TLSVersion.TLSv1_2)

    def clientConnectionForTLS(self, tlsProtocol: Any) -> Any:
        """
        A connection that checks the master's certificate during the
        handshake and, as a backstop, refuses to finish one whose
        certificate was not checked.
        """
        from OpenSSL import SSL

        # TLSMemoryBIOFactory sets the connection's state and app data.
        connection = SSL.Connection(self._options.getContext(), None)
        checked: list[bool] = []

        def fail(message: str) -> None:
            _log.error("TLS to the master at {peer}: {problem}", peer=self.peer, problem=message)
            tlsProtocol.failVerification(Failure(MasterKeyMismatch(message)))

        def verify(conn: Any, cert: Any, errno: int, depth: int, ok: bool) -> bool:
            # Only the leaf matters: the certificate is self-signed (so
            # OpenSSL's own verdict, "ok", is always false) and its key is
            # the identity.
            if depth != 0:
                return True
            try:
                peerPem = _publicPem(cert.to_cryptography().public_key())
                problem = self.check.problem(peerPem)
            except Exception as e:
                # An exception escaping an OpenSSL callback is lost.
                problem = f"cannot read the master's certificate ({e})"
            if problem is not None:
                fail(problem)
                return False
            if self.check.pinned is None and not self.check.finger and not checked:
                _log.info(
                    "TLS to the master at {peer}: first contact, trusting its key {finger}",
                    peer=self.peer,
                    finger=crypt.fingerprint(peerPem),
                )
            checked.append(True)
            return True

        def info(conn: Any, where: int, ret: int) -> None:
            if where & SSL.SSL_CB_HANDSHAKE_DONE and not checked:
                fail("the handshake finished without a certificate check")

        connection.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, verify)
        connection.set_info_callback(info)
        return connection


@implementer(IOpenSSLServerConnectionCreator)
class MasterServerCreator:
    """
    The master's server connections: its certificate, and a deadline for
    the handshake.
    """

    def __init__(
        self, options: Any, clock: Any, role: str, timeout: float = HANDSHAKE_TIMEOUT
    ) -> None:
        """
        @param options: the C{CertificateOptions} of the master's key.
        @param clock: the reactor, for the deadline.
        @param role: the channel, for log lines.
        @param timeout: seconds a connection has to finish its handshake.
        """
        self._options = options
        self._clock = clock
        self.role = role
        self.timeout = timeout

    def serverConnectionForTLS(self, tlsProtocol: Any) -> Any:
        """
        A server connection, closed if its handshake is not done in time.
        """
        from OpenSSL import SSL

        connection = SSL.Connection(self._options.getContext(), None)
        done: list[bool] = []
        timer: list[Any] = []

        def info(conn: Any, where: int, ret: int) -> None:
            if where & SSL.SSL_CB_HANDSHAKE_DONE:
                done.append(True)
                # The deadline is no longer needed: do not keep the timer
                # (and the protocol) alive for the rest of the timeout.
                if timer and timer[0].active():
                    timer[0].cancel()

        def expire() -> None:
            if done or not tlsProtocol.connected:
                return
            peer = tlsProtocol.transport.getPeer()
            _log.warn(
                "closing the {role} connection from {host}:{port}: no TLS handshake in "
                "{timeout:.0f}s (this master's transport is tls: is the peer's transport "
                "option tls too?)",
                role=self.role,
                host=getattr(peer, "host", "?"),
                port=getattr(peer, "port", "?"),
                timeout=self.timeout,
            )
            tlsProtocol.abortConnection()

        connection.set_info_callback(info)
        timer.append(self._clock.callLater(self.timeout, expire))
        return connection


@implementer(IStreamServerEndpoint)
class TLSServerEndpoint:
    """
    A server endpoint that puts TLS on the connections of another one.
    """

    def __init__(self, wrapped: Any, creator: Any, clock: Any) -> None:
        """
        @param wrapped: the L{IStreamServerEndpoint} to listen on.
        @param creator: an L{IOpenSSLServerConnectionCreator}.
        @param clock: the reactor (for Twisted's TLS write buffering).
        """
        self.wrapped = wrapped
        self.creator = creator
        self.clock = clock

    def listen(self, factory: Any) -> Any:
        """
        Listen with the wrapped endpoint; C{factory}'s protocols run over TLS.
        """
        from twisted.protocols.tls import TLSMemoryBIOFactory

        return self.wrapped.listen(TLSMemoryBIOFactory(self.creator, False, factory, self.clock))


@implementer(IStreamClientEndpoint)
class TLSClientEndpoint:
    """
    A client endpoint that puts TLS on the connections of another one (as
    C{wrapClientTLS}, with the reactor given rather than the global one).
    """

    def __init__(self, wrapped: Any, creator: Any, clock: Any) -> None:
        """
        @param wrapped: the L{IStreamClientEndpoint} to connect with.
        @param creator: an L{IOpenSSLClientConnectionCreator}.
        @param clock: the reactor (for Twisted's TLS write buffering).
        """
        self.wrapped = wrapped
        self.creator = creator
        self.clock = clock

    def connect(self, factory: Any) -> Any:
        """
        Connect with the wrapped endpoint; the result is C{factory}'s
        protocol, which runs over TLS.
        """
        from twisted.protocols.tls import TLSMemoryBIOFactory

        wrapper = TLSMemoryBIOFactory(self.creator, True, factory, self.clock)
        return self.wrapped.connect(wrapper).addCallback(lambda proto: proto.wrappedProtocol)


def _tlsModule() -> None:
    """
    Import pyOpenSSL now, with a clear error if it is missing or was kept
    out of this process.
    """
    try:
        import OpenSSL  # noqa: F401
    except ImportError as e:
        raise RuntimeError(
            "the tls transport needs pyOpenSSL: install salttwist[tls] (a command that uses "
            "tls must start its reactor with TLS support: runWithReactor(tls=True))"
        ) from e


@implementer(ITransport)
class TLSTransport:
    """
    TLS over another transport's connections (C{tcp} by default).
    """

    name = "tls"
    needsTLS = True

    def __init__(self, inner: Any = TCP, handshakeTimeout: float = HANDSHAKE_TIMEOUT) -> None:
        """
        @param inner: the L{ITransport} carrying the TLS bytes.
        @param handshakeTimeout: seconds the master gives a handshake.
        """
        self.inner = inner
        self.handshakeTimeout = handshakeTimeout

    def prepareMaster(self, config: dict[str, Any]) -> None:
        """
        Make the master's certificate if it has none for its key, and put
        a copy in C{sock_dir} for the local clients.
        """
        _tlsModule()
        self.inner.prepareMaster(config)
        certificate = ensureMasterCertificate(config["pki_dir"])
        atomicWrite(
            os.path.join(config["sock_dir"], CERT_FILE),
            certificate.public_bytes(serialization.Encoding.PEM),
            0o644,
            durable=False,
        )

    def serverEndpoint(
        self, reactor: Any, config: dict[str, Any], interface: str, port: int, role: str
    ) -> TLSServerEndpoint:
        """
        @return: the inner transport's server endpoint, with TLS under the
            master's certificate.
        """
        _tlsModule()
        creator = MasterServerCreator(
            _serverOptions(config["pki_dir"]), reactor, role, self.handshakeTimeout
        )
        return TLSServerEndpoint(
            self.inner.serverEndpoint(reactor, config, interface, port, role), creator, reactor
        )

    def clientEndpoint(
        self, reactor: Any, config: dict[str, Any], host: str, port: int, role: str
    ) -> Any:
        """
        @return: the inner transport's client endpoint, with TLS that
            accepts only the master's key (L{MasterKeyCheck.forRole}).
        """
        _tlsModule()
        creator = PinnedMasterCreator(MasterKeyCheck.forRole(config, role), f"{host}:{port}")
        return TLSClientEndpoint(
            self.inner.clientEndpoint(reactor, config, host, port, role), creator, reactor
        )


#: The C{tls} transport (the object C{twisted/plugins/salttwist_transports.py}
#: declares).
TLS = TLSTransport()
