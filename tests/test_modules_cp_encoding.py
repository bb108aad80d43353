# -*- test-case-name: tests.test_modules_cp_encoding -*-
"""
Tests for L{salttwist.modules.cp}'s C{http://} downloads of a server that
sends C{Content-Encoding: gzip}: the bytes are stored as served (Salt's
C{fileclient.get_url} asks tornado for C{decompress_response=False}), so a
C{.tar.gz} keeps its C{source_hash}.

A real twisted.web server on 127.0.0.1 (an OS-chosen port) and the real
reactor with its threads.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from salttwist.modules import LoaderContext, loadFunctions


def _tarGz() -> bytes:
    """
    @return: a small C{.tar.gz} archive's bytes.
    """
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = b"hello\n" * 1000
        info = tarfile.TarInfo("app/hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


class _GzipEncoded(Resource):
    """
    Serve C{body} with C{Content-Encoding: gzip} whatever the request asks
    (as servers configured to label C{.gz} files so do), recording each
    request's C{Accept-Encoding}.
    """

    isLeaf = True

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body
        self.acceptEncodings: list[list[bytes] | None] = []

    def render_GET(self, request: Any) -> bytes:
        if request.path == b"/moved":
            request.redirect(b"/dl/app.tar.gz")
            return b""
        self.acceptEncodings.append(request.requestHeaders.getRawHeaders(b"accept-encoding"))
        request.setHeader(b"content-type", b"application/x-gzip")
        request.setHeader(b"content-encoding", b"gzip")
        return self.body


class ContentEncodingTests(TestCase):
    """
    C{cp.get_url} and C{cp.cache_file} store an http body as served.
    """

    def setUp(self) -> None:
        self.body = _tarGz()
        self.digest = hashlib.sha256(self.body).hexdigest()
        self.resource = _GzipEncoded(self.body)
        self.cachedir = os.path.abspath(self.mktemp())
        self.dest = os.path.abspath(self.mktemp())
        os.makedirs(self.dest)
        self.context = LoaderContext({"cachedir": self.cachedir, "id": "m1"}, {"id": "m1"}, reactor)
        port = reactor.listenTCP(0, Site(self.resource), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.url = f"http://127.0.0.1:{port.getHost().port}/dl/app.tar.gz"

    def cp(self, name: str, *args: Any, **kwargs: Any) -> Deferred[Any]:
        function = loadFunctions()[f"cp.{name}"]
        return Deferred.fromCoroutine(function(self.context, *args, **kwargs))

    def readBytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    @inlineCallbacks
    def test_destKeepsServedBytes(self) -> Any:
        """
        The file written to C{dest} is the archive as served, not its
        gunzipped tar; no C{gzip} encoding is asked for.
        """
        target = os.path.join(self.dest, "app.tar.gz")
        result = yield self.cp("get_url", self.url, target)
        self.assertEqual(result, target)
        self.assertEqual(self.readBytes(target), self.body)
        with tarfile.open(target, "r:gz") as tar:
            self.assertEqual(tar.getnames(), ["app/hello.txt"])
        self.assertEqual(self.resource.acceptEncodings, [None])

    @inlineCallbacks
    def test_cachedSourceHash(self) -> Any:
        """
        The cached copy has the served bytes' digest, so a second
        C{cp.cache_file} with that C{source_hash} does not download again.
        """
        cached = yield self.cp("cache_file", self.url, source_hash=f"sha256={self.digest}")
        self.assertEqual(hashlib.sha256(self.readBytes(cached)).hexdigest(), self.digest)
        again = yield self.cp("cache_file", self.url, source_hash=f"sha256={self.digest}")
        self.assertEqual(again, cached)
        self.assertEqual(len(self.resource.acceptEncodings), 1)

    @inlineCallbacks
    def test_redirect(self) -> Any:
        """
        A redirect is followed (as treq's C{get} did) to the file, stored
        as served.
        """
        target = os.path.join(self.dest, "moved.tar.gz")
        moved = self.url.replace("/dl/app.tar.gz", "/moved")
        result = yield self.cp("get_url", moved, target)
        self.assertEqual(self.readBytes(result), self.body)
