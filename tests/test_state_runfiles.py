# -*- test-case-name: tests.test_state_runfiles -*-
"""
Tests for L{salttwist.state.runfiles}: which sources a run fetches ahead,
and a L{RunFileClient} over a real L{RemoteFileClient} talking to the
master's file room (real temporary roots and cache), counting the
requests it sends.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from salttwist.blocking import runSynchronously
from salttwist.fileserver.client import LocalFileClient, RemoteFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules import LoaderContext, loadFunctions
from salttwist.modules._filesource import fetchSource
from salttwist.state import apply as stateapply
from salttwist.state.runfiles import RunFileClient, prefetchSources
from salttwist.states import StateContext
from tests.test_fileclient import RoomRequests
from tests.test_master_fileserving import FakeSession, RoomTestCase, writeFile


def managed(name: str, source: Any, **kwargs: Any) -> dict[str, Any]:
    return {
        "state": "file",
        "fun": "managed",
        "name": name,
        "__id__": name,
        "__env__": "base",
        "source": source,
        **kwargs,
    }


class PrefetchSourcesTests(RoomTestCase):
    """
    L{prefetchSources}.
    """

    def test_plainSaltSources(self) -> None:
        """
        Each single C{salt://} source of a C{file.managed} is kept once,
        in order, with its chunk's saltenv (its C{saltenv} argument
        first, then C{__env__}, then the run's).
        """
        chunks = [
            managed("/a", "salt://a.txt"),
            managed("/a2", "salt://a.txt"),
            managed("/b", "salt://b.txt", saltenv="dev"),
            {**managed("/c", "salt://c.txt"), "__env__": None},
            {"state": "cmd", "fun": "run", "name": "true", "source": "salt://x"},
            {"state": "file", "fun": "recurse", "name": "/d", "source": "salt://d"},
        ]
        self.assertEqual(
            prefetchSources(chunks, "prod"),
            [("salt://a.txt", "base"), ("salt://b.txt", "dev"), ("salt://c.txt", "prod")],
        )

    def test_maybeUnused(self) -> None:
        """
        Lists of sources, other schemes, and states that may not read
        their source (contents, C{replace: False}, C{onlyif}, C{unless},
        C{creates}) are not fetched ahead.
        """
        chunks = [
            managed("/a", ["salt://a.txt", "salt://b.txt"]),
            managed("/b", "https://example.invalid/b", skip_verify=True),
            managed("/c", "/srv/c"),
            managed("/d", "salt://d.txt", contents="x"),
            managed("/e", "salt://e.txt", replace=False),
            managed("/f", "salt://f.txt", onlyif="true"),
            managed("/g", "salt://g.txt", unless="true"),
            managed("/h", "salt://h.txt", creates="/h"),
        ]
        self.assertEqual(prefetchSources(chunks, None), [])


class RunFileClientTests(RoomTestCase):
    """
    L{RunFileClient} over a L{RemoteFileClient} and the master's room.
    """

    def setUp(self) -> None:
        self.room = self.makeRoom()
        for i in range(5):
            writeFile(self.base, f"src/f{i}.txt", b"file %d\n" % i)
        writeFile(self.dev, "src/dev.txt", b"in dev\n")
        self.requests = RoomRequests(self.room, FakeSession("m1"))
        self.cachedir = os.path.abspath(self.mktemp())
        self.client = RemoteFileClient(self.requests, self.cachedir, runSynchronously, "m1")
        self.run = RunFileClient(self.client)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def test_prefetchThenNoRequest(self) -> None:
        """
        The sources come in batched requests (no C{_file_hash} nor
        C{_serve_file}); then C{cacheFile} of each sends nothing and
        gives its cached copy.
        """
        sources = [(f"salt://src/f{i}.txt", "base") for i in range(5)]
        sources.append(("salt://src/dev.txt", "dev"))
        self.assertEqual(self.successResultOf(self.run.prefetch(sources)), 6)
        commands = {p["cmd"] for p in self.requests.sent}
        self.assertEqual(commands, {"_file_hash_many", "_serve_files"})
        # One hash request per saltenv: cacheFilesHashed, not cacheFiles
        # then hashFiles.
        self.assertEqual(len(self.requests.commands("_file_hash_many")), 2)
        self.requests.sent.clear()
        for i in range(5):
            cached = self.successResultOf(self.run.cacheFile(f"src/f{i}.txt", "base"))
            self.assertEqual(self.read(cached), b"file %d\n" % i)
        cached = self.successResultOf(self.run.cacheFile("salt://src/dev.txt", "dev"))
        self.assertEqual(self.read(cached), b"in dev\n")
        self.assertEqual(self.requests.sent, [])

    def test_otherFilesAsked(self) -> None:
        """
        A file not fetched ahead is asked for as without the prefetch.
        """
        self.successResultOf(self.run.prefetch([("salt://src/f0.txt", "base")]))
        self.requests.sent.clear()
        cached = self.successResultOf(self.run.cacheFile("src/f1.txt", "base"))
        self.assertEqual(self.read(cached), b"file 1\n")
        self.assertEqual(self.requests.commands("_file_hash")[0]["path"], "src/f1.txt")
        self.assertEqual(self.successResultOf(self.run.cacheFile("src/none.txt", "base")), "")

    def test_cachedCopyChanged(self) -> None:
        """
        A prefetched file whose cached copy was removed or changed since
        is fetched again, with no hash request: the run's copy is the
        master's.
        """
        self.successResultOf(self.run.prefetch([("salt://src/f0.txt", "base")]))
        cached = self.client.cachedPath("src/f0.txt", "base")
        with open(cached, "wb") as f:
            f.write(b"tampered, longer than before\n")
        self.requests.sent.clear()
        self.assertEqual(
            self.read(self.successResultOf(self.run.cacheFile("src/f0.txt", "base"))),
            b"file 0\n",
        )
        os.unlink(cached)
        self.assertEqual(
            self.read(self.successResultOf(self.run.cacheFile("src/f0.txt", "base"))),
            b"file 0\n",
        )
        self.assertEqual(self.requests.commands("_file_hash"), [])
        self.assertEqual(len(self.requests.commands("_serve_file")), 2)

    def test_changedOnMaster(self) -> None:
        """
        A file changed on the master after the prefetch and missing from
        the cache is fetched with its new content.
        """
        self.successResultOf(self.run.prefetch([("salt://src/f0.txt", "base")]))
        writeFile(self.base, "src/f0.txt", b"new content\n")
        os.unlink(self.client.cachedPath("src/f0.txt", "base"))
        self.assertEqual(
            self.read(self.successResultOf(self.run.cacheFile("src/f0.txt", "base"))),
            b"new content\n",
        )

    def test_prefetchFailureIgnored(self) -> None:
        """
        A prefetch the file server refuses fires with nothing known, and
        each state then asks for its own source, getting its own error.
        """
        sources = [("salt://src/f0.txt", "no such env"), ("salt://src/f1.txt", "base")]
        self.assertEqual(self.successResultOf(self.run.prefetch(sources)), 1)
        self.failureResultOf(self.run.cacheFile("src/f0.txt", "no such env"))

    def test_cachedKnown(self) -> None:
        """
        C{cachedKnown} gives a prefetched file's cached copy and its
        SHA-256 without a request; L{None} for a file not prefetched, a
        bad URL, or a copy changed or removed since (which C{cacheFile}
        then fetches again).
        """
        sources = [("salt://src/f0.txt", "base"), ("salt://src/dev.txt", "dev")]
        self.successResultOf(self.run.prefetch(sources))
        self.requests.sent.clear()
        f0 = self.client.cachedPath("src/f0.txt", "base")
        sha = hashlib.sha256(b"file 0\n").hexdigest()
        self.assertEqual(self.run.cachedKnown("salt://src/f0.txt", "base"), (f0, sha))
        dev = self.client.cachedPath("src/dev.txt", "dev")
        self.assertEqual(self.run.cachedKnown("salt://src/dev.txt?saltenv=dev", "base")[0], dev)
        self.assertIsNone(self.run.cachedKnown("salt://src/dev.txt", "base"))
        self.assertIsNone(self.run.cachedKnown("salt://src/f1.txt", "base"))
        self.assertIsNone(self.run.cachedKnown("salt://../etc/passwd", "base"))
        self.assertEqual(self.requests.sent, [])
        with open(f0, "wb") as f:
            f.write(b"tampered\n")
        self.assertIsNone(self.run.cachedKnown("salt://src/f0.txt", "base"))
        os.unlink(f0)
        self.assertIsNone(self.run.cachedKnown("salt://src/f0.txt", "base"))

    def test_fetchSourceAsksRunFirst(self) -> None:
        """
        C{fetchSource} of a prefetched C{salt://} source takes the run's
        C{cachedKnown} answer without calling C{cp.cache_file}; a source
        whose copy changed goes through C{cp.cache_file} as before.
        """
        self.successResultOf(self.run.prefetch([("salt://src/f0.txt", "base")]))
        called: list[tuple[Any, ...]] = []

        def cacheFile(path: str, saltenv: str) -> str:
            called.append((path, saltenv))
            return self.successResultOf(self.run.cacheFile(path, saltenv))

        ctx = StateContext(salt={"cp.cache_file": cacheFile}, opts={}, sources=self.run)
        f0 = self.client.cachedPath("src/f0.txt", "base")
        sha = hashlib.sha256(b"file 0\n").hexdigest()
        expected = (f0, {"hash_type": "sha256", "hsum": sha})
        self.assertEqual(
            fetchSource(ctx, "/d", "salt://src/f0.txt", None, None, "base", False), expected
        )
        self.assertEqual(called, [])
        os.unlink(f0)
        self.assertEqual(
            fetchSource(ctx, "/d", "salt://src/f0.txt", None, None, "base", False), expected
        )
        self.assertEqual(called, [("salt://src/f0.txt", "base")])

    def test_delegates(self) -> None:
        """
        Every other method is the client's.
        """
        self.assertEqual(self.run.cachedPath, self.client.cachedPath)
        self.assertIn("src/f0.txt", self.successResultOf(self.run.fileList("base")))

    def test_localClientNotPrefetched(self) -> None:
        """
        A local file client (no C{cacheFileKnown}) fetches nothing ahead.
        """
        opts = {"file_roots": {"base": [self.base]}}
        local = LocalFileClient(
            FileServer.fromConfig(opts), os.path.abspath(self.mktemp()), runSynchronously
        )
        run = RunFileClient(local)
        self.assertFalse(run.canPrefetch)
        self.assertEqual(self.successResultOf(run.prefetch([("salt://src/f0.txt", "base")])), 0)
        self.assertFalse(os.path.exists(local.cachedPath("src/f0.txt", "base")))


class RunChunksTests(RoomTestCase):
    """
    L{stateapply.runChunks} calls the run's C{prefetch} with the chunks
    before the first state.
    """

    def test_prefetchBeforeStates(self) -> None:
        seen: list[Any] = []

        def state(ctx: Any, name: str, **kwargs: Any) -> dict[str, Any]:
            seen.append(("state", name))
            return {"name": name, "changes": {}, "result": True, "comment": ""}

        chunks = [
            {
                "state": "test",
                "fun": "nop",
                "name": "one",
                "__id__": "one",
                "__env__": "base",
                "__sls__": "x",
                "order": 1,
            },
        ]
        run = stateapply.StateRun(
            files=None,
            opts={},
            minionId="m1",
            states={"test.nop": state},
            prefetch=lambda given: seen.append(("prefetch", [c["name"] for c in given])),
        )
        ret = stateapply.runChunks(run, chunks)
        self.assertEqual(seen, [("prefetch", ["one"]), ("state", "one")])
        self.assertEqual([r["result"] for r in ret.values()], [True])


class CpThroughRunClientTests(RoomTestCase):
    """
    C{cp.cache_file}, as a state calls it, with a L{RunFileClient} as the
    run's file client (what L{salttwist.modules.state} gives each run).
    """

    def test_cacheFileAfterPrefetch(self) -> None:
        self.room = self.makeRoom()
        writeFile(self.base, "src/a.txt", b"a\n")
        requests = RoomRequests(self.room, FakeSession("m1"))
        cachedir = os.path.abspath(self.mktemp())
        client = RemoteFileClient(requests, cachedir, runSynchronously, "m1")
        runFiles = RunFileClient(client)
        context = LoaderContext(
            {"cachedir": cachedir, "id": "m1"},
            {"id": "m1"},
            Clock(),
            loadFunctions(),
            fileClient=runFiles,
        )
        cacheFile = loadFunctions()["cp.cache_file"]
        chunks = [managed("/a", "salt://src/a.txt"), managed("/b", "salt://src/none.txt")]
        self.successResultOf(runFiles.prefetch(prefetchSources(chunks, None)))
        requests.sent.clear()
        path = self.successResultOf(
            Deferred.fromCoroutine(cacheFile(context, "salt://src/a.txt", "base"))
        )
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"a\n")
        self.assertEqual(requests.sent, [])
        missing = Deferred.fromCoroutine(cacheFile(context, "salt://src/none.txt", "base"))
        self.assertIs(self.successResultOf(missing), False)
        self.assertEqual([p["cmd"] for p in requests.sent], ["_file_hash"])
