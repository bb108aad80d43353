# -*- test-case-name: tests.test_master_service -*-
"""
The master as a tree of services: the req server, the publisher and the two
event-bus sockets, built around one L{Master}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint, UNIXServerEndpoint
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from salttwist.daemon import ensurePrivateDir, writeRuntimeFile
from salttwist.events.bus import EventPublisherFactory, EventPullFactory, LocalEventBus
from salttwist.master.core import Master, RunBlocking
from salttwist.master.keys import loadMasterKeys
from salttwist.master.publisher import PubServerFactory
from salttwist.master.reqserver import ReqServerFactory
from salttwist.pki.keystore import FilesystemKeyStore

EVENT_PUB_SOCKET = "master_event_pub.ipc"
EVENT_PULL_SOCKET = "master_event_pull.ipc"
PORTS_FILE = "master.ports"


def threadRunner(reactor: Any) -> RunBlocking:
    """
    @return: a C{runBlocking} that runs work in C{reactor}'s thread pool.
    """

    def run(f: Any, *args: Any, **kwargs: Any) -> Deferred:
        return deferToThreadPool(reactor, reactor.getThreadPool(), f, *args, **kwargs)

    return run


def tcpServerEndpoint(reactor: Any, interface: str, port: int) -> Any:
    """
    @return: a TCP server endpoint for C{interface} (IPv4 or IPv6).
    """
    if ":" in interface:
        return TCP6ServerEndpoint(reactor, port, interface=interface)
    return TCP4ServerEndpoint(reactor, port, interface=interface)


class MasterService(MultiService):
    """
    The running master.

    @ivar whenReady: fires once every socket listens and the ports file is
        written.
    """

    log = Logger()

    def __init__(
        self, config: dict[str, Any], reactor: Any, runBlocking: RunBlocking | None = None
    ):
        super().__init__()
        self.config = config
        self.reactor = reactor
        for directory in (config["pki_dir"], config["cachedir"], config["sock_dir"]):
            ensurePrivateDir(directory)
        if config["auto_accept"]:
            self.log.warn(
                "auto_accept is True: EVERY minion that connects is accepted without an "
                "admin. This is unsafe outside a closed test network."
            )
        self.bus = LocalEventBus()
        self.master = Master(
            config,
            loadMasterKeys(config["pki_dir"], config["cachedir"], config["keysize"]),
            FilesystemKeyStore(config["pki_dir"]),
            self.bus,
            runBlocking or threadRunner(reactor),
            reactor,
        )
        self.whenReady: Deferred[None] = Deferred()
        self._ports: list[Any] = []

    def privilegedStartService(self) -> None:
        """
        Bind every socket (before twistd drops privileges).
        """
        super().privilegedStartService()
        config, reactor = self.config, self.reactor
        sockDir = config["sock_dir"]
        listens = [
            tcpServerEndpoint(reactor, config["interface"], config["publish_port"]).listen(
                PubServerFactory(self.master)
            ),
            tcpServerEndpoint(reactor, config["interface"], config["ret_port"]).listen(
                ReqServerFactory(self.master)
            ),
            UNIXServerEndpoint(
                reactor, os.path.join(sockDir, EVENT_PUB_SOCKET), mode=0o660, wantPID=True
            ).listen(EventPublisherFactory(self.bus, config["event_queue_max"])),
            UNIXServerEndpoint(
                reactor, os.path.join(sockDir, EVENT_PULL_SOCKET), mode=0o660, wantPID=True
            ).listen(EventPullFactory(self.bus, config["max_frame_bytes"])),
        ]
        DeferredList(listens, fireOnOneErrback=True, consumeErrors=True).addCallbacks(
            self._listening, self._listenFailed
        )

    def _listening(self, results: list[tuple[bool, Any]]) -> None:
        self._ports = [port for _, port in results]
        publishPort = self._ports[0].getHost().port
        retPort = self._ports[1].getHost().port
        self.master.publishPort = publishPort
        writeRuntimeFile(
            os.path.join(self.config["sock_dir"], PORTS_FILE),
            {"publish_port": publishPort, "ret_port": retPort, "pid": os.getpid()},
        )
        self.log.info(
            "salttwist master ready: publish_port {pub}, ret_port {ret}, sock_dir {sock}",
            pub=publishPort,
            ret=retPort,
            sock=self.config["sock_dir"],
        )
        self.whenReady.callback(None)

    def _listenFailed(self, failure: Any) -> None:
        error = (
            failure.value.subFailure.value
            if hasattr(failure.value, "subFailure")
            else failure.value
        )
        self.log.critical("salttwist master cannot listen: {error}", error=error)
        self.whenReady.errback(failure)
        if self.reactor.running:
            self.reactor.stop()

    def stopService(self) -> Deferred:
        """
        Stop listening and close every connection.
        """
        super().stopService()
        for proto in list(self.master.subscribers.values()) + list(self.master.sessions.values()):
            proto.transport.loseConnection()
        try:
            os.unlink(os.path.join(self.config["sock_dir"], PORTS_FILE))
        except OSError:
            pass
        return DeferredList([maybeDeferred(port.stopListening) for port in self._ports])
