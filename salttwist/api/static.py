# -*- test-case-name: tests.test_api_static -*-
"""
The dashboard's files (C{salttwist/api/ui/}) served at C{/ui/}: read once
when the API starts and served from memory, only the files of that folder
(no directory listing, no path outside it), with the API's security
headers and a strict Content Security Policy: scripts, styles and
connections from the API's own origin only, no inline script or style, no
frames.

C{/ui} redirects to C{/ui/}, which is C{index.html}. Each file is also kept
gzipped, for the clients that accept it.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from typing import Any

from twisted.web.resource import Resource

from salttwist.api.resource import methodNotAllowed

__all__ = ["CSP", "UI_DIR", "StaticFiles", "mountLive"]

#: The dashboard's folder.
UI_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ui")
#: The dashboard's Content Security Policy.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_TYPES = {
    ".html": b"text/html; charset=utf-8",
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".svg": b"image/svg+xml",
    ".json": b"application/json",
}


def _acceptsGzip(header: bytes | None) -> bool:
    """
    Does an C{Accept-Encoding} header take gzip (not refused with C{q=0})?
    """
    for item in (header or b"").split(b","):
        name, _, params = item.strip().partition(b";")
        if name.strip().lower() in (b"gzip", b"*"):
            return params.replace(b" ", b"").lower() not in (b"q=0", b"q=0.0", b"q=0.00")
    return False


def _load(directory: str) -> dict[str, tuple[bytes, bytes, bytes, bytes]]:
    """
    @return: C{{relative path: (body, gzipped body, content type, etag)}}
        for the files of C{directory} (and its subfolders) whose type is
        served.
    """
    files: dict[str, tuple[bytes, bytes, bytes, bytes]] = {}
    for folder, _, names in os.walk(directory):
        for name in names:
            kind = _TYPES.get(os.path.splitext(name)[1])
            if kind is None:
                continue
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                body = f.read()
            relative = os.path.relpath(path, directory).replace(os.sep, "/")
            etag = b'"' + hashlib.sha256(body).hexdigest()[:32].encode() + b'"'
            # mtime=0: the same bytes at every start.
            files[relative] = (body, gzip.compress(body, 9, mtime=0), kind, etag)
    return files


class StaticFiles(Resource):
    """
    Serves the files of a folder from memory (see the module's docstring).
    """

    isLeaf = True

    def __init__(self, directory: str = UI_DIR, tls: bool = True) -> None:
        """
        @param tls: whether the API serves HTTPS (then
            C{Strict-Transport-Security} is sent).
        """
        super().__init__()
        self.files = _load(directory)
        self._tls = tls

    def _headers(self, request: Any) -> None:
        request.setHeader(b"Content-Security-Policy", CSP.encode())
        request.setHeader(b"X-Content-Type-Options", b"nosniff")
        request.setHeader(b"X-Frame-Options", b"DENY")
        request.setHeader(b"Referrer-Policy", b"no-referrer")
        request.setHeader(b"Cross-Origin-Opener-Policy", b"same-origin")
        if self._tls:
            request.setHeader(b"Strict-Transport-Security", b"max-age=31536000")

    def render(self, request: Any) -> bytes:
        if request.method not in (b"GET", b"HEAD"):
            return methodNotAllowed(request, "GET, HEAD", self._tls)
        return super().render(request)

    def render_GET(self, request: Any) -> bytes:
        self._headers(request)
        segments = [s.decode("utf-8", "replace") for s in request.postpath]
        if not segments:
            # /ui: relative links need the slash.
            request.setResponseCode(301)
            request.setHeader(b"Location", request.path + b"/")
            return b""
        relative = "/".join(segments) or "index.html"
        entry = self.files.get(relative)
        if entry is None:
            request.setResponseCode(404)
            request.setHeader(b"Content-Type", b"text/plain; charset=utf-8")
            return b"Not found\n"
        body, zipped, kind, etag = entry
        request.setHeader(b"Content-Type", kind)
        request.setHeader(b"Cache-Control", b"no-cache")
        request.setHeader(b"ETag", etag)
        request.setHeader(b"Vary", b"Accept-Encoding")
        if request.getHeader(b"If-None-Match") == etag:
            request.setResponseCode(304)
            return b""
        if _acceptsGzip(request.getHeader(b"Accept-Encoding")):
            request.setHeader(b"Content-Encoding", b"gzip")
            return zipped
        return body

    render_HEAD = render_GET


def mountLive(root: Resource, context: Any) -> None:
    """
    Hang C{/events} (L{salttwist.api.events}), the webhooks at
    C{webhook_url} (L{salttwist.api.hooks}) and the dashboard at C{/ui} on
    the API's C{root}.

    @param context: the API's L{salttwist.api.context.ApiContext}.
    """
    from salttwist.api.events import eventsResource
    from salttwist.api.hooks import hookResource

    root.putChild(b"events", eventsResource(context))
    hookPath = context.options.webhookUrl.strip("/").encode("utf-8") or b"hook"
    root.putChild(hookPath, hookResource(context))
    root.putChild(b"ui", StaticFiles(tls=not context.options.disableSsl))
