# -*- test-case-name: tests.test_transports -*-
"""
Tests for the transport plugins: L{salttwist.transport.registry}, the C{tcp}
and C{tls} transports, and a third-party plugin
(C{tests/plugins/twisted/plugins/salttwist_test_transport.py}) that salttwist
knows nothing about.

Everything runs in memory: the master listens and the minion connects on
one L{MemoryReactorClock}, and L{_Wire} joins each connection attempt to a
protocol of the factory listening on that port, so the TLS handshakes and
the whole authentication run for real, without a socket.
"""

from __future__ import annotations

import datetime
import io
import os
import shutil
import socket
import stat
import sys
import tempfile
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import (
    IStreamClientEndpoint,
    IStreamServerEndpoint,
    ISystemHandle,
    ITCPTransport,
)
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import EventLoggingObserver, MemoryReactorClock, StringTransport
from twisted.logger import globalLogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

import twisted.plugins
from salttwist import crypt
from salttwist.blocking import runSynchronously
from salttwist.cli import call as callCli
from salttwist.cli import run as runCli
from salttwist.cli import salt as saltCli
from salttwist.config import ConfigError, loadMasterConfig, loadMinionConfig
from salttwist.daemon import StartupError
from salttwist.master.service import MasterService
from salttwist.minion import core as minionCore
from salttwist.minion.service import buildMinion
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from salttwist.transport import tls
from salttwist.transport.interfaces import ROLE_CLIENT, ROLE_PUB, ROLE_REQ, ITransport
from salttwist.transport.registry import UnknownTransport, findTransport, installedTransports
from salttwist.transport.tcp import (
    CONNECT_TIMEOUT,
    KEEPALIVE_IDLE,
    LISTEN_BACKLOG,
    TCP,
    KeepAliveEndpoint,
    addressFamily,
)
from salttwist.transport.tls import (
    CERT_FILE,
    TLS,
    MasterKeyCheck,
    MasterKeyMismatch,
    ensureMasterCertificate,
)
from tests._fresh import pythonOutput
from tests._loopback import Loopback

MASTER_KEY = crypt.generatePrivateKey()
MASTER_PEM = crypt.publicKeyToPem(MASTER_KEY.public_key())
OTHER_KEY = crypt.generatePrivateKey()
OTHER_PEM = crypt.publicKeyToPem(OTHER_KEY.public_key())
MINION_KEY = crypt.generatePrivateKey()
MINION_PEM = crypt.publicKeyToPem(MINION_KEY.public_key())

PUB_PORT = 4505
REQ_PORT = 4506
#: The directory holding the test plugin's C{twisted/plugins}.
TEST_PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins")
TLS_HANDSHAKE_RECORD = 0x16


def useTestPlugins(testCase: SynchronousTestCase) -> None:
    """
    Make the test plugin directory part of C{twisted.plugins} for one test,
    as installing a third-party plugin would (tahoe-lafs's
    C{UseTestPlugins}).
    """
    testCase.patch(
        twisted.plugins,
        "__path__",
        [*twisted.plugins.__path__, os.path.join(TEST_PLUGINS, "twisted", "plugins")],
    )


def seedKeyPair(pkiDir: str, name: str, key: Any) -> None:
    """
    Put C{key} in C{pkiDir/name.pem} and C{.pub}, so nobody generates one.
    """
    os.makedirs(pkiDir, mode=0o700, exist_ok=True)
    crypt.writePrivateFile(os.path.join(pkiDir, f"{name}.pem"), crypt.privateKeyToPem(key))
    with open(os.path.join(pkiDir, f"{name}.pub"), "wb") as f:
        f.write(crypt.publicKeyToPem(key.public_key()))


class _NoJobCache:
    """
    A job cache that keeps nothing (the real one needs a real reactor).
    """

    def startPruning(self) -> None:
        pass

    def close(self) -> Deferred[None]:
        return succeed(None)

    def storeJob(self, *args: Any) -> Deferred[None]:
        return succeed(None)

    def storeReturn(self, *args: Any) -> Deferred[None]:
        return succeed(None)


class _Wire:
    """
    Joins each connection attempt made on a L{MemoryReactorClock} to a new
    protocol of the factory listening on that port, in memory, and keeps
    the first bytes each client sent.
    """

    def __init__(self, reactor: MemoryReactorClock) -> None:
        self.reactor = reactor
        self.loopback = Loopback(reactor)
        self.firstClientBytes: list[bytes] = []
        self._joined = 0

    def _joinNew(self) -> bool:
        servers = {port: factory for port, factory, *_ in self.reactor.tcpServers}
        attempts = self.reactor.tcpClients[self._joined :]
        for _host, port, factory, *_ in attempts:
            self._joined += 1
            addr = IPv4Address("TCP", "127.0.0.1", port)
            pump = self.loopback.connect(
                servers[port].buildProtocol(addr), factory.buildProtocol(addr)
            )
            self.firstClientBytes.append(b"".join(pump.clientIO.stream)[:1])
        return bool(attempts)

    def run(self, done: Any, rounds: int = 100) -> None:
        """
        Join and pump connections until C{done()} is true.
        """
        for _ in range(rounds):
            self._joinNew()
            self.loopback.flush()
            if done():
                return
            if not self._joinNew():
                self.reactor.advance(0.5)
        raise AssertionError("never done")


class RegistryTests(SynchronousTestCase):
    """
    L{findTransport} and L{installedTransports} find transports among the
    Twisted plugins.
    """

    def test_builtinsInstalled(self) -> None:
        """
        C{tcp} and C{tls} are installed plugins providing L{ITransport}, found
        by the plugin scan; C{tcp} is the built-in object whichever way it is
        looked up (without a scan, to save the commands' start-up time).
        """
        installed = installedTransports()
        self.assertIs(installed["tcp"], TCP)
        self.assertIs(installed["tls"], TLS)
        self.assertIs(findTransport("tcp"), TCP)
        self.assertIs(findTransport("tls"), TLS)
        for transport in (TCP, TLS):
            self.assertTrue(verifyObject(ITransport, transport))
        self.assertFalse(TCP.needsTLS)
        self.assertTrue(TLS.needsTLS)

    def test_unknownListsInstalled(self) -> None:
        """
        An unknown name raises L{UnknownTransport}, a L{ConfigError}, whose
        message lists the installed transports.
        """
        error = self.assertRaises(UnknownTransport, findTransport, "carrier-pigeon")
        self.assertIsInstance(error, ConfigError)
        self.assertEqual(str(error), "unknown transport 'carrier-pigeon'; installed: tcp, tls")

    def test_sameNameTwice(self) -> None:
        """
        When two plugins claim one name, choosing it is an error that names
        both, rather than a silent pick.
        """
        directory = os.path.join(os.path.abspath(self.mktemp()), "twisted", "plugins")
        os.makedirs(directory)
        module = "salttwist_test_second_tls"
        with open(os.path.join(directory, module + ".py"), "w") as f:
            f.write(
                "from salttwist.transport.tls import TLSTransport\n"
                "class OtherTLS(TLSTransport):\n"
                "    pass\n"
                "otherTLS = OtherTLS()\n"
            )
        self.patch(twisted.plugins, "__path__", [*twisted.plugins.__path__, directory])
        self.addCleanup(sys.modules.pop, f"twisted.plugins.{module}", None)
        error = self.assertRaises(UnknownTransport, findTransport, "tls")
        self.assertIn("several plugins", str(error))
        self.assertIn("salttwist.transport.tls.TLSTransport", str(error))
        self.assertIn("OtherTLS", str(error))

    def test_optionNoLongerPending(self) -> None:
        """
        C{transport} is an implemented option now: setting it in either
        config logs no "not implemented yet" warning.
        """
        logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        root = os.path.abspath(self.mktemp())
        loadMasterConfig(root, {"root_dir": root, "transport": "tls"})
        loadMinionConfig(root, {"root_dir": root, "transport": "tls"})
        self.assertEqual([e for e in logs if "not implemented" in e.get("log_format", "")], [])

    def test_scanKeepsOpenSSLOut(self) -> None:
        """
        Scanning the plugins and looking up C{tls} imports neither pyOpenSSL
        nor the reactor, so a command can still choose to start its reactor
        without TLS after the lookup.
        """
        script = (
            "import sys\n"
            "from salttwist.transport.registry import findTransport, installedTransports\n"
            "installedTransports()\n"
            "findTransport('tls'); findTransport('tcp')\n"
            "print('OpenSSL' in sys.modules, 'twisted.internet.reactor' in sys.modules)\n"
        )
        out = pythonOutput(self, script)
        self.assertEqual(out.split(), ["False", "False"])


class StartFailsTests(SynchronousTestCase):
    """
    A master, a minion or a command configured with an unknown transport
    fails at start and lists the installed transports.
    """

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="stt-")
        self.addCleanup(shutil.rmtree, self.root, True)

    def test_master(self) -> None:
        """
        L{MasterService} raises L{StartupError} with the list.
        """
        config = loadMasterConfig(self.root, {"root_dir": self.root, "transport": "nope"})
        error = self.assertRaises(
            StartupError, MasterService, config, MemoryReactorClock(), useWorkers=False
        )
        self.assertEqual(str(error), "unknown transport 'nope'; installed: tcp, tls")

    def test_minion(self) -> None:
        """
        L{buildMinion} raises L{StartupError} with the list, before it makes
        a key pair.
        """
        config = loadMinionConfig(self.root, {"root_dir": self.root, "transport": "nope"})
        error = self.assertRaises(StartupError, buildMinion, config, MemoryReactorClock())
        self.assertEqual(str(error), "unknown transport 'nope'; installed: tcp, tls")
        self.assertFalse(os.path.exists(os.path.join(config["pki_dir"], "minion.pem")))

    def test_command(self) -> None:
        """
        C{salttwist} prints the error and exits with 2 before it starts its
        reactor.
        """
        with open(os.path.join(self.root, "master"), "w") as f:
            f.write(f"root_dir: {self.root}\ntransport: nope\n")
        stderr = io.StringIO()
        self.patch(sys, "stderr", stderr)
        self.patch(saltCli, "runWithReactor", lambda *a, **kw: self.fail("reactor started"))
        self.assertEqual(saltCli.main(["-c", self.root, "*", "test.ping"]), 2)
        self.assertIn("unknown transport 'nope'; installed: tcp, tls", stderr.getvalue())

    def test_commandsAskForTLS(self) -> None:
        """
        C{salttwist}, C{salttwist-run} and C{salttwist-call} start their
        reactor with TLS support only when the transport of their config
        needs it (and C{salttwist-call --local}, which stays off the
        master, never). C{salttwist} starts no reactor at all for a plain
        job on C{tcp} (its direct client), only for a batch.
        """
        calls: list[tuple[str, bool]] = []

        def fakeRun(name: str) -> Any:
            def runWithReactor(command: Any, *args: Any, tls: bool = False) -> Any:
                calls.append((name, tls))
                return None, 0

            return runWithReactor

        for module, name in ((saltCli, "salt"), (runCli, "run"), (callCli, "call")):
            self.patch(module, "runWithReactor", fakeRun(name))
        for transport in ("tcp", "tls"):
            for daemon in ("master", "minion"):
                with open(os.path.join(self.root, daemon), "w") as f:
                    f.write(f"root_dir: {self.root}\ntransport: {transport}\n")
            saltCli.main(["-c", self.root, "*", "test.ping"])
            saltCli.main(["-c", self.root, "-b", "1", "*", "test.ping"])
            runCli.main(["-c", self.root, "jobs.list_jobs"])
            callCli.main(["-c", self.root, "test.ping"])
            callCli.main(["-c", self.root, "--local", "test.ping"])
        self.assertEqual(
            calls,
            [
                ("salt", False),
                ("run", False),
                ("call", False),
                ("call", False),
                ("salt", True),
                ("salt", True),
                ("run", True),
                ("call", True),
                ("call", False),
            ],
        )


@implementer(ITCPTransport, ISystemHandle)
class _TCPStringTransport(StringTransport):
    """
    A L{StringTransport} that records TCP keepalive settings.
    """

    def __init__(self) -> None:
        super().__init__()
        self.keepAlive = False
        self.options: list[tuple[int, int, int]] = []

    def setTcpKeepAlive(self, enabled: bool) -> None:
        self.keepAlive = enabled

    def getHandle(self) -> Any:
        return self

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append((level, option, value))


class TCPTransportTests(SynchronousTestCase):
    """
    The C{tcp} transport's endpoints.
    """

    def test_serverEndpoints(self) -> None:
        """
        The master listens on IPv4 or IPv6 by the interface's form, with a
        deep backlog, so thousands of minions connecting at once do not
        overflow the accept queue.
        """
        reactor = MemoryReactorClock()
        factory = Factory.forProtocol(Protocol)
        for interface in ("127.0.0.1", "::1"):
            endpoint = TCP.serverEndpoint(reactor, {}, interface, 4506, ROLE_REQ)
            self.assertTrue(verifyObject(IStreamServerEndpoint, endpoint))
            self.successResultOf(endpoint.listen(factory))
        self.assertEqual(
            [(port, backlog, interface) for port, _, backlog, interface in reactor.tcpServers],
            [(4506, LISTEN_BACKLOG, "127.0.0.1"), (4506, LISTEN_BACKLOG, "::1")],
        )

    def test_clientKeepAlive(self) -> None:
        """
        A client connection goes to the host and port with a timeout, and
        gets TCP keepalive with a 300 s idle time, so a master that vanished
        is noticed.
        """
        reactor = MemoryReactorClock()
        endpoint = TCP.clientEndpoint(reactor, {}, "10.0.0.5", 4506, ROLE_REQ)
        self.assertIsInstance(endpoint, KeepAliveEndpoint)
        self.assertTrue(verifyObject(IStreamClientEndpoint, endpoint))
        d = endpoint.connect(Factory.forProtocol(Protocol))
        host, port, factory, timeout, _ = reactor.tcpClients[0]
        self.assertEqual((host, port, timeout), ("10.0.0.5", 4506, CONNECT_TIMEOUT))
        transport = _TCPStringTransport()
        factory.buildProtocol(None).makeConnection(transport)
        proto = self.successResultOf(d)
        self.assertIs(proto.transport, transport)
        self.assertTrue(transport.keepAlive)
        if hasattr(__import__("socket"), "TCP_KEEPIDLE"):
            self.assertIn(KEEPALIVE_IDLE, [value for _, _, value in transport.options])

    def test_clientEndpointByAddressOrName(self) -> None:
        """
        An IPv4 or IPv6 address is connected to directly (no name
        resolution, which would take a thread per connection); a name, or an
        IPv6 address with a zone index, goes through C{HostnameEndpoint}.
        """
        from twisted.internet import endpoints

        reactor = MemoryReactorClock()
        expected = [
            ("192.0.2.7", endpoints.TCP4ClientEndpoint),
            ("::1", endpoints.TCP6ClientEndpoint),
            ("2001:db8::5", endpoints.TCP6ClientEndpoint),
            ("salt", endpoints.HostnameEndpoint),
            ("master.example.com", endpoints.HostnameEndpoint),
            ("fe80::1%eth0", endpoints.HostnameEndpoint),
            ("1.2.3", endpoints.HostnameEndpoint),
        ]
        for host, kind in expected:
            endpoint = TCP.clientEndpoint(reactor, {}, host, 4506, ROLE_REQ)
            self.assertIsInstance(endpoint.wrapped, kind, host)
        self.assertEqual(addressFamily("192.0.2.7"), socket.AF_INET)
        self.assertEqual(addressFamily("::1"), socket.AF_INET6)
        self.assertIsNone(addressFamily("salt"))

    def test_keepAliveSkipsOtherTransports(self) -> None:
        """
        A transport that is not TCP (an in-memory one) is left alone.
        """
        reactor = MemoryReactorClock()
        d = TCP.clientEndpoint(reactor, {}, "127.0.0.1", 4506, ROLE_REQ).connect(
            Factory.forProtocol(Protocol)
        )
        reactor.tcpClients[0][2].buildProtocol(None).makeConnection(StringTransport())
        self.successResultOf(d)


class CertificateTests(SynchronousTestCase):
    """
    The master's TLS certificate: made from its key on first start, kept
    while the key stays, remade when it changes.
    """

    def setUp(self) -> None:
        self.pkiDir = os.path.abspath(self.mktemp())
        seedKeyPair(self.pkiDir, "master", MASTER_KEY)
        self.path = os.path.join(self.pkiDir, CERT_FILE)
        self.now = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)

    def test_made(self) -> None:
        """
        The first call writes C{master.crt}, mode 0644: self-signed, for the
        master's own key, valid from an hour before now and without end.
        """
        certificate = ensureMasterCertificate(self.pkiDir, now=self.now)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o644)
        with open(self.path, "rb") as f:
            onDisk = x509.load_pem_x509_certificate(f.read())
        self.assertEqual(onDisk, certificate)
        self.assertEqual(tls._publicPem(certificate.public_key()), MASTER_PEM)
        self.assertEqual(certificate.issuer, certificate.subject)
        certificate.verify_directly_issued_by(certificate)
        self.assertEqual(certificate.not_valid_before_utc, self.now - datetime.timedelta(hours=1))
        self.assertEqual(certificate.not_valid_after_utc.year, 9999)

    def test_kept(self) -> None:
        """
        Later starts keep the certificate (same serial number and bytes).
        """
        first = ensureMasterCertificate(self.pkiDir, now=self.now)
        with open(self.path, "rb") as f:
            before = f.read()
        second = ensureMasterCertificate(self.pkiDir)
        self.assertEqual(second.serial_number, first.serial_number)
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_remadeForNewKey(self) -> None:
        """
        After the master's key changes, the certificate is remade for the
        new key; a file that is no certificate is replaced too.
        """
        ensureMasterCertificate(self.pkiDir, now=self.now)
        seedKeyPair(self.pkiDir, "master", OTHER_KEY)
        certificate = ensureMasterCertificate(self.pkiDir, now=self.now)
        self.assertEqual(tls._publicPem(certificate.public_key()), OTHER_PEM)
        with open(self.path, "wb") as f:
            f.write(b"not a certificate")
        certificate = ensureMasterCertificate(self.pkiDir, now=self.now)
        self.assertEqual(tls._publicPem(certificate.public_key()), OTHER_PEM)

    def test_prepareMasterCopiesToSockDir(self) -> None:
        """
        C{prepareMaster} makes the certificate and leaves a copy, mode
        0644, in C{sock_dir} for the local clients (who may not read
        C{pki_dir}).
        """
        sockDir = os.path.abspath(self.mktemp())
        os.makedirs(sockDir)
        TLS.prepareMaster({"pki_dir": self.pkiDir, "sock_dir": sockDir})
        copy = os.path.join(sockDir, CERT_FILE)
        with open(copy, "rb") as f, open(self.path, "rb") as g:
            self.assertEqual(f.read(), g.read())
        self.assertEqual(stat.S_IMODE(os.stat(copy).st_mode), 0o644)


class MasterKeyCheckTests(SynchronousTestCase):
    """
    L{MasterKeyCheck}: which master keys a TLS client accepts.
    """

    def minionConfig(self, pinned: bytes | None = None, finger: str = "") -> dict[str, Any]:
        pkiDir = os.path.abspath(self.mktemp())
        os.makedirs(pkiDir)
        if pinned is not None:
            with open(os.path.join(pkiDir, tls.PINNED_MASTER_FILE), "wb") as f:
                f.write(pinned)
        return {"pki_dir": pkiDir, "master_finger": finger}

    def test_pinnedFile(self) -> None:
        """
        A minion reads its pin from the file where it pins the master's key
        at authentication.
        """
        self.assertEqual(tls.PINNED_MASTER_FILE, minionCore.MASTER_PUB_FILE)

    def test_pinned(self) -> None:
        """
        With a pinned key, only that key passes; the refusal names both
        fingerprints and the pin's file.
        """
        check = MasterKeyCheck.forRole(self.minionConfig(MASTER_PEM), ROLE_REQ)
        self.assertIsNone(check.problem(MASTER_PEM))
        problem = check.problem(OTHER_PEM)
        assert problem is not None
        self.assertIn(crypt.fingerprint(OTHER_PEM), problem)
        self.assertIn(crypt.fingerprint(MASTER_PEM), problem)
        self.assertIn(check.pinnedPath, problem)

    def test_pinWinsOverFinger(self) -> None:
        """
        Once a key is pinned, C{master_finger} no longer decides.
        """
        config = self.minionConfig(MASTER_PEM, finger=crypt.fingerprint(OTHER_PEM))
        check = MasterKeyCheck.forRole(config, ROLE_PUB)
        self.assertIsNone(check.problem(MASTER_PEM))
        self.assertIsNotNone(check.problem(OTHER_PEM))

    def test_masterFinger(self) -> None:
        """
        Before any pin, C{master_finger} (in any case) must match.
        """
        finger = crypt.fingerprint(MASTER_PEM).upper()
        check = MasterKeyCheck.forRole(self.minionConfig(finger=finger), ROLE_REQ)
        self.assertIsNone(check.problem(MASTER_PEM))
        self.assertIn("master_finger", check.problem(OTHER_PEM) or "")

    def test_firstUse(self) -> None:
        """
        With neither a pin nor C{master_finger}, the first key is trusted.
        """
        check = MasterKeyCheck.forRole(self.minionConfig(), ROLE_REQ)
        self.assertIsNone(check.problem(OTHER_PEM))

    def test_localClient(self) -> None:
        """
        The local client pins the key of the certificate in C{sock_dir}, and
        cannot connect without one.
        """
        sockDir = os.path.abspath(self.mktemp())
        os.makedirs(sockDir)
        config = {"sock_dir": sockDir, "pki_dir": "/nonexistent"}
        self.assertRaises(OSError, MasterKeyCheck.forRole, config, ROLE_CLIENT)
        certificate = tls.makeCertificate(MASTER_KEY)
        with open(os.path.join(sockDir, CERT_FILE), "wb") as f:
            f.write(certificate.public_bytes(serialization.Encoding.PEM))
        check = MasterKeyCheck.forRole(config, ROLE_CLIENT)
        self.assertIsNone(check.problem(MASTER_PEM))
        self.assertIsNotNone(check.problem(OTHER_PEM))


class _Greeter(Protocol):
    """
    Sends C{greeting} once connected and keeps what it receives and how
    its connection ended.
    """

    def __init__(self, greeting: bytes = b"") -> None:
        self.greeting = greeting
        self.received = b""
        self.lostReason: Failure | None = None

    def connectionMade(self) -> None:
        if self.greeting:
            self.transport.write(self.greeting)

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lostReason = reason


class TLSHandshakeTests(SynchronousTestCase):
    """
    The C{tls} transport's endpoints, joined in memory.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.pkiDir = os.path.join(self.root, "pki")
        self.sockDir = os.path.join(self.root, "sock")
        os.makedirs(self.sockDir)
        seedKeyPair(self.pkiDir, "master", MASTER_KEY)
        self.masterConfig = {"pki_dir": self.pkiDir, "sock_dir": self.sockDir}
        TLS.prepareMaster(self.masterConfig)
        self.reactor = MemoryReactorClock()
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def listen(self, role: str = ROLE_REQ) -> _Greeter:
        """
        Listen as the master with a server protocol that greets.
        """
        self.server = _Greeter(b"hello from the master")
        endpoint = TLS.serverEndpoint(self.reactor, self.masterConfig, "127.0.0.1", 4506, role)
        self.assertTrue(verifyObject(IStreamServerEndpoint, endpoint))
        self.successResultOf(endpoint.listen(Factory.forProtocol(lambda: self.server)))
        return self.server

    def connect(self, config: dict[str, Any], role: str = ROLE_REQ) -> tuple[_Greeter, Any]:
        """
        Connect a client with C{config} to the listening master in memory.

        @return: the client protocol and the result of the connection.
        """
        client = _Greeter(b"hello from the minion")
        endpoint = TLS.clientEndpoint(self.reactor, config, "127.0.0.1", 4506, role)
        self.assertTrue(verifyObject(IStreamClientEndpoint, endpoint))
        d = endpoint.connect(Factory.forProtocol(lambda: client))
        wire = _Wire(self.reactor)
        wire.run(lambda: True)
        self.firstByte = wire.firstClientBytes[0]
        return client, d

    def minionConfig(self, pinned: bytes | None = None, finger: str = "") -> dict[str, Any]:
        pkiDir = os.path.join(self.root, "minion-pki")
        os.makedirs(pkiDir, exist_ok=True)
        if pinned is not None:
            with open(os.path.join(pkiDir, tls.PINNED_MASTER_FILE), "wb") as f:
                f.write(pinned)
        return {"pki_dir": pkiDir, "master_finger": finger}

    def test_pinnedKeyHandshake(self) -> None:
        """
        A minion that pinned the master's key completes the handshake, and
        the two protocols talk through TLS records.
        """
        server = self.listen()
        client, d = self.connect(self.minionConfig(MASTER_PEM))
        self.assertIs(self.successResultOf(d), client)
        self.assertEqual(self.firstByte, bytes([TLS_HANDSHAKE_RECORD]))
        self.assertEqual(client.received, b"hello from the master")
        self.assertEqual(server.received, b"hello from the minion")

    def test_firstContact(self) -> None:
        """
        A minion with no pin and no C{master_finger} trusts the key on first
        contact, and says so in the log.
        """
        server = self.listen()
        client, _ = self.connect(self.minionConfig(), ROLE_PUB)
        self.assertEqual(client.received, b"hello from the master")
        self.assertEqual(server.received, b"hello from the minion")
        self.assertTrue(any("first contact" in e["log_format"] for e in self.logs))

    def test_localClient(self) -> None:
        """
        The local client (the master's config, role C{client}) accepts the
        master it runs beside.
        """
        self.listen()
        client, _ = self.connect(self.masterConfig, ROLE_CLIENT)
        self.assertEqual(client.received, b"hello from the master")

    def assertRefused(self, client: _Greeter, server: _Greeter, needle: str) -> None:
        """
        The handshake failed on the client's side with L{MasterKeyMismatch}
        (logged, with C{needle} in the message), and no application byte
        crossed in either direction.
        """
        self.assertIsNotNone(client.lostReason)
        assert client.lostReason is not None
        self.assertTrue(client.lostReason.check(MasterKeyMismatch))
        self.assertIn(needle, str(client.lostReason.value))
        self.assertEqual(client.received, b"")
        self.assertEqual(server.received, b"")
        errors = [e for e in self.logs if e["log_format"].startswith("TLS to the master")]
        self.assertTrue(errors)
        self.assertIn(needle, errors[0]["problem"])

    def test_pinMismatchRefused(self) -> None:
        """
        A minion that pinned another key ends the handshake: the master it
        reached is not the one it knows.
        """
        server = self.listen()
        client, _ = self.connect(self.minionConfig(OTHER_PEM))
        self.assertRefused(client, server, crypt.fingerprint(OTHER_PEM))

    def test_fingerMismatchRefused(self) -> None:
        """
        A minion whose C{master_finger} names another key refuses the
        master on first contact.
        """
        server = self.listen()
        client, _ = self.connect(self.minionConfig(finger=crypt.fingerprint(OTHER_PEM)))
        self.assertRefused(client, server, "master_finger")

    def test_handshakeDeadline(self) -> None:
        """
        A peer that never starts a TLS handshake (a minion configured for
        C{tcp}) is disconnected after L{tls.HANDSHAKE_TIMEOUT} seconds, with
        a log line that says what is likely wrong; the master's protocol
        never saw a byte from it.
        """
        server = self.listen()
        factory = self.reactor.tcpServers[0][1]
        proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 4506))
        transport = StringTransport(peerAddress=IPv4Address("TCP", "192.0.2.7", 40000))
        proto.makeConnection(transport)
        self.reactor.advance(tls.HANDSHAKE_TIMEOUT - 1)
        self.assertFalse(transport.disconnecting)
        self.reactor.advance(1)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(server.received, b"")
        warnings = [e for e in self.logs if "no TLS handshake" in e["log_format"]]
        self.assertEqual(len(warnings), 1)
        self.assertEqual(warnings[0]["host"], "192.0.2.7")

    def test_handshakeDoneNoDeadline(self) -> None:
        """
        A connection whose handshake finished stays open past the deadline,
        and its deadline timer is cancelled at once (it would keep the
        connection's objects alive for the rest of the timeout).
        """
        server = self.listen()
        client, _ = self.connect(self.minionConfig(MASTER_PEM))
        self.assertEqual(
            [c for c in self.reactor.getDelayedCalls() if "expire" in repr(c.func)], []
        )
        self.reactor.advance(tls.HANDSHAKE_TIMEOUT + 1)
        self.assertIsNone(client.lostReason)
        self.assertIsNone(server.lostReason)

    def test_missingCertificate(self) -> None:
        """
        Without C{prepareMaster}'s certificate, the master cannot listen
        with this transport, and says why.
        """
        os.unlink(os.path.join(self.pkiDir, CERT_FILE))
        error = self.assertRaises(
            OSError, TLS.serverEndpoint, self.reactor, self.masterConfig, "127.0.0.1", 1, ROLE_PUB
        )
        self.assertIn(CERT_FILE, str(error))


class MasterMinionTestCase(SynchronousTestCase):
    """
    A real L{MasterService} and a minion from L{buildMinion}, both with the
    transport their configs name, on one L{MemoryReactorClock}.
    """

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="stt-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.reactor = MemoryReactorClock()
        self.reactor.running = True
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def startMaster(self, transport: str, **overrides: Any) -> MasterService:
        """
        Start listening as a master whose key pair is L{MASTER_KEY} and that
        accepted the minion C{m1}.
        """
        masterDir = os.path.join(self.root, "master")
        config = loadMasterConfig(
            masterDir,
            overrides={
                "root_dir": masterDir,
                "interface": "127.0.0.1",
                "publish_port": PUB_PORT,
                "ret_port": REQ_PORT,
                "transport": transport,
                **overrides,
            },
        )
        seedKeyPair(config["pki_dir"], "master", MASTER_KEY)
        FilesystemKeyStore(config["pki_dir"]).putKey(ACCEPTED, "m1", MINION_PEM)
        service = MasterService(
            config,
            self.reactor,
            runBlocking=runSynchronously,
            jobCache=_NoJobCache(),
            useWorkers=False,
        )
        service.privilegedStartService()
        self.successResultOf(service.whenReady())
        self.addCleanup(service.stopService)
        return service

    def startMinion(self, transport: str, **overrides: Any) -> minionCore.Minion:
        """
        Start the minion C{m1}, whose key pair is L{MINION_KEY}.
        """
        minionDir = os.path.join(self.root, "minion")
        config = loadMinionConfig(
            minionDir,
            overrides={
                "root_dir": minionDir,
                "id": "m1",
                "master": "127.0.0.1",
                "master_port": REQ_PORT,
                "transport": transport,
                "recon_randomize": False,
                "random_reauth_delay": 0,
                **overrides,
            },
        )
        seedKeyPair(config["pki_dir"], "minion", MINION_KEY)
        minion = buildMinion(config, self.reactor, runBlocking=runSynchronously)
        minion.start()
        self.addCleanup(minion.stop)
        return minion


class MasterMinionTLSTests(MasterMinionTestCase):
    """
    A master and a minion with C{transport: tls}.
    """

    def test_authenticatesOverTLS(self) -> None:
        """
        The minion authenticates and subscribes over TLS on both channels,
        and pins the key its TLS check will hold the master to from then
        on; the master made its certificate at start.
        """
        master = self.startMaster("tls")
        minion = self.startMinion("tls")
        wire = _Wire(self.reactor)
        wire.run(lambda: minion.state == "ready")
        self.assertEqual(wire.firstClientBytes, [bytes([TLS_HANDSHAKE_RECORD])] * 2)
        self.assertTrue(os.path.exists(os.path.join(master.config["pki_dir"], CERT_FILE)))
        with open(os.path.join(minion.config["pki_dir"], tls.PINNED_MASTER_FILE), "rb") as f:
            self.assertEqual(crypt.canonicalPublicPem(f.read()), MASTER_PEM)
        self.assertIn("m1", master.master.subscribers)

    def test_otherMasterRefused(self) -> None:
        """
        A minion that pinned another master's key never reaches the
        master's protocols: the TLS check ends each attempt, with the
        reason in the log.
        """
        minionPki = os.path.join(self.root, "minion", "etc", "salttwist", "pki", "minion")
        os.makedirs(minionPki, mode=0o700)
        with open(os.path.join(minionPki, tls.PINNED_MASTER_FILE), "wb") as f:
            f.write(OTHER_PEM)
        master = self.startMaster("tls")
        minion = self.startMinion("tls", pki_dir=minionPki)
        wire = _Wire(self.reactor)
        wire.run(lambda: len(self.reactor.tcpClients) >= 2)
        self.assertNotEqual(minion.state, "ready")
        self.assertEqual(master.master.sessions, {})
        self.assertTrue(
            any(
                crypt.fingerprint(OTHER_PEM) in e.get("problem", "")
                for e in self.logs
                if e["log_format"].startswith("TLS to the master")
            )
        )


class ThirdPartyPluginTests(MasterMinionTestCase):
    """
    A transport plugin from outside salttwist
    (C{tests/plugins/twisted/plugins/salttwist_test_transport.py}) is found
    and used as soon as its directory is part of C{twisted.plugins}.
    """

    def setUp(self) -> None:
        super().setUp()
        useTestPlugins(self)
        self.plugin = findTransport("loggingtcp")
        self.plugin.records.clear()
        self.addCleanup(self.plugin.records.clear)

    def test_found(self) -> None:
        """
        The plugin is installed, listed with the others, and provides
        L{ITransport}.
        """
        self.assertTrue(verifyObject(ITransport, self.plugin))
        self.assertEqual(type(self.plugin).__module__, "twisted.plugins.salttwist_test_transport")
        self.assertEqual(sorted(installedTransports()), ["loggingtcp", "tcp", "tls"])
        error = self.assertRaises(UnknownTransport, findTransport, "nope")
        self.assertIn("installed: loggingtcp, tcp, tls", str(error))

    def test_masterAndMinionUseIt(self) -> None:
        """
        With C{transport: loggingtcp} in both configs, the master listens
        and the minion connects through the plugin's endpoints, and the
        minion authenticates and subscribes.
        """
        self.startMaster("loggingtcp")
        minion = self.startMinion("loggingtcp")
        _Wire(self.reactor).run(lambda: minion.state == "ready")
        self.assertEqual(
            self.plugin.records,
            [
                "prepare master",
                "listen pub",
                "listen req",
                "connect req",
                "accept req",
                "connect pub",
                "accept pub",
            ],
        )
