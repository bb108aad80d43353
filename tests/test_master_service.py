# -*- test-case-name: tests.test_master_service -*-
"""
Tests for L{salttwist.master.service.MasterService} and the master's twistd
plugin, on a L{MemoryReactorClock}.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from twisted.application.internet import StreamServerEndpointService, TimerService
from twisted.application.service import IService
from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import MemoryReactorClock
from twisted.plugin import IPlugin, getPlugins
from twisted.trial.unittest import SynchronousTestCase

from salttwist.config import loadMasterConfig
from salttwist.daemon import StartupError
from salttwist.master import tap
from salttwist.master.core import runSynchronously
from salttwist.master.service import (
    KEY_RECONCILE_INTERVAL,
    PORTS_FILE,
    ChannelService,
    JobCacheService,
    MasterService,
    PeriodicService,
    WorkerPoolService,
)


class _RecordingJobCache:
    """
    Records what the service asks of its job cache (the real one needs a
    real reactor's threads).
    """

    def __init__(self) -> None:
        self.calls: list[str] = []

    def startPruning(self) -> None:
        self.calls.append("startPruning")

    def close(self) -> Deferred[None]:
        self.calls.append("close")
        return succeed(None)

    def storeJob(self, *args: Any) -> Deferred[None]:
        self.calls.append("storeJob")
        return succeed(None)

    def storeReturn(self, *args: Any) -> Deferred[None]:
        self.calls.append("storeReturn")
        return succeed(None)


class MasterServiceTests(SynchronousTestCase):
    """
    The master's service tree: sockets, ports file, periodic work.
    """

    def setUp(self) -> None:
        """
        A config under a short temporary root (UNIX socket paths are short).
        """
        self.root = tempfile.mkdtemp(prefix="stm-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.reactor = MemoryReactorClock()
        # As under twistd -n once the reactor runs; see test_announcedWhenRunning.
        self.reactor.running = True

    def makeService(self, **overrides: Any) -> MasterService:
        """
        Build a master service with C{overrides} on top of the test config.
        """
        options = {"root_dir": self.root, "interface": "127.0.0.1", "keysize": 2048}
        options.update(overrides)
        config = loadMasterConfig(self.root, overrides=options)
        return MasterService(
            config,
            self.reactor,
            runBlocking=runSynchronously,
            jobCache=_RecordingJobCache(),
            useWorkers=False,
        )

    def test_tree(self) -> None:
        """
        The master is a tree of services: the job cache, the worker pool,
        the periodic work as L{TimerService}s (reconciliation, rotation,
        presence and statistics, as configured) and the four sockets as
        L{StreamServerEndpointService}s, in that order.
        """
        service = self.makeService(publish_session=60, presence_events=True, master_stats=True)
        children = list(service)
        self.assertEqual(
            [type(child) for child in children],
            [JobCacheService, *[PeriodicService] * 4, *[ChannelService] * 4],
        )
        self.assertIs(children[0].jobCache, service.jobCache)
        for child in children[1:5]:
            self.assertIsInstance(child, TimerService)
        self.assertEqual(
            [child.step for child in children[1:5]], [KEY_RECONCILE_INTERVAL, 60.0, 60.0, 60.0]
        )
        for child in children[5:]:
            self.assertIsInstance(child, StreamServerEndpointService)
        self.assertEqual(service.channels, children[5:])

    def test_workerPoolChild(self) -> None:
        """
        With workers, the pool is a child of its own, after the job cache.
        """
        options = {"root_dir": self.root, "interface": "127.0.0.1", "keysize": 2048}
        config = loadMasterConfig(self.root, overrides=options)
        service = MasterService(
            config, self.reactor, runBlocking=runSynchronously, jobCache=_RecordingJobCache()
        )
        pool = list(service)[1]
        self.assertIsInstance(pool, WorkerPoolService)
        self.assertIs(pool.pool, service.workers)

    def test_listensAndWritesPorts(self) -> None:
        """
        Starting binds the pub and req ports and both event sockets, then
        writes the real ports to C{sock_dir/master.ports} and fires
        C{whenReady}.
        """
        service = self.makeService(publish_port=4505, ret_port=4506)
        service.privilegedStartService()
        self.successResultOf(service.whenReady())
        self.assertEqual([port for port, *_ in self.reactor.tcpServers], [4505, 4506])
        # A deep backlog, so thousands of minions connecting at once do not
        # overflow the accept queue and hang.
        self.assertEqual([backlog for _, _, backlog, _ in self.reactor.tcpServers], [4096, 4096])
        self.assertEqual(
            sorted(os.path.basename(path) for path, *_ in self.reactor.unixServers),
            ["master_event_pub.ipc", "master_event_pull.ipc"],
        )
        with open(os.path.join(service.config["sock_dir"], PORTS_FILE)) as f:
            self.assertEqual(json.load(f)["ret_port"], 4506)

    def test_announcedWhenRunning(self) -> None:
        """
        Started before the reactor runs (twistd's order), the master listens
        at once but writes its ports file and fires C{whenReady} only once
        the reactor runs, when twistd's SIGTERM handler is in place: a
        supervisor that stops it as soon as the file appears gets a clean
        shutdown.
        """
        self.reactor.running = False
        service = self.makeService()
        service.privilegedStartService()
        portsFile = os.path.join(service.config["sock_dir"], PORTS_FILE)
        ready = service.whenReady()
        self.assertEqual(len(self.reactor.tcpServers), 2)
        self.assertFalse(os.path.exists(portsFile))
        self.assertNoResult(ready)
        for hook, args, kwargs in self.reactor.whenRunningHooks:
            hook(*args, **kwargs)
        self.assertTrue(os.path.exists(portsFile))
        self.successResultOf(ready)

    def test_cannotListen(self) -> None:
        """
        When a port cannot be bound before the reactor runs (twistd's order),
        starting raises L{StartupError} naming the reason, and a caller
        waiting on L{MasterService.whenReady} sees the failure.
        """
        from twisted.internet.defer import fail
        from twisted.internet.error import CannotListenError

        class Busy:
            def listen(self, factory: object) -> Deferred[None]:
                return fail(CannotListenError("127.0.0.1", 4506, OSError("in use")))

        self.reactor.running = False
        service = self.makeService()
        self.patch(service.transport, "serverEndpoint", lambda *a: Busy())
        ready = service.whenReady()
        error = self.assertRaises(StartupError, service.privilegedStartService)
        self.assertIn("cannot listen", str(error))
        self.failureResultOf(ready)

    def test_reconcilesEverySecond(self) -> None:
        """
        Once started, the master looks every second whether the accepted
        keys changed, and compares the key store with the connected minions
        when they did (and once at the start); stopping ends that.
        """
        service = self.makeService()
        calls: list[object] = []
        self.patch(service.master, "reconcileKeys", lambda *a: calls.append(a))
        service.startService()
        self.reactor.advance(KEY_RECONCILE_INTERVAL)
        self.reactor.advance(KEY_RECONCILE_INTERVAL)
        self.assertEqual(len(calls), 1)
        accepted = os.path.join(service.config["pki_dir"], "minions")
        info = os.stat(accepted)
        os.utime(accepted, ns=(info.st_atime_ns, info.st_mtime_ns + 1000))
        self.reactor.advance(KEY_RECONCILE_INTERVAL)
        self.assertEqual(len(calls), 2)
        service.stopService()
        os.utime(accepted, ns=(info.st_atime_ns, info.st_mtime_ns + 2000))
        self.reactor.advance(KEY_RECONCILE_INTERVAL)
        self.assertEqual(len(calls), 2)
        self.assertEqual(service.jobCache.calls, ["startPruning", "close"])

    def test_failingReconcileKeepsRunning(self) -> None:
        """
        A reconciliation that fails is logged and the next one still runs.
        """
        service = self.makeService()
        calls: list[object] = []

        def failing(*a: object) -> None:
            calls.append(a)
            raise OSError("disk gone")

        self.patch(service.master, "reconcileKeys", failing)
        service.startService()
        self.reactor.advance(KEY_RECONCILE_INTERVAL)
        self.reactor.advance(KEY_RECONCILE_INTERVAL)
        self.assertEqual(len(calls), 2)
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 2)
        service.stopService()

    def test_rotatesEveryPublishSession(self) -> None:
        """
        The publication key is rotated every C{publish_session} seconds.
        """
        service = self.makeService(publish_session=60)
        self.patch(service.master, "reconcileKeys", lambda *a: None)
        kid = service.master.publicationKey.kid
        service.startService()
        self.reactor.advance(60)
        self.assertEqual(service.master.publicationKey.kid, kid + 1)
        service.stopService()

    def test_keyEventsReachTheMaster(self) -> None:
        """
        A C{salt/key} delete event on the bus makes the master rotate.
        """
        service = self.makeService()
        kid = service.master.publicationKey.kid
        service.bus.fire("salt/key", {"act": "delete", "id": "gone"})
        self.assertEqual(service.master.publicationKey.kid, kid + 1)

    def test_sockDirTooDeep(self) -> None:
        """
        A sock_dir too deep for a UNIX socket path stops the master at start
        with a message naming the problem.
        """
        deep = os.path.join(self.root, "d" * 120)
        error = self.assertRaises(StartupError, self.makeService, sock_dir=deep)
        self.assertIn("too deep for a UNIX socket", str(error))

    def test_plugin(self) -> None:
        """
        The C{salttwist-master} twistd plugin is found and builds the service
        from C{-c}.
        """
        import twisted.plugins

        makers = {
            p.tapname: p for p in getPlugins(IPlugin, twisted.plugins) if hasattr(p, "tapname")
        }
        self.assertIn("salttwist-master", makers)
        self.assertIn("salttwist-minion", makers)
        with open(os.path.join(self.root, "master"), "w") as f:
            f.write(f"root_dir: {self.root}\n")
        from salttwist.master import service as serviceModule

        self.patch(serviceModule, "SQLiteJobCache", lambda *a: _RecordingJobCache())
        options = tap.Options()
        options.parseOptions(["-c", self.root])
        service = tap.makeService(options, reactor=self.reactor)
        self.assertTrue(IService.providedBy(service))
