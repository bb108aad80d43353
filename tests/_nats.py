# -*- test-case-name: tests.test_cluster_nats -*-
"""
NATS for the cluster's tests: the machine's server (C{SALTTWIST_TEST_NATS},
by default C{nats://127.0.0.1:4222}, JetStream on), a cluster id of each
test's own (its stream is deleted after the test), a private
C{nats-server} process this test starts, stops and restarts on a port the
OS chose (never the machine's shared one), and a TCP proxy that can drop
traffic (a partition).

Without a reachable server, or without the C{nats-server} binary for a
private one, the test is skipped, except in CI (C{CI} set), where it fails:
CI must run these tests (L{.ci/run} checks the server is up).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
from collections.abc import Callable
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import Factory, ProcessProtocol, Protocol
from twisted.trial.unittest import FailTest, SkipTest, TestCase

from salttwist.cluster.natsprotocol import NatsProtocol

DEFAULT_SERVER = "nats://127.0.0.1:4222"
#: Seconds a condition may take before the test fails.
DEADLINE = 20.0


def reactor() -> Any:
    """
    The reactor trial runs (resolved late, as everywhere).
    """
    from twisted.internet import reactor as globalReactor

    return globalReactor


def unavailable(reason: str) -> None:
    """
    Skip, or fail in CI.
    """
    if os.environ.get("CI"):
        raise AssertionError(f"NATS tests cannot run in CI: {reason}")
    raise SkipTest(reason)


def serverUrl() -> str:
    """
    @return: the URL of the machine's NATS server.
    """
    return os.environ.get("SALTTWIST_TEST_NATS", DEFAULT_SERVER)


def newClusterId() -> str:
    """
    @return: a cluster id of the test's own (its stream and subjects are
        its own).
    """
    return "t" + secrets.token_hex(6)


async def waitUntil(condition: Callable[[], Any], what: str, deadline: float = DEADLINE) -> Any:
    """
    Poll C{condition} until it returns a true value (returned), failing
    after C{deadline} seconds.
    """
    clock = reactor()
    end = clock.seconds() + deadline
    while True:
        value = condition()
        if value:
            return value
        if clock.seconds() > end:
            raise FailTest(f"timed out waiting for {what}")
        await task.deferLater(clock, 0.05, lambda: None)


async def jetStreamRequest(
    url: str,
    subject: str,
    body: dict[str, Any],
    caFile: str | None = None,
    tlsOptions: Any = None,
    **protocolArgs: Any,
) -> dict[str, Any]:
    """
    Make one JetStream API request on a connection of its own (with the
    URL's credentials, and TLS for C{tls://} checked against C{caFile}, or
    C{tlsOptions}; C{protocolArgs} go to L{NatsProtocol}: an NKEY).
    """
    from salttwist.cluster.nats import brokerAddress, brokerTlsOptions

    address = brokerAddress(url)
    if tlsOptions is None:
        tlsOptions = brokerTlsOptions(address, caFile)
    clock = reactor()
    proto = await TCP4ClientEndpoint(clock, address.host, address.port, timeout=5).connect(
        Factory.forProtocol(
            lambda: NatsProtocol(
                clock, "salttwist-test", address.credentials, tlsOptions, **protocolArgs
            )
        )
    )
    try:
        await proto.ready.addTimeout(5, clock)
        _, payload = await proto.request(subject, json.dumps(body).encode(), 5)
        return json.loads(payload or b"{}")  # type: ignore[no-any-return]
    finally:
        proto.transport.loseConnection()


async def requireServer(testCase: TestCase, url: str) -> None:
    """
    Check the server at C{url} answers with JetStream on.
    """
    try:
        answer = await jetStreamRequest(url, "$JS.API.INFO", {})
    except Exception as e:
        unavailable(f"no NATS server at {url}: {e}")
    if "error" in answer:
        unavailable(f"JetStream is not on at {url}: {answer['error']}")


def deleteStreamAfter(
    testCase: TestCase, url: str, clusterId: str, caFile: str | None = None
) -> None:
    """
    Delete the cluster's stream when C{testCase} ends.
    """

    async def delete() -> None:
        await jetStreamRequest(url, f"$JS.API.STREAM.DELETE.SALTTWIST_{clusterId}", {}, caFile)

    testCase.addCleanup(lambda: Deferred.fromCoroutine(delete()))


def _freePort() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # type: ignore[no-any-return]


class _ServerProcess(ProcessProtocol):
    def __init__(self) -> None:
        self.output = b""
        self.ended: Deferred[None] = Deferred()

    def childDataReceived(self, fd: int, data: bytes) -> None:
        self.output += data

    def processEnded(self, reason: Any) -> None:
        self.ended.callback(None)


class PrivateNatsServer:
    """
    A C{nats-server} with JetStream of this test's own, on 127.0.0.1 and a
    port the OS chose, storing in a directory of the test's; stopped (by
    its pid) when the test ends.
    """

    def __init__(
        self,
        testCase: TestCase,
        jetStream: bool = True,
        extraArgs: tuple[str, ...] = (),
        scheme: str = "nats",
        userinfo: str = "",
        caFile: str | None = None,
        loginArgs: dict[str, Any] | None = None,
    ) -> None:
        """
        @param extraArgs: more C{nats-server} arguments (TLS, credentials).
        @param loginArgs: how the readiness check logs in, besides the
            URL's credentials (L{jetStreamRequest}'s C{tlsOptions} and
            L{NatsProtocol}'s arguments: a client certificate, an NKEY).
        @param scheme: of L{url}; with C{tls}, its host is C{localhost}
            (the name the test's certificate is for).
        @param userinfo: C{user:password@} or C{token@} in L{url}.
        @param caFile: the certificate that signs the server's (C{tls}).
        """
        self._jetStream = jetStream
        self._extraArgs = extraArgs
        self.caFile = caFile
        self._loginArgs = loginArgs or {}
        binary = shutil.which("nats-server")
        if binary is None:
            unavailable("the nats-server binary is not installed")
        self._binary = binary
        self._storeDir = os.path.abspath(testCase.mktemp())
        os.makedirs(self._storeDir)
        self.port = _freePort()
        host = "localhost" if scheme == "tls" else "127.0.0.1"
        self.url = f"{scheme}://{userinfo}{host}:{self.port}"
        self._process: Any = None
        self._protocol: _ServerProcess | None = None
        testCase.addCleanup(self.stop)

    async def start(self) -> None:
        """
        Start it, and wait until it answers.
        """
        self._protocol = _ServerProcess()
        self._process = reactor().spawnProcess(
            self._protocol,
            self._binary,
            [
                self._binary,
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                *(["-js", "-sd", self._storeDir] if self._jetStream else []),
                *self._extraArgs,
            ],
            env=None,
        )

        async def check() -> bool:
            try:
                # Without JetStream this is answered too (no responders).
                await jetStreamRequest(self.url, "$JS.API.INFO", {}, self.caFile, **self._loginArgs)
            except Exception:
                return False
            return True

        end = reactor().seconds() + DEADLINE
        while not await check():
            if reactor().seconds() > end or self._protocol.ended.called:
                raise FailTest(f"nats-server did not start: {self._protocol.output.decode()}")
            await task.deferLater(reactor(), 0.1, lambda: None)

    async def stop(self) -> None:
        """
        Stop it (SIGTERM to its pid) and wait for its exit.
        """
        if self._protocol is None or self._protocol.ended.called:
            return
        self._process.signalProcess(signal.SIGTERM)
        await self._protocol.ended


class _Relay(Protocol):
    def __init__(self, proxy: DropProxy) -> None:
        self._proxy = proxy
        self.peer: _Relay | None = None
        self.held: list[bytes] = []

    def dataReceived(self, data: bytes) -> None:
        if self._proxy.dropping:
            return
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)
        else:
            self.held.append(data)

    def connectionLost(self, reason: Any = None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.loseConnection()


class DropProxy:
    """
    A TCP proxy on 127.0.0.1 (a port the OS chose) to a server, that can
    drop every byte both ways without closing anything (L{dropping}): a
    network partition, as seen from the client.
    """

    def __init__(self, testCase: TestCase, targetPort: int) -> None:
        self._target = targetPort
        self.dropping = False
        self._port: Any = None
        self._relays: list[_Relay] = []
        testCase.addCleanup(self.close)

    async def listen(self) -> str:
        """
        @return: the C{nats://} URL that reaches the server through it.
        """
        proxy = self

        class Front(_Relay):
            def connectionMade(self) -> None:
                proxy._relays.append(self)
                self.transport.pauseProducing()
                back = _Relay(proxy)
                back.peer = self
                self.peer = back
                proxy._relays.append(back)
                connecting = TCP4ClientEndpoint(reactor(), "127.0.0.1", proxy._target).connect(
                    Factory.forProtocol(lambda: back)
                )

                def connected(_: object) -> None:
                    for data in self.held:
                        back.transport.write(data)
                    self.held = []
                    self.transport.resumeProducing()

                connecting.addCallbacks(connected, lambda _: self.transport.loseConnection())

        self._port = await TCP4ServerEndpoint(reactor(), 0, interface="127.0.0.1").listen(
            Factory.forProtocol(lambda: Front(proxy))
        )
        return f"nats://127.0.0.1:{self._port.getHost().port}"

    async def close(self) -> None:
        """
        Close every relayed connection and stop listening.
        """
        for relay in self._relays:
            if relay.transport is not None:
                relay.transport.abortConnection()
        if self._port is not None:
            await self._port.stopListening()
