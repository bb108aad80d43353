# -*- test-case-name: tests.test_cli_cp -*-
"""
Tests for L{salttwist.cli.cp}, the C{salttwist-cp} command: its options,
how it lays files out and splits them into chunks, and the copy itself
through L{LoopbackClient}, an in-memory stand-in for the local client
whose minion C{good} runs the real C{cp.recv_chunked} and C{cp.recv} on
this host's disk (under a temporary directory), C{silent} never answers
and C{broken} answers an error.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import gzip
import io
import os
import stat
import sys
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from salttwist.blocking import runSynchronously
from salttwist.cli import cp as cli
from salttwist.client.base import JobResult
from salttwist.modules import Retcode, loadFunctions


class LoopbackClient:
    """
    Publishes a job to three pretend minions, as
    L{salttwist.client.local.LocalClient.run} answers.

    @ivar jobs: C{(tgt, fun, arg, tgtType)} of every job.
    """

    minions = ("good", "silent", "broken")

    def __init__(self) -> None:
        self.jobs: list[tuple[Any, str, list[Any], str]] = []

    def _targeted(self, tgt: Any, tgtType: str) -> list[str]:
        if tgtType == "list":
            names = tgt if isinstance(tgt, list) else tgt.split(",")
            return [m for m in self.minions if m in names]
        if tgtType == "glob":
            return [m for m in self.minions if fnmatch.fnmatch(m, tgt)]
        return []

    def run(self, tgt: Any, fun: str, arg: list[Any], tgtType: str, timeout: float) -> Any:
        self.jobs.append((tgt, fun, arg, tgtType))
        minions = self._targeted(tgt, tgtType)
        result = JobResult("20261126000000000000", minions)
        for minionId in minions:
            if minionId == "good":
                value = loadFunctions()[fun](*arg)
                if isinstance(value, Retcode):
                    value = value.value
                result.returns[minionId] = {"return": value, "retcode": 0}
            elif minionId == "broken":
                result.returns[minionId] = {"return": "Permission denied", "retcode": 1}
        result.missing = [m for m in minions if m not in result.returns]

        async def answer() -> Any:
            return result

        return Deferred.fromCoroutine(answer())


class OptionTests(SynchronousTestCase):
    """
    The command line.
    """

    def test_defaults(self) -> None:
        """
        A target, sources and a destination; glob targeting, the old mode,
        compression, the master's timeout.
        """
        options = cli.parseOptions(["web*", "/a", "/b", "/dest/"])
        self.assertEqual(options.tgt, "web*")
        self.assertEqual(options.tgt_type, "glob")
        self.assertEqual(options.sources, ["/a", "/b"])
        self.assertEqual(options.dest, "/dest/")
        self.assertFalse(options.chunked)
        self.assertTrue(options.gzip)
        self.assertIsNone(options.timeout)
        self.assertEqual(options.out, "nested")

    def test_flags(self) -> None:
        """
        Salt's flags: C{-C} chunked, C{-n} no compression, C{-t}, C{--out},
        the target types; C{-L} splits the list.
        """
        options = cli.parseOptions(
            ["-C", "-n", "-t", "30", "--out", "json", "-L", "a,b", "/src", "/dest"]
        )
        self.assertTrue(options.chunked)
        self.assertFalse(options.gzip)
        self.assertEqual(options.timeout, 30.0)
        self.assertEqual(options.out, "json")
        self.assertEqual(options.tgt, ["a", "b"])
        self.assertEqual(options.tgt_type, "list")
        for flag, kind in (
            ("-E", "pcre"),
            ("--pcre", "pcre"),
            ("-G", "grain"),
            ("-P", "grain_pcre"),
            ("-N", "nodegroup"),
            ("--compound", "compound"),
        ):
            self.assertEqual(cli.parseOptions([flag, "x", "/s", "/d"]).tgt_type, kind)
        self.assertEqual(cli.parseOptions(["-L", "a b", "/s", "/d"]).tgt, ["a", "b"])

    def test_bad(self) -> None:
        """
        No destination, or two target types, exit with a usage error.
        """
        stderr, sys.stderr = sys.stderr, io.StringIO()
        try:
            for argv in (["*", "/only"], ["-E", "-G", "x", "/s", "/d"], []):
                with self.assertRaises(SystemExit) as caught:
                    cli.parseOptions(argv)
                self.assertEqual(caught.exception.code, 2)
        finally:
            sys.stderr = stderr

    def test_entryPoint(self) -> None:
        """
        The console script C{salttwist-cp} is declared.
        """
        setup = os.path.join(os.path.dirname(os.path.dirname(__file__)), "setup.cfg")
        with open(setup) as f:
            self.assertIn("salttwist-cp = salttwist.cli.cp:main", f.read())


class LayoutTests(SynchronousTestCase):
    """
    Which files are sent where, and their chunks.
    """

    def setUp(self) -> None:
        self.src = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(self.src, "app", "lib"))
        os.makedirs(os.path.join(self.src, "app", "empty"))
        for name, data in (("app/a.txt", b"a"), ("app/lib/b.py", b"b"), ("one.txt", b"1")):
            with open(os.path.join(self.src, name), "wb") as f:
                f.write(data)
        os.chmod(os.path.join(self.src, "one.txt"), 0o640)

    def test_listSources(self) -> None:
        """
        Files with their modes, directories walked, empty ones listed; a
        missing source is an error.
        """
        files, empty = cli.listSources(
            [os.path.join(self.src, "app"), os.path.join(self.src, "one.txt")]
        )
        self.assertEqual(
            sorted(os.path.relpath(p, self.src) for p in files),
            ["app/a.txt", "app/lib/b.py", "one.txt"],
        )
        self.assertEqual(files[os.path.join(self.src, "one.txt")], 0o640)
        self.assertEqual(empty, [os.path.join(self.src, "app", "empty")])
        self.assertRaises(cli.UsageError, cli.listSources, [os.path.join(self.src, "nope")])

    def test_remotePath(self) -> None:
        """
        Salt's placement: one file to DEST itself, or into a directory
        DEST; a directory source by its name, or its contents with a
        trailing slash.
        """
        one = os.path.join(self.src, "one.txt")
        app = os.path.join(self.src, "app")
        self.assertFalse(cli.destIsDir("/d", {one: 0o644}, []))
        self.assertTrue(cli.destIsDir("/d/", {one: 0o644}, []))
        self.assertTrue(cli.destIsDir("/d", {one: 0o644}, ["/x"]))
        self.assertEqual(cli.remotePath(one, [one], "/etc/x.txt", False), "/etc/x.txt")
        self.assertEqual(cli.remotePath(one, [one], "/etc/", True), "/etc/one.txt")
        self.assertEqual(
            cli.remotePath(os.path.join(app, "lib", "b.py"), [app, one], "/opt", True),
            "/opt/app/lib/b.py",
        )
        self.assertEqual(
            cli.remotePath(os.path.join(app, "lib", "b.py"), [app + "/"], "/opt", True),
            "/opt/lib/b.py",
        )

    def test_chunks(self) -> None:
        """
        Chunks are base64 of gzip of each piece (or of the raw piece); an
        empty file is one chunk.
        """
        path = os.path.join(self.src, "big")
        data = os.urandom(2500)
        with open(path, "wb") as f:
            f.write(data)
        chunks = list(cli.readChunks(path, 1000, True))
        self.assertEqual(len(chunks), 3)
        self.assertEqual(b"".join(gzip.decompress(base64.b64decode(c)) for c in chunks), data)
        raw = list(cli.readChunks(path, 1000, False))
        self.assertEqual(b"".join(base64.b64decode(c) for c in raw), data)
        empty = os.path.join(self.src, "empty-file")
        open(empty, "wb").close()
        self.assertEqual(
            [gzip.decompress(base64.b64decode(c)) for c in cli.readChunks(empty)], [b""]
        )


class CopyTests(SynchronousTestCase):
    """
    The copy, through L{LoopbackClient}.
    """

    def setUp(self) -> None:
        self.src = os.path.abspath(self.mktemp())
        self.dest = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(self.src, "tree", "sub"))
        os.makedirs(os.path.join(self.src, "tree", "void"))
        self.big = os.urandom(int(cli.CHUNK_SIZE * 2.5))
        self.write("tree/big.bin", self.big)
        self.write("tree/sub/small.txt", b"small\n")
        self.write("motd", b"Welcome\n")
        os.chmod(os.path.join(self.src, "motd"), 0o600)
        self.client = LoopbackClient()

    def write(self, name: str, data: bytes) -> None:
        with open(os.path.join(self.src, name), "wb") as f:
            f.write(data)

    def options(self, *argv: str) -> argparse.Namespace:
        return cli.parseOptions(list(argv))

    def copy(self, *argv: str) -> tuple[dict[str, Any], bool]:
        options = self.options(*argv)
        function = cli.copyChunked if options.chunked else cli.copyOneJob
        d = Deferred.fromCoroutine(function(self.client, runSynchronously, options, 5.0))
        return self.successResultOf(d)

    def read(self, *parts: str) -> bytes:
        with open(os.path.join(self.dest, *parts), "rb") as f:
            return f.read()

    def test_chunkedTree(self) -> None:
        """
        A directory goes over in chunks: files written whole, modes kept,
        empty directories made; the output is Salt's; a minion that does
        not answer or fails is reported and not sent the rest of a file.
        """
        ret, matched = self.copy(
            "-C", "*", os.path.join(self.src, "tree"), os.path.join(self.src, "motd"), self.dest
        )
        self.assertTrue(matched)
        self.assertEqual(self.read("tree", "big.bin"), self.big)
        self.assertEqual(self.read("tree", "sub", "small.txt"), b"small\n")
        self.assertEqual(self.read("motd"), b"Welcome\n")
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.dest, "motd")).st_mode), 0o600)
        self.assertTrue(os.path.isdir(os.path.join(self.dest, "tree", "void")))
        paths = [
            os.path.join(self.dest, "motd"),
            os.path.join(self.dest, "tree", "big.bin"),
            os.path.join(self.dest, "tree", "sub", "small.txt"),
            os.path.join(self.dest, "tree", "void"),
        ]
        self.assertEqual(ret["good"], dict.fromkeys(paths, True))
        self.assertEqual(ret["silent"], dict.fromkeys(paths, cli.NO_RESPONSE))
        self.assertEqual(ret["broken"], dict.fromkeys(paths, "Permission denied"))
        self.assertFalse(cli.succeeded(ret))
        # big.bin took three chunks, each after the first only to "good".
        bigJobs = [job for job in self.client.jobs if job[2][0].endswith("big.bin")]
        self.assertEqual(len(bigJobs), 3)
        self.assertEqual(bigJobs[0][0], ["good", "silent", "broken"])
        self.assertEqual([job[0] for job in bigJobs[1:]], [["good"], ["good"]])
        self.assertEqual([job[2][2] for job in bigJobs], [False, True, True])
        # The first job of all went to the target itself.
        self.assertEqual(self.client.jobs[0][0:1], ("*",))

    def test_chunkedOneFile(self) -> None:
        """
        One file to a DEST that is not a directory lands at DEST; without
        compression too.
        """
        target = os.path.join(self.dest, "renamed")
        os.makedirs(self.dest)
        ret, _ = self.copy("-C", "-n", "good", os.path.join(self.src, "motd"), target)
        self.assertEqual(ret, {"good": {target: True}})
        self.assertTrue(cli.succeeded(ret))
        self.assertEqual(self.read("renamed"), b"Welcome\n")
        self.assertIs(self.client.jobs[0][2][3], False)

    def test_noMatch(self) -> None:
        """
        A target matching no minion sends one job and says so.
        """
        ret, matched = self.copy("-C", "nobody", os.path.join(self.src, "tree"), self.dest)
        self.assertFalse(matched)
        self.assertEqual(len(self.client.jobs), 1)

    def test_relativeDest(self) -> None:
        """
        A relative DEST or a missing source is refused before any job.
        """
        for chunked in ((), ("-C",)):
            d = Deferred.fromCoroutine(
                (cli.copyChunked if chunked else cli.copyOneJob)(
                    self.client,
                    runSynchronously,
                    self.options(*chunked, "*", os.path.join(self.src, "motd"), "rel/dest"),
                    5.0,
                )
            )
            self.assertIn("absolute", str(self.failureResultOf(d, cli.UsageError).value))
        options = self.options("-C", "*", os.path.join(self.src, "nope"), self.dest)
        d = Deferred.fromCoroutine(cli.copyChunked(self.client, runSynchronously, options, 5.0))
        self.failureResultOf(d, cli.UsageError)
        self.assertEqual(self.client.jobs, [])

    def test_oneJob(self) -> None:
        """
        The default mode sends the files in one C{cp.recv} job; a directory
        source is refused with a word about C{--chunked}.
        """
        os.makedirs(self.dest)
        ret, matched = self.copy("good", os.path.join(self.src, "motd"), self.dest)
        self.assertTrue(matched)
        self.assertEqual(ret, {"good": {os.path.join(self.dest, "motd"): True}})
        self.assertEqual(self.read("motd"), b"Welcome\n")
        self.assertEqual(self.client.jobs[0][1], "cp.recv")
        options = self.options("*", os.path.join(self.src, "tree"), self.dest)
        d = Deferred.fromCoroutine(cli.copyOneJob(self.client, runSynchronously, options, 5.0))
        self.assertIn("--chunked", str(self.failureResultOf(d, cli.UsageError).value))

    def test_oneJobTooLarge(self) -> None:
        """
        Sources over L{cli.ONE_JOB_MAX} ask for C{-C}.
        """
        self.patch(cli, "ONE_JOB_MAX", 1000)
        options = self.options("*", os.path.join(self.src, "tree", "big.bin"), self.dest)
        d = Deferred.fromCoroutine(cli.copyOneJob(self.client, runSynchronously, options, 5.0))
        self.assertIn("-C", str(self.failureResultOf(d, cli.UsageError).value))
        self.assertEqual(self.client.jobs, [])

    def test_frameLimits(self) -> None:
        """
        Chunks and one-job copies stay well under the master's frame
        limit: 1 MiB chunks and 16 MiB jobs with the default 100 MiB
        frames, smaller with small frames, never under 4 KiB chunks.
        """
        self.assertEqual(cli.frameLimits(104857600), (cli.CHUNK_SIZE, cli.ONE_JOB_MAX))
        chunk, oneJob = cli.frameLimits(65536)
        self.assertEqual(oneJob, 32768)
        self.assertLess(chunk * 4 // 3, 32768)
        self.assertEqual(cli.frameLimits(1000)[0], 4096)

    def test_chunkSizeOption(self) -> None:
        """
        The chunk size set from the master's limits is the one used.
        """
        options = self.options("-C", "good", os.path.join(self.src, "motd"), self.dest + "/")
        options.chunk_size = 4
        d = Deferred.fromCoroutine(cli.copyChunked(self.client, runSynchronously, options, 5.0))
        ret, _ = self.successResultOf(d)
        self.assertEqual(len(self.client.jobs), len(b"Welcome\n") // 4)
        self.assertEqual(self.read("motd"), b"Welcome\n")

    def test_succeeded(self) -> None:
        """
        Success is every minion taking every file.
        """
        self.assertTrue(cli.succeeded({"a": {"/x": True, "/y": True}}))
        self.assertFalse(cli.succeeded({"a": {"/x": True}, "b": {"/x": "error"}}))
        self.assertFalse(cli.succeeded({"a": "Destination unavailable"}))
        self.assertFalse(cli.succeeded({"a": {}}))
