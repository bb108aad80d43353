# -*- test-case-name: tests.test_minion -*-
"""
The minion as a twistd service.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.endpoints import UNIXServerEndpoint
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from salttwist import crypt
from salttwist.blocking import threadRunner
from salttwist.daemon import (
    RunAs,
    StartupError,
    checkMinionPki,
    dropPrivileges,
    ensurePrivateDir,
    ownerOnlyUmask,
)
from salttwist.events import minionEventSockets
from salttwist.events.bus import EventPublisherFactory, EventPullFactory
from salttwist.fileserver.client import LocalFileClient, RemoteFileClient
from salttwist.fileserver.server import FileServer
from salttwist.grains import coreGrains, grainsFilePath
from salttwist.minion.core import ConnectTCP, Minion
from salttwist.minion.pillar import localCompiler
from salttwist.minion.returnsqueue import ReturnsQueue
from salttwist.modules import LoaderContext, loadFunctions
from salttwist.modules.executor import Executor
from salttwist.modules.extmods import autoloadExtensions
from salttwist.pki.ids import InvalidMinionId, configuredMinionId, validateMinionId
from salttwist.transport.interfaces import ROLE_PUB, ROLE_REQ, ITransport
from salttwist.transport.registry import UnknownTransport, findTransport


def transportConnector(reactor: Any, config: dict[str, Any], transport: ITransport) -> ConnectTCP:
    """
    @return: a function connecting a factory to C{host:port} with
        C{transport}'s client endpoints, for the channel the factory says
        (its C{channel}, see L{salttwist.minion.connection.ChannelFactory}).
        The function raises L{ValueError} for a factory that does not say
        C{ROLE_REQ} or C{ROLE_PUB}: the port tells nothing (the pub channel
        may be on any port the master announces).
    """

    def connect(host: str, port: int, factory: Factory) -> Deferred:
        role = getattr(factory, "channel", None)
        if role not in (ROLE_REQ, ROLE_PUB):
            raise ValueError(
                f"cannot connect {factory!r} to {host}:{port}: its channel is {role!r}, "
                f"not {ROLE_REQ!r} or {ROLE_PUB!r} (use a ChannelFactory)"
            )
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
    @raise StartupError: on an invalid id, an unknown transport, an entry of
        C{master} it cannot read, unusable directories, or a C{pki_dir},
        C{minion.pem} or C{minion_master.pub} that other users could read or
        change (L{checkMinionPki}).
    """
    if connectTCP is None:
        try:
            connectTCP = transportConnector(reactor, config, findTransport(config["transport"]))
        except UnknownTransport as e:
            raise StartupError(str(e)) from e
    try:
        minionId = validateMinionId(configuredMinionId(config))
    except InvalidMinionId as e:
        raise StartupError(f"invalid minion id: {e}") from e
    for directory in (config["pki_dir"], config["cachedir"], config["sock_dir"]):
        ensurePrivateDir(directory, searchableParents=bool(config["user"]))
    checkMinionPki(config["pki_dir"], runAs=config["user"])
    privateKey, publicPem = crypt.loadOrCreateKeyPair(
        config["pki_dir"], "minion", config["keysize"]
    )
    runBlocking = runBlocking or threadRunner(reactor)
    grains = coreGrains(minionId, config["grains"], grainsFilePath(config))
    context = LoaderContext(config, grains, reactor)
    executor = Executor(loadFunctions(), context, runBlocking)
    context.functions = executor.functions
    if config["autoload_dynamic_modules"]:
        # The custom modules and grains synced from the file server
        # (blocking: at start, before the reactor runs).
        autoloadExtensions(context)
    returnsQueue = ReturnsQueue(os.path.join(config["cachedir"], "returns"), runBlocking)
    leftover = returnsQueue.load()
    try:
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
    except ValueError as e:
        # An entry of master it cannot read (salttwist.minion.masters).
        raise StartupError(str(e)) from e
    for name, ret in leftover:
        minion.returns.queueLeftover(name, ret)
    context.onGrainsChanged = minion.sendGrains
    context.fireMaster = minion.fireMaster
    context.fireLocal = minion.bus.fire
    context.fileClient = buildFileClient(config, minionId, minion.masterRequest, runBlocking)
    context.refreshPillar = minion.pillar.refresh
    context.fetchPillar = minion.pillar.fetch
    if config.get("file_client") == "local":
        # Masterless (Salt's): the pillar is compiled here from pillar_roots.
        minion.pillar.localCompile = localCompiler(context, minionId, runBlocking)
    return minion


def buildFileClient(
    config: dict[str, Any], minionId: str, request: Any, runBlocking: Any
) -> RemoteFileClient | LocalFileClient:
    """
    The minion's file client: over its session (L{RemoteFileClient}), or
    from its own C{file_roots} with C{file_client: local}
    (L{LocalFileClient}); both cache under C{cachedir/files}.

    @param request: sends one session request (L{Minion.masterRequest}).
    @raise StartupError: for a C{file_client: local} whose file server
        options are wrong.
    """
    if config.get("file_client") == "local":
        try:
            fileServer = FileServer.fromConfig(config)
        except ValueError as e:
            raise StartupError(f"file_client local: {e}") from e
        return LocalFileClient(fileServer, config["cachedir"], runBlocking)
    return RemoteFileClient(request, config["cachedir"], runBlocking, minionId)


class MinionService(Service):
    """
    Starts the minion's connection loop with the reactor and stops it cleanly,
    and serves the minion's own event bus (L{Minion.bus}) on its two UNIX
    sockets in C{sock_dir}, named as Salt's (L{minionEventSockets}), mode
    0660 as the master's.
    """

    log = Logger()
    #: The user to switch to before the service starts (the C{user} option,
    #: see L{salttwist.daemon.resolveUser}); set by the twistd plugin.
    runAs: RunAs | None = None

    def __init__(self, minion: Minion) -> None:
        self.minion = minion
        self._ports: list[Any] = []

    def privilegedStartService(self) -> None:
        """
        Switch to L{runAs} if set: the minion binds no port, and makes its
        event-bus sockets as that user in its C{sock_dir}.
        """
        super().privilegedStartService()
        dropPrivileges(self.runAs, self.minion.config)

    def startService(self) -> None:
        """
        Listen on the event-bus sockets, then start connecting to the master.
        A bus that cannot listen (another minion with this id and
        C{sock_dir} runs) is logged; the minion runs on without it.
        """
        super().startService()
        self.log.info("salttwist minion {id} starting", id=self.minion.id)
        self._listenBus()
        self.minion.start()

    def _listenBus(self) -> None:
        minion = self.minion
        config, reactor, bus = minion.config, minion.reactor, minion.bus
        pubPath, pullPath = minionEventSockets(config["sock_dir"], minion.id)
        # Bound owner-only, then given their mode: see ownerOnlyUmask.
        with ownerOnlyUmask():
            listens = [
                UNIXServerEndpoint(reactor, pubPath, mode=0o660, wantPID=True).listen(
                    EventPublisherFactory(bus)
                ),
                UNIXServerEndpoint(reactor, pullPath, mode=0o660, wantPID=True).listen(
                    EventPullFactory(bus, config["max_frame_bytes"])
                ),
            ]

        def listened(results: list[tuple[bool, Any]]) -> None:
            for ok, result in results:
                if ok:
                    self._ports.append(result)
                else:
                    self.log.error(
                        "minion {id}: no local event bus: {error}",
                        id=minion.id,
                        error=result.value,
                    )

        DeferredList(listens, consumeErrors=True).addCallback(listened)

    def stopService(self) -> Deferred:
        """
        Stop as L{Minion.shutdown} says (running jobs get a grace), then
        close the event-bus sockets (their files are removed).
        """
        super().stopService()

        def closeBus(_: object) -> Deferred:
            ports, self._ports = self._ports, []
            return DeferredList([maybeDeferred(port.stopListening) for port in ports])

        return self.minion.shutdown().addCallback(closeBus)
