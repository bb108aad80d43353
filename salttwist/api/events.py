# -*- test-case-name: tests.test_api_events -*-
"""
C{GET /events}: the master's event bus as Server-Sent Events, as Salt's
C{rest_cherrypy} streams it: first C{retry: 400}, then for each event::

    tag: salt/job/20261127010101123456/new
    data: {"tag": "salt/job/20261127010101123456/new", "data": {...}}

(a blank line ends each event), with a comment line (C{: heartbeat}) every
L{HEARTBEAT} seconds so that proxies keep an idle stream open.

Authentication: the token in the C{X-Auth-Token} header. Salt 3008 refuses
any query parameter on C{/events} (a token in a URL ends up in access logs
and C{Referer} headers), and has no option to accept one again; so does
this resource. The dashboard reads the stream with C{fetch}, which can send
the header.

What a token sees (L{EventFilter}): everything with the item C{'@events'}
in its permissions; otherwise only the events of the jobs it could have
run itself: C{salt/job/<jid>/new} when the job's function is allowed on
every targeted minion, C{salt/job/<jid>/ret/<id>} when the returned
function is allowed on that minion, the progress events
C{salt/job/<jid>/prog/<id>/...} of a job it saw start, and
C{salt/run/<jid>/...} / C{salt/wheel/<jid>/...} when the runner or wheel
function is allowed. Every other event (keys, authentication, presence,
webhooks, custom tags) needs C{'@events'}. The token is checked again
every L{RECHECK} seconds and the stream ends when it expires or is
revoked.

Bounds: one subscription to the master's bus is shared by every client
(L{EventHub}); at most C{maxClients} streams (503 beyond), and at most
C{maxPerToken} of them for one token (429 beyond: one user cannot take
them all); a client that
does not read (its transport paused us) has its events queued up to
C{queueLimit} bytes, then its connection is dropped: a slow client is
never buffered without bound.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IDelayedCall, IPushProducer, IReactorTime
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET
from zope.interface import implementer

from salttwist.eauth.engine import AclRefused, Permissions, SpecialRule
from salttwist.events import jsonPlain

__all__ = ["EventFilter", "EventHub", "EventsResource", "eventsResource", "formatEvent"]

_log = Logger()

#: Seconds between heartbeat comments on an idle stream.
HEARTBEAT = 15.0
#: Seconds between checks that a stream's token is still valid.
RECHECK = 30.0
#: Bytes of events queued for a client that does not read, before it is dropped.
QUEUE_LIMIT = 1 << 20
#: Event streams open at once.
MAX_CLIENTS = 100
#: Event streams open at once with one token.
MAX_PER_TOKEN = 10
#: Jobs whose start a stream remembers (for their progress events).
REMEMBERED_JOBS = 4096
#: Decisions a stream keeps (function, minions) before starting afresh.
DECISIONS = 8192
#: The special auth list item that shows the whole bus.
EVENTS_ITEM = "events"

_JOB_TAG = re.compile(r"\Asalt/job/(?P<jid>[^/]+)/(?P<kind>new|ret|prog)(?:/(?P<minion>[^/]+))?")
_RUN_TAG = re.compile(r"\Asalt/(?P<kind>run|wheel)/(?P<jid>[^/]+)/(?P<what>[^/]+)")


def formatEvent(tag: str, data: dict[str, Any]) -> bytes:
    """
    One event as C{rest_cherrypy} streams it: a C{tag:} line, a C{data:}
    line holding C{{"tag": ..., "data": ...}} as JSON, and a blank line.
    Line breaks in the tag are escaped (they would end the field).
    """
    safeTag = tag.replace("\r", "\\r").replace("\n", "\\n")
    body = json.dumps({"tag": tag, "data": jsonPlain(data)}, default=str)
    return f"tag: {safeTag}\ndata: {body}\n\n".encode()


class EventFilter:
    """
    Which events one token may see (see the module's docstring).
    """

    def __init__(
        self,
        perms: Permissions,
        remember: int = REMEMBERED_JOBS,
        decisions: dict[tuple[Any, ...], bool] | None = None,
    ) -> None:
        """
        @param remember: how many job starts to keep (for their returns
            and progress events).
        @param decisions: a cache of decisions to share with the other
            filters of the same permissions (L{DecisionCaches}).
        """
        self._perms = perms
        self.everything = any(
            isinstance(rule, SpecialRule) and rule.scope == EVENTS_ITEM and rule.functions is None
            for rule in perms.rules
        )
        # jid -> function of the last jobs whose start came by (shown or
        # not); runner jobs as "run/<jid>".
        self._jobs: OrderedDict[str, Any] = OrderedDict()
        self._remember = remember
        self._decisions = decisions if decisions is not None else {}

    def _allowed(self, fun: object, minions: list[str], kind: str) -> bool:
        if isinstance(fun, list) and fun and all(isinstance(f, str) for f in fun):
            key: tuple[Any, ...] = (kind, tuple(fun), *minions)
        elif isinstance(fun, str) and fun:
            key = (kind, fun, *minions)
        else:
            return False
        # The same function on the same minion comes back with every job:
        # decided once for all the streams of the same permissions.
        decision = self._decisions.get(key)
        if decision is None:
            try:
                self._perms.authorize(fun, minions, kind)  # type: ignore[arg-type]
                decision = True
            except (AclRefused, ValueError):
                decision = False
            if len(self._decisions) >= DECISIONS:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _seen(self, jid: str, fun: Any) -> None:
        self._jobs[jid] = fun
        self._jobs.move_to_end(jid)
        while len(self._jobs) > self._remember:
            self._jobs.popitem(last=False)

    def visible(self, tag: str, data: dict[str, Any]) -> bool:
        """
        May the token see the event C{(tag, data)}?
        """
        if self.everything:
            return True
        job = _JOB_TAG.match(tag)
        if job is not None:
            jid, kind, minion = job["jid"], job["kind"], job["minion"]
            if kind == "new":
                minions = data.get("minions")
                fun = data.get("fun")
                if fun:
                    # Kept whether shown or not: the job's own function
                    # decides its returns, not the one a return claims.
                    self._seen(jid, fun)
                if not isinstance(minions, list) or not all(isinstance(m, str) for m in minions):
                    return False
                # A job with no minion would pass any target restriction:
                # it must be allowed everywhere.
                return self._allowed(fun, minions or ["\0no minion"], "local")
            if minion is None:
                return False
            if kind == "ret":
                return self._allowed(self._jobs.get(jid, data.get("fun")), [minion], "local")
            fun = self._jobs.get(jid)
            return fun is not None and self._allowed(fun, [minion], "local")
        run = _RUN_TAG.match(tag)
        if run is not None:
            fun = data.get("fun")
            if fun is None and run["kind"] == "run":
                fun = self._jobs.get("run/" + run["jid"])
            # Salt's events name the function with its client's prefix
            # (wheel.key.list_all, runner.jobs.list_jobs); the ACL does not.
            prefix = "runner." if run["kind"] == "run" else "wheel."
            if isinstance(fun, str) and fun.startswith(prefix):
                fun = fun[len(prefix) :]
            if isinstance(fun, str) and self._allowed(
                fun, [], "runner" if run["kind"] == "run" else "wheel"
            ):
                if run["kind"] == "run":
                    self._seen("run/" + run["jid"], fun)
                return True
            return False
        return False


class _Decisions(dict):  # type: ignore[type-arg]
    """
    A decision cache (a dict that can be weakly referenced).
    """


class DecisionCaches:
    """
    One decision cache per set of permissions, shared by the streams that
    have them, and dropped with the last of them.
    """

    def __init__(self) -> None:
        self._caches: weakref.WeakValueDictionary[str, _Decisions] = weakref.WeakValueDictionary()

    def forPerms(self, perms: Permissions) -> dict[tuple[Any, ...], bool]:
        """
        @return: the cache of the filters of C{perms}.
        """
        key = json.dumps(perms.items, sort_keys=True, default=str)
        cache = self._caches.get(key)
        if cache is None:
            cache = _Decisions()
            self._caches[key] = cache
        return cache


class EventHub:
    """
    One subscription to the master's bus, shared by every event stream:
    connected when the first stream opens, closed when the last one ends.

    @ivar streams: the open streams.
    """

    def __init__(
        self,
        subscribe: Callable[[Callable[[str, dict[str, Any]], None]], Deferred[Any]],
    ) -> None:
        """
        @param subscribe: connects to the bus and calls its argument with
            each event; fires with the connection (a protocol with a
            C{transport} and a C{lost} L{Deferred}) once subscribed
            (L{salttwist.events.client.listenEvents}).
        """
        self._subscribe = subscribe
        self.streams: list[EventStream] = []
        self._connection: Any = None
        self._connecting = False
        self._waiting: list[Deferred[None]] = []

    def add(self, stream: EventStream) -> Deferred[None]:
        """
        Deliver the bus's events to C{stream}.

        @return: fires once subscribed (no event fired after that is missed
            by C{stream}); fails if the bus cannot be reached.
        """
        self.streams.append(stream)
        if self._connection is not None:
            return succeed(None)
        ready: Deferred[None] = Deferred()
        self._waiting.append(ready)
        if not self._connecting:
            self._connecting = True
            self._subscribe(self._dispatch).addCallbacks(self._connected, self._failed)
        return ready

    def _connected(self, connection: Any) -> None:
        self._connecting = False
        self._connection = connection
        connection.lost.addCallback(self._lost, connection)
        waiting, self._waiting = self._waiting, []
        for ready in waiting:
            ready.callback(None)
        if not self.streams:
            self._close()

    def _failed(self, failure: Any) -> None:
        self._connecting = False
        _log.warn("/events: the master's event bus cannot be reached: {error}", error=failure.value)
        waiting, self._waiting = self._waiting, []
        for ready in waiting:
            ready.errback(ConnectionError("the master's event bus cannot be reached"))

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.transport.loseConnection()

    def _lost(self, _: object, connection: Any) -> None:
        if self._connection is not connection:
            return
        self._connection = None
        # The clients reconnect by themselves (the retry hint).
        for stream in list(self.streams):
            stream.end()

    def remove(self, stream: EventStream) -> None:
        """
        Stop delivering to C{stream}; the last one closes the subscription.
        """
        if stream in self.streams:
            self.streams.remove(stream)
        if not self.streams:
            self._close()

    def _dispatch(self, tag: str, data: dict[str, Any]) -> None:
        frame: bytes | None = None
        for stream in list(self.streams):
            if stream.filter.visible(tag, data):
                if frame is None:
                    frame = formatEvent(tag, data)
                stream.send(frame)


@implementer(IPushProducer)
class EventStream:
    """
    One client's event stream: writes the events its filter lets through,
    pauses when its transport does, and is dropped when it falls
    C{queueLimit} bytes behind.

    @ivar dropped: whether it was dropped for reading too slowly.
    """

    def __init__(
        self,
        request: Any,
        eventFilter: EventFilter,
        hub: EventHub,
        clock: IReactorTime,
        queueLimit: int = QUEUE_LIMIT,
        heartbeat: float = HEARTBEAT,
        token: str | None = None,
    ) -> None:
        """
        @param token: the token the stream was opened with (its streams
            are counted).
        """
        self.request = request
        self.token = token
        self.filter = eventFilter
        self._hub = hub
        self._clock = clock
        self._queueLimit = queueLimit
        self._heartbeatEvery = heartbeat
        # Paused until started: events that come first wait for the headers.
        self._paused = True
        self._queue: list[bytes] = []
        self._queued = 0
        self._ended = False
        self.dropped = False
        self._timers: list[IDelayedCall] = []
        self._heartbeat: IDelayedCall | None = None

    def start(self) -> None:
        """
        Send the headers and the retry hint; start the heartbeat.
        """
        self.request.registerProducer(self, True)
        self.request.write(b"retry: 400\n")
        self._scheduleHeartbeat()
        self.request.notifyFinish().addBoth(lambda _: self._cleanUp())
        self.resumeProducing()

    def endAt(self, when: float) -> None:
        """
        End the stream at C{when} (the token's expiry), in clock seconds.
        """
        self._timers.append(self._clock.callLater(max(0, when - self._clock.seconds()), self.end))

    def every(self, seconds: float, check: Callable[[], None]) -> None:
        """
        Call C{check} every C{seconds} while the stream is open.
        """

        def run() -> None:
            if not self._ended:
                check()
                self._timers.append(self._clock.callLater(seconds, run))

        self._timers.append(self._clock.callLater(seconds, run))

    def _scheduleHeartbeat(self) -> None:
        if self._heartbeatEvery > 0 and not self._ended:
            self._heartbeat = self._clock.callLater(self._heartbeatEvery, self._beat)

    def _beat(self) -> None:
        self._heartbeat = None
        if not self._paused:
            self.request.write(b": heartbeat\n\n")
        self._scheduleHeartbeat()

    def send(self, frame: bytes) -> None:
        """
        Write one formatted event, or queue it while paused; drop the
        client once the queue passes the limit.
        """
        if self._ended:
            return
        if not self._paused:
            self.request.write(frame)
            return
        self._queue.append(frame)
        self._queued += len(frame)
        if self._queued > self._queueLimit:
            _log.warn(
                "/events: a client fell {queued} bytes behind; it is dropped",
                queued=self._queued,
            )
            self.dropped = True
            self._queue, self._queued = [], 0
            transport = getattr(self.request, "transport", None) or getattr(
                self.request.channel, "transport", None
            )
            self._cleanUp()
            if transport is not None:
                transport.abortConnection()

    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        queue, self._queue, self._queued = self._queue, [], 0
        for frame in queue:
            if self._paused or self._ended:
                self._queue.append(frame)
                self._queued += len(frame)
            else:
                self.request.write(frame)

    def stopProducing(self) -> None:
        self._cleanUp()

    def end(self) -> None:
        """
        Finish the response (the token expired or was revoked, the bus
        went away, or the API stops).
        """
        if self._ended:
            return
        self._cleanUp()
        try:
            self.request.unregisterProducer()
            self.request.finish()
        except RuntimeError:
            # The connection went away meanwhile.
            pass

    def _cleanUp(self) -> None:
        if self._ended:
            return
        self._ended = True
        for timer in self._timers + ([self._heartbeat] if self._heartbeat else []):
            if timer.active():
                timer.cancel()
        self._timers = []
        self._heartbeat = None
        self._hub.remove(self)


def _jsonError(request: Any, status: int, message: str) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"Content-Type", b"application/json")
    return json.dumps({"status": status, "return": message}).encode()


class EventsResource(Resource):
    """
    C{GET /events} (see the module's docstring).
    """

    isLeaf = True

    def __init__(
        self,
        sessionFor: Callable[[str], Deferred[Any]],
        hub: EventHub,
        clock: IReactorTime,
        maxClients: int = MAX_CLIENTS,
        queueLimit: int = QUEUE_LIMIT,
        heartbeat: float = HEARTBEAT,
        recheck: float = RECHECK,
        headers: Callable[[Any], None] | None = None,
        maxPerToken: int = MAX_PER_TOKEN,
        cors: Callable[[Any], bool] | None = None,
    ) -> None:
        """
        @param sessionFor: the session of a token
            (L{salttwist.eauth.authenticator.Authenticator.session}); fails
            for a token that is unknown, expired or revoked.
        @param headers: sets the API's security headers on a request.
        @param maxPerToken: streams one token may have open at once.
        @param cors: sets the CORS headers of a request and says whether
            its origin is allowed (L{salttwist.api.resource.corsHeaders}).
        """
        super().__init__()
        self._sessionFor = sessionFor
        self.hub = hub
        self._clock = clock
        self.maxClients = maxClients
        self.maxPerToken = maxPerToken
        self._cors = cors
        self._queueLimit = queueLimit
        self._heartbeat = heartbeat
        self._recheck = recheck
        self._headers = headers
        self._decisionCaches = DecisionCaches()

    def _token(self, request: Any) -> str | None:
        header = request.getHeader(b"X-Auth-Token")
        if header:
            return header.decode("utf-8", errors="replace")
        return None

    def render(self, request: Any) -> bytes | int:
        corsAllowed = self._cors is not None and self._cors(request)
        if request.method == b"OPTIONS" and corsAllowed:
            from salttwist.api.resource import corsPreflight

            if self._headers is not None:
                self._headers(request)
            return corsPreflight(request, "GET")
        if request.method not in (b"GET", b"HEAD"):
            # twisted.web would answer 501 and HTML to all but GET, HEAD, POST.
            if self._headers is not None:
                self._headers(request)
            request.setHeader(b"Allow", b"GET, HEAD")
            return _jsonError(
                request,
                405,
                f"{request.method.decode('ascii', 'replace')} is not allowed here; use GET",
            )
        return super().render(request)

    def render_HEAD(self, request: Any) -> bytes | int:
        """
        The headers a C{GET} would get, after the same checks (token,
        bounds), and no stream: the answer ends at once.
        """
        return self.render_GET(request)

    def render_GET(self, request: Any) -> bytes | int:
        if self._headers is not None:
            self._headers(request)
        if request.args:
            return _jsonError(
                request,
                400,
                "The /events endpoint takes no query parameters; in particular, tokens"
                " must not be passed in the URL (they end up in access logs and the"
                " Referer header). Send the 'X-Auth-Token' header instead.",
            )
        token = self._token(request)
        if not token:
            return _jsonError(request, 401, "No authentication token: send 'X-Auth-Token'.")
        if len(self.hub.streams) >= self.maxClients:
            request.setHeader(b"Retry-After", b"5")
            return _jsonError(
                request, 503, f"Too many event streams are open (at most {self.maxClients})."
            )
        Deferred.fromCoroutine(self._open(request, token))
        return NOT_DONE_YET

    async def _open(self, request: Any, token: str) -> None:
        finished = request.notifyFinish()
        gone: list[bool] = []
        finished.addBoth(lambda _: gone.append(True))
        try:
            session = await self._sessionFor(token)
        except Exception:
            if not gone:
                request.write(
                    _jsonError(request, 401, 'Authentication failure of type "token" occurred.')
                )
                request.finish()
            return
        if gone:
            return
        if len(self.hub.streams) >= self.maxClients:
            request.setHeader(b"Retry-After", b"5")
            request.write(
                _jsonError(
                    request, 503, f"Too many event streams are open (at most {self.maxClients})."
                )
            )
            request.finish()
            return
        if sum(1 for s in self.hub.streams if s.token == token) >= self.maxPerToken:
            request.setHeader(b"Retry-After", b"5")
            request.write(
                _jsonError(
                    request,
                    429,
                    f"Too many event streams are open with this token (at most"
                    f" {self.maxPerToken}); close one first.",
                )
            )
            request.finish()
            return
        stream = EventStream(
            request,
            EventFilter(session.perms, decisions=self._decisionCaches.forPerms(session.perms)),
            self.hub,
            self._clock,
            self._queueLimit,
            self._heartbeat,
            token,
        )
        try:
            await self.hub.add(stream)
        except Exception:
            self.hub.remove(stream)
            if not gone:
                request.write(_jsonError(request, 503, "The master's event bus cannot be reached."))
                request.finish()
            return
        if gone:
            self.hub.remove(stream)
            return
        request.setHeader(b"Content-Type", b"text/event-stream")
        request.setHeader(b"Cache-Control", b"no-cache")
        # nginx buffers responses unless told not to.
        request.setHeader(b"X-Accel-Buffering", b"no")
        if request.method == b"HEAD":
            self.hub.remove(stream)
            request.finish()
            return
        stream.start()
        stream.endAt(session.expire)
        stream.every(self._recheck, lambda: self._checkToken(stream, token))

    def _checkToken(self, stream: EventStream, token: str) -> None:
        def refused(_: object) -> None:
            _log.info("/events: a stream's token is no longer valid; it ends")
            stream.end()

        self._sessionFor(token).addErrback(refused)


def eventsResource(context: Any, reactor: Any = None) -> EventsResource:
    """
    C{/events} for the API of C{context} (a
    L{salttwist.api.context.ApiContext}): the master's bus at
    C{master_event_pub.ipc} in its C{sock_dir}, the context's sessions,
    the API's security headers.

    @param reactor: connects to the bus (default: the global reactor).
    """
    from salttwist.api.resource import corsHeaders, securityHeaders
    from salttwist.events import EVENT_PUB_SOCKET
    from salttwist.events.client import listenEvents

    if reactor is None:
        from twisted.internet import reactor as globalReactor

        reactor = globalReactor

    def subscribe(onEvent: Callable[[str, dict[str, Any]], None]) -> Deferred[Any]:
        sockPath = os.path.join(context.config["sock_dir"], EVENT_PUB_SOCKET)
        return Deferred.fromCoroutine(listenEvents(reactor, sockPath, [], onEvent))

    tls = not context.options.disableSsl
    return EventsResource(
        lambda token: Deferred.fromCoroutine(context.session(token)),
        EventHub(subscribe),
        context.clock,
        headers=lambda request: securityHeaders(request, tls),
        cors=lambda request: corsHeaders(request, context.options.corsOrigin),
    )
