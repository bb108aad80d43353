# -*- test-case-name: tests.test_api_static -*-
"""
Tests for L{salttwist.api.static}: the dashboard's files served from
memory with a strict Content Security Policy, over a L{StringTransport}.
"""

from __future__ import annotations

import gzip
import os
import re

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from salttwist.api.static import CSP, UI_DIR, StaticFiles


class StaticFilesTests(SynchronousTestCase):
    """
    L{StaticFiles} serves the files of its folder and nothing else.
    """

    def setUp(self) -> None:
        root = Resource()
        root.putChild(b"ui", StaticFiles())
        self.site = Site(root, reactor=Clock())

    def get(self, path: str, headers: str = "") -> tuple[int, str, bytes]:
        transport = StringTransport()
        proto = self.site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
        proto.makeConnection(transport)
        proto.dataReceived(f"GET {path} HTTP/1.1\r\nHost: api\r\n{headers}\r\n".encode())
        head, _, body = transport.value().partition(b"\r\n\r\n")
        text = head.decode("latin-1")
        return int(text.split(" ", 2)[1]), text, body

    def test_index(self) -> None:
        """
        C{/ui/} is C{index.html}, with the CSP and the security headers.
        """
        status, head, body = self.get("/ui/")
        self.assertEqual(status, 200)
        self.assertIn("Content-Type: text/html; charset=utf-8", head)
        self.assertIn(f"Content-Security-Policy: {CSP}", head)
        self.assertIn("X-Frame-Options: DENY", head)
        self.assertIn("X-Content-Type-Options: nosniff", head)
        self.assertIn("Strict-Transport-Security", head)
        self.assertIn(b'<script type="module" src="js/app.js">', body)

    def test_redirect(self) -> None:
        """
        C{/ui} redirects to C{/ui/} (the page's links are relative).
        """
        status, head, _ = self.get("/ui")
        self.assertEqual(status, 301)
        self.assertIn("Location: /ui/", head)

    def test_module(self) -> None:
        """
        A script is served as JavaScript.
        """
        status, head, body = self.get("/ui/js/app.js")
        self.assertEqual(status, 200)
        self.assertIn("Content-Type: text/javascript; charset=utf-8", head)
        self.assertIn(b"import", body)

    def test_gzip(self) -> None:
        """
        A client that accepts gzip gets the file gzipped; one that refuses
        it (C{q=0}) or says nothing gets it as it is.
        """
        _, _, plain = self.get("/ui/js/app.js")
        status, head, body = self.get("/ui/js/app.js", "Accept-Encoding: gzip, deflate, br\r\n")
        self.assertEqual(status, 200)
        self.assertIn("Content-Encoding: gzip", head)
        self.assertIn("Vary: Accept-Encoding", head)
        self.assertEqual(gzip.decompress(body), plain)
        self.assertLess(len(body), len(plain))
        _, head, body = self.get("/ui/js/app.js", "Accept-Encoding: gzip;q=0, br\r\n")
        self.assertNotIn("Content-Encoding", head)
        self.assertEqual(body, plain)

    def test_missing(self) -> None:
        """
        A name that is not one of the folder's files is a 404, whatever
        its dots.
        """
        for path in ("/ui/nope.js", "/ui/../static.py", "/ui/js/../../static.py", "/ui/js/"):
            self.assertEqual(self.get(path)[0], 404, path)

    def test_notModified(self) -> None:
        """
        A request with the file's C{ETag} gets 304.
        """
        _, head, _ = self.get("/ui/style.css")
        etag = re.search(r"ETag: (\S+)", head).group(1)  # type: ignore[union-attr]
        status, _, body = self.get("/ui/style.css", f"If-None-Match: {etag}\r\n")
        self.assertEqual(status, 304)
        self.assertEqual(body, b"")

    def test_noInlineCode(self) -> None:
        """
        The page holds no inline script, handler attribute or style
        attribute (the CSP would block them).
        """
        with open(os.path.join(UI_DIR, "index.html")) as f:
            html = f.read()
        self.assertEqual(re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html), [])
        self.assertEqual(re.findall(r"\son[a-z]+\s*=", html), [])
        self.assertEqual(re.findall(r"\sstyle\s*=", html), [])
        self.assertNotIn("<style", html)

    def test_noMarkupFromData(self) -> None:
        """
        The scripts never parse text as HTML (every value from the API is
        set as text).
        """
        jsDir = os.path.join(UI_DIR, "js")
        for name in os.listdir(jsDir):
            with open(os.path.join(jsDir, name)) as f:
                code = f.read()
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
                self.assertNotIn(sink, code, f"{name} uses {sink}")


class MountedTests(SynchronousTestCase):
    """
    The API's tree (L{salttwist.api.app.makeRoot}) has C{/ui}, C{/events}
    and C{/hook} (L{salttwist.api.static.mountLive}).
    """

    def setUp(self) -> None:
        from tests._apifakes import Api

        self.api = Api(self.mktemp())

    def test_ui(self) -> None:
        """
        C{/ui/} is the dashboard, with its CSP.
        """
        status, headers, body = self.api.request("GET", "/ui/")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-security-policy"], [CSP])
        self.assertIn(b"<title>salttwist dashboard</title>", body)

    def test_events(self) -> None:
        """
        C{/events} wants a token, in the header.
        """
        self.assertEqual(self.api.json("GET", "/events")[0], 401)
        token = self.api.login("pinger")
        self.assertEqual(self.api.json("GET", f"/events?token={token}")[0], 400)

    def test_hook(self) -> None:
        """
        C{/hook} wants a token (C{webhook_disable_auth} is off).
        """
        status, data = self.api.json("POST", "/hook/x", {})
        self.assertEqual(status, 401)
        self.assertEqual(data["status"], 401)
