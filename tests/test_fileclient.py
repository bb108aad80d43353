# -*- test-case-name: tests.test_fileclient -*-
"""
Tests for L{salttwist.fileserver.client}: L{RemoteFileClient} against the
master's room (L{salttwist.master.fileserving.FileRequests}) through a
request callable that answers as the req channel does, and through a real
in-memory session of a minion with its master; L{LocalFileClient} on
local roots. Real temporary files everywhere.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from salttwist.blocking import runSynchronously
from salttwist.fileserver.client import (
    INDEX_FILE,
    WINDOW,
    WRITE_BATCH,
    CacheIndex,
    LocalFileClient,
    RemoteFileClient,
)
from salttwist.fileserver.client import _Download as client_Download
from salttwist.fileserver.interfaces import FileServerError, IFileClient
from salttwist.fileserver.limits import FairLimits
from salttwist.fileserver.server import FileServer
from salttwist.master.reqserver import FILE_AND_PILLAR_FUNCS
from salttwist.pki.keystore import ACCEPTED
from salttwist.transport.errors import RequestError
from tests.test_master_fileserving import (
    CONTENT,
    FakeSession,
    ManualRunner,
    RoomTestCase,
    writeFile,
)
from tests.test_minion import MINION_PEM, MinionTestCase

BIG = os.urandom(50_000)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class RoomRequests:
    """
    A C{request} callable into a room, as a minion's session would carry
    it: the command picks the method, a L{ValueError} becomes a
    L{RequestError} with its text.

    @ivar sent: every payload sent.
    @ivar hold: when true, replies wait in L{held} until L{release}.
    """

    def __init__(self, room: Any, session: Any) -> None:
        self.room = room
        self.session = session
        self.sent: list[dict[str, Any]] = []
        self.hold = False
        self.held: list[tuple[Deferred[dict[str, Any]], Deferred[dict[str, Any]]]] = []
        self.before: Callable[[dict[str, Any]], None] | None = None

    def __call__(self, payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        self.sent.append(payload)
        if self.before is not None:
            self.before(payload)
        method = getattr(self.room, FILE_AND_PILLAR_FUNCS[payload["cmd"]])

        def refused(failure: Failure) -> None:
            failure.trap(ValueError)
            raise RequestError(str(failure.value))

        d = maybeDeferred(method, self.session, payload).addErrback(refused)
        if not self.hold:
            return d
        out: Deferred[dict[str, Any]] = Deferred()
        self.held.append((d, out))
        return out

    def release(self, count: int = 1) -> None:
        for _ in range(count):
            d, out = self.held.pop(0)
            d.chainDeferred(out)

    def commands(self, cmd: str) -> list[dict[str, Any]]:
        return [p for p in self.sent if p["cmd"] == cmd]


class RemoteTestCase(RoomTestCase):
    """
    A room and a L{RemoteFileClient} talking to it.
    """

    def setUp(self) -> None:
        self.room = self.makeRoom(file_recv=True)
        writeFile(self.base, "big.bin", BIG)
        self.requests = RoomRequests(self.room, FakeSession("m1"))
        self.cachedir = os.path.abspath(self.mktemp())
        self.client = RemoteFileClient(self.requests, self.cachedir, runSynchronously, "m1")

    def cached(self, path: str, saltenv: str = "base") -> bytes:
        with open(os.path.join(self.cachedir, "files", saltenv, path), "rb") as f:
            return f.read()


class RemoteClientTests(RemoteTestCase):
    """
    L{RemoteFileClient}: listings, the cache, pipelined transfers.
    """

    def test_interface(self) -> None:
        """
        L{RemoteFileClient} provides L{IFileClient}.
        """
        self.assertTrue(verifyObject(IFileClient, self.client))

    def test_listings(self) -> None:
        """
        C{envs}, C{fileList}, C{dirList} and C{hashFile} answer as the
        master does.
        """
        self.assertEqual(self.successResultOf(self.client.envs()), ["base", "dev"])
        self.assertEqual(
            self.successResultOf(self.client.fileList("base", "web/")),
            ["web/files/big.txt", "web/init.sls"],
        )
        self.assertEqual(self.successResultOf(self.client.dirList("base")), ["web", "web/files"])
        self.assertEqual(
            self.successResultOf(self.client.hashFile("salt://big.bin")),
            {"hsum": hashlib.sha256(BIG).hexdigest(), "hash_type": "sha256"},
        )
        self.assertEqual(self.successResultOf(self.client.hashFile("salt://nothing")), {})

    def test_cachedPath(self) -> None:
        """
        Files are cached as Salt's are: C{cachedir/files/<saltenv>/<path>};
        a saltenv in the URL wins.
        """
        self.assertEqual(
            self.client.cachedPath("salt://web/init.sls?saltenv=dev", "base"),
            os.path.join(self.cachedir, "files", "dev", "web", "init.sls"),
        )

    def test_cacheMissThenHit(self) -> None:
        """
        The first C{cacheFile} fetches the file in chunks; the second asks
        only its hash.
        """
        path = self.successResultOf(self.client.cacheFile("salt://big.bin"))
        self.assertEqual(path, os.path.join(self.cachedir, "files", "base", "big.bin"))
        self.assertEqual(self.cached("big.bin"), BIG)
        self.assertEqual(len(self.requests.commands("_serve_file")), 13)
        self.requests.sent.clear()
        self.assertEqual(self.successResultOf(self.client.cacheFile("salt://big.bin")), path)
        self.assertEqual([p["cmd"] for p in self.requests.sent], ["_file_hash"])
        self.assertEqual(os.listdir(os.path.dirname(path)), ["big.bin"])

    def test_missing(self) -> None:
        """
        A file the master does not have caches as C{""}.
        """
        self.assertEqual(self.successResultOf(self.client.cacheFile("salt://nothing")), "")

    def test_corruptedCacheFetchedAgain(self) -> None:
        """
        A cached copy changed on the minion is fetched again.
        """
        path = self.successResultOf(self.client.cacheFile("big.bin"))
        with open(path, "r+b") as f:
            f.write(b"corrupt")
        self.requests.sent.clear()
        self.successResultOf(self.client.cacheFile("big.bin"))
        self.assertEqual(self.cached("big.bin"), BIG)
        self.assertTrue(self.requests.commands("_serve_file"))

    def test_changedOnMasterFetchedAgain(self) -> None:
        """
        A file changed on the master is fetched again.
        """
        self.successResultOf(self.client.cacheFile("big.bin"))
        writeFile(self.base, "big.bin", b"new content")
        self.successResultOf(self.client.cacheFile("big.bin"))
        self.assertEqual(self.cached("big.bin"), b"new content")

    def test_changedMidTransferRestarts(self) -> None:
        """
        A file that changes on the master while it is fetched is fetched
        again from the start, and the cache holds the new content.
        """
        changed = []

        def change(payload: dict[str, Any]) -> None:
            if payload["cmd"] == "_serve_file" and payload["loc"] == 8192 and not changed:
                changed.append(True)
                writeFile(self.base, "big.bin", CONTENT)

        self.requests.before = change
        self.successResultOf(self.client.cacheFile("big.bin"))
        self.assertEqual(self.cached("big.bin"), CONTENT)
        self.assertEqual(len(self.requests.commands("_serve_file")[0]["hsum"]), 64)
        self.assertEqual(os.listdir(os.path.join(self.cachedir, "files", "base")), ["big.bin"])

    def test_refusedAsFileServerError(self) -> None:
        """
        The master's refusal is a L{FileServerError} in its words; a bad
        path is refused before anything is sent.
        """
        failure = self.failureResultOf(self.client.cacheFile("top.sls", "nope"), FileServerError)
        self.assertEqual(str(failure.value), "saltenv 'nope' is not configured")
        self.requests.sent.clear()
        failure = self.failureResultOf(self.client.cacheFile("salt://../x"), FileServerError)
        self.assertIn("'..'", str(failure.value))
        self.assertEqual(self.requests.sent, [])

    def test_notConnected(self) -> None:
        """
        Without a session the request's L{ConnectionError} comes through.
        """
        client = RemoteFileClient(
            lambda payload: maybeDeferred(_raise, ConnectionError("not connected")),
            self.cachedir,
            runSynchronously,
            "m1",
        )
        self.failureResultOf(client.cacheFile("big.bin"), ConnectionError)

    def test_window(self) -> None:
        """
        After the first chunk, L{WINDOW} chunk requests are in flight at
        once, never more; chunks arriving out of order are written in
        order.
        """
        self.requests.hold = True
        d = self.client.cacheFile("big.bin")
        self.requests.release()  # _file_hash
        self.assertEqual(len(self.requests.held), 1)
        self.requests.release()  # the first chunk
        self.assertEqual(len(self.requests.held), WINDOW)
        # Answer the window's second request before its first.
        second, first = self.requests.held[1], self.requests.held[0]
        self.requests.held[0:2] = [second, first]
        while self.requests.held:
            self.assertLessEqual(len(self.requests.held), WINDOW)
            self.requests.release()
        self.successResultOf(d)
        self.assertEqual(self.cached("big.bin"), BIG)

    def test_sameFileOnce(self) -> None:
        """
        Two C{cacheFile} of the same file at once share one transfer; what
        the first caller chains on its result does not change the second's.
        """
        self.requests.hold = True
        first = self.client.cacheFile("big.bin")
        seen: list[str] = []
        first.addCallback(seen.append)
        second = self.client.cacheFile("salt://big.bin?saltenv=base")
        while self.requests.held:
            self.requests.release()
        path = self.client.cachedPath("big.bin")
        self.assertEqual((seen, self.successResultOf(second)), ([path], path))
        self.assertEqual(len(self.requests.commands("_file_hash")), 1)

    def test_cacheFileToWritesDestInTheSamePass(self) -> None:
        """
        C{cacheFileTo} of a file not cached fills the cache and writes
        C{dest} with the same transfer (one C{_serve_file} per chunk), and
        says so; a new C{dest} gets the cached file's mode, no temporary
        file is left beside either.
        """
        dest = os.path.join(os.path.abspath(self.mktemp()), "out.bin")
        os.makedirs(os.path.dirname(dest))
        cached, written = self.successResultOf(self.client.cacheFileTo("big.bin", "base", dest))
        self.assertEqual((cached, written), (self.client.cachedPath("big.bin"), True))
        self.assertEqual(self.cached("big.bin"), BIG)
        with open(dest, "rb") as f:
            self.assertEqual(f.read(), BIG)
        self.assertEqual(len(self.requests.commands("_serve_file")), 13)
        self.assertEqual(os.listdir(os.path.dirname(dest)), ["out.bin"])
        self.assertEqual(os.listdir(os.path.dirname(cached)), ["big.bin"])
        self.assertEqual(os.stat(dest).st_mode, os.stat(cached).st_mode)

    def test_cacheFileToKeepsMode(self) -> None:
        """
        An existing C{dest} of another size is replaced with the file and
        keeps its mode.
        """
        dest = os.path.join(os.path.abspath(self.mktemp()), "out.bin")
        os.makedirs(os.path.dirname(dest))
        with open(dest, "wb") as f:
            f.write(b"old")
        os.chmod(dest, 0o640)
        _, written = self.successResultOf(self.client.cacheFileTo("big.bin", "base", dest))
        self.assertTrue(written)
        with open(dest, "rb") as f:
            self.assertEqual(f.read(), BIG)
        self.assertEqual(os.stat(dest).st_mode & 0o7777, 0o640)

    def test_cacheFileToLeavesDestAlone(self) -> None:
        """
        C{dest} is not written (the caller compares and copies) when the
        cached copy is already good, when a file of the same size is
        there, or when its directory is missing; the cache is filled all
        the same.
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        same = os.path.join(directory, "same.bin")
        with open(same, "wb") as f:
            f.write(b"x" * len(BIG))
        result = self.successResultOf(self.client.cacheFileTo("big.bin", "base", same))
        self.assertEqual(result, (self.client.cachedPath("big.bin"), False))
        with open(same, "rb") as f:
            self.assertEqual(f.read(), b"x" * len(BIG))
        self.assertEqual(self.cached("big.bin"), BIG)
        fresh = os.path.join(directory, "fresh.bin")
        result = self.successResultOf(self.client.cacheFileTo("big.bin", "base", fresh))
        self.assertEqual(result, (self.client.cachedPath("big.bin"), False))
        self.assertFalse(os.path.exists(fresh))
        os.remove(self.client.cachedPath("big.bin"))
        nowhere = os.path.join(directory, "missing", "out.bin")
        result = self.successResultOf(self.client.cacheFileTo("big.bin", "base", nowhere))
        self.assertEqual(result, (self.client.cachedPath("big.bin"), False))
        self.assertEqual(sorted(os.listdir(directory)), ["same.bin"])
        self.assertEqual(
            self.successResultOf(self.client.cacheFileTo("nothing", "base", fresh)), ("", False)
        )

    def test_cacheFileToBadContentWritesNothing(self) -> None:
        """
        When what arrives does not have the announced SHA-256, neither the
        cache nor C{dest} is written, and no temporary file is left.
        """
        dest = os.path.join(os.path.abspath(self.mktemp()), "out.bin")
        os.makedirs(os.path.dirname(dest))

        def corrupt(reply: dict[str, Any]) -> dict[str, Any]:
            if reply.get("data"):
                reply["data"] = b"\0" * len(reply["data"])
            return reply

        serve = self.room.serveFile
        self.patch(
            self.room,
            "serveFile",
            lambda proto, load: serve(proto, load).addCallback(corrupt),
        )
        failure = self.failureResultOf(
            self.client.cacheFileTo("big.bin", "base", dest), FileServerError
        )
        self.assertIn("SHA-256", str(failure.value))
        self.assertEqual(os.listdir(os.path.dirname(dest)), [])
        self.assertEqual(os.listdir(os.path.dirname(self.client.cachedPath("big.bin"))), [])

    def test_cacheFileToWritesInParallel(self) -> None:
        """
        The file (and its hash) and the copy beside C{dest} are written by
        two thread calls at once, each taking the chunks arrived in order,
        at most L{WRITE_BATCH} a call.
        """
        runner = ManualRunner()
        client = RemoteFileClient(self.requests, self.cachedir, runner, "m1")
        dest = os.path.join(os.path.abspath(self.mktemp()), "out.bin")
        os.makedirs(os.path.dirname(dest))
        d = client.cacheFileTo("big.bin", "base", dest)
        together = False
        batches: list[int] = []
        while runner.calls:
            names = {f.__name__ for f, _, _ in runner.calls}
            together = together or {"writeOwn", "writeCopy"} <= names
            f, args, result = runner.calls.pop(0)
            if f.__name__ == "writeOwn":
                batches.append(len(args[0]))
            maybeDeferred(f, *args).chainDeferred(result)
        self.assertEqual(self.successResultOf(d), (client.cachedPath("big.bin"), True))
        with open(dest, "rb") as f:
            self.assertEqual(f.read(), BIG)
        self.assertEqual(self.cached("big.bin"), BIG)
        self.assertTrue(together)
        self.assertEqual(sum(batches), 13)
        self.assertGreater(max(batches), 1)
        self.assertLessEqual(max(batches), WRITE_BATCH)

    def test_cacheFileToDestUnwritable(self) -> None:
        """
        A copy that cannot be written fails the fetch naming C{dest}, and
        leaves no temporary file.
        """
        dest = os.path.join(os.path.abspath(self.mktemp()), "out.bin")
        os.makedirs(os.path.dirname(dest))

        class Full:
            def __init__(self, real: Any) -> None:
                self.real = real
                self.closed = False

            def write(self, data: bytes) -> int:
                raise OSError(28, "No space left on device")

            def close(self) -> None:
                self.closed = True
                self.real.close()

        openCopy = client_Download._openCopy

        def fullCopy(download: Any, *args: Any) -> None:
            openCopy(download, *args)
            download._copy = Full(download._copy)

        self.patch(client_Download, "_openCopy", fullCopy)
        failure = self.failureResultOf(
            self.client.cacheFileTo("big.bin", "base", dest), FileServerError
        )
        self.assertEqual(str(failure.value), f"cannot write {dest}: No space left on device")
        self.assertEqual(os.listdir(os.path.dirname(dest)), [])
        self.assertEqual(os.listdir(os.path.dirname(self.client.cachedPath("big.bin"))), [])

    def test_cacheFileToJoinedFetch(self) -> None:
        """
        A C{cacheFileTo} that joins a fetch of the same file under way for
        another destination is told its own C{dest} was not written.
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        one, two = os.path.join(directory, "one"), os.path.join(directory, "two")
        self.requests.hold = True
        first = self.client.cacheFileTo("big.bin", "base", one)
        second = self.client.cacheFileTo("big.bin", "base", two)
        while self.requests.held:
            self.requests.release()
        cached = self.client.cachedPath("big.bin")
        self.assertEqual(self.successResultOf(first), (cached, True))
        self.assertEqual(self.successResultOf(second), (cached, False))
        self.assertEqual(os.listdir(directory), ["one"])

    def test_hashFiles(self) -> None:
        """
        C{hashFiles} asks one C{_file_hash_many} per saltenv: each path
        as given gets its hash, C{{}} when missing; a path the master
        refuses is left out.
        """
        writeFile(self.dev, "dev.sls", b"dev: true\n")
        paths = ["top.sls", "salt://dev.sls?saltenv=dev", "nothing", "escape", "big.bin"]
        result = self.successResultOf(self.client.hashFiles(paths))
        self.assertEqual(
            result,
            {
                "top.sls": {"hsum": sha256(b"base:\n  '*': [web]\n"), "hash_type": "sha256"},
                "salt://dev.sls?saltenv=dev": {
                    "hsum": sha256(b"dev: true\n"),
                    "hash_type": "sha256",
                },
                "nothing": {},
                "big.bin": {"hsum": sha256(BIG), "hash_type": "sha256"},
            },
        )
        self.assertEqual([p["cmd"] for p in self.requests.sent], ["_file_hash_many"] * 2)
        self.assertIn("'..'", str(self.failureResultOf(self.client.hashFiles(["../x"])).value))

    def test_cacheFilesColdThenWarm(self) -> None:
        """
        C{cacheFiles} fetches small files that differ many to a
        C{_serve_files} request, a big one in chunks; called again with
        every copy good it sends only the hash request.
        """
        for name in "abc":
            writeFile(self.base, f"small/{name}", name.encode() * 1500)
        paths = ["small/a", "small/b", "small/c", "big.bin", "nothing", "escape"]
        result = self.successResultOf(self.client.cacheFiles(paths))
        self.assertEqual(
            result,
            {
                **{f"small/{n}": self.client.cachedPath(f"small/{n}") for n in "abc"},
                "big.bin": self.client.cachedPath("big.bin"),
                "nothing": "",
            },
        )
        for name in "abc":
            self.assertEqual(self.cached(f"small/{name}"), name.encode() * 1500)
        self.assertEqual(self.cached("big.bin"), BIG)
        # Two replies of at most file_buffer_size (4096) bytes carry the
        # three 1500-byte files; the big file's first try comes without
        # data, then its 13 chunks.
        self.assertEqual(len(self.requests.commands("_serve_files")), 3)
        self.assertEqual(len(self.requests.commands("_serve_file")), 13)
        self.requests.sent.clear()
        self.assertEqual(self.successResultOf(self.client.cacheFiles(paths)), result)
        self.assertEqual([p["cmd"] for p in self.requests.sent], ["_file_hash_many"])
        with open(self.client.cachedPath("small/b"), "r+b") as f:
            f.write(b"X")
        self.requests.sent.clear()
        self.successResultOf(self.client.cacheFiles(paths))
        self.assertEqual(self.cached("small/b"), b"b" * 1500)
        self.assertEqual(
            [p["cmd"] for p in self.requests.sent], ["_file_hash_many", "_serve_files"]
        )

    def test_cacheFilesHashed(self) -> None:
        """
        C{cacheFilesHashed} caches as C{cacheFiles} does, in its requests
        (no second C{_file_hash_many}), and gives each cached file's path
        with the SHA-256 its copy has: cold (small files in one reply, a
        big one in chunks) and warm; a missing or refused path is left
        out.
        """
        writeFile(self.base, "small/a", b"a" * 1500)
        writeFile(self.dev, "dev.sls", b"dev: true\n")
        paths = ["small/a", "salt://dev.sls?saltenv=dev", "big.bin", "nothing", "escape"]
        expected = {
            "small/a": (self.client.cachedPath("small/a"), sha256(b"a" * 1500)),
            "salt://dev.sls?saltenv=dev": (
                self.client.cachedPath("dev.sls", "dev"),
                sha256(b"dev: true\n"),
            ),
            "big.bin": (self.client.cachedPath("big.bin"), sha256(BIG)),
        }
        self.assertEqual(self.successResultOf(self.client.cacheFilesHashed(paths)), expected)
        self.assertEqual(self.cached("small/a"), b"a" * 1500)
        self.assertEqual(self.cached("big.bin"), BIG)
        self.assertEqual(len(self.requests.commands("_file_hash_many")), 2)
        self.requests.sent.clear()
        self.assertEqual(self.successResultOf(self.client.cacheFilesHashed(paths)), expected)
        self.assertEqual([p["cmd"] for p in self.requests.sent], ["_file_hash_many"] * 2)
        self.assertIn(
            "'..'", str(self.failureResultOf(self.client.cacheFilesHashed(["../x"])).value)
        )

    def test_cacheFilesBadContent(self) -> None:
        """
        A small file whose content is not its announced hash fails
        C{cacheFiles} and is not cached.
        """
        serve = self.room.serveFiles

        def corrupt(reply: dict[str, Any]) -> dict[str, Any]:
            for info in reply.get("ret", {}).values():
                if info.get("data"):
                    info["data"] = b"\0" * len(info["data"])
            return reply

        self.patch(
            self.room, "serveFiles", lambda proto, load: serve(proto, load).addCallback(corrupt)
        )
        failure = self.failureResultOf(self.client.cacheFiles(["top.sls"]), FileServerError)
        self.assertIn("SHA-256", str(failure.value))
        self.assertFalse(os.path.exists(self.client.cachedPath("top.sls")))

    def test_cacheDir(self) -> None:
        """
        C{cacheDir} fetches every file under a directory (not a sibling
        with the same prefix), with empty directories if asked.
        """
        writeFile(self.base, "webby.sls", b"not under web/")
        os.makedirs(os.path.join(self.base, "web", "empty"))
        paths = self.successResultOf(self.client.cacheDir("salt://web", includeEmpty=True))
        self.assertEqual(
            paths,
            [
                self.client.cachedPath("web/files/big.txt"),
                self.client.cachedPath("web/init.sls"),
            ],
        )
        self.assertEqual(self.cached("web/files/big.txt"), CONTENT)
        self.assertTrue(os.path.isdir(self.client.cachedPath("web/empty")))
        self.assertFalse(os.path.exists(self.client.cachedPath("webby.sls")))

    def test_recheckThousandFiles(self) -> None:
        """
        Re-checking 1,000 unchanged cached files is one C{_file_hashes}
        request; only a file changed on the master is fetched again. (How
        long it takes is measured by benchmarks/vs_salt/files_pillar.py's
        cachedir phase, not asserted here.)
        """
        for i in range(1000):
            writeFile(self.base, f"many/f{i:04d}.txt", b"file %d\n" % i)
        self.successResultOf(self.client.cacheDir("many"))
        writeFile(self.base, "many/f0007.txt", b"changed\n")
        self.requests.sent.clear()
        client = RemoteFileClient(self.requests, self.cachedir, runSynchronously, "m1")
        paths = self.successResultOf(client.cacheDir("many"))
        self.assertEqual(len(paths), 1000)
        self.assertEqual(len(self.requests.commands("_file_hashes")), 1)
        self.assertEqual(
            {p["path"] for p in self.requests.commands("_serve_file")}, {"many/f0007.txt"}
        )
        self.assertEqual(self.cached("many/f0007.txt"), b"changed\n")
        self.assertTrue(os.path.exists(os.path.join(self.cachedir, INDEX_FILE)))

    def test_push(self) -> None:
        """
        C{push} sends a local file to the master in chunks.
        """
        local = os.path.join(self.cachedir, "local.bin")
        os.makedirs(self.cachedir, exist_ok=True)
        with open(local, "wb") as f:
            f.write(BIG)
        self.assertIs(self.successResultOf(self.client.push(local, "/tmp/local.bin")), True)
        stored = os.path.join(self.config["cachedir"], "minions", "m1", "files", "tmp", "local.bin")
        with open(stored, "rb") as f:
            self.assertEqual(f.read(), BIG)

    def test_pushRefused(self) -> None:
        """
        A master without C{file_recv} refuses a push with its reason.
        """
        room = self.makeRoom()
        client = RemoteFileClient(
            RoomRequests(room, FakeSession("m1")), self.cachedir, runSynchronously, "m1"
        )
        local = os.path.join(self.base, "top.sls")
        failure = self.failureResultOf(client.push(local, "x"), FileServerError)
        self.assertIn("file_recv is disabled", str(failure.value))


def _raise(e: Exception) -> None:
    raise e


class LocalClientTests(RoomTestCase):
    """
    L{LocalFileClient}: the same cache from local roots.
    """

    def setUp(self) -> None:
        self.makeRoom()
        self.cachedir = os.path.abspath(self.mktemp())
        self.client = LocalFileClient(
            FileServer.fromConfig(self.config), self.cachedir, runSynchronously
        )

    def test_interface(self) -> None:
        """
        L{LocalFileClient} provides L{IFileClient}.
        """
        self.assertTrue(verifyObject(IFileClient, self.client))

    def test_cacheFile(self) -> None:
        """
        C{cacheFile} copies into the cache, again only if the root's copy
        changed; a missing file is C{""}; a path trick is refused.
        """
        path = self.successResultOf(self.client.cacheFile("salt://web/files/big.txt"))
        self.assertEqual(path, self.client.cachedPath("web/files/big.txt"))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), CONTENT)
        mtime = os.stat(path).st_mtime_ns
        self.successResultOf(self.client.cacheFile("salt://web/files/big.txt"))
        self.assertEqual(os.stat(path).st_mtime_ns, mtime)
        writeFile(self.base, "web/files/big.txt", b"new")
        self.successResultOf(self.client.cacheFile("salt://web/files/big.txt"))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"new")
        self.assertEqual(self.successResultOf(self.client.cacheFile("nothing")), "")
        self.failureResultOf(self.client.cacheFile("salt://escape"), FileServerError)
        self.failureResultOf(self.client.cacheFile("../x"), FileServerError)

    def test_cacheFileTo(self) -> None:
        """
        C{cacheFileTo} caches the file and leaves C{dest} to the caller.
        """
        dest = os.path.join(os.path.abspath(self.mktemp()), "out")
        cached, written = self.successResultOf(self.client.cacheFileTo("top.sls", "base", dest))
        self.assertEqual((cached, written), (self.client.cachedPath("top.sls"), False))
        self.assertFalse(os.path.exists(dest))

    def test_hashAndCacheFiles(self) -> None:
        """
        C{hashFiles} and C{cacheFiles} read the local roots; a refused
        path is left out, a missing one is C{{}} or C{""}.
        """
        paths = ["top.sls", "nothing", "escape"]
        self.assertEqual(
            self.successResultOf(self.client.hashFiles(paths)),
            {
                "top.sls": {"hsum": sha256(b"base:\n  '*': [web]\n"), "hash_type": "sha256"},
                "nothing": {},
            },
        )
        self.assertEqual(
            self.successResultOf(self.client.cacheFiles(paths)),
            {"top.sls": self.client.cachedPath("top.sls"), "nothing": ""},
        )

    def test_listingsAndDir(self) -> None:
        """
        Listings, hashes and C{cacheDir} work on the local roots.
        """
        self.assertEqual(self.successResultOf(self.client.envs()), ["base", "dev"])
        self.assertEqual(self.successResultOf(self.client.fileList("dev")), ["dev.sls"])
        self.assertEqual(
            self.successResultOf(self.client.hashFile("top.sls"))["hash_type"], "sha256"
        )
        paths = self.successResultOf(self.client.cacheDir("web"))
        self.assertEqual(len(paths), 2)

    def test_pushRefused(self) -> None:
        """
        A masterless minion cannot push.
        """
        failure = self.failureResultOf(self.client.push("/etc/hostname", "x"), FileServerError)
        self.assertIn("needs a master", str(failure.value))


class SessionTests(MinionTestCase):
    """
    The minion's file client over a real (in-memory) session with its
    master.
    """

    def test_cacheFileOverSession(self) -> None:
        """
        A ready minion's C{context.fileClient} fetches a file from its
        master over its session; a stopped one fails with
        L{ConnectionError}.
        """
        roots = os.path.abspath(self.mktemp())
        writeFile(roots, "data/big.bin", BIG)
        self.master.fileRequests.fileServer = FileServer.fromConfig(
            dict(self.master.config, file_roots={"base": [roots]})
        )
        self.net.keyStore.putKey(ACCEPTED, "m1", MINION_PEM)
        minion = self.readyMinion()
        client = minion.executor.context.fileClient
        self.assertIsInstance(client, RemoteFileClient)
        d = client.cacheFile("salt://data/big.bin")
        self.net.flush()
        path = self.successResultOf(d)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), BIG)
        self.assertTrue(path.startswith(minion.config["cachedir"]))
        minion.stop()
        self.net.flush()
        self.failureResultOf(client.cacheFile("salt://data/big.bin"), ConnectionError)

    def test_localFileClient(self) -> None:
        """
        With C{file_client: local} the minion's file client reads its own
        roots.
        """
        roots = os.path.abspath(self.mktemp())
        writeFile(roots, "a.txt", b"local")
        minion = self.makeMinion(file_client="local", file_roots={"base": [roots]})
        client = minion.executor.context.fileClient
        self.assertIsInstance(client, LocalFileClient)
        with open(self.successResultOf(client.cacheFile("salt://a.txt")), "rb") as f:
            self.assertEqual(f.read(), b"local")

    def test_limitsOverSession(self) -> None:
        """
        Through the real req channel, a minion over its limits has its
        requests wait, then refused once its queue is full (the refusal
        reaches it as a L{FileServerError}); requests still waiting when
        its session closes are dropped without an error logged.
        """
        self.master.fileRequests.limits = FairLimits(
            self.net.reactor, rate=1, burst=2, inflightBytes=65536, maxQueued=3
        )
        minion = self.readyMinion()
        client = minion.executor.context.fileClient
        replies = [client.envs() for _ in range(8)]
        self.net.flush()
        self.assertEqual(sum(1 for d in replies if d.called), 5)
        for d in replies[5:]:
            self.assertIn("file-server requests waiting", str(self.failureResultOf(d).value))
        self.assertEqual(self.master.fileRequests.limits.waiting("m1"), 3)
        self.net.advance(1)
        self.assertTrue(replies[2].called)
        minion.stop()
        self.net.flush()
        for d in replies[3:5]:
            self.failureResultOf(d, ConnectionError)
        self.assertEqual(self.master.fileRequests.limits.waiting("m1"), 0)
        self.assertEqual(self.logged("internal error"), [])
        self.assertEqual(self.logged("failed"), [])


class CacheIndexTests(SynchronousTestCase):
    """
    L{CacheIndex} used from several threads at once.
    """

    def test_threads(self) -> None:
        """
        Threads recording and saving at once lose nothing and raise
        nothing; a new index reads every entry back.
        """
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        index = CacheIndex(os.path.join(directory, INDEX_FILE))
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(200):
                    index.record(f"/c/{n}/{i}", i, i, "h")
                    if i % 20 == 0:
                        index.save()
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        index.save()
        self.assertEqual(errors, [])
        again = CacheIndex(index.path)
        self.assertEqual(len(again._load()), 1600)
