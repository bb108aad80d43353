# -*- test-case-name: tests.test_minion -*-
"""
The minion as a twistd service.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from salttwist import crypt
from salttwist.blocking import threadRunner
from salttwist.daemon import StartupError, ensurePrivateDir
from salttwist.minion.core import ConnectTCP, Minion
from salttwist.minion.executor import Executor
from salttwist.minion.grains import coreGrains, grainsFilePath
from salttwist.minion.returnsqueue import ReturnsQueue
from salttwist.modules import LoaderContext, loadFunctions
from salttwist.pki.ids import InvalidMinionId, validateMinionId

CONNECT_TIMEOUT = 10
KEEPALIVE_IDLE = 300


def tcpConnector(reactor: Any) -> ConnectTCP:
    """
    @return: a function connecting a factory to C{host:port} over TCP.
    """

    def connect(host: str, port: int, factory: Factory) -> Deferred:
        d = HostnameEndpoint(reactor, host, port, timeout=CONNECT_TIMEOUT).connect(factory)
        return d.addCallback(_keepAlive)

    return connect


def _keepAlive(proto: Any) -> Any:
    """
    Turn on TCP keepalive (Salt's C{tcp_keepalive}, with a 300 s idle time),
    so a master that vanished without closing the connection is noticed and
    the minion reconnects.
    """
    transport = proto.transport
    transport.setTcpKeepAlive(True)
    handle = transport.getHandle()
    if hasattr(socket, "TCP_KEEPIDLE"):
        handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE)
    return proto


def buildMinion(
    config: dict[str, Any],
    reactor: Any,
    connectTCP: ConnectTCP | None = None,
    runBlocking: Any = None,
) -> Minion:
    """
    Create the minion's directories and key pair (blocking: at start, before
    the reactor runs) and wire a L{Minion}.

    @raise StartupError: on an invalid id or unusable directories.
    """
    try:
        minionId = validateMinionId(config["id"] or socket.getfqdn())
    except InvalidMinionId as e:
        raise StartupError(f"invalid minion id: {e}") from e
    for directory in (config["pki_dir"], config["cachedir"]):
        ensurePrivateDir(directory)
    privateKey, publicPem = crypt.loadOrCreateKeyPair(
        config["pki_dir"], "minion", config["keysize"]
    )
    runBlocking = runBlocking or threadRunner(reactor)
    grains = coreGrains(minionId, config["grains"], grainsFilePath(config))
    context = LoaderContext(config, grains, reactor)
    executor = Executor(loadFunctions(), context, runBlocking)
    context.functions = executor.functions
    returnsQueue = ReturnsQueue(os.path.join(config["cachedir"], "returns"), runBlocking)
    leftover = returnsQueue.load()
    minion = Minion(
        config,
        minionId,
        privateKey,
        publicPem,
        executor,
        reactor,
        connectTCP or tcpConnector(reactor),
        runBlocking,
        returnsQueue,
    )
    for name, ret in leftover:
        minion.pendingReturns.append((name, ret))
    context.onGrainsChanged = minion.sendGrains
    return minion


class MinionService(Service):
    """
    Starts the minion's connection loop with the reactor and stops it cleanly.
    """

    log = Logger()

    def __init__(self, minion: Minion) -> None:
        self.minion = minion

    def startService(self) -> None:
        """
        Start connecting to the master.
        """
        super().startService()
        self.log.info("salttwist minion {id} starting", id=self.minion.id)
        self.minion.start()

    def stopService(self) -> None:
        """
        Close the connections to the master.
        """
        super().stopService()
        self.minion.stop()
