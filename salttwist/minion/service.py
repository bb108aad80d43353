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
from salttwist.transport.interfaces import ROLE_PUB, ROLE_REQ, ITransport
from salttwist.transport.registry import UnknownTransport, findTransport


def transportConnector(reactor: Any, config: dict[str, Any], transport: ITransport) -> ConnectTCP:
    """
    @return: a function connecting a factory to C{host:port} with
        C{transport}'s client endpoints. The minion connects to its
        C{master_port} for the req channel and to the port the master
        announces for the pub channel, so the port tells the channel.
    """

    def connect(host: str, port: int, factory: Factory) -> Deferred:
        role = ROLE_REQ if port == config["master_port"] else ROLE_PUB
        return transport.clientEndpoint(reactor, config, host, port, role).connect(factory)

    return connect


def buildMinion(
    config: dict[str, Any],
    reactor: Any,
    connectTCP: ConnectTCP | None = None,
    runBlocking: Any = None,
) -> Minion:
    """
    Create the minion's directories and key pair (blocking: at start, before
    the reactor runs) and wire a L{Minion}.

    @param connectTCP: how to connect to the master; by default the client
        endpoints of the C{transport} the config names.
    @raise StartupError: on an invalid id, an unknown transport or unusable
        directories.
    """
    if connectTCP is None:
        try:
            connectTCP = transportConnector(reactor, config, findTransport(config["transport"]))
        except UnknownTransport as e:
            raise StartupError(str(e)) from e
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
        connectTCP,
        runBlocking,
        returnsQueue,
    )
    for name, ret in leftover:
        minion.pendingReturns.append((name, ret))
    context.onGrainsChanged = minion.sendGrains
    context.fireMaster = minion.fireMaster
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
