# -*- test-case-name: tests.test_api_openapi -*-
"""
C{GET /openapi.json}: the API's OpenAPI 3.1 document, C{openapi.json}
beside this module (package data of the wheel; C{docs/openapi.json} is
the same file, which C{tests.test_api_openapi} checks). It describes every
path L{salttwist.api.app.mountResources} hangs, with its methods, bodies,
answers and errors; C{tests.integration.test_api_schema} runs the API
against it with schemathesis.

Read once when the API starts and served from memory, without a token (it
holds nothing about this master), with the API's security headers.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from twisted.web.resource import Resource

from salttwist.api.resource import methodNotAllowed, securityHeaders

__all__ = ["DOCUMENT_PATH", "OpenApiDocument"]

#: The document, beside this module.
DOCUMENT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openapi.json")


class OpenApiDocument(Resource):
    """
    Serves the OpenAPI document (see the module's docstring).
    """

    isLeaf = True

    def __init__(self, path: str = DOCUMENT_PATH, tls: bool = True) -> None:
        """
        @param tls: whether the API serves HTTPS (then
            C{Strict-Transport-Security} is sent).
        """
        super().__init__()
        with open(path, "rb") as f:
            self.body = f.read()
        self.etag = b'"' + hashlib.sha256(self.body).hexdigest()[:32].encode("ascii") + b'"'
        self._tls = tls

    def render(self, request: Any) -> bytes:
        if request.method not in (b"GET", b"HEAD"):
            return methodNotAllowed(request, "GET, HEAD", self._tls)
        return super().render(request)

    def render_GET(self, request: Any) -> bytes:
        securityHeaders(request, self._tls)
        request.setHeader(b"Content-Type", b"application/json")
        request.setHeader(b"Cache-Control", b"no-cache")
        request.setHeader(b"ETag", self.etag)
        if request.getHeader(b"If-None-Match") == self.etag:
            request.setResponseCode(304)
            return b""
        return self.body

    render_HEAD = render_GET
