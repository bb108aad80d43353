# -*- test-case-name: tests.test_master_service -*-
"""
The master as a tree of services around one L{Master}.

L{MasterService} is the parent (built by L{salttwist.master.tap.makeService});
each of its children starts and stops one part:

  - L{KeyStoreService}: a PostgreSQL key store (C{keys.cache_driver:
    postgres}): its load awaited and reported, its threads closed last;
  - L{JobCacheService}: the job cache (its worker, its pruning);
  - L{salttwist.cluster.service.ClusterService}: the connection to the
    other masters of a cluster, through its broker (C{cluster_id});
  - L{WorkerPoolService}: the worker processes, handed to the master once up;
  - the Salt reactor (C{reactor} option), a L{salttwist.master.reactor.Reactor};
  - L{PeriodicService}s (L{TimerService}s): key reconciliation, the
    publication key's rotation, presence and statistics events, and the
    gitfs fetch (C{gitfs_update_interval}, when C{fileserver_backend}
    names C{git});
  - L{ChannelService}s (L{StreamServerEndpointService}s): the pub and req
    ports and the two event-bus sockets, bound in C{privilegedStartService},
    before privileges drop.

Readiness (every socket listening, the ports file written once the reactor
runs) is an explicit L{Deferred}: L{MasterService.whenReady}.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from twisted.application.internet import StreamServerEndpointService, TimerService
from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred, succeed
from twisted.internet.endpoints import UNIXServerEndpoint
from twisted.internet.interfaces import IStreamServerEndpoint
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThread
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from salttwist.blocking import RunBlocking, threadRunner
from salttwist.cluster.service import clusterFromConfig
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
from salttwist.master.keywatch import KeyStoreFeed
from salttwist.master.maintenance import MasterStats, PresenceEvents
from salttwist.master.minioncache_pg import cachesFromConfig
from salttwist.master.publisher import PubServerFactory
from salttwist.master.reqserver import ReqServerFactory
from salttwist.pki.ids import UnicodeIdsUnavailable, escapeId, idRulesFromConfig
from salttwist.pki.keystore import nonconformingIds
from salttwist.pki.stores import (
    LOCALFS,
    KeyStoreSetupError,
    describeKeyStore,
    keyStoreSpec,
    openKeyStore,
)
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
#: The module of the pillar tasks they run (issue 20).
PILLAR_TASKS_MODULE = "salttwist.master.pillartasks"
#: The worker processes kept while the master is idle; up to
#: C{worker_threads} run while authentications or runners wait for one.
#: Each holds its own copy of Twisted, cryptography and the master key
#: (about 35 MB), so an idle master does not keep them all.
IDLE_WORKERS = 1
#: Seconds a worker beyond L{IDLE_WORKERS} may stay idle before it stops.
WORKER_IDLE_TIMEOUT = 30.0


#: The log namespace of the master's service tree: its lines read as they
#: always did, whichever child logs them.
_LOG_NAMESPACE = "salttwist.master.service.MasterService"


@implementer(IStreamServerEndpoint)
class _ObservedEndpoint:
    """
    An endpoint made when it is first listened on (the transport may fail
    making it), whose outcome goes to L{whenListening} rather than to the
    service listening on it: the master reports a socket it cannot bind
    together with the others (L{MasterService.privilegedStartService}).

    @ivar whenListening: fires with the listening port, or fails with why
        it could not listen; a new one for each L{listen}.
    """

    def __init__(self, makeEndpoint: Callable[[], Any], ownerOnly: bool = False) -> None:
        """
        @param makeEndpoint: makes the endpoint to listen on.
        @param ownerOnly: bind under an owner-only umask (a UNIX socket,
            given its mode afterwards: see L{ownerOnlyUmask}).
        """
        self._makeEndpoint = makeEndpoint
        self._ownerOnly = ownerOnly
        self.whenListening: Deferred[Any] = Deferred()

    def _listen(self, factory: Any) -> Deferred[Any]:
        if self._ownerOnly:
            with ownerOnlyUmask():
                return self._makeEndpoint().listen(factory)  # type: ignore[no-any-return]
        return self._makeEndpoint().listen(factory)  # type: ignore[no-any-return]

    def listen(self, factory: Any) -> Deferred[Any]:
        """
        Listen with C{factory}.

        @return: a L{Deferred} firing with the port, or with L{None} if it
            could not listen (the reason goes to L{whenListening}).
        """
        observed = self.whenListening = Deferred()

        def listening(port: Any) -> Any:
            observed.callback(port)
            return port

        def failed(failure: Failure) -> None:
            observed.errback(failure)

        return maybeDeferred(self._listen, factory).addCallbacks(listening, failed)


class ChannelService(StreamServerEndpointService):
    """
    One socket of the master (the pub or req port, an event-bus socket):
    bound in C{privilegedStartService}, closed when stopped.
    """

    _listened = False

    def __init__(self, endpoint: _ObservedEndpoint, factory: Any) -> None:
        super().__init__(endpoint, factory)
        self.observed = endpoint

    def privilegedStartService(self) -> None:
        """
        Listen (before privileges drop).
        """
        self._listened = True
        super().privilegedStartService()

    def stopService(self) -> Deferred[None]:
        """
        Stop listening, if it listened at all.
        """
        if not self._listened:
            return succeed(None)
        return super().stopService()  # type: ignore[no-any-return]


class PeriodicService(TimerService):
    """
    Call C{f} every C{step} seconds on C{clock}, first one step after the
    start (L{TimerService} calls at once: the master's timers never did,
    a rotation at start would waste a publication key); a call that fails
    is logged and the next one still runs.
    """

    log = Logger(namespace=_LOG_NAMESPACE)

    def __init__(self, step: float, f: Callable[[], Any], clock: Any, now: bool = False) -> None:
        super().__init__(step, self._runOnce)
        self.clock = clock
        self._f = f
        #: Whether the first call is at the start rather than one step later.
        self.now = now

    def _runOnce(self) -> Deferred[Any]:
        # A failure is logged and the loop goes on: one bad run must not
        # stop key reconciliation or rotation for good.
        return maybeDeferred(self._f).addErrback(
            lambda failure: self.log.failure("periodic task {f} failed", failure, f=self._f)
        )

    def startService(self) -> None:
        """
        Start calling, the first time one step from now. (As
        L{TimerService.startService}, which has no C{now} flag; its
        C{stopService} stops the same loop.)
        """
        Service.startService(self)
        self._loop = LoopingCall(self._runOnce)
        self._loop.clock = self.clock
        self._loopFinished = self._loop.start(self.step, now=self.now)
        self._loopFinished.addErrback(self._failed)

    def stopService(self) -> Deferred[None]:
        """
        Stop calling, if started.
        """
        if not self.running:
            return succeed(None)
        return super().stopService()  # type: ignore[no-any-return]


class WorkerPoolService(Service):
    """
    The worker processes: started with the master; once up, they check
    authentication and run runners (until then, threads and the master do).
    """

    log = Logger(namespace=_LOG_NAMESPACE)

    def __init__(self, pool: Any, master: Master, size: int) -> None:
        self.pool = pool
        self._master = master
        self._size = size

    def startService(self) -> None:
        """
        Start the pool.
        """
        super().startService()
        self.pool.start().addCallbacks(self._workersReady, self._workersFailed)

    def _workersReady(self, _: object) -> None:
        # Until now authentication ran in threads; from now on in workers.
        self._master.workers = self.pool
        self.log.info("up to {n} worker processes check authentication", n=self._size)

    def _workersFailed(self, failure: Any) -> None:
        self.log.warn(
            "worker processes could not start ({error}); authentication runs in threads",
            error=failure.value,
        )

    def stopService(self) -> Deferred[None]:
        """
        Take the pool from the master, then stop it.
        """
        super().stopService()
        self._master.workers = None
        return self.pool.stop()  # type: ignore[no-any-return]


def makeJobCache(config: dict[str, Any], reactor: Any, useWorkers: bool) -> Any:
    """
    The job cache C{master_job_cache} selects: C{local_cache} (the default)
    is the SQLite file C{cachedir/jobs.sqlite}, written and read by a worker
    process of its own (L{WorkerJobCache}) when C{useWorkers}, else by a
    thread (L{SQLiteJobCache}); C{pgjsonb} or C{postgres} is a PostgreSQL
    database (L{salttwist.master.jobcache_pg.PostgresJobCache}, reached with
    the C{returner.pgjsonb.*} options).

    @raise StartupError: if PostgreSQL is selected and psycopg is missing.
    """
    from salttwist.master.jobcache_pg import JOB_CACHE_NAMES

    if config.get("master_job_cache", "local_cache") in JOB_CACHE_NAMES:
        try:
            import psycopg  # noqa: F401
        except ImportError as e:
            raise StartupError(
                f"master_job_cache: {config['master_job_cache']} needs psycopg 3: "
                "pip install 'salttwist[postgres]'"
            ) from e
        from salttwist.master.jobcache_pg import PostgresJobCache

        return PostgresJobCache.fromConfig(config, reactor)
    jobCachePath = os.path.join(config["cachedir"], JOB_CACHE_FILE)
    if useWorkers:
        # Its worker starts with the others, in startService.
        return WorkerJobCache(jobCachePath, reactor, config["keep_jobs"])
    return SQLiteJobCache(jobCachePath, reactor, config["keep_jobs"])


class JobCacheService(Service):
    """
    The job cache: its worker (L{WorkerJobCache}) and its pruning start with
    the master; it is closed when the master stops.
    """

    def __init__(self, jobCache: Any) -> None:
        self.jobCache = jobCache

    def startService(self) -> None:
        """
        Start the cache's worker, if it has one, and its pruning.
        """
        super().startService()
        if isinstance(self.jobCache, WorkerJobCache):
            self.jobCache.start()
        self.jobCache.startPruning()

    def stopService(self) -> Deferred[None]:
        """
        Close the cache.
        """
        super().stopService()
        return self.jobCache.close()  # type: ignore[no-any-return]


class KeyStoreService(Service):
    """
    A key store with threads and connections of its own (PostgreSQL): it
    is opened when the master is built and retries with back-off while its
    server is unreachable (the master starts regardless, as with the
    PostgreSQL job cache: minions cannot authenticate until the keys are
    loaded, and no one is cut off meanwhile). This service says so in the
    log if the keys are not loaded within C{warnAfter} seconds, reports the
    load, and closes the store when the master stops (last).
    """

    log = Logger(namespace=_LOG_NAMESPACE)

    def __init__(
        self,
        keyStore: Any,
        where: str,
        reactor: Any,
        warnAfter: float,
        loaded: Callable[[], object],
    ) -> None:
        """
        @param where: the store, for messages (L{describeKeyStore}).
        @param loaded: called on the reactor once the keys are loaded.
        """
        self.keyStore = keyStore
        self._where = where
        self._reactor = reactor
        self._warnAfter = warnAfter
        self._loaded = loaded
        self._warning: Any = None

    def startService(self) -> None:
        """
        Start the store's threads (not before: twistd may fork to
        daemonize after the service tree is built, and threads do not
        survive a fork), and wait for the load without blocking, warning if
        it takes long.
        """
        super().startService()
        self.keyStore.start()
        self._warning = self._reactor.callLater(self._warnAfter, self._notLoaded)
        self.keyStore.whenReady(self._reactor).addCallbacks(self._ready, self._refused)

    def _notLoaded(self) -> None:
        self._warning = None
        self.log.error(
            "the minion keys in {where} are not loaded yet ({error}): minions cannot "
            "authenticate until they are; retrying with back-off",
            where=self._where,
            error=getattr(self.keyStore, "lastError", "") or "no answer",
        )

    def _cancelWarning(self) -> None:
        if self._warning is not None and self._warning.active():
            self._warning.cancel()
        self._warning = None

    def _ready(self, _: object) -> None:
        self._cancelWarning()
        self.log.info(
            "minion keys loaded from {where}: {n} accepted",
            where=self._where,
            n=len(self.keyStore.listKeys("minions")),
        )
        self._loaded()

    def _refused(self, failure: Failure) -> None:
        self._cancelWarning()
        self.log.critical(
            "the minion keys in {where} cannot be used: {error}",
            where=self._where,
            error=failure.getErrorMessage(),
        )

    def stopService(self) -> Deferred[None]:
        """
        Close the store (its threads join: off the reactor).
        """
        super().stopService()
        self._cancelWarning()
        return deferToThread(self.keyStore.close)


class MasterService(MultiService):
    """
    The running master: the parent of its service tree (see the module's
    docstring).

    @param jobCache: the job cache (an L{IJobCache} with C{startPruning});
        by default the one C{master_job_cache} selects (L{makeJobCache}).
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
        try:
            # cache: postgres (the grains and pillar caches every master of
            # a cluster shares), a child service; None with localfs.
            sharedCaches = cachesFromConfig(config, reactor)
        except ValueError as e:
            raise StartupError(str(e)) from e
        #: The store of the shared grains and pillar caches, if any.
        self.minionDataStore = sharedCaches[0] if sharedCaches else None
        grainsCache: Any = None
        if sharedCaches is None:
            grainsCache = GrainsCache(os.path.join(config["cachedir"], "grains.cache"), runBlocking)
            grainsCache.load()
        else:
            grainsCache = sharedCaches[1]
        if jobCache is None:
            jobCache = makeJobCache(config, reactor, useWorkers)
        self.jobCache = jobCache
        idRules = idRulesFromConfig(config)
        try:
            idRules.require()
        except UnicodeIdsUnavailable as e:
            raise StartupError(str(e)) from e
        try:
            #: Which key store (C{keys.cache_driver}), as plain data for
            #: the auth workers, which open one of their own.
            self.keyStoreSpec = keyStoreSpec(config)
            # A PostgreSQL store's threads start with the services (after
            # twistd may have forked): KeyStoreService.
            keyStore = openKeyStore(self.keyStoreSpec, idRules, start=False)
        except KeyStoreSetupError as e:
            raise StartupError(str(e)) from e
        #: The key store (an L{IKeyStore}).
        self.keyStore = keyStore
        shared = self.keyStoreSpec["driver"] != LOCALFS
        if not shared:
            self._warnNonconformingIds(keyStore)
        self.workers: Any = None
        if useWorkers:
            size = config["worker_threads"]
            self.workers = WorkerPool(
                reactor,
                size,
                spawnArgs=[AUTH_TASKS_MODULE, RUNNER_TASKS_MODULE, PILLAR_TASKS_MODULE],
                initTasks=[
                    (
                        f"{AUTH_TASKS_MODULE}.loadAuthenticator",
                        [config["pki_dir"], idRules.unicode]
                        + ([dict(self.keyStoreSpec)] if shared else []),
                    )
                ],
                minSize=min(IDLE_WORKERS, size),
                idleTimeout=WORKER_IDLE_TIMEOUT,
            )
        self.master = Master(
            config,
            loadMasterKeys(config["pki_dir"], config["cachedir"], config["keysize"]),
            keyStore,
            self.bus,
            runBlocking,
            reactor,
            grainsCache,
            jobCache=self.jobCache,
            pillarCache=sharedCaches[2] if sharedCaches else None,
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
        try:
            #: The fan-out to the other masters of a cluster, a child
            #: service, when C{cluster_id} is set (L{salttwist.cluster}).
            self.clusterService = clusterFromConfig(config, reactor, self.master)
        except ValueError as e:
            raise StartupError(str(e)) from e
        #: Salt's reactor, a child service, when the C{reactor} option is set.
        self.reactorService: Any = None
        if config.get("reactor"):
            # Imported only when asked for: with Jinja2 it is about 2.5 MB of
            # the master's memory.
            from salttwist.master.reactor import buildReactor

            self.reactorService = buildReactor(config, self.master)
        #: Serves the bus on C{master_event_pub.ipc} (kept for its figures).
        self.eventPublisher = EventPublisherFactory(
            self.bus, config["event_queue_max"], config["ipc_write_buffer"]
        )
        self._ready: bool | Failure = False
        self._readyWaiters: list[Deferred[None]] = []
        self._ports: list[Any] = []
        self._acceptedStamp: tuple[int, int] | None = None
        #: The changes of a shared key store, handed to the key watch.
        self.keyFeed: KeyStoreFeed | None = None
        self.keyStoreService: KeyStoreService | None = None
        if shared:
            self.keyFeed = KeyStoreFeed(reactor, self.master.keyWatch.storeChanged)
            keyStore.watch(self.keyFeed)
            self.keyStoreService = KeyStoreService(
                keyStore,
                describeKeyStore(self.keyStoreSpec),
                reactor,
                float(config.get("keys.postgres.connect_timeout", 10)),
                lambda: self.master.runBlocking(self._warnNonconformingIds, keyStore),
            )
        for name in (EVENT_PUB_SOCKET, EVENT_PULL_SOCKET):
            path = os.path.join(config["sock_dir"], name)
            if len(os.fsencode(path)) > MAX_UNIX_PATH:
                raise StartupError(
                    f"sock_dir is too deep for a UNIX socket: {path} is over "
                    f"{MAX_UNIX_PATH} bytes; choose a shorter sock_dir"
                )
        self._addChildren()

    def _warnNonconformingIds(self, keyStore: Any) -> None:
        """
        Warn of keys whose ids a new minion could not take (they break
        the id rules or clash with another id): they were written before
        the rules or by hand. They still work; C{salttwist-key -d} deletes
        them.
        """
        found = nonconformingIds(keyStore)
        if not found:
            return
        shown = "; ".join(
            f"'{escapeId(minionId)}' in {state}: {problem}"
            for state, minionId, problem in found[:50]
        )
        more = f"; and {len(found) - 50} more" if len(found) > 50 else ""
        self.log.warn(
            "{n} minion key(s) have ids that break the id rules or clash with another id; "
            "check them (salttwist-key -L shows ids escaped) and delete impostors with "
            "salttwist-key -d ID: {keys}{more}",
            n=len(found),
            keys=shown,
            more=more,
        )

    def _addChildren(self) -> None:
        """
        Build the tree. Children start in this order and stop in the
        reverse: the sockets close first, the job cache last.
        """
        config, reactor, master = self.config, self.reactor, self.master
        if self.keyStoreService is not None:
            # First, so it stops last: nothing uses the keys after it.
            self.keyStoreService.setServiceParent(self)
        JobCacheService(self.jobCache).setServiceParent(self)
        if self.minionDataStore is not None:
            self.minionDataStore.setServiceParent(self)
        if self.clusterService is not None:
            # Connected before the sockets listen; disconnected after they
            # close and before the job cache does.
            self.clusterService.setServiceParent(self)
        if self.workers is not None:
            WorkerPoolService(self.workers, master, config["worker_threads"]).setServiceParent(self)
        if self.reactorService is not None:
            self.reactorService.setServiceParent(self)
        # Key changes made by any means take effect within a second.
        PeriodicService(KEY_RECONCILE_INTERVAL, self._reconcileIfChanged, reactor).setServiceParent(
            self
        )
        if config["publish_session"] > 0:
            PeriodicService(
                float(config["publish_session"]),
                lambda: master.rotatePublicationKey("publish_session elapsed"),
                reactor,
            ).setServiceParent(self)
        # The periodic events the config asks for (salttwist.master.maintenance).
        if config["presence_events"]:
            PeriodicService(
                float(config["loop_interval"]), PresenceEvents(master), reactor
            ).setServiceParent(self)
        if config["master_stats"]:
            PeriodicService(
                float(config["master_stats_event_iter"]),
                MasterStats(master, reactor, self.eventPublisher),
                reactor,
            ).setServiceParent(self)
        # gitfs fetches its remotes at start and every gitfs_update_interval.
        if any(name in ("git", "gitfs") for name in config["fileserver_backend"]):
            PeriodicService(
                float(config["gitfs_update_interval"]), self._updateGitfs, reactor, now=True
            ).setServiceParent(self)
        sockDir = config["sock_dir"]
        #: The sockets, in the order of L{_listening}'s ports: pub, req,
        #: the bus's publisher and its pull socket.
        self.channels = [
            ChannelService(
                _ObservedEndpoint(lambda: self._channelEndpoint(config["publish_port"], ROLE_PUB)),
                # A pub connection needs only the sessions room.
                PubServerFactory(master.sessionsRoom),
            ),
            ChannelService(
                _ObservedEndpoint(lambda: self._channelEndpoint(config["ret_port"], ROLE_REQ)),
                ReqServerFactory(master),
            ),
            ChannelService(
                _ObservedEndpoint(
                    lambda: UNIXServerEndpoint(
                        reactor,
                        os.path.join(sockDir, EVENT_PUB_SOCKET),
                        # publisher_acl users gather their returns from the
                        # bus, as in Salt; who reaches the socket is then up
                        # to sock_dir's mode.
                        mode=0o666 if master.acl.acl else 0o660,
                        wantPID=True,
                    ),
                    ownerOnly=True,
                ),
                self.eventPublisher,
            ),
            ChannelService(
                _ObservedEndpoint(
                    lambda: UNIXServerEndpoint(
                        reactor, os.path.join(sockDir, EVENT_PULL_SOCKET), mode=0o660, wantPID=True
                    ),
                    ownerOnly=True,
                ),
                EventPullFactory(self.bus, config["max_frame_bytes"]),
            ),
        ]
        for channel in self.channels:
            channel.setServiceParent(self)

    def _updateGitfs(self) -> Deferred[None] | None:
        """
        Fetch the gitfs remotes (L{salttwist.fileserver.server.FileServer.update}
        of the C{git} backend) in a thread: git runs as blocking
        subprocesses. A remote that fails is logged by the backend and
        keeps serving its last good trees.
        """
        fileServer = self.master.fileServer
        if fileServer is None:
            return None

        def updated(changed: dict[str, bool]) -> None:
            if changed.get("git"):
                self.log.info("gitfs: new commits fetched; serving them")

        return self.master.runBlocking(fileServer.update, "git").addCallback(updated)

    def _channelEndpoint(self, port: int, role: str) -> Any:
        """
        @return: the endpoint of channel C{role} on C{port}, from the
            configured transport.
        """
        return self.transport.serverEndpoint(
            self.reactor, self.config, self.config["interface"], port, role
        )

    def _reconcileIfChanged(self) -> Deferred[None] | None:
        """
        Compare the key store with the connected minions, but only when the
        accepted keys changed since the last comparison: listing and
        checking thousands of keys every second is measurable master CPU.
        The files' store tells by the mtime of the accepted-keys directory
        (any move in or out of it changes it); a shared store by its change
        notifications (L{KeyStoreFeed.dirty}), and never before its keys
        are loaded (an empty list would cut off every minion).
        """
        feed = self.keyFeed
        if feed is not None:
            if not feed.dirty or not self.keyStore.loaded:
                return None
            feed.dirty = False

            def again(failure: Any) -> Any:
                feed.dirty = True
                return failure

            return maybeDeferred(self.master.reconcileKeys).addErrback(again)
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

    def privilegedStartService(self) -> None:
        """
        Bind every socket (the L{ChannelService} children), then switch to
        L{runAs} if set.
        """
        super().privilegedStartService()
        failed: list[Any] = []
        DeferredList(
            [channel.observed.whenListening for channel in self.channels],
            fireOnOneErrback=True,
            consumeErrors=True,
        ).addCallbacks(self._listening, self._listenFailed).addErrback(failed.append)
        if failed:
            failed[0].raiseException()
        # Bound: now give up root (twistd starts the services, and so the
        # worker processes, only after this method).
        dropPrivileges(self.runAs, self.config)

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
        Close every connection, then stop the children: stop listening,
        stop the timers and the workers, close the job cache.
        """
        self.master.sessionsRoom.closeAll()
        try:
            os.unlink(os.path.join(self.config["sock_dir"], PORTS_FILE))
        except OSError:
            pass
        return super().stopService()  # type: ignore[no-any-return]
