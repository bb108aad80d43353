# -*- test-case-name: tests.test_cluster_nats_auth -*-
"""
Tests for NATS's decentralised logins and client certificates on the
cluster's connection to its broker (L{salttwist.cluster.natsauth},
L{salttwist.cluster.nats}, L{salttwist.cluster.natsprotocol}).

Unit: NKEY seeds decoded (a known seed gives its known public key and
signature, the signature verifies), refused with the reason (another kind of
seed, a bad checksum, a public key), C{.creds} files read, and the
C{CONNECT} built from the server's nonce on a L{StringTransport}.

Real: private C{nats-server}s started by the test with a configuration file:
one that requires client certificates (C{tls { verify: true }}) and has an
NKEY user, through which the whole bus contract runs; the refusals (no
client certificate, another NKEY, a server with no NKEY users); and one in
operator mode (C{resolver: MEMORY}), with operator, account and user JWTs
made and signed here, logged in to with a C{.creds} file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.cluster.nats import NatsClusterBus, brokerAddress, brokerTlsOptions
from salttwist.cluster.natsauth import (
    PREFIX_ACCOUNT,
    PREFIX_OPERATOR,
    PREFIX_USER,
    NkeyAuth,
    NkeyError,
    NkeyPair,
    crc16,
    encodeSeed,
    jwtClaims,
    loadNkeyAuth,
    parseCreds,
    verifyNonce,
)
from salttwist.cluster.natsprotocol import NatsProtocol
from salttwist.daemon import StartupError
from tests._clustercontract import ClusterBusContract
from tests._nats import PrivateNatsServer, newClusterId, reactor, waitUntil
from tests.test_cluster_nats import _NatsBuses
from tests.test_cluster_nats_tls import makeCertificate

#: A user seed and its public key, and a nonce's signature by it, as NATS's
#: own nkeys library gives them (nats.py's tests use this seed).
SEED = "SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU"
PUBLIC = "UCK5N7N66OBOINFXAYC2ACJQYFSOD4VYNU6APEJTAVFZB2SVHLKGEW7L"
NONCE = "PXoWU7zWAMt75FY"
SIGNATURE = "ZaAiVDgB5CeYoXoQ7cBCmq-ZllzUnGUoDVb8C7PilWvCs8XKfUchAUhz2P4BYAF--Dg3w05CqyQFRDiGL6LrDw"


def newPair(prefix: int = PREFIX_USER) -> tuple[str, NkeyPair]:
    """
    @return: a new seed of C{prefix}'s kind, and its key pair.
    """
    seed = encodeSeed(prefix, os.urandom(32))
    return seed, NkeyPair.fromSeed(seed, expected=prefix)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def makeJwt(issuer: NkeyPair, subject: str, name: str, nats: dict[str, Any]) -> str:
    """
    Make a NATS JWT (v2): JSON claims signed by C{issuer} with Ed25519
    (C{alg: ed25519-nkey}), its C{jti} the SHA-512/256 of the claims.
    """
    claims: dict[str, Any] = {
        "jti": "",
        "iat": int(time.time()),
        "iss": issuer.publicKey,
        "name": name,
        "sub": subject,
        "nats": {**nats, "version": 2},
    }
    digest = hashlib.new("sha512_256", json.dumps(claims).encode()).digest()
    claims["jti"] = base64.b32encode(digest).decode().rstrip("=")
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    payload = _b64(json.dumps(claims).encode())
    signature = _b64(issuer.sign(f"{header}.{payload}".encode()))
    return f"{header}.{payload}.{signature}"


def credsText(jwt: str, seed: str) -> str:
    """
    @return: a C{.creds} file as C{nsc} writes it.
    """
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{seed}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


def writePrivate(testCase: Any, text: str, mode: int = 0o600) -> str:
    """
    @return: the path of a new file holding C{text} with C{mode}.
    """
    path = os.path.abspath(testCase.mktemp())
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


class NkeyTests(SynchronousTestCase):
    """
    NKEY seeds, public keys and signatures.
    """

    def test_knownSeed(self) -> None:
        """
        A known user seed gives its known public key, and the known
        signature of a nonce, base64url without padding, which verifies.
        """
        pair = NkeyPair.fromSeed(SEED)
        self.assertEqual(pair.publicKey, PUBLIC)
        self.assertEqual(pair.signNonce(NONCE), SIGNATURE)
        self.assertNotIn("=", SIGNATURE)
        self.assertTrue(verifyNonce(PUBLIC, NONCE, SIGNATURE))
        self.assertFalse(verifyNonce(PUBLIC, NONCE + "x", SIGNATURE))
        self.assertNotIn(SEED, repr(pair))

    def test_crc16(self) -> None:
        """
        The checksum is CRC-16/XMODEM (its check value for C{123456789}).
        """
        self.assertEqual(crc16(b"123456789"), 0x31C3)

    def test_roundTrip(self) -> None:
        """
        A seed made here decodes to the same key.
        """
        raw = bytes(range(32))
        seed = encodeSeed(PREFIX_USER, raw)
        self.assertTrue(seed.startswith("SU"))
        pair = NkeyPair.fromSeed(seed)
        self.assertTrue(pair.publicKey.startswith("U"))
        self.assertTrue(verifyNonce(pair.publicKey, "n", pair.signNonce("n")))

    def test_refused(self) -> None:
        """
        Another kind of seed, a bad checksum, a public key, or text that is
        not base32 are refused saying why, without showing the seed.
        """
        account, _ = newPair(PREFIX_ACCOUNT)
        error = self.assertRaises(NkeyError, NkeyPair.fromSeed, account)
        self.assertIn("account seed (SA...), not a user seed (SU...)", str(error))
        self.assertNotIn(account, str(error))
        typo = SEED[:20] + ("A" if SEED[20] != "A" else "B") + SEED[21:]
        error = self.assertRaises(NkeyError, NkeyPair.fromSeed, typo)
        self.assertIn("checksum", str(error))
        self.assertNotIn(SEED[:20], str(error))
        error = self.assertRaises(NkeyError, NkeyPair.fromSeed, PUBLIC)
        self.assertIn("public user key, not a seed", str(error))
        self.assertRaises(NkeyError, NkeyPair.fromSeed, "not base32!")

    def test_connectFields(self) -> None:
        """
        An NKEY user sends C{nkey} and C{sig}; a JWT user C{jwt} and C{sig}.
        """
        pair = NkeyPair.fromSeed(SEED)
        self.assertEqual(NkeyAuth(pair).connectFields(NONCE), {"nkey": PUBLIC, "sig": SIGNATURE})
        self.assertEqual(
            NkeyAuth(pair, "a.b.c").connectFields(NONCE), {"jwt": "a.b.c", "sig": SIGNATURE}
        )


class CredsTests(SynchronousTestCase):
    """
    C{.creds} files and the files C{cluster_broker_nkey} and
    C{cluster_broker_creds} name.
    """

    def test_parse(self) -> None:
        """
        The JWT and the seed are read from their blocks; the JWT is for the
        seed's key.
        """
        account = newPair(PREFIX_ACCOUNT)[1]
        jwt = makeJwt(account, PUBLIC, "m", {"type": "user"})
        parsed, pair = parseCreds(credsText(jwt, SEED))
        self.assertEqual((parsed, pair.publicKey), (jwt, PUBLIC))
        self.assertEqual(jwtClaims(jwt)["iss"], account.publicKey)

    def test_refused(self) -> None:
        """
        A file with no blocks, a JWT for another key, or an account seed in
        it is refused saying so.
        """
        self.assertRaises(NkeyError, parseCreds, "nothing here")
        account = newPair(PREFIX_ACCOUNT)[1]
        other = newPair()[1]
        jwt = makeJwt(account, other.publicKey, "m", {"type": "user"})
        error = self.assertRaises(NkeyError, parseCreds, credsText(jwt, SEED))
        self.assertIn("not for its seed's key", str(error))
        accountSeed = newPair(PREFIX_ACCOUNT)[0]
        error = self.assertRaises(NkeyError, parseCreds, credsText(jwt, accountSeed))
        self.assertIn("not a user seed", str(error))

    def test_loadFiles(self) -> None:
        """
        A seed file and a C{.creds} file are loaded; both at once, or a
        missing file, are refused naming the option; nothing given is no
        NKEY login.
        """
        self.assertIsNone(loadNkeyAuth())
        seedFile = writePrivate(self, f"{SEED}\n")
        auth = loadNkeyAuth(seedFile)
        assert auth is not None
        self.assertEqual((auth.pair.publicKey, auth.jwt), (PUBLIC, None))
        account = newPair(PREFIX_ACCOUNT)[1]
        jwt = makeJwt(account, PUBLIC, "m", {"type": "user"})
        credsFile = writePrivate(self, credsText(jwt, SEED))
        auth = loadNkeyAuth(credsFile=credsFile)
        assert auth is not None
        self.assertEqual(auth.jwt, jwt)
        error = self.assertRaises(NkeyError, loadNkeyAuth, seedFile, credsFile)
        self.assertIn("not both", str(error))
        error = self.assertRaises(NkeyError, loadNkeyAuth, seedFile + ".missing")
        self.assertIn("cluster_broker_nkey", str(error))
        badFile = writePrivate(self, "SAx\n")
        error = self.assertRaises(NkeyError, loadNkeyAuth, badFile)
        self.assertIn(badFile, str(error))

    def test_loosePermissionsRefused(self) -> None:
        """
        A seed file, a C{.creds} file or a client key others may read stops
        the master at start, naming the file and the C{chmod}.
        """
        loose = writePrivate(self, f"{SEED}\n", 0o644)
        for options in ({"nkeyFile": loose}, {"credsFile": loose}):
            error = self.assertRaises(
                StartupError, NatsClusterBus, Clock(), "nats://h", "c", "m", **options
            )
            self.assertIn(loose, str(error))
            self.assertIn("chmod go-rwx", str(error))
        cert, key = makeCertificate(os.path.abspath(self.mktemp()))
        os.chmod(key, 0o640)
        error = self.assertRaises(
            StartupError, brokerTlsOptions, brokerAddress("tls://h"), None, cert, key
        )
        self.assertIn(key, str(error))

    def test_clientCertificateRefusals(self) -> None:
        """
        A certificate without its key, a certificate with another one's key,
        a certificate without TLS, and an NKEY besides a password are
        refused.
        """
        cert, key = makeCertificate(os.path.abspath(self.mktemp()))
        _, otherKey = makeCertificate(os.path.abspath(self.mktemp()))
        os.chmod(key, 0o600)
        os.chmod(otherKey, 0o600)
        tls = brokerAddress("tls://h")
        self.assertRaises(ValueError, brokerTlsOptions, tls, None, cert, None)
        error = self.assertRaises(ValueError, brokerTlsOptions, tls, None, cert, otherKey)
        self.assertIn("is not the key of the certificate", str(error))
        error = self.assertRaises(
            ValueError, brokerTlsOptions, brokerAddress("nats://h"), None, cert, key
        )
        self.assertIn("tls://", str(error))
        self.assertIsNotNone(brokerTlsOptions(tls, None, cert, key))
        seedFile = writePrivate(self, f"{SEED}\n")
        error = self.assertRaises(
            ValueError, NatsClusterBus, Clock(), "nats://u:p@h", "c", "m", nkeyFile=seedFile
        )
        self.assertIn("one way to log in", str(error))


class ConnectTests(SynchronousTestCase):
    """
    The C{CONNECT} answering a server's C{INFO}, on a L{StringTransport}.
    """

    def connect(self, auth: NkeyAuth | None, info: dict[str, Any]) -> tuple[NatsProtocol, Any]:
        """
        @return: a protocol logging in with C{auth} that got C{info}, and
            the C{CONNECT} it sent (L{None} if none).
        """
        proto = NatsProtocol(Clock(), "salttwist-m", nkeyAuth=auth)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(b"INFO " + json.dumps(info).encode() + b"\r\n")
        connect = None
        for line in transport.value().split(b"\r\n"):
            if line.startswith(b"CONNECT "):
                connect = json.loads(line[len(b"CONNECT ") :])
        return proto, connect

    def test_nkey(self) -> None:
        """
        The server's nonce is signed with the user's seed; the signature
        verifies with the public key sent.
        """
        seed, pair = newPair()
        _, connect = self.connect(NkeyAuth(pair), {"nonce": "n0nce", "auth_required": True})
        self.assertEqual(connect["nkey"], pair.publicKey)
        self.assertTrue(verifyNonce(connect["nkey"], "n0nce", connect["sig"]))
        self.assertNotIn("jwt", connect)
        self.assertNotIn(seed, json.dumps(connect))

    def test_jwt(self) -> None:
        """
        A C{.creds} user sends its JWT and the signature, not C{nkey}.
        """
        _, pair = newPair()
        _, connect = self.connect(NkeyAuth(pair, "h.p.s"), {"nonce": "x", "auth_required": True})
        self.assertEqual(connect["jwt"], "h.p.s")
        self.assertNotIn("nkey", connect)
        self.assertTrue(verifyNonce(pair.publicKey, "x", connect["sig"]))

    def test_noNonce(self) -> None:
        """
        A server that sends no nonce (no NKEY users) is left before the
        C{CONNECT}, saying why.
        """
        proto, connect = self.connect(NkeyAuth(newPair()[1], source="/etc/m.nk"), {})
        self.assertIsNone(connect)
        assert proto.failReason is not None
        self.assertIn("sent no nonce", proto.failReason)
        self.assertIn("/etc/m.nk", proto.failReason)

    def test_authorizationViolation(self) -> None:
        """
        The server's C{-ERR 'Authorization Violation'} closes the
        connection, the reason kept for the refusal.
        """
        proto, _ = self.connect(NkeyAuth(newPair()[1]), {"nonce": "x"})
        proto.dataReceived(b"-ERR 'Authorization Violation'\r\n")
        assert proto.failReason is not None
        self.assertIn("Authorization Violation", proto.failReason)


# -- real servers -------------------------------------------------------------


def serverConfig(testCase: Any, text: str) -> str:
    """
    @return: the path of a C{nats-server} configuration file holding C{text}.
    """
    path = os.path.abspath(testCase.mktemp()) + ".conf"
    with open(path, "w") as f:
        f.write(text)
    return path


class MutualTls:
    """
    A private server requiring TLS with client certificates (C{verify:
    true}, signed by the client's own self-signed certificate) and an NKEY
    user.
    """

    async def startMutualTls(self) -> None:
        """
        Start the server; C{self.server}, the certificates, the client's key
        and the NKEY user's seed (file) are set.
        """
        testCase: Any = self
        self.serverCert, serverKey = makeCertificate(os.path.abspath(testCase.mktemp()))
        self.clientCert, self.clientKey = makeCertificate(
            os.path.abspath(testCase.mktemp()), "salttwist-master"
        )
        os.chmod(self.clientKey, 0o600)
        self.seed, self.pair = newPair()
        self.seedFile = writePrivate(testCase, f"{self.seed}\n")
        config = serverConfig(
            testCase,
            f"""
            tls {{
              cert_file: "{self.serverCert}"
              key_file: "{serverKey}"
              ca_file: "{self.clientCert}"
              verify: true
            }}
            authorization {{
              users = [ {{ nkey: "{self.pair.publicKey}" }} ]
            }}
            """,
        )
        address = brokerAddress("tls://localhost")
        self.server = PrivateNatsServer(
            testCase,
            extraArgs=("-c", config),
            scheme="tls",
            caFile=self.serverCert,
            loginArgs={
                "tlsOptions": brokerTlsOptions(
                    address, self.serverCert, self.clientCert, self.clientKey
                ),
                "nkeyAuth": loadNkeyAuth(self.seedFile),
                "clientCertificate": True,
            },
        )
        await self.server.start()


class MutualTlsNkeyBusTests(MutualTls, _NatsBuses, ClusterBusContract, TestCase):
    """
    The L{IClusterBus} contract through TLS with a client certificate,
    logged in as an NKEY user.
    """

    async def startServer(self) -> None:
        await self.startMutualTls()
        # Its stream goes with the server's own store: no deletion needed.
        self.clusterId = newClusterId()
        self.url = self.serverUrl = self.server.url

    async def makeBus(self, memberId: str, **options: Any) -> NatsClusterBus:
        if not self.url:
            await self.startServer()
        options.setdefault("caFile", self.serverCert)
        options.setdefault("certFile", self.clientCert)
        options.setdefault("keyFile", self.clientKey)
        options.setdefault("nkeyFile", self.seedFile)
        return await super().makeBus(memberId, **options)


async def refusal(testCase: TestCase, url: str, **options: Any) -> str:
    """
    @return: why a bus with C{options} is refused by the server at C{url}
        (what new jobs are refused with).
    """
    bus = NatsClusterBus(reactor(), url, newClusterId(), "a", unreachableLimit=0.2, **options)
    bus.start()
    testCase.addCleanup(bus.stop)
    why = await waitUntil(
        lambda: (
            "cannot connect" not in (bus.whyUnavailable() or "cannot connect")
            and "not connected yet" not in (bus.whyUnavailable() or "")
            and bus.whyUnavailable()
        ),
        f"jobs refused with a reason ({url})",
    )
    testCase.assertFalse(bus.connected)
    return why  # type: ignore[no-any-return]


class MutualTlsRefusalTests(MutualTls, TestCase):
    """
    What a server with client certificates and NKEY users refuses.
    """

    async def test_noClientCertificate(self) -> None:
        """
        Without a client certificate the TLS handshake fails: refused.
        """
        await self.startMutualTls()
        why = await refusal(self, self.server.url, caFile=self.serverCert, nkeyFile=self.seedFile)
        self.assertIn("bad certificate", why)

    async def test_otherNkey(self) -> None:
        """
        A seed the server does not know: its "Authorization Violation",
        and the seed is not shown.
        """
        await self.startMutualTls()
        otherSeed, _ = newPair()
        why = await refusal(
            self,
            self.server.url,
            caFile=self.serverCert,
            certFile=self.clientCert,
            keyFile=self.clientKey,
            nkeyFile=writePrivate(self, otherSeed + "\n"),
        )
        self.assertIn("Authorization Violation", why)
        self.assertNotIn(otherSeed, why)

    async def test_noLogin(self) -> None:
        """
        A client certificate but no NKEY: the server's "Authorization
        Violation" (the certificate alone is not a login here).
        """
        await self.startMutualTls()
        why = await refusal(
            self,
            self.server.url,
            caFile=self.serverCert,
            certFile=self.clientCert,
            keyFile=self.clientKey,
        )
        self.assertIn("Authorization Violation", why)


class NkeyServerTests(TestCase):
    """
    NKEY users on plain TCP.
    """

    async def test_serverWithoutNonce(self) -> None:
        """
        An NKEY given for a server with no NKEY users (it sends no nonce):
        refused, saying so.
        """
        server = PrivateNatsServer(self, extraArgs=("--user", "u", "--pass", "p"), userinfo="u:p@")
        await server.start()
        url = f"nats://127.0.0.1:{server.port}"
        why = await refusal(self, url, nkeyFile=writePrivate(self, SEED + "\n"))
        self.assertIn("sent no nonce", why)

    async def test_nkeyUser(self) -> None:
        """
        An C{nkey} user of the server's configuration logs in on C{nats://}.
        """
        seed, pair = newPair()
        seedFile = writePrivate(self, seed + "\n")
        config = serverConfig(
            self, f'authorization {{ users = [ {{ nkey: "{pair.publicKey}" }} ] }}\n'
        )
        server = PrivateNatsServer(
            self, extraArgs=("-c", config), loginArgs={"nkeyAuth": loadNkeyAuth(seedFile)}
        )
        await server.start()
        bus = NatsClusterBus(reactor(), server.url, newClusterId(), "a", nkeyFile=seedFile)
        bus.start()
        self.addCleanup(bus.stop)
        await waitUntil(lambda: bus.connected, "connected as an NKEY user")


class OperatorModeTests(TestCase):
    """
    A server in operator mode (decentralised JWT authentication): an
    operator, an account with JetStream and a user, their JWTs made and
    signed here; the master logs in with the user's C{.creds} file.
    """

    async def startOperatorServer(self) -> tuple[PrivateNatsServer, str, NkeyPair]:
        """
        @return: the server, a C{.creds} file of a user of its account, and
            the account's key pair (to sign other users).
        """
        _, operator = newPair(PREFIX_OPERATOR)
        _, account = newPair(PREFIX_ACCOUNT)
        _, system = newPair(PREFIX_ACCOUNT)
        userSeed, user = newPair()
        operatorJwt = makeJwt(operator, operator.publicKey, "op", {"type": "operator"})
        unlimited = {
            name: -1
            for name in (
                "subs",
                "data",
                "payload",
                "imports",
                "exports",
                "conn",
                "leaf",
                "mem_storage",
                "disk_storage",
                "streams",
                "consumer",
            )
        }
        accountJwt = makeJwt(
            operator,
            account.publicKey,
            "salttwist",
            {
                "type": "account",
                "limits": {**unlimited, "wildcards": True},
                "default_permissions": {"pub": {}, "sub": {}},
            },
        )
        userJwt = makeJwt(
            account,
            user.publicKey,
            "master",
            {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1},
        )
        systemJwt = makeJwt(operator, system.publicKey, "SYS", {"type": "account"})
        operatorFile = writePrivate(self, operatorJwt)
        config = serverConfig(
            self,
            f"""
            operator: "{operatorFile}"
            system_account: "{system.publicKey}"
            resolver: MEMORY
            resolver_preload: {{
              {account.publicKey}: "{accountJwt}"
              {system.publicKey}: "{systemJwt}"
            }}
            """,
        )
        credsFile = writePrivate(self, credsText(userJwt, userSeed))
        server = PrivateNatsServer(
            self, extraArgs=("-c", config), loginArgs={"nkeyAuth": loadNkeyAuth(None, credsFile)}
        )
        await server.start()
        return server, credsFile, account

    async def test_credsLogin(self) -> None:
        """
        The bus logs in with the C{.creds} file, sets up its stream, and a
        durable message crosses between two members.
        """
        server, credsFile, _ = await self.startOperatorServer()
        clusterId = newClusterId()
        buses = []
        for member in ("a", "b"):
            bus = NatsClusterBus(reactor(), server.url, clusterId, member, credsFile=credsFile)
            buses.append(bus)
        got: list[bytes] = []
        buses[1].subscribe("job", got.append)
        for bus in buses:
            bus.start()
            self.addCleanup(bus.stop)
        await waitUntil(lambda: all(bus.connected for bus in buses), "both connected")
        await buses[0].publish("job", b"through operator mode")
        await waitUntil(lambda: got, "the job delivered")
        self.assertEqual(got, [b"through operator mode"])

    async def test_userOfAnotherAccount(self) -> None:
        """
        A user JWT signed by an account the operator did not sign: the
        server's "Authorization Violation".
        """
        server, _, _ = await self.startOperatorServer()
        userSeed, user = newPair()
        stranger = newPair(PREFIX_ACCOUNT)[1]
        jwt = makeJwt(stranger, user.publicKey, "x", {"type": "user", "pub": {}, "sub": {}})
        why = await refusal(
            self, server.url, credsFile=writePrivate(self, credsText(jwt, userSeed))
        )
        self.assertIn("Authorization Violation", why)
        self.assertNotIn(userSeed, why)
