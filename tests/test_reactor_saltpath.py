# -*- test-case-name: tests.test_reactor_saltpath -*-
"""
Tests for C{salt://} reaction files (L{salttwist.master.reactor}): read
from the master's file server (real temporary C{file_roots}), with errors
naming the URL in C{salt/reactor/error}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.config import loadMasterConfig
from salttwist.events.bus import LocalEventBus
from salttwist.fileserver.server import FileServer
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import MasterKeys
from salttwist.master.reactor import ERROR_TAG, ReactionError, Reactor, readReactionFiles
from salttwist.pki.keystore import InMemoryKeyStore

MASTER_KEY = crypt.generatePrivateKey()

REACTION = """\
say:
  event.send:
    - tag: reacted/{{ data['id'] }}
    - data: {from: {{ tag }}}
"""


class SaltPathTests(SynchronousTestCase):
    """
    A master whose C{file_roots} are real temporary folders (C{base} and
    C{dev}), and a reactor over its bus.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.base = os.path.join(self.root, "srv", "base")
        self.dev = os.path.join(self.root, "srv", "dev")
        os.makedirs(self.base)
        os.makedirs(self.dev)
        self.config = loadMasterConfig(
            self.root,
            overrides={
                "root_dir": self.root,
                "file_roots": {"base": [self.base], "dev": [self.dev]},
                "reactor": [{"go/*": ["salt://reactor/go.sls"]}],
            },
        )
        self.bus = LocalEventBus()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.bus.subscribe([], lambda tag, data: self.events.append((tag, data)))
        self.clock = Clock()
        self.master = Master(
            self.config,
            MasterKeys(MASTER_KEY, crypt.publicKeyToPem(MASTER_KEY.public_key()), b"r" * 32),
            InMemoryKeyStore(),
            self.bus,
            runSynchronously,
            self.clock,
        )

    def serve(self, relative: str, text: str, root: str | None = None) -> str:
        path = os.path.join(root or self.base, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def startReactor(self, files: list[str], fileServer: Any = None) -> Reactor:
        reactor = Reactor(self.master, [{"go/*": files}], self.root, fileServer=fileServer)
        reactor.startService()
        self.addCleanup(reactor.stopService)
        return reactor

    def fire(self, tag: str, data: dict[str, Any]) -> None:
        self.bus.fire(tag, data)
        self.clock.advance(0)

    def tagged(self, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        """
        @return: the events seen whose tag starts with C{prefix}, without
            their C{_stamp}.
        """
        return [
            (tag, {k: v for k, v in data.items() if k != "_stamp"})
            for tag, data in self.events
            if tag.startswith(prefix)
        ]

    def test_configAcceptsSaltUrls(self) -> None:
        """
        The C{reactor} option takes C{salt://} URLs.
        """
        self.assertEqual(self.config["reactor"], [{"go/*": ["salt://reactor/go.sls"]}])

    def test_reactsFromFileServer(self) -> None:
        """
        A C{salt://} reaction file is read from the master's file server,
        each time (an edit takes effect at the next event).
        """
        self.serve("reactor/go.sls", REACTION)
        reactor = self.startReactor(["salt://reactor/go.sls"])
        self.fire("go/1", {"id": "m1"})
        self.assertEqual(self.tagged("reacted/"), [("reacted/m1", {"from": "go/1"})])
        self.serve("reactor/go.sls", REACTION.replace("reacted/", "again/"))
        self.fire("go/2", {"id": "m2"})
        self.assertEqual(self.tagged("again/"), [("again/m2", {"from": "go/2"})])
        self.assertEqual((reactor.reacted, reactor.failed), (2, 0))

    def test_saltenv(self) -> None:
        """
        C{?saltenv=} reads from another saltenv.
        """
        self.serve("reactor/go.sls", REACTION.replace("reacted/", "dev/"), root=self.dev)
        self.startReactor(["salt://reactor/go.sls?saltenv=dev"])
        self.fire("go/1", {"id": "m1"})
        self.assertEqual(self.tagged("dev/"), [("dev/m1", {"from": "go/1"})])

    def test_missing(self) -> None:
        """
        A C{salt://} file the file server does not have is a failure
        reported in C{salt/reactor/error}, naming the URL.
        """
        reactor = self.startReactor(["salt://reactor/nope.sls"])
        self.fire("go/1", {"id": "m1"})
        [(_, error)] = self.tagged(ERROR_TAG)
        self.assertEqual(error["file"], "salt://reactor/nope.sls")
        self.assertIn("salt://reactor/nope.sls", error["error"])
        self.assertIn("no such file", error["error"])
        self.assertEqual(reactor.failed, 1)

    def test_refused(self) -> None:
        """
        A path leaving the roots, or a saltenv the file server does not
        have, is a failure naming the URL and why.
        """
        self.serve("reactor/go.sls", REACTION)
        self.startReactor(["salt://../etc/passwd", "salt://reactor/go.sls?saltenv=nope"])
        self.fire("go/1", {"id": "m1"})
        errors = [data for _, data in self.tagged(ERROR_TAG)]
        self.assertEqual(
            [e["file"] for e in errors],
            ["salt://../etc/passwd", "salt://reactor/go.sls?saltenv=nope"],
        )
        self.assertIn("..", errors[0]["error"])
        self.assertIn("'nope' is not configured", errors[1]["error"])
        self.assertEqual(self.tagged("reacted/"), [])

    def test_givenFileServer(self) -> None:
        """
        A reactor given a file server reads from it rather than the
        master's.
        """
        other = os.path.join(self.root, "other")
        self.serve("reactor/go.sls", REACTION.replace("reacted/", "other/"), root=other)
        fileServer = FileServer({"file_roots": {"base": [other]}})
        self.startReactor(["salt://reactor/go.sls"], fileServer=fileServer)
        self.fire("go/1", {"id": "m1"})
        self.assertEqual(self.tagged("other/"), [("other/m1", {"from": "go/1"})])

    def test_noFileServer(self) -> None:
        """
        Without a file server, a C{salt://} file is an error saying so.
        """
        error = self.assertRaises(ReactionError, readReactionFiles, "salt://r.sls", self.root)
        self.assertIn("no file server", str(error))

    def test_pathsStillWork(self) -> None:
        """
        Filesystem paths are read as before beside C{salt://} URLs.
        """
        self.serve("reactor/go.sls", REACTION)
        local = self.serve("local.sls", REACTION.replace("reacted/", "local/"), root=self.root)
        self.startReactor(["salt://reactor/go.sls", local])
        self.fire("go/1", {"id": "m1"})
        self.assertEqual(len(self.tagged("reacted/")), 1)
        self.assertEqual(len(self.tagged("local/")), 1)
