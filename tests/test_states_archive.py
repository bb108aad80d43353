# -*- test-case-name: tests.test_states_archive -*-
"""
Tests for L{salttwist.states.archive} (Salt's C{archive.extracted}), with
real archives built in the tests (malicious ones included), served from
a local path, C{file://} and a temporary C{salt://} file server, run as a
state run runs them.
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import tarfile
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase
from twisted.web.server import Site
from twisted.web.static import File

from salttwist.blocking import runSynchronously
from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules.extmods import SaltFunctions
from salttwist.states import StateContext, loadStates
from tests._statectx import makeLoaderContext, runState
from tests.test_modules_archive import makeTar, makeZip


class ExtractedTests(TestCase):
    """
    C{archive.extracted} over a temporary file server and cache.
    """

    def setUp(self) -> None:
        top = os.path.abspath(self.mktemp())
        self.roots = os.path.join(top, "srv")
        self.cachedir = os.path.join(top, "cache")
        self.work = os.path.join(top, "work")
        for directory in (self.roots, self.cachedir, self.work):
            os.makedirs(directory)
        self.dest = os.path.join(top, "dest")
        self.tar = makeTar(
            os.path.join(self.work, "app-1.0.tar.gz"),
            [
                ("app-1.0", None, tarfile.DIRTYPE),
                ("app-1.0/README", b"hello\n"),
                ("app-1.0/bin", None, tarfile.DIRTYPE),
                ("app-1.0/bin/run", b"#!/bin/sh\n", tarfile.REGTYPE, "", 0o755),
            ],
        )

    def context(self, test: bool = False) -> StateContext:
        opts = {
            "file_client": "local",
            "file_roots": {"base": [self.roots]},
            "cachedir": self.cachedir,
            "fileserver_backend": ["roots"],
        }
        loader = makeLoaderContext(opts)
        loader.fileClient = LocalFileClient(
            FileServer.fromConfig(loader.opts), self.cachedir, runSynchronously
        )
        return StateContext(
            salt=SaltFunctions(loader),
            opts=loader.opts,
            grains=loader.grains,
            test=test,
            states=loadStates(),
            reactor=loader.reactor,
        )

    def extracted(self, test: bool = False, **kwargs: Any) -> Any:
        kwargs.setdefault("name", self.dest)
        kwargs.setdefault("source", self.tar)
        return runState("archive.extracted", ctx=self.context(test), **kwargs)

    @inlineCallbacks
    def test_extractLocal(self) -> Any:
        """
        A local tar is unpacked: Salt's changes and comment; a second run
        finds everything present.
        """
        ret = yield self.extracted()
        dest = self.dest + os.sep
        self.assertEqual(
            ret,
            {
                "name": self.dest,
                "result": True,
                "changes": {
                    "directories_created": [dest],
                    "extracted_files": [
                        "app-1.0",
                        "app-1.0/README",
                        "app-1.0/bin",
                        "app-1.0/bin/run",
                    ],
                },
                "comment": f"{self.tar} extracted to {dest}, "
                "due to absence of one or more files/dirs",
            },
        )
        with open(os.path.join(self.dest, "app-1.0", "README")) as f:
            self.assertEqual(f.read(), "hello\n")
        ret = yield self.extracted()
        self.assertEqual(
            (ret["result"], ret["changes"], ret["comment"]),
            (True, {}, "All files in archive are already present"),
        )

    @inlineCallbacks
    def test_testMode(self) -> Any:
        """
        With test=True nothing is written: result None, Salt's comment.
        """
        ret = yield self.extracted(test=True)
        self.assertIsNone(ret["result"])
        self.assertEqual(
            ret["comment"],
            f"Archive {self.tar} would be extracted to {self.dest}{os.sep}, "
            "due to absence of one or more files/dirs",
        )
        self.assertFalse(os.path.exists(self.dest))

    @inlineCallbacks
    def test_missingFileReextracts(self) -> Any:
        """
        A file of the archive removed is brought back.
        """
        yield self.extracted()
        os.unlink(os.path.join(self.dest, "app-1.0", "README"))
        ret = yield self.extracted()
        self.assertEqual(ret["result"], True)
        self.assertTrue(ret["comment"].endswith("due to absence of one or more files/dirs"))
        self.assertTrue(os.path.isfile(os.path.join(self.dest, "app-1.0", "README")))

    @inlineCallbacks
    def test_saltSourceWithHash(self) -> Any:
        """
        A C{salt://} zip is cached and checked against C{source_hash}; a
        wrong hash fails naming both digests.
        """
        zipPath = makeZip(os.path.join(self.roots, "pkg.zip"), [("pkg/a.txt", b"a")])
        with open(zipPath, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        ret = yield self.extracted(source="salt://pkg.zip", source_hash=f"sha256={digest}")
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(ret["changes"]["extracted_files"], ["pkg/a.txt"])
        self.assertEqual(
            ret["comment"],
            f"salt://pkg.zip extracted to {self.dest}{os.sep}, "
            "due to absence of one or more files/dirs",
        )
        ret = yield self.extracted(
            name=self.dest + "2", source="salt://pkg.zip", source_hash="0" * 64
        )
        self.assertEqual(ret["result"], False)
        self.assertIn(f"does not match actual checksum ({digest})", ret["comment"])
        self.assertFalse(os.path.exists(self.dest + "2"))

    @inlineCallbacks
    def test_localHashMismatch(self) -> Any:
        """
        A local source whose hash differs is not extracted.
        """
        ret = yield self.extracted(source="file://" + self.tar, source_hash="md5=" + "0" * 32)
        self.assertEqual(ret["result"], False)
        self.assertIn("does not match the desired source_hash", ret["comment"])

    @inlineCallbacks
    def test_enforceToplevel(self) -> Any:
        """
        An archive without one top-level directory is refused unless
        C{enforce_toplevel=False}.
        """
        bomb = makeTar(os.path.join(self.work, "bomb.tar"), [("a", b"a"), ("b", b"b")])
        ret = yield self.extracted(source=bomb)
        self.assertEqual(ret["result"], False)
        self.assertTrue(
            ret["comment"].startswith("Archive does not have a single top-level directory.")
        )
        self.assertIn("'tar-bomb'", ret["comment"])
        ret = yield self.extracted(source=bomb, enforce_toplevel=False)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(sorted(os.listdir(self.dest)), ["a", "b"])

    @inlineCallbacks
    def test_maliciousRefused(self) -> Any:
        """
        An archive with a member escaping the destination is refused
        whole, naming the member; nothing is written.
        """
        evil = makeTar(
            os.path.join(self.work, "evil.tar.gz"),
            [("top", None, tarfile.DIRTYPE), ("top/x", b"x"), ("top/../../evil", b"x")],
        )
        ret = yield self.extracted(source=evil, enforce_toplevel=False)
        self.assertEqual(ret["result"], False)
        self.assertIn("Refusing to extract", ret["comment"])
        self.assertIn("- top/../../evil: path leads outside the destination", ret["comment"])
        self.assertFalse(os.path.exists(self.dest))
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(self.dest), "evil")))
        links = makeZip(os.path.join(self.work, "links.zip"), [("top/a", b"a")], {"top/l": "/etc"})
        ret = yield self.extracted(source=links)
        self.assertEqual(ret["result"], False)
        self.assertIn("- top/l: symbolic link to the absolute path /etc", ret["comment"])

    @inlineCallbacks
    def test_ifMissing(self) -> Any:
        """
        An existing C{if_missing} path means nothing to do.
        """
        ret = yield self.extracted(if_missing=self.work)
        self.assertEqual((ret["result"], ret["comment"]), (True, f"Path {self.work} exists"))
        self.assertFalse(os.path.exists(self.dest))

    @inlineCallbacks
    def test_stripComponents(self) -> Any:
        """
        tar C{options} C{--strip-components=1} drop the top directory.
        """
        ret = yield self.extracted(options="--strip-components=1", enforce_toplevel=False)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertTrue(os.path.isfile(os.path.join(self.dest, "README")))

    @inlineCallbacks
    def test_clean(self) -> Any:
        """
        C{clean=True} with C{overwrite} removes the archive's top-level
        paths (and files no longer in it) before unpacking.
        """
        yield self.extracted()
        stale = os.path.join(self.dest, "app-1.0", "stale")
        with open(stale, "w") as f:
            f.write("old")
        ret = yield self.extracted(clean=True, overwrite=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(ret["changes"]["removed"], [os.path.join(self.dest, "app-1.0")])
        self.assertFalse(os.path.exists(stale))

    @inlineCallbacks
    def test_wrongType(self) -> Any:
        """
        A path of the wrong type is refused without C{force}, replaced with
        it.
        """
        os.makedirs(os.path.join(self.dest, "app-1.0", "README"))
        ret = yield self.extracted()
        self.assertEqual(ret["result"], False)
        self.assertIn("exist, but are the incorrect type", ret["comment"])
        self.assertIn("- app-1.0/README", ret["comment"])
        ret = yield self.extracted(force=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertTrue(os.path.isfile(os.path.join(self.dest, "app-1.0", "README")))

    @inlineCallbacks
    def test_keepSource(self) -> Any:
        """
        C{keep_source=False} removes the cached copy of a remote source.
        """
        makeZip(os.path.join(self.roots, "k.zip"), [("k/a", b"a")])
        ret = yield self.extracted(source="salt://k.zip", keep_source=False, skip_verify=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        cached = []
        for _root, _dirs, files in os.walk(self.cachedir):
            cached += [f for f in files if f == "k.zip"]
        self.assertEqual(cached, [])

    @inlineCallbacks
    def test_trimOutput(self) -> Any:
        """
        C{trim_output} limits the names in the changes, as Salt says.
        """
        ret = yield self.extracted(trim_output=2)
        self.assertEqual(
            ret["changes"]["extracted_files"],
            ["app-1.0", "app-1.0/README", "List trimmed after 2 files."],
        )
        self.assertTrue(ret["comment"].endswith(". Output was trimmed to 2 number of lines"))

    @inlineCallbacks
    def test_userGroup(self) -> Any:
        """
        C{user}/C{group} own what was unpacked (the test's own ids, which
        any user may set); an unknown user fails.
        """
        me = pwd.getpwuid(os.getuid()).pw_name
        group = grp.getgrgid(os.getgid()).gr_name
        ret = yield self.extracted(user=me, group=group)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertEqual(os.stat(os.path.join(self.dest, "app-1.0")).st_uid, os.getuid())
        ret = yield self.extracted(user="no-such-user-xyz")
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, "User no-such-user-xyz does not exist")
        )

    @inlineCallbacks
    def test_badArguments(self) -> Any:
        """
        A relative name, a missing source, an unguessable format.
        """
        ret = yield self.extracted(name="relative")
        self.assertEqual(ret["comment"], "relative is not an absolute path")
        ret = yield self.extracted(source="/nonexistent/a.tar")
        self.assertEqual(ret["comment"], "Source file '/nonexistent/a.tar' does not exist")
        odd = os.path.join(self.work, "a.bin")
        with open(odd, "w") as f:
            f.write("x")
        ret = yield self.extracted(source=odd)
        self.assertIn("Could not guess archive_format", ret["comment"])
        self.assertEqual(ret["result"], False)

    def serveHttp(self) -> str:
        """
        Serve C{self.work} over HTTP on 127.0.0.1 for the test.

        @return: its base URL.
        """
        # Serve .tar.gz as the bytes they are, not as tars with a gzip
        # Content-Encoding (which the client would decode).
        self.patch(File, "contentEncodings", {})
        port = reactor.listenTCP(0, Site(File(self.work)), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        return f"http://127.0.0.1:{port.getHost().port}"

    @inlineCallbacks
    def test_httpSource(self) -> Any:
        """
        An http source is downloaded into the cache and checked against its
        C{source_hash}; without one (and no C{skip_verify}) it is refused.
        """
        base = self.serveHttp()
        with open(self.tar, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        url = f"{base}/app-1.0.tar.gz"
        ret = yield self.extracted(source=url)
        self.assertEqual(ret["result"], False)
        self.assertIn("please set source_hash or set skip_verify to True", ret["comment"])
        ret = yield self.extracted(source=url, source_hash=digest)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertTrue(os.path.isfile(os.path.join(self.dest, "app-1.0", "README")))
        ret = yield self.extracted(source=url, source_hash=digest, test=True)
        self.assertIsNone(ret["result"])
        self.assertIn("would be cached (if necessary) and checked", ret["comment"])

    @inlineCallbacks
    def test_sourceHashUpdate(self) -> Any:
        """
        With C{source_hash_update}, a new archive (a new hash) is extracted
        again though every file is present.
        """
        with open(self.tar, "rb") as f:
            first = hashlib.sha256(f.read()).hexdigest()
        ret = yield self.extracted(source_hash=first, source_hash_update=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        makeTar(
            self.tar,
            [
                ("app-1.0", None, tarfile.DIRTYPE),
                ("app-1.0/README", b"second\n"),
                ("app-1.0/bin", None, tarfile.DIRTYPE),
                ("app-1.0/bin/run", b"#!/bin/sh\n", tarfile.REGTYPE, "", 0o755),
            ],
        )
        with open(self.tar, "rb") as f:
            second = hashlib.sha256(f.read()).hexdigest()
        ret = yield self.extracted(source_hash=second)
        self.assertEqual(ret["comment"], "All files in archive are already present")
        ret = yield self.extracted(source_hash=second, source_hash_update=True)
        self.assertEqual(ret["result"], True, ret["comment"])
        self.assertTrue(ret["comment"].endswith(", due to source_hash update"), ret["comment"])
        with open(os.path.join(self.dest, "app-1.0", "README")) as f:
            self.assertEqual(f.read(), "second\n")
