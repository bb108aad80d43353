# -*- test-case-name: tests.test_minion_memory -*-
"""
Tests for what a minion daemon keeps in memory: the modules its start-up
imports (see L{salttwist._startup} and L{salttwist.cli.daemons}), and the
returns it writes to a master that does not read them (C{req_write_buffer}).
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from salttwist import serial
from salttwist.minion.returns import DEFAULT_REQ_WRITE_BUFFER, FLUSH_RETRY, ReturnDelivery
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
