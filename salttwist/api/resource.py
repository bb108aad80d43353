# -*- test-case-name: tests.test_api_resource -*-
"""
The base of every API resource: L{ApiResource}.

A subclass sets C{name} (its first path segment, for stats), says whether
it needs a token (C{requiresToken}) and defines C{async} methods named
after the HTTP methods it answers, taking an L{ApiCall} and returning the
answer's data (a dict, written as JSON or YAML as the client accepts), an
L{Answer} (another status or headers) or a L{RawAnswer} (bytes of their
own type)::

    class Widgets(ApiResource):
        name = "widgets"

        async def GET(self, call: ApiCall) -> dict[str, Any]:
            return {"return": [call.path]}

C{HEAD} is answered wherever C{GET} is: the same status and headers
(C{Content-Length} included), no body.

It is a leaf: the path segments below it are C{call.path} (C{/widgets/a/b}
gives C{["a", "b"]}; a trailing slash adds nothing). Errors are raised as
L{salttwist.api.errors.ApiError}s; anything else is a 500 without details
(with a traceback when C{debug} is on). Every answer carries the security
headers, and CORS ones when C{cors_origin} allows the request's origin.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, ClassVar

from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request

from salttwist.api.context import ApiContext
from salttwist.api.errors import ApiError, MethodNotAllowed, Unauthorized
from salttwist.api.formats import JSON, chooseFormat, dump, parseBody
from salttwist.eauth.authenticator import Session

__all__ = [
    "Answer",
    "ApiCall",
    "ApiResource",
    "RawAnswer",
    "TOKEN_HEADER",
    "corsHeaders",
    "corsPreflight",
    "methodNotAllowed",
    "withHead",
]

_log = Logger()

#: The header that carries a token.
TOKEN_HEADER = b"X-Auth-Token"
#: The methods a CORS preflight may ask for, and the headers.
_CORS_METHODS = "GET, POST"
_CORS_HEADERS = "Content-Type, X-Auth-Token, X-Requested-With"


@dataclass
class Answer:
    """
    Data to write with a status and headers of its own.
    """

    data: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RawAnswer:
    """
    Bytes written as they are, with their C{Content-Type}.
    """

    body: bytes
    contentType: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ApiCall:
    """
    One request, as a handler sees it.

    @ivar session: the token's session (L{None} if the resource needs none
        and none was sent).
    @ivar body: the parsed body (L{None} when empty).
    @ivar path: the path segments below the resource, decoded.
    @ivar source: the client's address.
    """

    request: Request
    context: ApiContext
    session: Session | None
    body: Any
    path: list[str]
    source: str

    def arg(self, name: str) -> str | None:
        """
        @return: the query argument C{name} (its first value), or L{None}.
        """
        values = self.request.args.get(name.encode("utf-8"))
        if not values:
            return None
        return values[0].decode("utf-8", "replace")


def securityHeaders(request: Request, tls: bool) -> None:
    """
    Set the headers every answer carries.
    """
    request.setHeader(b"X-Content-Type-Options", b"nosniff")
    request.setHeader(b"X-Frame-Options", b"DENY")
    request.setHeader(b"Content-Security-Policy", b"default-src 'self'; frame-ancestors 'none'")
    request.setHeader(b"Referrer-Policy", b"no-referrer")
    if tls:
        request.setHeader(b"Strict-Transport-Security", b"max-age=31536000")


def methodNotAllowed(request: Request, allowed: str, tls: bool) -> bytes:
    """
    The answer of a plain twisted.web resource of the API (the dashboard,
    the event stream, the OpenAPI document) to a method it does not take:
    405 with C{Allow} and the API's JSON error, as an L{ApiResource}
    answers (twisted.web answers 501 and an HTML page to any method but
    GET, HEAD and POST).

    @param allowed: the methods it takes, as C{Allow} lists them.
    @return: the body.
    """
    securityHeaders(request, tls)
    method = request.method.decode("ascii", "replace")
    error = MethodNotAllowed(f"{method} is not allowed here; use {allowed}")
    request.setResponseCode(int(error.status))
    request.setHeader(b"Allow", allowed.encode("ascii"))
    request.setHeader(b"Content-Type", JSON.encode("ascii"))
    return dump(error.body(), JSON)


def corsHeaders(request: Request, allowed: str | list[str] | None) -> bool:
    """
    Set the CORS headers of an answer when C{allowed} (the
    C{cors_origin} option: an origin, C{*} or a list) lets the request's
    C{Origin} in.

    @return: whether it does (a preflight may then be answered).
    """
    origin = _header(request, b"Origin")
    if not allowed or not origin:
        return False
    if allowed == "*":
        request.setHeader(b"Access-Control-Allow-Origin", b"*")
        return True
    origins = [allowed] if isinstance(allowed, str) else allowed
    if origin not in origins:
        return False
    request.setHeader(b"Access-Control-Allow-Origin", origin.encode("utf-8"))
    request.setHeader(b"Vary", b"Origin")
    request.setHeader(b"Access-Control-Expose-Headers", b"X-Auth-Token")
    return True


def corsPreflight(request: Request, methods: str) -> bytes:
    """
    Answer a CORS preflight (C{OPTIONS}) that L{corsHeaders} allowed.

    @param methods: the methods the resource takes.
    @return: the (empty) body.
    """
    request.setHeader(b"Access-Control-Allow-Methods", methods.encode("ascii"))
    request.setHeader(b"Access-Control-Allow-Headers", _CORS_HEADERS.encode())
    request.setHeader(b"Access-Control-Max-Age", b"1400")
    request.setHeader(b"Content-Length", b"0")
    return b""


def withHead(methods: tuple[str, ...]) -> tuple[str, ...]:
    """
    @return: C{methods}, with C{HEAD} after C{GET} when it holds C{GET}.
    """
    if "GET" not in methods or "HEAD" in methods:
        return methods
    at = methods.index("GET") + 1
    return (*methods[:at], "HEAD", *methods[at:])


def sourceOf(request: Request) -> str:
    """
    @return: the client's address (its host), for the login limit and logs.
    """
    address = request.getClientAddress()
    return str(getattr(address, "host", address))


class ApiResource(Resource):
    """
    A resource of the API; see the module's docstring.

    @cvar name: the resource's first path segment ("" for the root).
    @cvar requiresToken: every method needs a valid C{X-Auth-Token}.
    @cvar readsBody: the methods that read a body.
    """

    isLeaf = True
    name: ClassVar[str] = ""
    requiresToken: ClassVar[bool] = True
    readsBody: ClassVar[tuple[bytes, ...]] = (b"POST",)

    def __init__(self, context: ApiContext) -> None:
        super().__init__()
        self.context = context

    # -- twisted.web ---------------------------------------------------------

    def render(self, request: Request) -> Any:  # type: ignore[override]
        options = self.context.options
        securityHeaders(request, not options.disableSsl)
        request.setHeader(b"Cache-Control", b"no-store")
        corsAllowed = self._cors(request)
        if request.method == b"OPTIONS" and corsAllowed:
            return corsPreflight(request, _CORS_METHODS)
        start = self.context.clock.seconds()
        d = Deferred.fromCoroutine(self._answer(request))
        finished = request.notifyFinish()
        # A client that goes away cancels the work done for it.
        finished.addErrback(lambda _: d.cancel())
        d.addErrback(self._unexpected, request)
        d.addCallback(self._write, request, start)
        d.addErrback(lambda f: f.trap(CancelledError))
        d.addErrback(lambda f: _log.failure("writing an answer failed", f))
        return NOT_DONE_YET

    def _cors(self, request: Request) -> bool:
        return corsHeaders(request, self.context.options.corsOrigin)

    async def _answer(self, request: Request) -> tuple[str, Any]:
        try:
            media = chooseFormat(_header(request, b"Accept"))
        except ApiError as e:
            return JSON, e
        try:
            method = request.method.decode("ascii", "replace")
            methods = self.methodsAt([segment for segment in request.postpath if segment])
            # HEAD is GET without the body (twisted.web writes none).
            name = "GET" if method == "HEAD" else method
            handler = getattr(self, name, None) if name in methods else None
            if handler is None:
                allowed = ", ".join(withHead(methods))
                raise MethodNotAllowed(
                    f"{method} is not allowed here; use {allowed}", {"Allow": allowed}
                )
            call = await self.makeCall(request)
            return media, await handler(call)
        except ApiError as e:
            return media, e

    def methodsAt(self, path: list[bytes]) -> tuple[str, ...]:
        """
        The methods this resource answers at C{path} (the segments below
        it); others get a 405 (C{HEAD} goes with C{GET}, see L{withHead}).
        By default, every method it defines, wherever.
        """
        return tuple(m for m in ("GET", "POST") if hasattr(self, m))

    async def makeCall(self, request: Request) -> ApiCall:
        """
        Read the request: its token's session and its body.

        @raise ApiError: 401 without a valid token where one is needed,
            400 or 406 for a body that cannot be read.
        """
        token = _header(request, TOKEN_HEADER)
        session = None
        if self.requiresToken or token:
            session = await self.context.session(token)
        body = None
        if request.method in self.readsBody and request.content is not None:
            request.content.seek(0)
            body = parseBody(_header(request, b"Content-Type"), request.content.read())
        path = [segment.decode("utf-8", "replace") for segment in request.postpath if segment]
        return ApiCall(request, self.context, session, body, path, sourceOf(request))

    def _unexpected(self, failure: Failure, request: Request) -> tuple[str, Any]:
        failure.trap(Exception)
        if failure.check(CancelledError):
            return failure  # type: ignore[return-value]
        _log.failure("{method} {path} failed", failure, method=request.method, path=request.path)
        message = "An unexpected error occurred"
        if self.context.options.debug:
            message = "".join(traceback.format_exception(failure.value))
        error = ApiError(message)
        return JSON, error

    def _write(self, result: tuple[str, Any], request: Request, start: float) -> None:
        media, answer = result
        if isinstance(answer, ApiError):
            status, headers, body = int(answer.status), answer.headers, dump(answer.body(), media)
        elif isinstance(answer, RawAnswer):
            status, headers, body = answer.status, answer.headers, answer.body
            media = answer.contentType
        elif isinstance(answer, Answer):
            status, headers, body = answer.status, answer.headers, dump(answer.data, media)
        else:
            status, headers, body = 200, {}, dump(answer, media)
        if self.context.options.collectStats:
            elapsed = self.context.clock.seconds() - start
            self.context.stats.record(self.name or "/", status, elapsed)
        if request.finished or getattr(request, "_disconnected", False):
            return
        request.setResponseCode(status)
        for name, value in headers.items():
            request.setHeader(name.encode("latin-1"), value.encode("latin-1"))
        request.setHeader(b"Content-Type", media.encode("ascii"))
        request.setHeader(b"Content-Length", str(len(body)).encode("ascii"))
        request.write(body)
        request.finish()


def _header(request: Request, name: bytes) -> str | None:
    value = request.getHeader(name)
    if value is None:
        return None
    return value.decode("latin-1") if isinstance(value, bytes) else value


def requireSession(call: ApiCall) -> Session:
    """
    @return: the call's session.
    @raise Unauthorized: it has none.
    """
    if call.session is None:
        raise Unauthorized()
    return call.session
