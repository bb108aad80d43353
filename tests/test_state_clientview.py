"""
Tests for L{salttwist.state.clientview}: the state tree read through a
minion's file client, from a state run's thread.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from salttwist.blocking import threadRunner
from salttwist.config import loadMinionConfig
from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.interfaces import FileServerError
from salttwist.fileserver.server import FileServer
from salttwist.state.clientview import ClientFiles, FileClientUnavailable
from salttwist.state.top import showTop


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


def writeFile(root: str, relative: str, data: str) -> str:
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)
    return path


class CountingClient:
    """
    A file client that passes every call to a real one and counts them.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            return method(*args)

        return call


class BrokenClient:
    """
    A file client whose session is gone, as a minion's without a master.
    """

    def cacheFile(self, path: str, saltenv: str = "base") -> Deferred[str]:
        return fail(ConnectionError("minion m1 is not connected to its master"))

    def envs(self) -> Deferred[list[str]]:
        return fail(ConnectionError("minion m1 is not connected to its master"))


class ClientFilesTests(TestCase):
    """
    L{ClientFiles} over a L{LocalFileClient} of real roots, called from a
    thread as a state run does.
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        self.base = os.path.join(root, "srv", "base")
        self.dev = os.path.join(root, "srv", "dev")
        writeFile(self.base, "top.sls", "base:\n  '*':\n    - web\ndev:\n  '*':\n    - tools\n")
        writeFile(self.base, "web/init.sls", "nginx:\n  test.nop: []\n")
        writeFile(self.base, "web/map.jinja", "{% set port = 80 %}\n")
        writeFile(self.dev, "tools.sls", "tools:\n  test.nop: []\n")
        self.config = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": "m1",
                "cachedir": os.path.join(root, "cache"),
                "file_client": "local",
                "file_roots": {"base": [self.base], "dev": [self.dev]},
            },
        )
        reactor = _reactor()
        local = LocalFileClient(
            FileServer.fromConfig(self.config), self.config["cachedir"], threadRunner(reactor)
        )
        self.client = CountingClient(local)
        self.files = ClientFiles(self.client, reactor)

    def inThread(self, f: Any, *args: Any, **kwargs: Any) -> Deferred[Any]:
        return deferToThread(f, *args, **kwargs)

    async def test_findFile(self) -> None:
        """
        C{findFile} caches the file and describes the cached copy; a file
        the roots lack is L{None}; both are remembered for the run.
        """
        found = await self.inThread(self.files.findFile, "web/init.sls", "base")
        self.assertEqual(found.path, "web/init.sls")
        self.assertTrue(found.realPath.startswith(self.config["cachedir"]))
        with open(found.realPath) as f:
            self.assertEqual(f.read(), "nginx:\n  test.nop: []\n")
        self.assertEqual(found.size, os.path.getsize(found.realPath))
        self.assertIsNone(await self.inThread(self.files.findFile, "web.sls", "base"))
        await self.inThread(self.files.findFile, "web/init.sls", "base")
        await self.inThread(self.files.findFile, "web.sls", "base")
        self.assertEqual(
            [name for name, _ in self.client.calls], ["cacheFile", "cacheFile"], self.client.calls
        )

    async def test_findFileSaltenv(self) -> None:
        """
        A file is looked up in the saltenv asked for only.
        """
        self.assertIsNone(await self.inThread(self.files.findFile, "tools.sls", "base"))
        found = await self.inThread(self.files.findFile, "tools.sls", "dev")
        self.assertEqual(found.path, "tools.sls")

    async def test_refused(self) -> None:
        """
        A path the file server refuses raises its L{FileServerError}.
        """
        d = self.inThread(self.files.findFile, "../etc/passwd", "base")
        error = await self.assertFailure(d, FileServerError)
        self.assertIn("..", str(error))

    async def test_listsOnce(self) -> None:
        """
        C{envs} and C{fileList} ask once per run; a prefix of a saltenv
        already listed whole is answered from that list.
        """
        self.assertEqual(await self.inThread(self.files.envs), ["base", "dev"])
        self.assertEqual(await self.inThread(self.files.envs), ["base", "dev"])
        files = await self.inThread(self.files.fileList, "base")
        self.assertEqual(files, ["top.sls", "web/init.sls", "web/map.jinja"])
        self.assertEqual(
            await self.inThread(self.files.fileList, "base", "web/"),
            ["web/init.sls", "web/map.jinja"],
        )
        self.assertEqual(
            [name for name, _ in self.client.calls], ["envs", "fileList"], self.client.calls
        )

    async def test_missingFromList(self) -> None:
        """
        Once the saltenv was listed whole, a file it lacks is L{None}
        without asking the client; one it has is fetched.
        """
        await self.inThread(self.files.fileList, "base")
        self.assertIsNone(await self.inThread(self.files.findFile, "web.sls", "base"))
        found = await self.inThread(self.files.findFile, "web/init.sls", "base")
        self.assertEqual(found.path, "web/init.sls")
        self.assertEqual(
            [name for name, _ in self.client.calls], ["fileList", "cacheFile"], self.client.calls
        )
        found = await self.inThread(self.files.findFile, "salt://web/map.jinja", "base")
        self.assertTrue(found.realPath.endswith("map.jinja"))

    async def test_prefixListed(self) -> None:
        """
        A prefix listed first asks for that prefix only, not the saltenv.
        """
        files = await self.inThread(self.files.fileList, "base", "web/")
        self.assertEqual(files, ["web/init.sls", "web/map.jinja"])
        self.assertEqual(self.client.calls, [("fileList", ("base", "web/"))])

    async def test_showTop(self) -> None:
        """
        The state top reads its top files through the view.
        """
        matches, errors = await self.inThread(
            showTop, self.config, self.files, "m1", {"id": "m1"}, {}
        )
        self.assertEqual(errors, [])
        self.assertEqual(matches, {"base": ["web"], "dev": ["tools"]})

    async def test_unavailable(self) -> None:
        """
        A client that cannot reach its master raises
        L{FileClientUnavailable} naming the cause, never "no such file".
        """
        files = ClientFiles(BrokenClient(), _reactor())
        error = await self.assertFailure(
            self.inThread(files.findFile, "web/init.sls", "base"), FileClientUnavailable
        )
        self.assertIn("not connected to its master", str(error))
        await self.assertFailure(self.inThread(files.envs), FileClientUnavailable)

    def test_noClient(self) -> None:
        """
        A minion without a file client cannot read a state tree.
        """
        error = self.assertRaises(FileClientUnavailable, ClientFiles, None, _reactor())
        self.assertIn("no file client", str(error))
