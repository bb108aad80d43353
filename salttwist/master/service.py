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
from twisted.internet.endpoints import UNIXServerEndpoint
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from salttwist.blocking import RunBlocking, threadRunner
from salttwist.daemon import (
    PORTS_FILE,
    RunAs,
    StartupError,
    dropPrivileges,
    ensurePrivateDir,
    ownerOnlyUmask,
    resolveUser,
    writeRuntimeFile,
)
from salttwist.events import EVENT_PUB_SOCKET, EVENT_PULL_SOCKET
from salttwist.events.bus import EventPublisherFactory, EventPullFactory, LocalEventBus
from salttwist.master.acl import setUpUserKeys
from salttwist.master.core import Master
from salttwist.master.grainscache import GrainsCache
from salttwist.master.jobcache import SQLiteJobCache
from salttwist.master.jobcacheworker import WorkerJobCache
from salttwist.master.keys import loadMasterKeys
from salttwist.master.maintenance import MasterStats, PresenceEvents
from salttwist.master.publisher import PubServerFactory
from salttwist.master.reqserver import ReqServerFactory
from salttwist.pki.keystore import FilesystemKeyStore
from salttwist.transport.interfaces import ROLE_PUB, ROLE_REQ
from salttwist.transport.registry import UnknownTransport, findTransport
from salttwist.workers.pool import WorkerPool

JOB_CACHE_FILE = "jobs.sqlite"
#: The longest path a UNIX socket can be bound to (sun_path less its NUL).
MAX_UNIX_PATH = 107
#: Seconds between two checks of the key store against connected minions.
KEY_RECONCILE_INTERVAL = 1.0
#: The module of the authentication tasks the worker processes run.
AUTH_TASKS_MODULE = "salttwist.master.authtasks"
#: The module of the runner tasks they run (L{salttwist.runners.inWorker}).
RUNNER_TASKS_MODULE = "salttwist.master.runnertasks"
#: The worker processes kept while the master is idle; up to
#: C{worker_threads} run while authentications or runners wait for one.
#: Each holds its own copy of Twisted, cryptography and the master key
#: (about 35 MB), so an idle master does not keep them all.
IDLE_WORKERS = 1
#: Seconds a worker beyond L{IDLE_WORKERS} may stay idle before it stops.
WORKER_IDLE_TIMEOUT = 30.0


class MasterService(MultiService):
    """
    The running master.

    @param jobCache: the job cache (an L{IJobCache} with C{startPruning});
        by default the SQLite file C{cachedir/jobs.sqlite}, written and
        read by a worker process of its own (L{WorkerJobCache}) when
        C{useWorkers}, else by a thread (L{SQLiteJobCache}).
    L{whenReady} tells when every socket listens and the ports file is
    written.
    """

    log = Logger()
    #: The user to switch to once every socket is bound (the C{user}
    #: option, see L{salttwist.daemon.resolveUser}); set by the twistd plugin.
    runAs: RunAs | None = None

    def __init__(
        self,
        config: dict[str, Any],
        reactor: Any,
        runBlocking: RunBlocking | None = None,
        jobCache: Any = None,
        useWorkers: bool = True,
    ) -> None:
        super().__init__()
        self.config = config
        self.reactor = reactor
        try:
            #: The L{ITransport} of the pub and req channels (C{transport}).
            self.transport = findTransport(config["transport"])
        except UnknownTransport as e:
            raise StartupError(str(e)) from e
        for directory in (config["pki_dir"], config["cachedir"], config["sock_dir"]):
            ensurePrivateDir(directory, searchableParents=bool(config["user"]))
        if config["auto_accept"]:
            self.log.warn(
                "auto_accept is True: EVERY minion that connects is accepted without an "
                "admin. This is unsafe outside a closed test network."
            )
        self.bus = LocalEventBus()
        runBlocking = runBlocking or threadRunner(reactor)
        grainsCache = GrainsCache(os.path.join(config["cachedir"], "grains.cache"), runBlocking)
        grainsCache.load()
        if jobCache is None:
            jobCachePath = os.path.join(config["cachedir"], JOB_CACHE_FILE)
            if useWorkers:
                # Its worker starts with the others, in startService.
                jobCache = WorkerJobCache(jobCachePath, reactor, config["keep_jobs"])
            else:
                jobCache = SQLiteJobCache(jobCachePath, reactor, config["keep_jobs"])
        self.jobCache = jobCache
        self.workers: Any = None
        if useWorkers:
            size = config["worker_threads"]
            self.workers = WorkerPool(
                reactor,
                size,
                spawnArgs=[AUTH_TASKS_MODULE, RUNNER_TASKS_MODULE],
                initTasks=[(f"{AUTH_TASKS_MODULE}.loadAuthenticator", [config["pki_dir"]])],
                minSize=min(IDLE_WORKERS, size),
                idleTimeout=WORKER_IDLE_TIMEOUT,
            )
        self.master = Master(
            config,
            loadMasterKeys(config["pki_dir"], config["cachedir"], config["keysize"]),
            FilesystemKeyStore(config["pki_dir"]),
            self.bus,
            runBlocking,
            reactor,
            grainsCache,
            jobCache=self.jobCache,
        )
        try:
            # After loadMasterKeys: the tls transport makes its certificate
            # from the master's key.
            self.transport.prepareMaster(config)
        except Exception as e:
            raise StartupError(f"transport {config['transport']!r}: {e}") from e
        # The keys of the users publisher_acl names (and none for those it
        # no longer names); uid 0 and the master's own user use .root_key.
        # The user the master will run as (option user) is its own user too.
        ownUids = {0, os.geteuid()}
        if config.get("user"):
            runAs = resolveUser(config["user"])
            if runAs is not None:
                ownUids.add(runAs.uid)
        self.master.masterKeys.userKeys = setUpUserKeys(config, self.master.acl, ownUids)
        #: Salt's reactor, a child service, when the C{reactor} option is set.
        self.reactorService: Any = None
        if config.get("reactor"):
            # Imported only when asked for: with Jinja2 it is about 2.5 MB of
            # the master's memory.
            from salttwist.master.reactor import buildReactor

            self.reactorService = buildReactor(config, self.master)
        if self.reactorService is not None:
            self.reactorService.setServiceParent(self)
        #: Serves the bus on C{master_event_pub.ipc} (kept for its figures).
        self.eventPublisher = EventPublisherFactory(self.bus, config["event_queue_max"])
        self._ready: bool | Failure = False
        self._readyWaiters: list[Deferred[None]] = []
        self._ports: list[Any] = []
        self._loops: list[LoopingCall] = []
        self._acceptedStamp: tuple[int, int] | None = None
        for name in (EVENT_PUB_SOCKET, EVENT_PULL_SOCKET):
            path = os.path.join(config["sock_dir"], name)
            if len(os.fsencode(path)) > MAX_UNIX_PATH:
                raise StartupError(
                    f"sock_dir is too deep for a UNIX socket: {path} is over "
                    f"{MAX_UNIX_PATH} bytes; choose a shorter sock_dir"
                )

    def startService(self) -> None:
        """
        Start the periodic work: key reconciliation every second (so key
        changes made by any means take effect within a second) and the
        publication key's rotation every C{publish_session} seconds.
        """
        super().startService()
        if isinstance(self.jobCache, WorkerJobCache):
            self.jobCache.start()
        self.jobCache.startPruning()
        if self.workers is not None:
            self.workers.start().addCallbacks(self._workersReady, self._workersFailed)
        self._startLoop(KEY_RECONCILE_INTERVAL, self._reconcileIfChanged)
        if self.config["publish_session"] > 0:
            self._startLoop(
                float(self.config["publish_session"]),
                lambda: self.master.rotatePublicationKey("publish_session elapsed"),
            )
        self._startReports()

    def _startReports(self) -> None:
        """
        Start the periodic events the config asks for: presence every
        C{loop_interval} seconds, statistics every C{master_stats_event_iter}
        seconds (see L{salttwist.master.maintenance}).
        """
        if self.config["presence_events"]:
            self._startLoop(float(self.config["loop_interval"]), PresenceEvents(self.master))
        if self.config["master_stats"]:
            self._startLoop(
                float(self.config["master_stats_event_iter"]),
                MasterStats(self.master, self.reactor, self.eventPublisher),
            )

    def _reconcileIfChanged(self) -> Deferred[None] | None:
        """
        Compare the key store with the connected minions, but only when the
        accepted-keys directory changed since the last comparison (any move
        in or out of it changes its mtime): listing and checking thousands
        of keys every second is measurable master CPU.
        """
        try:
            info = os.stat(os.path.join(self.config["pki_dir"], "minions"))
            stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_ino)
        except OSError:
            stamp = None
        if stamp is not None and stamp == self._acceptedStamp:
            return None

        def failed(failure: Any) -> Any:
            # Try again at the next tick, whatever the directory does.
            self._acceptedStamp = None
            return failure

        self._acceptedStamp = stamp
        return maybeDeferred(self.master.reconcileKeys).addErrback(failed)

    def _workersReady(self, _: object) -> None:
        # Until now authentication ran in threads; from now on in workers.
        self.master.workers = self.workers
        self.log.info(
            "up to {n} worker processes check authentication", n=self.config["worker_threads"]
        )

    def _workersFailed(self, failure: Any) -> None:
        self.log.warn(
            "worker processes could not start ({error}); authentication runs in threads",
            error=failure.value,
        )

    def _startLoop(self, interval: float, f: Any) -> None:
        def runOnce() -> Deferred:
            # A failure is logged and the loop goes on: one bad run must not
            # stop key reconciliation or rotation for good.
            return maybeDeferred(f).addErrback(
                lambda failure: self.log.failure("periodic task {f} failed", failure, f=f)
            )

        loop = LoopingCall(runOnce)
        loop.clock = self.reactor
        loop.start(interval, now=False)
        self._loops.append(loop)

    def privilegedStartService(self) -> None:
        """
        Bind every socket, then switch to L{runAs} if set.
        """
        super().privilegedStartService()
        config, reactor = self.config, self.reactor
        sockDir = config["sock_dir"]
        listens = [
            self._listenChannel(config["publish_port"], ROLE_PUB, PubServerFactory(self.master)),
            self._listenChannel(config["ret_port"], ROLE_REQ, ReqServerFactory(self.master)),
        ]
        # Bound owner-only, then given their mode: see ownerOnlyUmask.
        with ownerOnlyUmask():
            listens += [
                UNIXServerEndpoint(
                    reactor,
                    os.path.join(sockDir, EVENT_PUB_SOCKET),
                    # publisher_acl users gather their returns from the bus, as
                    # in Salt; who reaches the socket is then up to sock_dir's
                    # mode.
                    mode=0o666 if self.master.acl.acl else 0o660,
                    wantPID=True,
                ).listen(self.eventPublisher),
                UNIXServerEndpoint(
                    reactor, os.path.join(sockDir, EVENT_PULL_SOCKET), mode=0o660, wantPID=True
                ).listen(EventPullFactory(self.bus, config["max_frame_bytes"])),
            ]
        failed: list[Any] = []
        DeferredList(listens, fireOnOneErrback=True, consumeErrors=True).addCallbacks(
            self._listening, self._listenFailed
        ).addErrback(failed.append)
        if failed:
            failed[0].raiseException()
        # Bound: now give up root (twistd starts the services, and so the
        # worker processes, only after this method).
        dropPrivileges(self.runAs, config)

    def _listenChannel(self, port: int, role: str, factory: Any) -> Deferred[Any]:
        """
        Listen on C{port} for channel C{role} with the configured transport.

        @return: the L{Deferred} of the listening port; a transport that
            raises fails it instead.
        """
        return maybeDeferred(
            lambda: self.transport.serverEndpoint(
                self.reactor, self.config, self.config["interface"], port, role
            ).listen(factory)
        )

    def whenReady(self) -> Deferred[None]:
        """
        @return: a L{Deferred} that fires once the master listens on every
            socket, or fails with the reason it cannot.
        """
        d: Deferred[None] = Deferred()
        if self._ready is True:
            d.callback(None)
        elif isinstance(self._ready, Failure):
            d.errback(self._ready)
        else:
            self._readyWaiters.append(d)
        return d

    def _setReady(self, result: bool | Failure) -> None:
        # Only those who asked get the outcome: a failed start that nobody
        # waits for (the daemon exits) is not reported again as unhandled.
        self._ready = result
        waiters, self._readyWaiters = self._readyWaiters, []
        for waiter in waiters:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(None)

    def _listening(self, results: list[tuple[bool, Any]]) -> None:
        self._ports = [port for _, port in results]
        self.master.publishPort = self._ports[0].getHost().port
        # The ports file tells the world the master is up, and a supervisor
        # may then stop it: announce only once the reactor runs, when twistd
        # has installed its SIGTERM handler (a SIGTERM before that would
        # kill the process without its clean-up).
        if getattr(self.reactor, "running", True):
            self._announce()
        else:
            self.reactor.callWhenRunning(self._announce)

    def _announce(self) -> None:
        publishPort = self._ports[0].getHost().port
        retPort = self._ports[1].getHost().port
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
        self._setReady(True)

    def _listenFailed(self, failure: Any) -> None:
        error = (
            failure.value.subFailure.value
            if hasattr(failure.value, "subFailure")
            else failure.value
        )
        self.log.critical("salttwist master cannot listen: {error}", error=error)
        self._setReady(failure)
        if self.reactor.running:
            self.reactor.stop()
        else:
            # twistd binds before the reactor runs, so stopping it is no use:
            # fail the start, or the master would run on without its sockets.
            raise StartupError(f"cannot listen: {error}")

    def stopService(self) -> Deferred:
        """
        Stop listening and close every connection.
        """
        super().stopService()
        for loop in self._loops:
            if loop.running:
                loop.stop()
        master = self.master
        transients = [proto for each in master.transients.values() for proto in each]
        for proto in [*master.subscribers.values(), *master.sessions.values(), *transients]:
            proto.transport.loseConnection()
        try:
            os.unlink(os.path.join(self.config["sock_dir"], PORTS_FILE))
        except OSError:
            pass
        stops = [maybeDeferred(port.stopListening) for port in self._ports]
        self.master.workers = None
        if self.workers is not None:
            stops.append(self.workers.stop())
        return DeferredList([*stops, self.jobCache.close()])
