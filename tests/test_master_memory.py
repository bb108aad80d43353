# -*- test-case-name: tests.test_master_memory -*-
"""
Tests for what keeps the idle master's processes small (issue 6: the master
and its workers under 120 MB RSS together): an elastic worker pool that
keeps one auth worker while idle (L{WorkerPool} with C{minSize}), worker
children that import AMP without C{asyncio} and pyOpenSSL
(L{salttwist.workers.lean}) and import the runner modules only when a runner
runs, and a master that imports Salt's reactor (and Jinja2) only when the
C{reactor} option asks for it.

The pool is driven by the fake process reactor of L{tests.test_workers};
the import checks run real interpreters, since this one has imported
everything already.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver, StringTransport
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist import crypt
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.master import authtasks, runnertasks
from salttwist.master.core import runSynchronously
from salttwist.master.jobcache import JobCacheDatabase
from salttwist.master.reqserver import (
    DEFAULT_REQ_WRITE_BUFFER,
    MAX_HELD_REPLIES,
    ReqServerFactory,
)
from salttwist.master.service import IDLE_WORKERS, WORKER_IDLE_TIMEOUT, MasterService
from salttwist.master.sessions import Sessions
from salttwist.pki.keystore import InMemoryKeyStore
from salttwist.transport.backlog import writeBacklog
from salttwist.transport.session import SessionCipher
from salttwist.workers.lean import asyncioStandIn
from salttwist.workers.pool import RESTART_BACKOFF_BASE, WorkerPool
from tests._fresh import pythonOutput, runWorkerChild
from tests.test_master_rooms import (
    FakeReqChannel,
    FakeSession,
    FakeSubscriber,
    frameBytes,
    readFrames,
)
from tests.test_master_service import _RecordingJobCache
from tests.test_workers import ECHO, FakeProcessReactor, PoolTestsMixin

#: Modules an auth worker must not import before it runs a runner: the
#: runners and what they need (the job cache, SQLite, execution modules),
#: and what the child keeps out of AMP's imports.
LAZY_IN_AUTH_WORKER = (
    "asyncio",
    "OpenSSL",
    "salttwist.master.jobcache",
    "salttwist.modules",
    "salttwist.runners",
    "sqlite3",
    "ssl",
)

#: Modules the job cache worker must never import: the job cache needs no
#: cryptography (about 11 MB) and no asyncio.
NOT_IN_JOB_CACHE_WORKER = ("asyncio", "cryptography", "OpenSSL", "salttwist.crypt", "ssl")

_PROBE = "salttwist_memory_probe"


def _writeProbe(directory: str, report: str | None = None) -> None:
    """
    Write a task module C{salttwist_memory_probe} into C{directory}: its
    task C{modules} returns the names in C{sys.modules}; with C{report},
    importing it writes them there as JSON.
    """
    lines = [
        "import json, sys\n",
        "from salttwist.workers.tasks import task\n",
        "@task\n",
        "def modules():\n",
        "    return sorted(sys.modules)\n",
    ]
    if report is not None:
        lines.append(f"with open({report!r}, 'w') as f:\n    json.dump(sorted(sys.modules), f)\n")
    with open(os.path.join(directory, f"{_PROBE}.py"), "w") as f:
        f.writelines(lines)


class ElasticPoolTests(PoolTestsMixin, SynchronousTestCase):
    """
    A L{WorkerPool} with C{minSize} below C{size} grows while requests wait
    and shrinks back when idle.
    """

    def test_startsMinSize(self) -> None:
        """
        C{start()} spawns C{minSize} workers and fires once they are ready;
        C{stats()} still gives the configured C{size}.
        """
        self.makePool(size=3, minSize=1)
        self.assertEqual(len(self.reactor.processes), 1)
        self.assertEqual(self.pool.stats()["size"], 3)
        self.assertEqual(self.pool.stats()["idle"], 1)

    def test_growsWhileRequestsWait(self) -> None:
        """
        A request that finds no idle worker spawns another one, as many as
        wait beyond the workers already starting, never more than C{size}
        in all; every request then runs, and none of those workers counts
        as a restart.
        """
        self.makePool(size=3, minSize=1)
        first = self.pool.run(ECHO, 1)
        self.assertEqual(len(self.reactor.processes), 1)
        waiting = [self.pool.run(ECHO, n) for n in range(2, 6)]
        self.assertEqual(len(self.reactor.processes), 3)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(first), 1)
        self.assertEqual([self.successResultOf(d) for d in waiting], [2, 3, 4, 5])
        stats = self.pool.stats()
        self.assertEqual((stats["idle"], stats["restarts"], stats["completed"]), (3, 0, 5))

    def test_growsWhileStarting(self) -> None:
        """
        Requests made while the first worker starts spawn the others at
        once rather than wait for it.
        """
        self.makePool(size=2, minSize=1, start=False)
        started = self.pool.start()
        requests = [self.pool.run(ECHO, n) for n in range(2)]
        self.assertEqual(len(self.reactor.processes), 2)
        self.reactor.pumpAll()
        self.assertIsNone(self.successResultOf(started))
        self.assertEqual([self.successResultOf(d) for d in requests], [0, 1])

    def test_noGrowthWhileStartFails(self) -> None:
        """
        While a failed start is being retried (with its back-off), waiting
        requests spawn no further workers; once a worker has started again,
        they do.
        """
        self.makePool(size=3, minSize=1)
        busy = self.pool.run(ECHO, "busy")
        waiting = self.pool.run(ECHO, "waiting")
        self.assertEqual(len(self.reactor.processes), 2)
        self.reactor.processes[1].end(1)
        more = self.pool.run(ECHO, "more")
        self.assertEqual(len(self.reactor.processes), 2)
        self.reactor.advance(RESTART_BACKOFF_BASE)
        self.assertEqual(len(self.reactor.processes), 3)
        self.reactor.pumpAll()
        self.assertEqual(
            [self.successResultOf(d) for d in (busy, waiting, more)], ["busy", "waiting", "more"]
        )
        self.assertEqual(len(self.reactor.live()), 2)
        later = [self.pool.run(ECHO, n) for n in range(3)]
        self.assertEqual(len(self.reactor.live()), 3)
        self.reactor.pumpAll()
        self.assertEqual([self.successResultOf(d) for d in later], [0, 1, 2])

    def test_idleWorkerRetired(self) -> None:
        """
        A worker beyond C{minSize} idle for C{idleTimeout} seconds is told to
        shut down; the pool keeps C{minSize} workers however long it stays
        idle, and a retired worker is not replaced.
        """
        self.makePool(size=2, minSize=1, idleTimeout=10)
        self.pool.run(ECHO, 1)
        self.pool.run(ECHO, 2)
        self.reactor.pumpAll()
        self.assertEqual(len(self.reactor.live()), 2)
        self.reactor.advance(9.9)
        self.reactor.pumpAll()
        self.assertEqual(len(self.reactor.live()), 2)
        self.reactor.advance(0.1)
        self.reactor.pumpAll()
        self.assertEqual(len(self.reactor.live()), 1)
        self.reactor.advance(1000)
        self.reactor.pumpAll()
        self.assertEqual(len(self.reactor.live()), 1)
        self.assertEqual(len(self.reactor.processes), 2)
        stats = self.pool.stats()
        self.assertEqual((stats["idle"], stats["restarts"], stats["failed"]), (1, 0, 0))
        self.assertEqual(self.reactor.getDelayedCalls(), [])
        d = self.pool.run(ECHO, 3)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), 3)

    def test_workIsNotIdleness(self) -> None:
        """
        A worker given a request is not retired while it runs it, nor
        C{idleTimeout} seconds after it became idle before; the one left
        idle is.
        """
        self.makePool(size=2, minSize=1, idleTimeout=10)
        self.pool.run(ECHO, 1)
        self.pool.run(ECHO, 2)
        self.reactor.pumpAll()
        self.reactor.advance(5)
        running = self.pool.run(ECHO, "late")
        first = self.reactor.processes[0]
        self.reactor.advance(5)
        self.reactor.pumpAll()
        self.assertEqual(self.reactor.live(), [first])
        self.assertEqual(self.successResultOf(running), "late")

    def test_retiringWorkerKilled(self) -> None:
        """
        A retired worker that has not exited C{shutdownGrace} seconds after
        it was told to is killed with SIGKILL; its end is no failure and
        brings no replacement.
        """
        self.makePool(size=2, minSize=1, idleTimeout=10, shutdownGrace=3)
        self.pool.run(ECHO, 1)
        self.pool.run(ECHO, 2)
        self.reactor.pumpAll()
        self.reactor.advance(10)
        retired = next(p for p in self.reactor.processes if p.toChild)
        self.reactor.advance(3)
        self.assertEqual(retired.signals, ["KILL"])
        retired.end(signal=9)
        self.assertEqual(len(self.reactor.processes), 2)
        self.assertEqual(self.pool.stats()["restarts"], 0)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_stopWhileRetiring(self) -> None:
        """
        C{stop()} while a worker is being retired tells the others to shut
        down, not that one again, and fires once every worker has exited.
        """
        self.makePool(size=2, minSize=1, idleTimeout=10)
        self.pool.run(ECHO, 1)
        self.pool.run(ECHO, 2)
        self.reactor.pumpAll()
        self.reactor.advance(10)
        retired = next(p for p in self.reactor.processes if p.toChild)
        told = retired.toChild
        stopped = self.pool.stop()
        self.assertEqual(retired.toChild, told)
        self.assertNoResult(stopped)
        self.reactor.pumpAll()
        self.assertIsNone(self.successResultOf(stopped))
        self.assertEqual(self.reactor.live(), [])

    def test_fixedPoolKeepsItsWorkers(self) -> None:
        """
        By default (C{minSize} is C{size}) the pool starts every worker and
        sets no idle timer.
        """
        self.makePool(size=2)
        self.assertEqual(len(self.reactor.processes), 2)
        d = self.pool.run(ECHO, 1)
        self.reactor.pumpAll()
        self.assertEqual(self.successResultOf(d), 1)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_badSizes(self) -> None:
        """
        C{minSize} must be from 1 to C{size}, and C{idleTimeout} positive.
        """
        for minSize in (0, 3):
            self.assertRaises(ValueError, WorkerPool, FakeProcessReactor(), 2, minSize=minSize)
        self.assertRaises(ValueError, WorkerPool, FakeProcessReactor(), 2, idleTimeout=0)


class MasterPoolTests(SynchronousTestCase):
    """
    The master's main pool (auth and runner workers) keeps L{IDLE_WORKERS}
    workers while idle and grows to C{worker_threads}.
    """

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="stm-")
        self.addCleanup(shutil.rmtree, self.root, True)
        saved = dict(authtasks._state)
        self.addCleanup(lambda: (authtasks._state.clear(), authtasks._state.update(saved)))

    def test_idleWorkers(self) -> None:
        """
        The pool starts L{IDLE_WORKERS} auth worker; with more requests
        waiting it runs C{worker_threads} of them, and those beyond
        L{IDLE_WORKERS} stop after L{WORKER_IDLE_TIMEOUT} seconds idle.
        """
        fake = FakeProcessReactor()
        options = {"root_dir": self.root, "keysize": 2048, "worker_threads": 3}
        config = loadMasterConfig(self.root, overrides=options)
        service = MasterService(
            config, fake, runBlocking=runSynchronously, jobCache=_RecordingJobCache()
        )
        started = service.workers.start()
        fake.pumpAll()
        self.successResultOf(started)
        self.assertEqual(IDLE_WORKERS, 1)
        self.assertEqual(len(fake.processes), IDLE_WORKERS)
        self.assertIn("salttwist.master.authtasks", fake.processes[0].args)
        requests = [service.workers.run(ECHO, n) for n in range(5)]
        self.assertEqual(len(fake.processes), 3)
        fake.pumpAll()
        self.assertEqual([self.successResultOf(d) for d in requests], list(range(5)))
        fake.advance(WORKER_IDLE_TIMEOUT)
        fake.pumpAll()
        self.assertEqual(len(fake.live()), IDLE_WORKERS)


class LeanImportTests(SynchronousTestCase):
    """
    L{salttwist.workers.lean}: AMP's imports without C{asyncio} and
    pyOpenSSL.
    """

    def test_standInIsCoroutine(self) -> None:
        """
        The stand-in's C{iscoroutine} is true of coroutines only (not of
        generators, which C{Deferred} checks for itself), and it has the
        other two names C{twisted.internet.defer} imports.
        """
        standIn = asyncioStandIn()

        async def coroutineFunction() -> None:
            pass

        def generatorFunction() -> Any:
            yield 1

        coroutine = coroutineFunction()
        self.addCleanup(coroutine.close)
        self.assertTrue(standIn.iscoroutine(coroutine))
        self.assertFalse(standIn.iscoroutine(generatorFunction()))
        self.assertFalse(standIn.iscoroutine(object()))
        self.assertTrue(isinstance(standIn.Future, type))
        self.assertTrue(isinstance(standIn.AbstractEventLoop, type))

    def runFresh(self, moduleSource: str) -> list[Any]:
        """
        In a fresh interpreter, C{importLean} a module made of
        C{moduleSource}.

        @return: whether C{asyncio}, C{ssl} and C{twisted.internet.ssl} are
            in C{sys.modules} afterwards, and C{str()} of the module's
            C{asyncio} (the module's own name for it).
        """
        directory = self.mktemp()
        os.makedirs(directory)
        with open(os.path.join(directory, "salttwist_lean_probe.py"), "w") as f:
            f.write(moduleSource)
        script = (
            "import json, sys\n"
            "from salttwist.workers.lean import importLean\n"
            "module = importLean('salttwist_lean_probe')\n"
            "print(json.dumps([name in sys.modules for name in\n"
            "    ('asyncio', 'ssl', 'twisted.internet.ssl')] + [module.found]))\n"
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([directory, *sys.path]))
        return json.loads(pythonOutput(self, script, env=env))

    def test_standInWhileImporting(self) -> None:
        """
        A module imported by C{importLean} that takes C{iscoroutine} from
        C{asyncio} gets the stand-in's, and neither C{asyncio} nor C{ssl}
        is left imported.
        """
        found = self.runFresh("from asyncio import iscoroutine\nfound = iscoroutine.__module__\n")
        self.assertEqual(found, [False, False, False, "salttwist._startup"])

    def test_realAsyncioWhenMoreIsWanted(self) -> None:
        """
        A module that wants a name the stand-in lacks is imported with the
        real C{asyncio}.
        """
        found = self.runFresh(
            "from asyncio import get_running_loop\nfound = get_running_loop.__module__\n"
        )
        self.assertEqual(found[0], True)
        self.assertIn(found[3], ("asyncio.events", "_asyncio"))

    def test_sslHidden(self) -> None:
        """
        C{twisted.internet.ssl} cannot be imported meanwhile (AMP then does
        without TLS), and is not left hidden afterwards.
        """
        found = self.runFresh(
            "try:\n"
            "    import twisted.internet.ssl\n"
            "    found = 'imported'\n"
            "except ImportError:\n"
            "    found = 'hidden'\n"
        )
        self.assertEqual(found[2:], [False, "hidden"])


class WorkerImportTests(SynchronousTestCase):
    """
    What a real worker child has imported once its task modules are in.
    """

    def childModules(self, taskModules: list[str]) -> list[str]:
        """
        @return: C{sys.modules} of a real child that imported
            C{taskModules}, then the probe module.
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        report = os.path.join(directory, "report.json")
        _writeProbe(directory, report)
        done = runWorkerChild(directory, [*taskModules, _PROBE])
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(report) as f:
            return json.load(f)

    def test_authWorker(self) -> None:
        """
        An auth worker (auth and runner task modules) has imported neither
        the runners nor what they need, nor C{asyncio}, pyOpenSSL or C{ssl}.
        """
        modules = self.childModules(["salttwist.master.authtasks", "salttwist.master.runnertasks"])
        self.assertIn("salttwist.master.runnertasks", modules)
        self.assertEqual([m for m in LAZY_IN_AUTH_WORKER if m in modules], [])

    def test_jobCacheWorker(self) -> None:
        """
        The job cache worker has imported neither cryptography nor
        C{asyncio}.
        """
        modules = self.childModules(["salttwist.master.jobcachetasks"])
        self.assertIn("salttwist.master.jobcachetasks", modules)
        self.assertEqual([m for m in NOT_IN_JOB_CACHE_WORKER if m in modules], [])


class MasterImportTests(SynchronousTestCase):
    """
    What building the master imports.
    """

    def test_noReactorNoJinja(self) -> None:
        """
        Without the C{reactor} option, building the L{MasterService} imports
        neither Salt's reactor module nor Jinja2; nor SQLite, which only the
        job cache's worker uses.
        """
        root = tempfile.mkdtemp(prefix="stm-")
        self.addCleanup(shutil.rmtree, root, True)
        script = (
            "import sys\n"
            "from twisted.internet.testing import MemoryReactorClock\n"
            "from salttwist.config import loadMasterConfig\n"
            "from salttwist.master.core import runSynchronously\n"
            "from salttwist.master.service import MasterService\n"
            "class Cache:\n"
            "    def startPruning(self): pass\n"
            "root = sys.argv[1]\n"
            "config = loadMasterConfig(root, overrides={'root_dir': root, 'keysize': 2048})\n"
            "MasterService(config, MemoryReactorClock(), runBlocking=runSynchronously,\n"
            "    jobCache=Cache(), useWorkers=False)\n"
            "print([m for m in ('salttwist.master.reactor', 'jinja2', 'sqlite3')\n"
            "    if m in sys.modules])\n"
        )
        self.assertEqual(pythonOutput(self, script, root).strip(), "[]")


class RunnerImportTests(TestCase):
    """
    A real auth worker imports the runners when it first runs one.
    """

    timeout = 60

    def test_runnersOnFirstUse(self) -> None:
        """
        A real worker of the master's main pool, its key loaded, has not
        imported the runners (nor SQLite); once it has run C{jobs.list_jobs}
        it has.
        """
        directory = os.path.abspath(self.mktemp())
        pkiDir = os.path.join(directory, "pki")
        os.makedirs(pkiDir)
        _writeProbe(directory)
        crypt.writePrivateFile(
            os.path.join(pkiDir, "master.pem"),
            crypt.privateKeyToPem(crypt.generatePrivateKey(2048)),
            durable=False,
        )
        config = loadMasterConfig(directory, overrides={"root_dir": directory})
        cachePath = os.path.join(directory, "jobs.sqlite")
        database = JobCacheDatabase(cachePath)
        database.open()
        database.close()
        pool = WorkerPool(
            reactor,
            1,
            spawnArgs=["salttwist.master.authtasks", "salttwist.master.runnertasks", _PROBE],
            initTasks=[(authtasks.loadAuthenticator, [pkiDir])],
            env={"PYTHONPATH": os.pathsep.join([directory, *sys.path])},
        )

        async def test() -> None:
            try:
                await pool.start()
                before = await pool.run(f"{_PROBE}.modules")
                self.assertEqual([m for m in LAZY_IN_AUTH_WORKER if m in before], [])
                jobs = await pool.run(
                    runnertasks.runIdempotentRunner, "jobs.list_jobs", [], {}, config, cachePath
                )
                self.assertEqual(jobs, {})
                after = await pool.run(f"{_PROBE}.modules")
                self.assertIn("salttwist.runners.jobs", after)
                self.assertIn("sqlite3", after)
            finally:
                await pool.stop()

        return ensureDeferred(test())


class _StalledSubscriber(FakeSubscriber):
    """
    A subscriber whose publications stay in its transport: a minion that
    does not read them (until the test clears the transport).
    """

    def sendString(self, data: bytes) -> None:
        self.strings.append(data)
        self.transport.write(data)


class PubWriteBufferTests(SynchronousTestCase):
    """
    The sessions room drops the publications of a subscriber that holds
    more than C{pub_write_buffer} bytes unread (issue 22, section 4), and
    counts and logs them; the others get every publication.
    """

    def setUp(self) -> None:
        from salttwist.master.keywatch import AcceptedIds

        self.room = Sessions(
            LocalEventBus(), Clock(), AcceptedIds(InMemoryKeyStore()), pubWriteBuffer=1000
        )
        self.sessions: dict[str, FakeSession] = {}
        for minionId in ("stalled", "reading"):
            session = FakeSession(minionId, [])
            self.sessions[minionId] = session
            self.room.sessions[minionId] = session
            self.room.subscribers[minionId] = _StalledSubscriber(minionId, session, False)
        self.stalled = self.room.subscribers["stalled"]
        self.reading = self.room.subscribers["reading"]

    def publish(self) -> None:
        """
        Deliver one publication of a 400-byte blob; the reading subscriber
        reads it.
        """
        from salttwist import wire

        blob = os.urandom(400)
        prefix = wire.publicationFramePrefix(blob, 1)
        self.room.deliver(
            prefix,
            wire.acknowledgingFramePrefixes(prefix),
            wire.publicationMacMessage(1, crypt.sha256(blob)),
        )
        self.reading.transport.clear()

    def test_droppedPastTheBound(self) -> None:
        """
        Once the stalled subscriber holds more than C{pub_write_buffer}
        bytes, publications to it are dropped and counted; what it holds
        stays under the bound plus one publication; the reading one gets
        all. When it catches up it gets publications again, and the run of
        drops is logged when it begins and when it ends.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        for _ in range(10):
            self.publish()
        written = len(self.stalled.strings)  # type: ignore[attr-defined]
        self.assertEqual(written, 3)
        self.assertLess(writeBacklog(self.stalled.transport), 1000 + 500)
        self.assertEqual(len(self.reading.strings), 10)  # type: ignore[attr-defined]
        self.assertEqual(self.room.publicationsDropped, 7)
        warnings = [e for e in events if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 1)
        self.assertEqual(warnings[0]["id"], "stalled")
        self.assertIn("pub_write_buffer", warnings[0]["log_format"])

        self.stalled.transport.clear()
        self.publish()
        self.assertEqual(len(self.stalled.strings), 4)  # type: ignore[attr-defined]
        self.assertEqual(self.room.publicationsDropped, 7)
        warnings = [e for e in events if e["log_level"] == LogLevel.warn]
        self.assertEqual(len(warnings), 2)
        self.assertEqual(warnings[1]["n"], 7)

    def test_heldAcknowledgementsStillSent(self) -> None:
        """
        The acknowledgements a stalled subscriber's session holds go on its
        req connection when its publication is dropped.
        """
        self.stalled.transport.write(b"x" * 2000)
        session = self.sessions["stalled"]
        session.held = [5, 6]
        self.room.holdingReplies(session)
        self.publish()
        self.assertEqual(self.stalled.strings, [])  # type: ignore[attr-defined]
        self.assertEqual(session.sent, [[5, 6]])
        self.assertEqual(self.room._replyHolders, {})

    def test_unsubscribeForgetsTheRun(self) -> None:
        """
        A stalled subscriber that leaves is no longer tracked.
        """
        self.stalled.transport.write(b"x" * 2000)
        self.publish()
        self.assertEqual(self.room._droppingFor, {"stalled": 1})
        self.room.unsubscribe(self.stalled)
        self.assertEqual(self.room._droppingFor, {})

    def test_default(self) -> None:
        """
        C{pub_write_buffer} is 16 MiB by default, and the master gives its
        value to the sessions room.
        """
        from salttwist.config import MASTER_DEFAULTS
        from tests.test_master_rooms import makeMaster

        self.assertEqual(MASTER_DEFAULTS["pub_write_buffer"], 16 * 1024 * 1024)
        master = makeMaster(self)
        self.assertEqual(master.sessionsRoom.pubWriteBuffer, 16 * 1024 * 1024)


class ReqWriteBufferTests(SynchronousTestCase):
    """
    A req connection whose peer sends requests and reads no reply is cut
    off once it holds more than C{req_write_buffer} bytes unread; the
    replies a session holds back are sent once there are
    L{MAX_HELD_REPLIES} (issue 22, section 4).
    """

    def connect(self, limit: int | None) -> tuple[Any, StringTransport, SessionCipher, Any]:
        """
        @return: a req protocol with a client session, its transport (which
            nobody reads), the client's cipher, and the fake channel.
        """
        key = os.urandom(32)
        channel = FakeReqChannel(key)
        if limit is not None:
            channel.config["req_write_buffer"] = limit
        proto = ReqServerFactory(channel).buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(frameBytes({"cmd": "_client_auth", "user": "alice"}))
        return proto, transport, SessionCipher(key, isServer=False), channel

    def test_cutOffPastTheBound(self) -> None:
        """
        Replies are written while the connection holds at most
        C{req_write_buffer} bytes unread; the next request's reply closes
        the connection instead, with a log line naming the option.
        """
        events = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        proto, transport, client, channel = self.connect(2000)
        rid = 0
        while not transport.disconnecting:
            rid += 1
            self.assertLess(rid, 100)
            proto.dataReceived(client.sealFrame({"cmd": "runner", "fun": "f", "rid": rid}))
        self.assertGreater(rid, 5)
        self.assertGreater(len(transport.value()), 2000)
        self.assertLess(len(transport.value()), 2000 + 500)
        [warning] = [e for e in events if e["log_level"] == LogLevel.warn]
        self.assertIn("req_write_buffer 2000", warning["reason"])

    def test_defaultIsGenerous(self) -> None:
        """
        By default (16 MiB) a peer that reads slowly is not cut off for a
        few hundred replies.
        """
        from salttwist.config import MASTER_DEFAULTS, MINION_DEFAULTS

        self.assertEqual(MASTER_DEFAULTS["req_write_buffer"], DEFAULT_REQ_WRITE_BUFFER)
        self.assertEqual(MINION_DEFAULTS["req_write_buffer"], DEFAULT_REQ_WRITE_BUFFER)
        proto, transport, client, channel = self.connect(None)
        for rid in range(300):
            proto.dataReceived(client.sealFrame({"cmd": "runner", "fun": "f", "rid": rid}))
        self.assertFalse(transport.disconnecting)

    def test_heldRepliesBounded(self) -> None:
        """
        A session holds at most L{MAX_HELD_REPLIES} replies back: the last
        one sends them all at once.
        """
        proto, transport, client, channel = self.connect(None)
        transport.clear()
        for rid in range(MAX_HELD_REPLIES - 1):
            proto.holdPayload({"ret": True, "rid": rid})
        self.assertEqual(transport.value(), b"")
        self.assertEqual(len(proto._held), MAX_HELD_REPLIES - 1)
        proto.holdPayload({"ret": True, "rid": MAX_HELD_REPLIES})
        self.assertEqual(proto._held, [])
        self.assertEqual(len(readFrames(transport.value())), MAX_HELD_REPLIES)


class WriteBacklogTests(TestCase):
    """
    L{writeBacklog} reads what a real socket transport holds unsent.
    """

    async def test_realSocket(self) -> None:
        """
        Over a real UNIX socket pair whose reader does not read, the
        backlog grows past the kernel's buffers with what is written, and
        falls to 0 once the reader reads it all.
        """
        import socket

        from twisted.internet import defer, unix
        from twisted.internet.protocol import Protocol

        ours, theirs = socket.socketpair()
        self.addCleanup(theirs.close)
        theirs.setblocking(False)
        proto = Protocol()
        transport = unix.Server(ours, proto, None, None, 0, reactor)  # type: ignore[arg-type]
        proto.makeConnection(transport)
        self.addCleanup(transport.loseConnection)
        self.assertEqual(writeBacklog(transport), 0)
        chunk = b"x" * 65536
        for _ in range(64):
            transport.write(chunk)
        self.assertEqual(writeBacklog(transport), 64 * 65536)
        # Let the reactor push what the kernel takes, then read it all.
        received = 0
        for _ in range(1000):
            d: defer.Deferred[None] = defer.Deferred()
            reactor.callLater(0, d.callback, None)  # type: ignore[attr-defined]
            await d
            try:
                received += len(theirs.recv(1 << 20))
            except BlockingIOError:
                pass
            if writeBacklog(transport) == 0 and received == 64 * 65536:
                break
        self.assertEqual(writeBacklog(transport), 0)
        self.assertEqual(received, 64 * 65536)
