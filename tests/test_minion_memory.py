# -*- test-case-name: tests.test_minion_memory -*-
"""
Tests for what a minion daemon keeps in memory: the modules its start-up
imports (see L{salttwist._startup} and L{salttwist.cli.daemons}), the
returns it writes to a master that does not read them (C{req_write_buffer}),
and those it keeps while the master does not acknowledge them
(C{returns_memory_max}).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial, wire
from salttwist.blocking import runSynchronously
from salttwist.minion.returns import (
    DEFAULT_REQ_WRITE_BUFFER,
    DEFAULT_RETURNS_MEMORY_MAX,
    FLUSH_RETRY,
    NOT_STORED_RETRY,
    ReturnDelivery,
)
from salttwist.minion.returnsqueue import ReturnsQueue
from salttwist.transport.errors import RequestError
from tests._fresh import pythonOutput

#: Runs the C{salttwist-minion} wrapper in a fresh interpreter up to the
#: point where twistd would start the reactor: instead, the minion is built
#: (key pair, grains, execution modules), the first job's module is loaded
#: and the req channel's endpoint is made, without connecting; then it
#: prints what was imported.
_SCRIPT = """
import sys
from salttwist.cli import daemons
from salttwist.config import loadMinionConfig

def runApp(config, gcThresholds=None):
    from twisted.internet import reactor
    from salttwist.minion.tap import makeService
    from salttwist.transport.tcp import TCP

    minion = makeService(config.subOptions, reactor).minion
    minion.executor.functions.get("test.ping")
    TCP.clientEndpoint(reactor, minion.config, "127.0.0.1", 4506, "req")
    deferred = sorted(
        name for name, module in sys.modules.items()
        if type(module).__name__ == "_DeferredModule"
    )
    print(" ".join(deferred))
    print("asyncio" in sys.modules, "twisted.internet.defer" in sys.modules)
    print(sys.modules.get("OpenSSL", "imported"))
    from salttwist import crypt
    from salttwist.events import minionEventSockets

    crypt.hmacEqual(crypt.hmacSha256(b"k" * 32, b"m"), b"")
    crypt.fingerprint(minion.credentials.publicPem)
    minionEventSockets("/tmp", "memory-minion")
    print("_hashlib" in sys.modules)

daemons._runApp = runApp
code = daemons._run(
    "salttwist-minion", loadMinionConfig, ["-c", sys.argv[1]], daemons.minionNeedsTLS
)
print(code)
"""


class MinionStartupImportsTests(SynchronousTestCase):
    """
    Modules an idle minion never uses stay out of its process.
    """

    def test_daemonStartup(self) -> None:
        """
        The C{salttwist-minion} wrapper, up to a built minion that has
        loaded C{test.ping} and made its tcp endpoint, imports Twisted's
        C{defer} without C{asyncio} (which stays unimported) and without
        pyOpenSSL, and leaves the modules of
        L{salttwist._startup.DEFERRED_MODULES} that Twisted and the standard
        library import (C{pdb}, C{getpass}, C{bz2}, C{lzma}, C{stringprep},
        C{http.cookiejar}) unexecuted; nor does it load C{_hashlib}.
        """
        root = os.path.abspath(self.mktemp())
        configDir = os.path.join(root, "etc")
        os.makedirs(configDir)
        with open(os.path.join(configDir, "minion"), "w") as f:
            f.write(f"root_dir: {root}\nid: memory-minion\nmaster: 127.0.0.1\n")
        env = dict(os.environ)
        env.pop("SALTTWIST_CONFIG_DIR", None)
        output = pythonOutput(self, _SCRIPT, configDir, env=env)
        deferred, imported, openSSL, hashlib, code = output.splitlines()[-5:]
        self.assertEqual(
            set(deferred.split()),
            {"bz2", "getpass", "http.cookiejar", "lzma", "pdb", "stringprep"},
        )
        self.assertEqual(imported, "False True")
        self.assertEqual(openSSL, "None")
        # Nor the system's libcrypto, which hashlib and hmac load, even
        # after its MACs, fingerprints and event socket names are made.
        self.assertEqual(hashlib, "False")
        self.assertEqual(code, "0")


class _UnreadReq:
    """
    A req session's protocol as L{ReturnDelivery} uses it: each request's
    bytes stay in its transport until the test says the master read them,
    and each waits for its answer.
    """

    def __init__(self) -> None:
        self.transport = StringTransport()
        self.requests: list[tuple[dict[str, Any], Deferred[Any]]] = []

    def request(self, payload: dict[str, Any]) -> Deferred[Any]:
        self.transport.write(serial.dumps(payload))
        d: Deferred[Any] = Deferred()
        self.requests.append((payload, d))
        return d


class ReturnsWriteBufferTests(SynchronousTestCase):
    """
    L{ReturnDelivery} sends returns while the req connection holds at most
    C{req_write_buffer} bytes unsent; the rest wait until the master has
    read what was sent (issue 22, section 4).
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.delivery = ReturnDelivery("m1", self.clock, None)
        self.delivery.writeLimit = 2000
        self.delivery.stopped = False
        self.req = _UnreadReq()
        self.delivery.req = self.req  # type: ignore[assignment]

    def finish(self, n: int) -> None:
        """
        Hand the delivery C{n} returns of about 800 bytes each.
        """
        for jid in range(n):
            self.delivery.jobDone(
                {"return": "x" * 800, "retcode": 0, "success": True},
                {"jid": str(jid), "fun": "test.echo"},
            )

    def test_waitsPastTheBound(self) -> None:
        """
        Returns are written while the connection holds at most the bound;
        the rest wait in L{ReturnDelivery.pending}, and go once the master's
        acknowledgements show it read what was sent.
        """
        self.finish(6)
        self.assertEqual(len(self.req.requests), 3)
        self.assertEqual(len(self.delivery.pending), 3)
        # The master reads everything and acknowledges the first return.
        self.req.transport.clear()
        self.req.requests[0][1].callback({"ret": True})
        self.assertEqual(len(self.req.requests), 6)
        self.assertEqual(len(self.delivery.pending), 0)
        self.assertEqual(
            [payload["jid"] for payload, _ in self.req.requests], [str(n) for n in range(6)]
        )

    def test_retriedWithoutAcknowledgement(self) -> None:
        """
        Without an acknowledgement, the delivery looks again every
        L{FLUSH_RETRY} seconds and sends once the connection has room.
        """
        self.finish(5)
        self.assertEqual(len(self.req.requests), 3)
        self.clock.advance(FLUSH_RETRY)
        self.assertEqual(len(self.req.requests), 3)
        self.req.transport.clear()
        self.clock.advance(FLUSH_RETRY)
        self.assertEqual(len(self.req.requests), 5)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_notStoredSentAgain(self) -> None:
        """
        A return the master could not store (C{return not stored}: its job
        cache failed) is kept and sent again L{NOT_STORED_RETRY} seconds
        later; another refusal is final.
        """
        self.finish(2)
        self.req.transport.clear()
        self.req.requests[0][1].errback(RequestError(f"{wire.RETURN_NOT_STORED}: db away"))
        self.req.requests[1][1].errback(RequestError("return refused: already returned"))
        self.assertEqual(len(self.req.requests), 2)
        self.clock.advance(NOT_STORED_RETRY)
        self.assertEqual([p["jid"] for p, _ in self.req.requests], ["0", "1", "0"])
        self.req.requests[2][1].callback({"ret": True})
        self.assertEqual(len(self.delivery.pending), 0)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.flushLoggedErrors()

    def test_stopCancelsTheRetry(self) -> None:
        """
        A stopping minion leaves no retry timer behind.
        """
        self.finish(5)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.delivery.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_default(self) -> None:
        """
        The minion's C{req_write_buffer} is 16 MiB by default.
        """
        from salttwist.config import MINION_DEFAULTS

        self.assertEqual(MINION_DEFAULTS["req_write_buffer"], DEFAULT_REQ_WRITE_BUFFER)
        self.assertEqual(ReturnDelivery("m1", self.clock, None).writeLimit, 16 * 1024 * 1024)


class ReturnsMemoryBoundTests(SynchronousTestCase):
    """
    L{ReturnDelivery} keeps at most C{returns_memory_max} bytes of returns
    in memory; past it, a return is kept on disk only and read back when it
    is its turn, and every return is still delivered once, in order (issue
    22, section 4).
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.directory = os.path.abspath(self.mktemp())
        self.returnsQueue = ReturnsQueue(self.directory, runSynchronously)
        self.assertEqual(self.returnsQueue.load(), [])
        self.delivery = self.makeDelivery()
        self.req = _UnreadReq()
        #: The most bytes L{ReturnDelivery.memoryUsed} reached.
        self.highest = 0

    def makeDelivery(self) -> ReturnDelivery:
        """
        A delivery over the test's returns queue, bounded to 5,000 bytes:
        three returns of L{finish} (about 1,300 bytes each) fit, a fourth
        does not.
        """
        delivery = ReturnDelivery("m1", self.clock, self.returnsQueue)
        delivery.memoryLimit = 5000
        delivery.stopped = False
        return delivery

    def finish(self, n: int) -> None:
        """
        Hand the delivery C{n} returns of about 800 bytes each, jids 0 to
        C{n - 1}.
        """
        for jid in range(n):
            self.delivery.jobDone(
                {"return": str(jid) * 800, "retcode": 0, "success": True},
                {"jid": str(jid), "fun": "test.echo"},
            )
            self.watch()

    def watch(self) -> None:
        """
        Note the in-memory total, which stays within the bound.
        """
        self.highest = max(self.highest, self.delivery.memoryUsed)
        self.assertLessEqual(self.delivery.memoryUsed, self.delivery.memoryLimit)

    def onDisk(self) -> list[str]:
        """
        The jids of the returns in the on-disk queue, oldest first.
        """
        return [ret["jid"] for _, ret in ReturnsQueue(self.directory, runSynchronously).load()]

    def acknowledgeAll(self, answered: int = 0) -> None:
        """
        The master acknowledges each return sent, oldest first, from the
        C{answered}th, until none is left; the in-memory total stays within
        the bound meanwhile.
        """
        while answered < len(self.req.requests):
            self.req.requests[answered][1].callback({"ret": True})
            answered += 1
            self.watch()

    def assertDeliveredOnceInOrder(self, n: int) -> None:
        """
        The master got the returns 0 to C{n - 1} once each, in order, and
        the minion keeps nothing of them, in memory or on disk.
        """
        self.assertEqual([p["jid"] for p, _ in self.req.requests], [str(j) for j in range(n)])
        self.assertEqual(
            [p["return"] for p, _ in self.req.requests], [str(j) * 800 for j in range(n)]
        )
        self.assertEqual(self.delivery.memoryUsed, 0)
        self.assertEqual(len(self.delivery.pending), 0)
        self.assertEqual(self.delivery.unacknowledged, {})
        self.assertEqual(os.listdir(self.directory), [])

    def test_notAcknowledgedPastTheBoundOnDisk(self) -> None:
        """
        With a master that reads and does not acknowledge, the returns past
        the bound are written at once and kept on disk only, not in memory,
        and not sent until acknowledgements free memory; then every return
        is delivered once, in order, each read back when its turn comes.
        """
        self.delivery.req = self.req  # type: ignore[assignment]
        self.finish(10)
        self.assertEqual(len(self.req.requests), 3)
        self.assertEqual(self.delivery.memoryUsed, 3 * (800 + 512))
        # Seven on disk only: no in-memory copy of them anywhere.
        self.assertEqual(self.onDisk(), [str(j) for j in range(3, 10)])
        self.assertEqual(len(self.delivery.unacknowledged), 3)
        self.assertEqual([ret for _, ret in self.delivery.pending], [None] * 7)
        # A second later, the three unacknowledged ones are on disk too.
        self.clock.advance(self.delivery.persistAfter)
        self.assertEqual(sorted(self.onDisk()), [str(j) for j in range(10)])
        self.watch()
        self.acknowledgeAll()
        self.assertDeliveredOnceInOrder(10)
        self.assertGreater(self.highest, 3000)

    def test_masterAwayThenBack(self) -> None:
        """
        While the master is away, the returns within the bound are kept in
        memory and on disk, those past it on disk only; once it is back,
        each is delivered once, in order.
        """
        self.finish(10)
        self.assertEqual(self.onDisk(), [str(j) for j in range(10)])
        self.assertLessEqual(self.delivery.memoryUsed, 5000)
        onDiskOnly = [ret is None for _, ret in self.delivery.pending]
        self.assertEqual(onDiskOnly, [False] * 3 + [True] * 7)
        self.delivery.req = self.req  # type: ignore[assignment]
        self.delivery.flush()
        self.acknowledgeAll()
        self.assertDeliveredOnceInOrder(10)

    def test_leftoversPastTheBound(self) -> None:
        """
        Returns left on disk by an earlier run are loaded into memory up to
        the bound, the rest read back when their turn comes.
        """
        for jid in range(10):
            self.successResultOf(
                self.returnsQueue.persist({"jid": str(jid), "return": str(jid) * 800})
            )
        for name, ret in ReturnsQueue(self.directory, runSynchronously).load():
            self.delivery.queueLeftover(name, ret)
            self.watch()
        inMemory = [ret is not None for _, ret in self.delivery.pending]
        kept = inMemory.count(True)
        self.assertTrue(0 < kept < 10)
        self.assertEqual(inMemory, [True] * kept + [False] * (10 - kept))
        self.delivery.req = self.req  # type: ignore[assignment]
        self.delivery.flush()
        self.acknowledgeAll()
        self.assertDeliveredOnceInOrder(10)

    def test_connectionLostBeforeAcknowledgement(self) -> None:
        """
        A return past the bound whose write had not finished when it was
        sent is on disk only once written; when the connection is lost
        before the master acknowledged it, it is read back and sent again
        after reconnecting (the master refuses a duplicate).
        """
        writes: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

        def held(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            writes.append((f, args, d))
            return d

        self.returnsQueue._runBlocking = held  # type: ignore[method-assign]
        self.delivery.memoryLimit = 1000
        self.delivery.req = self.req  # type: ignore[assignment]
        self.delivery.jobDone(
            {"return": "0" * 800, "retcode": 0, "success": True}, {"jid": "0", "fun": "test.echo"}
        )
        # Past the bound, being written (and counted until it is on disk),
        # sent from memory meanwhile.
        self.assertEqual(self.delivery.memoryUsed, 800 + 512)
        self.assertEqual(len(self.req.requests), 1)
        self.returnsQueue._runBlocking = runSynchronously  # type: ignore[method-assign]
        f, args, d = writes.pop()
        d.callback(f(*args))
        self.assertEqual(self.delivery.memoryUsed, 0)
        self.assertEqual(self.delivery.unacknowledged, {})
        # The connection is lost before the acknowledgement.
        self.req.requests.pop()[1].errback(ConnectionError("lost"))
        self.assertEqual([ret for _, ret in self.delivery.pending], [None])
        self.delivery.req = self.req  # type: ignore[assignment]
        self.delivery.flush()
        self.acknowledgeAll()
        self.assertDeliveredOnceInOrder(1)

    def test_memoryFreedByAWrite(self) -> None:
        """
        A return waiting on disk for memory is read back and sent as soon as
        another's write frees that memory, not only on an acknowledgement.
        """
        writes: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

        def held(f: Any, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            writes.append((f, args, d))
            return d

        def finish(jid: str, size: int) -> None:
            self.delivery.jobDone(
                {"return": jid * size, "retcode": 0, "success": True},
                {"jid": jid, "fun": "test.echo"},
            )

        finish("0", 2000)  # in memory (and on disk: the master is away)
        finish("1", 2500)  # past the bound: on disk only
        self.returnsQueue._runBlocking = held  # type: ignore[method-assign]
        finish("2", 2000)  # past the bound, its write not finished
        self.returnsQueue._runBlocking = runSynchronously  # type: ignore[method-assign]
        self.delivery.req = self.req  # type: ignore[assignment]
        self.delivery.flush()
        # 0 is sent; 1 waits for memory (0 and 2 hold it).
        self.assertEqual([p["jid"] for p, _ in self.req.requests], ["0"])
        self.req.requests[0][1].callback({"ret": True})
        self.assertEqual(len(self.req.requests), 1)
        # The write of 2 finishes: its memory is free, 1 goes.
        f, args, d = writes.pop()
        d.callback(f(*args))
        self.assertEqual([p["jid"] for p, _ in self.req.requests], ["0", "1"])
        self.acknowledgeAll(1)
        self.assertEqual([p["jid"] for p, _ in self.req.requests], ["0", "1", "2"])
        self.assertEqual(self.delivery.memoryUsed, 0)
        self.assertEqual(os.listdir(self.directory), [])

    def test_unreadableKept(self) -> None:
        """
        A return on disk only that cannot be read back is left in place
        with a log line, and the next ones are delivered.
        """
        self.finish(5)
        self.assertEqual(self.onDisk(), [str(j) for j in range(5)])
        name = sorted(os.listdir(self.directory))[3]
        with open(os.path.join(self.directory, name), "wb") as f:
            f.write(b"\xc1")
        self.delivery.req = self.req  # type: ignore[assignment]
        self.delivery.flush()
        self.acknowledgeAll()
        self.assertEqual([p["jid"] for p, _ in self.req.requests], ["0", "1", "2", "4"])
        self.assertEqual(os.listdir(self.directory), [name])
        self.assertEqual(len(self.flushLoggedErrors()), 0)

    def test_default(self) -> None:
        """
        The minion's C{returns_memory_max} is 64 MiB by default.
        """
        from salttwist.config import MINION_DEFAULTS

        self.assertEqual(MINION_DEFAULTS["returns_memory_max"], DEFAULT_RETURNS_MEMORY_MAX)
        self.assertEqual(ReturnDelivery("m1", self.clock, None).memoryLimit, 64 * 1024 * 1024)
