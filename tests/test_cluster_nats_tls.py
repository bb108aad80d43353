# -*- test-case-name: tests.test_cluster_nats_tls -*-
"""
Tests for credentials and TLS on the cluster's connection to NATS
(L{salttwist.cluster.nats}, L{salttwist.cluster.natsprotocol}): the bus
contract through a private C{nats-server} that requires TLS (a self-signed
certificate made here) and a user and password; a token; and the refusals,
each saying why: a wrong password, plain TCP to a server that requires TLS,
TLS asked of a server without it, a certificate not signed by the CA given.
The URL's password never shows in messages.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.cluster.nats import NatsClusterBus, brokerAddress, parseBrokerUrl
from salttwist.config import ConfigError, loadMasterConfig
from tests._clustercontract import ClusterBusContract
from tests._nats import PrivateNatsServer, newClusterId, reactor, waitUntil
from tests.test_cluster_nats import _NatsBuses

USER = "master"
PASSWORD = "s3cret:@/x"
PASSWORD_IN_URL = "s3cret%3A%40%2Fx"


def makeCertificate(directory: str, name: str = "localhost") -> tuple[str, str]:
    """
    Make a self-signed certificate for C{name} (its own CA).

    @return: the paths of its PEM certificate and key.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    os.makedirs(directory, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certPath = os.path.join(directory, "cert.pem")
    keyPath = os.path.join(directory, "key.pem")
    with open(certPath, "wb") as f:
        f.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(keyPath, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return certPath, keyPath


async def startTlsServer(testCase: TestCase, userinfo: str, *auth: str) -> PrivateNatsServer:
    """
    Start a private server requiring TLS (and C{auth}'s arguments).
    """
    cert, key = makeCertificate(os.path.abspath(testCase.mktemp()))
    server = PrivateNatsServer(
        testCase,
        extraArgs=("--tls", "--tlscert", cert, "--tlskey", key, *auth),
        scheme="tls",
        userinfo=userinfo,
        caFile=cert,
    )
    await server.start()
    return server


class TlsPasswordBusTests(_NatsBuses, ClusterBusContract, TestCase):
    """
    The L{IClusterBus} contract through TLS, logged in with a user and a
    password (percent-encoded in the URL).
    """

    async def startServer(self) -> None:
        self.server = await startTlsServer(
            self, f"{USER}:{PASSWORD_IN_URL}@", "--user", USER, "--pass", PASSWORD
        )
        self.caFile = self.server.caFile
        self.url = self.serverUrl = self.server.url

    async def makeBus(self, memberId: str, **options: Any) -> NatsClusterBus:
        if not self.url:
            await self.startServer()
        options.setdefault("caFile", self.caFile)
        return await super().makeBus(memberId, **options)


class RefusalTests(TestCase):
    """
    A connection that cannot be made as asked is refused, and jobs are
    refused naming the reason.
    """

    async def refusal(self, url: str, caFile: str | None) -> str:
        bus = NatsClusterBus(
            reactor(), url, newClusterId(), "a", unreachableLimit=0.2, caFile=caFile
        )
        bus.start()
        self.addCleanup(bus.stop)
        why = await waitUntil(
            lambda: (
                "cannot connect" not in (bus.whyUnavailable() or "cannot connect")
                and "not connected yet" not in (bus.whyUnavailable() or "")
                and bus.whyUnavailable()
            ),
            f"jobs refused with a reason ({url})",
        )
        self.assertFalse(bus.connected)
        self.assertNotIn(PASSWORD, why)
        return why  # type: ignore[no-any-return]

    async def test_wrongPassword(self) -> None:
        """
        A password the server refuses: the server's authorization error.
        """
        server = await startTlsServer(
            self, f"{USER}:{PASSWORD_IN_URL}@", "--user", USER, "--pass", PASSWORD
        )
        url = f"tls://{USER}:wrong@localhost:{server.port}"
        why = await self.refusal(url, server.caFile)
        self.assertIn("Authorization Violation", why)
        self.assertNotIn("wrong", why)

    async def test_noCredentials(self) -> None:
        """
        No credentials for a server that requires them: said before sending
        anything.
        """
        server = await startTlsServer(self, "tok3n@", "--auth", "tok3n")
        why = await self.refusal(f"tls://localhost:{server.port}", server.caFile)
        self.assertIn("requires credentials", why)

    async def test_token(self) -> None:
        """
        C{tls://token@host} logs in with a token.
        """
        server = await startTlsServer(self, "tok3n@", "--auth", "tok3n")
        bus = NatsClusterBus(reactor(), server.url, newClusterId(), "a", caFile=server.caFile)
        bus.start()
        self.addCleanup(bus.stop)
        await waitUntil(lambda: bus.connected, "connected with a token")
        self.assertEqual(bus.url, f"tls://***@localhost:{server.port}")

    async def test_plainToTlsServer(self) -> None:
        """
        C{nats://} to a server that requires TLS: refused, saying to use
        C{tls://}.
        """
        server = await startTlsServer(self, "")
        url = server.url.replace("tls://localhost", "nats://127.0.0.1")
        why = await self.refusal(url, None)
        self.assertIn("requires TLS", why)

    async def test_tlsToPlainServer(self) -> None:
        """
        C{tls://} to a server without TLS: refused before the credentials
        are sent.
        """
        server = PrivateNatsServer(
            self,
            extraArgs=("--user", USER, "--pass", PASSWORD),
            userinfo=f"{USER}:{PASSWORD_IN_URL}@",
        )
        await server.start()
        url = f"tls://{USER}:{PASSWORD_IN_URL}@localhost:{server.port}"
        why = await self.refusal(url, None)
        self.assertIn("does not offer TLS", why)

    async def test_untrustedCertificate(self) -> None:
        """
        A certificate not signed by the CA given (another self-signed one)
        fails the handshake: nothing is sent.
        """
        server = await startTlsServer(
            self, f"{USER}:{PASSWORD_IN_URL}@", "--user", USER, "--pass", PASSWORD
        )
        other, _ = makeCertificate(os.path.abspath(self.mktemp()))
        why = await self.refusal(server.url, other)
        self.assertIn("certificate", why.lower())


class UrlTests(SynchronousTestCase):
    """
    Reading C{cluster_broker}.
    """

    def test_forms(self) -> None:
        """
        nats:// and tls://, with a user and password, a token, or neither;
        the URL shown masks the password and the token.
        """
        address = brokerAddress(f"tls://{USER}:{PASSWORD_IN_URL}@db.example:4333")
        self.assertEqual((address.host, address.port, address.tls), ("db.example", 4333, True))
        self.assertEqual(address.credentials, {"user": USER, "pass": PASSWORD})
        self.assertEqual(address.url, f"tls://{USER}:***@db.example:4333")
        self.assertNotIn(PASSWORD, repr(address))
        token = brokerAddress("nats://t0k@h")
        self.assertEqual(
            (token.credentials, token.url), ({"auth_token": "t0k"}, "nats://***@h:4222")
        )
        self.assertEqual(brokerAddress("nats://h").credentials, {})
        self.assertEqual(parseBrokerUrl("tls://[::1]:5"), ("::1", 5))
        for bad in ("nats://:@h", "nats://u:@h", "nats://h?x=1", "https://h"):
            error = self.assertRaises(ValueError, brokerAddress, bad)
            self.assertNotIn("@", str(error))

    def test_configHidesPassword(self) -> None:
        """
        A bad C{cluster_broker} is refused at start without showing it.
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        with open(os.path.join(directory, "master"), "w") as f:
            f.write(f"cluster_broker: tls://{USER}:{PASSWORD}@h/path\n")
        error = self.assertRaises(ConfigError, loadMasterConfig, directory)
        self.assertIn("cluster_broker", str(error))
        self.assertNotIn("s3cret", str(error))

    def test_badCaFile(self) -> None:
        """
        A CA file that is not PEM certificates is refused, naming it.
        """
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write("not a certificate\n")
        error = self.assertRaises(
            ValueError, NatsClusterBus, Clock(), "tls://h", "c", "m", caFile=path
        )
        self.assertIn(path, str(error))
