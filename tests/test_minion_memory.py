# -*- test-case-name: tests.test_minion_memory -*-
"""
Tests for what an idle minion daemon keeps in memory: the modules its
start-up imports (see L{salttwist._startup} and L{salttwist.cli.daemons}).
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

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
