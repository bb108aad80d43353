# -*- test-case-name: tests.test_master_fileserving -*-
"""
Tests for L{salttwist.master.fileserving.FileRequests} (the file server's
room on the master) and L{salttwist.fileserver.limits.FairLimits}: real
temporary C{file_roots}, blocking work run synchronously or by hand, time
from a L{Clock}.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import Clock
from twisted.internet.testing import EventLoggingObserver
from twisted.logger import formatEvent, globalLogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from salttwist.blocking import runSynchronously
from salttwist.config import loadMasterConfig
from salttwist.daemon import StartupError
from salttwist.fileserver.limits import FairLimits, LimitExceeded, SessionClosed
from salttwist.master.fileserving import CHANGED, MAX_BATCH_PATHS, FileRequests

CONTENT = b"".join(b"line %06d of the big file\n" % i for i in range(1000))


class FakeSession:
    """
    What the room reads of a req session: the authenticated minion id.
    """

    def __init__(self, minionId: str) -> None:
        self.minionId = minionId


class ManualRunner:
    """
    A C{runBlocking} whose calls wait until the test runs them.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...], Deferred[Any]]] = []

    def __call__(self, f: Callable[..., Any], *args: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.calls.append((f, args, d))
        return d

    def runAll(self) -> None:
        """
        Run every waiting call (and those they cause), in order.
        """
        while self.calls:
            f, args, d = self.calls.pop(0)
            maybeDeferred(f, *args).chainDeferred(d)


def writeFile(root: str, relative: str, data: bytes) -> str:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def answer(d: Callable[[], Any]) -> Deferred[dict[str, Any]]:
    """
    Call a handler as the req channel does: a L{ValueError} (raised or in
    the L{Deferred}) becomes C{{"error": text}}.
    """

    def failed(failure: Failure) -> dict[str, Any]:
        failure.trap(ValueError)
        return {"error": str(failure.value)}

    return maybeDeferred(d).addErrback(failed)


class RoomTestCase(SynchronousTestCase):
    """
    A L{FileRequests} over two saltenvs in a temporary directory.
    """

    def makeRoom(self, runBlocking: Any = runSynchronously, **overrides: Any) -> FileRequests:
        root = os.path.abspath(self.mktemp())
        self.base = os.path.join(root, "srv", "base")
        self.dev = os.path.join(root, "srv", "dev")
        self.outside = os.path.join(root, "outside")
        writeFile(self.base, "top.sls", b"base:\n  '*': [web]\n")
        writeFile(self.base, "web/init.sls", b"nginx: pkg.installed\n")
        writeFile(self.base, "web/files/big.txt", CONTENT)
        writeFile(self.dev, "dev.sls", b"dev: true\n")
        writeFile(self.outside, "secret", b"not for minions")
        os.symlink(os.path.join(self.outside, "secret"), os.path.join(self.base, "escape"))
        options = {
            "root_dir": root,
            "file_roots": {"base": [self.base], "dev": [self.dev]},
            "file_buffer_size": 4096,
            **overrides,
        }
        self.config = loadMasterConfig(root, overrides=options)
        self.clock = Clock()
        room = FileRequests(self.config, self.clock, runBlocking)
        self.session = FakeSession("m1")
        return room

    def call(self, method: Callable[..., Any], load: dict[str, Any], session: Any = None) -> Any:
        return self.successResultOf(answer(lambda: method(session or self.session, load)))


class ListingTests(RoomTestCase):
    """
    Saltenvs, file and directory lists, hashes.
    """

    def setUp(self) -> None:
        self.room = self.makeRoom()

    def test_envs(self) -> None:
        """
        C{_file_envs} answers the configured saltenvs.
        """
        self.assertEqual(self.call(self.room.fileEnvs, {}), {"ret": ["base", "dev"]})

    def test_lists(self) -> None:
        """
        C{_file_list} and C{_dir_list} answer the files and directories of
        a saltenv under a prefix.
        """
        self.assertEqual(
            self.call(self.room.fileList, {"saltenv": "base", "prefix": "web/"}),
            {"ret": ["web/files/big.txt", "web/init.sls"]},
        )
        self.assertEqual(
            self.call(self.room.dirList, {"saltenv": "base", "prefix": ""})["ret"],
            ["web", "web/files"],
        )
        self.assertEqual(self.call(self.room.fileList, {"saltenv": "dev"}), {"ret": ["dev.sls"]})

    def test_hashes(self) -> None:
        """
        C{_file_hash} answers the SHA-256 and size, or C{{}} for a missing
        file; C{_file_hashes} every file's under a prefix.
        """
        expected = hashlib.sha256(CONTENT).hexdigest()
        self.assertEqual(
            self.call(self.room.fileHash, {"saltenv": "base", "path": "web/files/big.txt"}),
            {"ret": {"hsum": expected, "hash_type": "sha256", "size": len(CONTENT)}},
        )
        self.assertEqual(
            self.call(self.room.fileHash, {"saltenv": "base", "path": "nothing"}), {"ret": {}}
        )
        hashes = self.call(self.room.fileHashes, {"saltenv": "base", "prefix": "web/"})["ret"]
        self.assertEqual(sorted(hashes), ["web/files/big.txt", "web/init.sls"])
        self.assertEqual(hashes["web/files/big.txt"], expected)

    def test_refusals(self) -> None:
        """
        C{..}, absolute paths, NUL, a symlink out of a root, a saltenv
        that is not configured and values of the wrong type are answered
        as errors naming the problem.
        """
        cases = [
            ({"saltenv": "base", "path": "../outside/secret"}, "'..'"),
            ({"saltenv": "base", "path": "/etc/passwd"}, "absolute"),
            ({"saltenv": "base", "path": "a\x00b"}, "NUL"),
            ({"saltenv": "nope", "path": "top.sls"}, "'nope' is not configured"),
            ({"saltenv": "../base", "path": "top.sls"}, "'..'"),
            ({"saltenv": "base", "path": 7}, "string"),
        ]
        for method in (self.room.fileHash, self.room.serveFile):
            for load, words in cases:
                reply = self.call(method, load)
                self.assertIn(words, reply.get("error", ""), (method, load, reply))
        reply = self.call(self.room.serveFile, {"saltenv": "base", "path": "escape"})
        self.assertIn("error", reply)
        self.assertNotIn("data", reply)
        self.assertEqual(
            self.call(self.room.fileList, {"saltenv": "nope"}),
            {"error": "saltenv 'nope' is not configured"},
        )
        self.assertIn(
            "loc", self.call(self.room.serveFile, {"path": "top.sls", "loc": -1})["error"]
        )


class StartupTests(RoomTestCase):
    """
    A file server that cannot be built stops the master at start.
    """

    def test_unknownBackend(self) -> None:
        """
        An unknown C{fileserver_backend} is a L{StartupError} naming it.
        """
        e = self.assertRaises(StartupError, self.makeRoom, fileserver_backend=["roots", "svn"])
        self.assertIn("unknown backend 'svn'", str(e))


class ServeTests(RoomTestCase):
    """
    C{_serve_file}: chunks, their identity, a file that changes.
    """

    def setUp(self) -> None:
        self.room = self.makeRoom()
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

    def serve(self, loc: int, hsum: str | None = None, path: str = "web/files/big.txt") -> Any:
        load: dict[str, Any] = {"saltenv": "base", "path": path, "loc": loc}
        if hsum is not None:
            load["hsum"] = hsum
        return self.call(self.room.serveFile, load)

    def test_chunks(self) -> None:
        """
        The file comes in chunks of C{file_buffer_size} bytes, each
        naming the next offset, the last with C{eof}; the first carries
        the hash and size.
        """
        first = self.serve(0)
        hsum = hashlib.sha256(CONTENT).hexdigest()
        self.assertEqual((first["hsum"], first["size"], first["loc"]), (hsum, len(CONTENT), 4096))
        self.assertFalse(first["eof"])
        data, loc, eof = first["data"], first["loc"], first["eof"]
        while not eof:
            reply = self.serve(loc, hsum)
            self.assertNotIn("hsum", reply)
            self.assertLessEqual(len(reply["data"]), 4096)
            data += reply["data"]
            loc, eof = reply["loc"], reply["eof"]
        self.assertEqual(data, CONTENT)
        self.assertEqual(loc, len(CONTENT))

    def test_oneThreadCallPerFirstChunk(self) -> None:
        """
        A file's first chunk (all of a small file) is found, hashed and
        read in one thread call; a later chunk of a transfer the session
        began is read in one too.
        """
        runner = ManualRunner()
        room = self.makeRoom(runBlocking=runner)
        load = {"saltenv": "base", "path": "web/files/big.txt", "loc": 0}
        d = answer(lambda: room.serveFile(self.session, load))
        self.assertEqual(len(runner.calls), 1)
        f, args, result = runner.calls.pop(0)
        maybeDeferred(f, *args).chainDeferred(result)
        self.assertEqual(runner.calls, [])
        first = self.successResultOf(d)
        self.assertEqual(first["data"], CONTENT[:4096])
        later = answer(
            lambda: room.serveFile(self.session, dict(load, loc=4096, hsum=first["hsum"]))
        )
        self.assertEqual(len(runner.calls), 1)
        runner.runAll()
        self.assertEqual(self.successResultOf(later)["data"], CONTENT[4096:8192])

    def test_contentNotLogged(self) -> None:
        """
        Serving a file logs nothing of its content.
        """
        self.serve(0)
        self.serve(4096, hashlib.sha256(CONTENT).hexdigest())
        self.assertFalse([e for e in self.logs if b"line 000" in formatEvent(e).encode()])

    def test_emptyFile(self) -> None:
        """
        An empty file is one empty chunk with C{eof}.
        """
        writeFile(self.base, "empty", b"")
        reply = self.serve(0, path="empty")
        self.assertEqual((reply["data"], reply["loc"], reply["eof"]), (b"", 0, True))

    def test_missing(self) -> None:
        """
        A file not on the file server is an error naming it.
        """
        self.assertEqual(
            self.serve(0, path="nothing"),
            {"error": "salt://nothing (saltenv base) is not on the file server"},
        )

    def test_changedSize(self) -> None:
        """
        A file whose size changed since its transfer began is an error with
        L{CHANGED}.
        """
        first = self.serve(0)
        writeFile(self.base, "web/files/big.txt", CONTENT + b"more")
        self.assertIn(CHANGED, self.serve(4096, first["hsum"])["error"])

    def test_changedHash(self) -> None:
        """
        A minion that asks with a hash the file no longer has (its
        C{_file_hash} answer is older than the file) is told it changed,
        at offset 0 or later in a new session.
        """
        self.assertIn(CHANGED, self.serve(0, "0" * 64)["error"])
        self.assertIn(CHANGED, self.serve(4096, "0" * 64)["error"])

    def test_pastEnd(self) -> None:
        """
        An offset past the file's end is an error.
        """
        hsum = self.serve(0)["hsum"]
        self.assertIn("past its end", self.serve(len(CONTENT) + 1, hsum)["error"])

    def test_transfersForgotten(self) -> None:
        """
        A session's transfers are forgotten when it ends.
        """
        self.serve(0)
        self.assertEqual(len(self.room._sessions), 1)
        self.room.sessionEnded(self.session)
        self.assertEqual(self.room._sessions, {})


class BatchTests(RoomTestCase):
    """
    C{_file_hash_many} and C{_serve_files}: many files of one saltenv in
    one request and one thread call.
    """

    def setUp(self) -> None:
        self.runner = ManualRunner()
        self.room = self.makeRoom(runBlocking=self.runner)

    def batch(self, method: Callable[..., Any], load: dict[str, Any]) -> Any:
        d = answer(lambda: method(self.session, load))
        self.assertLessEqual(len(self.runner.calls), 1)
        self.runner.runAll()
        return self.successResultOf(d)

    def test_hashMany(self) -> None:
        """
        Each path gets C{_file_hash}'s answer: C{{}} for a missing file,
        an error for a symlink leaving the root.
        """
        reply = self.batch(
            self.room.fileHashMany,
            {"saltenv": "base", "paths": ["top.sls", "web/files/big.txt", "nothing", "escape"]},
        )["ret"]
        self.assertEqual(
            reply["web/files/big.txt"],
            {
                "hsum": hashlib.sha256(CONTENT).hexdigest(),
                "hash_type": "sha256",
                "size": len(CONTENT),
            },
        )
        self.assertEqual(reply["top.sls"]["size"], len(b"base:\n  '*': [web]\n"))
        self.assertEqual(reply["nothing"], {})
        self.assertIn("escape", reply["escape"]["error"])

    def test_refused(self) -> None:
        """
        A bad request is refused whole, naming the problem: C{paths} not
        a list, too many paths, a path trick, a saltenv not configured.
        """
        for load, words in [
            ({"paths": "top.sls"}, "paths must be a list"),
            ({"paths": ["x"] * (MAX_BATCH_PATHS + 1)}, f"more than {MAX_BATCH_PATHS}"),
            ({"paths": ["top.sls", "../etc/passwd"]}, ".."),
            ({"paths": [3]}, "must be a string"),
            ({"paths": ["top.sls"], "saltenv": "nope"}, "'nope' is not configured"),
        ]:
            for method in (self.room.fileHashMany, self.room.serveFiles):
                self.assertIn(words, self.batch(method, dict({"saltenv": "base"}, **load))["error"])

    def test_serveFiles(self) -> None:
        """
        Small files come whole with their hash and size while they fit in
        C{file_buffer_size} together; the others come without data, and
        can be fetched with C{_serve_file} (from offset 0 or later).
        """
        writeFile(self.base, "a", b"a" * 3000)
        writeFile(self.base, "b", b"b" * 3000)
        writeFile(self.base, "empty", b"")
        reply = self.batch(
            self.room.serveFiles,
            {"saltenv": "base", "paths": ["a", "b", "empty", "web/files/big.txt", "nothing"]},
        )["ret"]
        self.assertEqual(reply["a"]["data"], b"a" * 3000)
        self.assertEqual(reply["a"]["hsum"], hashlib.sha256(b"a" * 3000).hexdigest())
        self.assertEqual(
            reply["b"], {"hsum": hashlib.sha256(b"b" * 3000).hexdigest(), "size": 3000}
        )
        self.assertEqual(reply["empty"]["data"], b"")
        big = reply["web/files/big.txt"]
        self.assertEqual((big["size"], "data" in big), (len(CONTENT), False))
        self.assertEqual(reply["nothing"], {})
        load = {"saltenv": "base", "path": "web/files/big.txt", "loc": 4096, "hsum": big["hsum"]}
        chunk = self.batch(self.room.serveFile, load)
        self.assertEqual(chunk["data"], CONTENT[4096:8192])


class LimitTests(SynchronousTestCase):
    """
    L{FairLimits}: a token bucket and bytes in flight per minion.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.limits = FairLimits(self.clock, rate=10, burst=5, inflightBytes=100, maxQueued=20)

    def test_bucket(self) -> None:
        """
        A minion gets C{burst} requests at once, then C{rate} per second,
        in order; another minion is not delayed by its queue.
        """
        order: list[int] = []
        for i in range(12):
            self.limits.acquire("greedy").addCallback(lambda _, i=i: order.append(i))
        self.assertEqual(order, [0, 1, 2, 3, 4])
        self.assertEqual(self.limits.waiting("greedy"), 7)
        self.successResultOf(self.limits.acquire("polite"))
        self.clock.advance(0.1)
        self.assertEqual(order, [0, 1, 2, 3, 4, 5])
        self.clock.advance(0.35)
        self.assertEqual(order, list(range(9)))
        self.clock.advance(1)
        self.assertEqual(order, list(range(12)))

    def test_queueBound(self) -> None:
        """
        Past C{maxQueued} waiting requests, a request is refused saying
        so; another minion is unaffected.
        """
        for _ in range(5 + 20):
            self.limits.acquire("greedy")
        e = self.assertRaises(LimitExceeded, self.limits.acquire, "greedy")
        self.assertIn("minion greedy has 20 file-server requests waiting", str(e))
        self.successResultOf(self.limits.acquire("polite"))

    def test_bytes(self) -> None:
        """
        Requests wait while their bytes would pass C{inflightBytes}, and
        run as others release theirs; one larger than the bound runs alone.
        """
        first = self.limits.acquire("m", 60)
        second = self.limits.acquire("m", 60)
        self.successResultOf(first)
        self.assertNoResult(second)
        self.successResultOf(self.limits.acquire("other", 60))
        self.limits.release("m", 60)
        self.successResultOf(second)
        self.limits.release("m", 60)
        self.successResultOf(self.limits.acquire("m", 500))

    def test_heldBytes(self) -> None:
        """
        Waiting requests may hold at most C{inflightBytes} of data.
        """
        for _ in range(5):
            self.limits.acquire("m")
        self.limits.acquire("m", held=80)
        e = self.assertRaises(LimitExceeded, self.limits.acquire, "m", held=30)
        self.assertIn("more than fileserver_inflight_bytes 100", str(e))

    def test_dropOwner(self) -> None:
        """
        The waiting requests of a closed session fail with
        L{SessionClosed}; the others keep their place.
        """
        for _ in range(5):
            self.limits.acquire("m")
        gone, kept = object(), object()
        a = self.limits.acquire("m", owner=gone)
        b = self.limits.acquire("m", owner=kept)
        self.limits.dropOwner("m", gone)
        self.failureResultOf(a, SessionClosed)
        self.clock.advance(0.1)
        self.successResultOf(b)

    def test_idleForgotten(self) -> None:
        """
        A minion with nothing waiting, nothing in flight and a full bucket
        is forgotten (the accounts do not grow with every minion seen).
        """
        self.limits.acquire("m", 10)
        self.limits.release("m", 10)
        self.clock.advance(1)
        self.limits.release("m", 0)
        self.assertEqual(self.limits._accounts, {})


class RoomLimitTests(RoomTestCase):
    """
    The room applies the limits per minion: a greedy minion does not
    starve another.
    """

    def test_greedyMinionDoesNotStarveAnother(self) -> None:
        """
        A minion over its request rate waits in its own queue while
        another minion's request is answered at once.
        """
        room = self.makeRoom(fileserver_request_rate=10, fileserver_request_burst=5)
        greedy, polite = FakeSession("greedy"), FakeSession("polite")
        replies = [answer(lambda: room.fileEnvs(greedy, {})) for _ in range(50)]
        self.assertEqual(sum(1 for d in replies if d.called), 5)
        self.assertEqual(self.call(room.fileEnvs, {}, polite), {"ret": ["base", "dev"]})
        self.clock.pump([0.1] * 10 + [0.001])
        self.assertEqual(sum(1 for d in replies if d.called), 15)
        self.clock.pump([0.1] * 40)
        self.assertEqual(sum(1 for d in replies if d.called), 50)

    def test_inflightBytesPerMinion(self) -> None:
        """
        A minion's chunk reads beyond C{fileserver_inflight_bytes} wait
        until its earlier ones are done; another minion's read starts at
        once.
        """
        runner = ManualRunner()
        room = self.makeRoom(
            runBlocking=runner, fileserver_inflight_bytes=65536, file_buffer_size=32768
        )
        writeFile(self.base, "huge", b"x" * 200000)
        greedy, polite = FakeSession("greedy"), FakeSession("polite")
        load = {"saltenv": "base", "path": "huge", "loc": 0}
        replies = [answer(lambda: room.serveFile(greedy, load)) for _ in range(5)]
        self.assertEqual(len(runner.calls), 2)
        other = answer(lambda: room.serveFile(polite, load))
        self.assertEqual(len(runner.calls), 3)
        runner.runAll()
        for d in [*replies, other]:
            self.assertEqual(len(self.successResultOf(d)["data"]), 32768)

    def test_closedSessionQueueDropped(self) -> None:
        """
        The waiting requests of a session that ended are dropped; the
        minion's other session keeps its place.
        """
        room = self.makeRoom(fileserver_request_rate=1, fileserver_request_burst=1)
        first, second = FakeSession("m1"), FakeSession("m1")
        self.call(room.fileEnvs, {}, first)
        dropped = room.fileEnvs(first, {})
        kept = room.fileEnvs(second, {})
        room.sessionEnded(first)
        self.failureResultOf(dropped, SessionClosed)
        self.clock.advance(1)
        self.assertEqual(self.successResultOf(kept), {"ret": ["base", "dev"]})


class PushTests(RoomTestCase):
    """
    C{_file_recv} (C{cp.push}): off unless C{file_recv}, bounded by
    C{file_recv_max_size}, confined under C{cachedir/minions/<id>/files}.
    """

    def setUp(self) -> None:
        self.room = self.makeRoom(file_recv=True, file_recv_max_size=1)
        self.logs = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.files = os.path.join(self.config["cachedir"], "minions", "m1", "files")

    def push(self, path: str, data: bytes, chunk: int = 4096, session: Any = None) -> Any:
        loc, reply = 0, None
        while True:
            part = data[loc : loc + chunk]
            eof = loc + len(part) >= len(data)
            reply = self.call(
                self.room.fileRecv,
                {"path": path, "loc": loc, "data": part, "size": len(data), "eof": eof},
                session,
            )
            loc += len(part)
            if eof or "error" in reply:
                return reply

    def test_push(self) -> None:
        """
        A file pushed in chunks lands under the minion's directory, and
        nothing of its content is logged.
        """
        self.assertEqual(self.push("var/log/app.log", CONTENT), {"ret": True})
        with open(os.path.join(self.files, "var", "log", "app.log"), "rb") as f:
            self.assertEqual(f.read(), CONTENT)
        self.assertEqual(os.listdir(os.path.join(self.files, "var", "log")), ["app.log"])
        self.assertFalse([e for e in self.logs if "line 000" in formatEvent(e)])

    def test_disabled(self) -> None:
        """
        Without C{file_recv} a push is refused saying so.
        """
        room = self.makeRoom()
        reply = self.call(
            room.fileRecv, {"path": "x", "loc": 0, "data": b"", "size": 0, "eof": True}
        )
        self.assertEqual(
            reply, {"error": "file_recv is disabled on this master: cp.push is refused"}
        )

    def test_tooBig(self) -> None:
        """
        A push larger than C{file_recv_max_size} MB is refused.
        """
        reply = self.call(
            self.room.fileRecv,
            {"path": "big", "loc": 0, "data": b"x", "size": 2 * 1024 * 1024, "eof": False},
        )
        self.assertIn("exceeds file_recv_max_size 1 MB", reply["error"])
        self.assertFalse(os.path.exists(self.files))

    def test_traversal(self) -> None:
        """
        C{..} and absolute paths are refused.
        """
        self.assertIn("'..'", self.push("../../m2/files/x", b"evil")["error"])
        self.assertIn("absolute", self.push("/etc/passwd", b"evil")["error"])
        self.assertFalse(os.path.exists(os.path.join(self.config["cachedir"], "minions", "m2")))

    def test_plantedDirectorySymlink(self) -> None:
        """
        A symlink planted in the minion's directory is not followed: a push
        through it is refused and nothing is written outside.
        """
        os.makedirs(self.files)
        os.symlink(self.outside, os.path.join(self.files, "evil"))
        reply = self.push("evil/new", b"evil")
        self.assertIn("symbolic link", reply["error"])
        self.assertEqual(os.listdir(self.outside), ["secret"])

    def test_plantedFileSymlink(self) -> None:
        """
        A symlink planted where the pushed file goes is replaced, never
        written through.
        """
        os.makedirs(self.files)
        link = os.path.join(self.files, "target")
        os.symlink(os.path.join(self.outside, "secret"), link)
        self.assertEqual(self.push("target", b"pushed"), {"ret": True})
        self.assertFalse(os.path.islink(link))
        with open(os.path.join(self.outside, "secret"), "rb") as f:
            self.assertEqual(f.read(), b"not for minions")

    def test_symlinkedMinionDirectory(self) -> None:
        """
        A symlink planted as C{minions/<id>} is not followed either.
        """
        os.makedirs(os.path.join(self.config["cachedir"], "minions"))
        os.symlink(self.outside, os.path.join(self.config["cachedir"], "minions", "m1"))
        self.assertIn("symbolic link", self.push("x", b"evil")["error"])
        self.assertEqual(os.listdir(self.outside), ["secret"])

    def test_outOfOrder(self) -> None:
        """
        A chunk at an offset other than the next expected is refused.
        """
        self.call(
            self.room.fileRecv, {"path": "f", "loc": 0, "data": b"ab", "size": 6, "eof": False}
        )
        reply = self.call(
            self.room.fileRecv, {"path": "f", "loc": 4, "data": b"ef", "size": 6, "eof": True}
        )
        self.assertEqual(reply, {"error": "push of f out of order: expected offset 2, got 4"})

    def test_sizeLies(self) -> None:
        """
        Data past the announced size, or an C{eof} short of it, is refused.
        """
        reply = self.call(
            self.room.fileRecv, {"path": "f", "loc": 0, "data": b"abc", "size": 2, "eof": True}
        )
        self.assertIn("past its announced size", reply["error"])
        reply = self.call(
            self.room.fileRecv, {"path": "f", "loc": 0, "data": b"a", "size": 2, "eof": True}
        )
        self.assertIn("ends at 1 bytes, announced 2", reply["error"])

    def test_refusedChunkEndsPush(self) -> None:
        """
        A chunk refused by the limits ends its push: its temporary file is
        removed and a later chunk is refused, never appended after a gap.
        """
        self.room.limits = FairLimits(self.clock, 1, 1, 65536, maxQueued=0)
        first = {"path": "f", "loc": 0, "data": b"ab", "size": 6, "eof": False}
        self.assertEqual(self.call(self.room.fileRecv, first), {"ret": True})
        second = {"path": "f", "loc": 2, "data": b"cd", "size": 6, "eof": False}
        self.assertIn("requests waiting", self.call(self.room.fileRecv, second)["error"])
        self.clock.advance(5)
        third = {"path": "f", "loc": 4, "data": b"ef", "size": 6, "eof": True}
        self.assertIn("out of order", self.call(self.room.fileRecv, third)["error"])
        self.assertEqual(os.listdir(self.files), [])

    def test_unfinishedRemovedAtSessionEnd(self) -> None:
        """
        The temporary file of a push that never finished is removed when
        its session ends; nothing is renamed into place.
        """
        self.call(
            self.room.fileRecv, {"path": "f", "loc": 0, "data": b"ab", "size": 6, "eof": False}
        )
        self.assertEqual(len(os.listdir(self.files)), 1)
        self.room.sessionEnded(self.session)
        self.assertEqual(os.listdir(self.files), [])
