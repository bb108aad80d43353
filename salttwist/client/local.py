# -*- test-case-name: tests.test_local_client -*-
"""
The local client (Salt's LocalClient): publish a job through the master's req
channel and gather the returns from the master's event bus.

It subscribes to C{salt/job/} on the bus before it publishes, so no return
can be missed, and it authenticates with a MAC over the req connection's
challenge keyed with the root key in C{cachedir/.root_key}, which only the
master's user (and root) can read, or, for any other user, with the key
the master wrote for it because C{publisher_acl} names it,
C{cachedir/.<user>_key} (see L{readClientKey}).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionLost
from twisted.python.failure import Failure

from salttwist.client.base import (
    CONNECT_TIMEOUT,
    JOB_PREFIXES,
    JobResult,
    MasterUnavailable,
    clientLogin,
    currentUser,
    gatherReturns,
    jobReturnTag,
    masterReqAddress,
    publishRequest,
    readClientKey,
)
from salttwist.events import EVENT_PUB_SOCKET
from salttwist.events.client import EventListenerProtocol, listenEvents
from salttwist.transport.interfaces import ROLE_CLIENT
from salttwist.transport.registry import findTransport
from salttwist.transport.reqclient import ReqClientProtocol, reqClientFactory

__all__ = [
    "CONNECT_TIMEOUT",
    "JobResult",
    "LocalClient",
    "MasterUnavailable",
    "readClientKey",
]


class _Gather:
    """
    The returns of one job, and waiting for a set of them.
    """

    def __init__(self, reactor: Any, minions: list[str], onReturn: Any) -> None:
        self._reactor = reactor
        self._expected = set(minions)
        self._onReturn = onReturn
        self.returns: dict[str, dict[str, Any]] = {}
        self._waiter: tuple[set[str], Deferred[bool]] | None = None

    def add(self, minionId: str, data: dict[str, Any]) -> None:
        if minionId not in self._expected or minionId in self.returns:
            return
        self.returns[minionId] = data
        if self._onReturn is not None:
            self._onReturn(minionId, data)
        if self._waiter is not None:
            remaining = self._waiter[0]
            remaining.discard(minionId)
            if not remaining:
                self._finish(True)

    def waitFor(self, minions: set[str], timeout: float) -> Deferred[bool]:
        """
        @return: a L{Deferred} firing L{True} once all of C{minions} have
            returned, or L{False} after C{timeout} seconds (or when aborted).
        """
        d: Deferred[bool] = Deferred()
        if minions <= set(self.returns):
            d.callback(True)
            return d
        # The ids still awaited, shrunk as returns arrive (no rescans).
        self._waiter = (set(minions) - self.returns.keys(), d)
        timer = self._reactor.callLater(timeout, self._finish, False)
        d.addBoth(lambda r: (timer.cancel() if timer.active() else None, r)[1])
        return d

    def _finish(self, done: bool) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter[1].callback(done)


class _ReturnCollector:
    """
    Routes C{salt/job/<jid>/ret/<id>} events to the gather of their jid,
    keeping those that arrive while a publish waits for its reply (a fast
    minion can answer before the publish reply is read); returns of other
    jobs (another client's, or one this client finished with) are dropped,
    at the latest once every publish waiting when they came was answered.
    """

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor
        self._gathers: dict[str, _Gather] = {}
        #: Returns of unknown jids, oldest first, each with its arrival number.
        self._early: deque[tuple[int, str, str, dict[str, Any]]] = deque(maxlen=100000)
        self._arrivals = 0
        #: The publishes waiting for their reply: the arrival number when
        #: each was sent, by token.
        self._publishing: dict[object, int] = {}

    def onEvent(self, tag: str, data: dict[str, Any]) -> None:
        found = jobReturnTag(tag)
        if found is None:
            return
        jid, minionId = found
        gather = self._gathers.get(jid)
        if gather is not None:
            gather.add(minionId, data)
        elif self._publishing:
            self._arrivals += 1
            self._early.append((self._arrivals, jid, minionId, data))

    def publishStarted(self) -> object:
        """
        A publish is being sent: keep the returns of unknown jids until its
        reply names its jid.

        @return: a token for L{publishEnded}.
        """
        token = object()
        self._publishing[token] = self._arrivals
        return token

    def publishEnded(self, token: object) -> None:
        """
        A publish was answered (and its gather made) or failed. The returns
        kept that came before every publish still waiting was sent cannot
        be theirs (the master makes a job's jid when it takes the publish):
        they are dropped.
        """
        del self._publishing[token]
        oldest = min(self._publishing.values(), default=self._arrivals)
        early = self._early
        while early and early[0][0] <= oldest:
            early.popleft()

    def gather(self, jid: str, minions: list[str], onReturn: Any) -> _Gather:
        gather = _Gather(self._reactor, minions, onReturn)
        self._gathers[jid] = gather
        for _, earlyJid, minionId, data in list(self._early):
            if earlyJid == jid:
                gather.add(minionId, data)
        return gather

    def release(self, jid: str) -> None:
        """
        Stop gathering C{jid}: its late returns are dropped.
        """
        self._gathers.pop(jid, None)

    def abort(self) -> None:
        """
        The event bus went away: stop every wait.
        """
        for gather in list(self._gathers.values()):
            gather._finish(False)


#: What a command says when its connection to the master goes away.
CONNECTION_LOST = "the connection to the master was lost"


async def sessionRequest(req: ReqClientProtocol, payload: dict[str, Any]) -> dict[str, Any]:
    """
    Send one request on the authenticated session C{req}.

    @raise MasterUnavailable: if the connection is lost before the answer
        (as every command reports an unreachable master).
    @raise RequestError: if the master refused the request.
    """
    try:
        return await req.request(payload)
    except ConnectionLost as e:
        raise MasterUnavailable(CONNECTION_LOST) from e


class _Channel:
    """
    The event bus subscription and the authenticated req session of a
    client, and the collector of the returns that come on the bus. Once
    either connection is lost the channel is closed: both are, and every
    wait for returns stops.

    @ivar user: the user the session was opened as.
    """

    def __init__(
        self,
        events: EventListenerProtocol,
        req: ReqClientProtocol,
        collector: _ReturnCollector,
        user: str,
    ) -> None:
        self.events = events
        self.req = req
        self.collector = collector
        self.user = user
        self.closed = False
        events.lost.addCallback(self._lost)
        req.lost.addCallback(self._lost)

    def _lost(self, _: object) -> None:
        self.close()
        self.collector.abort()

    def close(self) -> None:
        """
        Close both connections.
        """
        if self.closed:
            return
        self.closed = True
        for proto in (self.req, self.events):
            if proto.transport is not None:
                proto.transport.loseConnection()

    async def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """
        Send one request on the session.

        @raise MasterUnavailable: if the channel is closed, or its
            connection is lost before the answer.
        """
        if self.closed:
            raise MasterUnavailable(CONNECTION_LOST)
        return await sessionRequest(self.req, payload)


class LocalClient:
    """
    Talks to the master running with C{config} on this machine.

    By default each command opens its own connections (the event bus
    subscription and the authenticated req session) and closes them when
    it is done, as a command line does. With C{keepConnected}, as Salt's
    LocalClient keeps its event subscription, the first command opens them
    and the later ones, including concurrent ones, share them, until
    L{close}; if they are lost (the master restarted), the next command
    opens new ones.
    """

    def __init__(self, config: dict[str, Any], reactor: Any, keepConnected: bool = False) -> None:
        self.config = config
        self.reactor = reactor
        self.keepConnected = keepConnected
        self._shared: _Channel | None = None
        #: Commands waiting for the shared channel being opened.
        self._opening: list[Deferred[_Channel]] | None = None

    def close(self) -> None:
        """
        Close the connections kept with C{keepConnected} (a later command
        opens new ones).
        """
        channel, self._shared = self._shared, None
        if channel is not None:
            channel.close()

    async def _connect(
        self, onEvent: Callable[[str, dict[str, Any]], None], prefixes: list[str]
    ) -> tuple[EventListenerProtocol, ReqClientProtocol]:
        """
        Subscribe to C{prefixes} on the master's event bus, then open an
        authenticated req session (the subscription first, so that no
        return of a job published on the session can be missed).
        """
        config = self.config
        sockPath = os.path.join(config["sock_dir"], EVENT_PUB_SOCKET)
        try:
            events = await listenEvents(
                self.reactor, sockPath, prefixes, onEvent, timeout=CONNECT_TIMEOUT
            )
        except Exception as e:
            raise MasterUnavailable(
                "the salttwist master is not running, or this user cannot reach its "
                f"event bus at {sockPath} ({e})"
            ) from e
        try:
            req = await self._login()
        except BaseException:
            events.transport.loseConnection()
            raise
        return events, req

    async def _login(self) -> ReqClientProtocol:
        """
        Open a req session authenticated with this user's client key.

        @raise MasterUnavailable: if the key cannot be read, the master
            cannot be reached or refuses the login.
        """
        config = self.config
        user = currentUser()
        clientKey = readClientKey(config["cachedir"], user)
        host, port = masterReqAddress(config)
        try:
            # The master's transport (C{transport}), as a local client sees it.
            endpoint = findTransport(config["transport"]).clientEndpoint(
                self.reactor, config, host, port, ROLE_CLIENT
            )
            req = await endpoint.connect(reqClientFactory(config["max_frame_bytes"])).addTimeout(
                CONNECT_TIMEOUT, self.reactor
            )
            challenge = await req.hello.addTimeout(CONNECT_TIMEOUT, self.reactor)
        except Exception as e:
            raise MasterUnavailable(
                f"cannot reach the master's req channel at {host}:{port} ({e})"
            ) from e
        login, sessionKey = clientLogin(clientKey, challenge, user)
        try:
            reply = await req.sendClear(login).addTimeout(CONNECT_TIMEOUT, self.reactor)
        except Exception as e:
            req.transport.abortConnection()
            raise MasterUnavailable(f"the master did not answer the client's login ({e})") from e
        if reply.get("ret") != "ok":
            req.transport.loseConnection()
            raise MasterUnavailable(f"the master refused this client: {reply.get('error', reply)}")
        req.startSession(sessionKey)
        return req

    async def run(
        self,
        tgt: Any,
        fun: str,
        arg: list[Any],
        tgtType: str = "glob",
        timeout: float = 5.0,
        onPublished: Callable[[str, list[str]], None] | None = None,
        onReturn: Callable[[str, dict[str, Any]], None] | None = None,
        gatherJobTimeout: float = 10.0,
        user: str | None = None,
    ) -> JobResult:
        """
        Publish one job and gather its returns, as Salt's LocalClient does:
        wait C{timeout} seconds for the connected targeted minions; then ask
        the silent ones with C{saltutil.find_job} (waiting up to
        C{gatherJobTimeout} for their answers) and keep waiting for those
        still running it, another C{timeout} at a time. Minions the master
        knew were not connected are not waited for at all.

        @param onPublished: called with the jid and expected minions.
        @param onReturn: called with each minion's return event as it arrives.
        @param user: the job's user, when this process runs as the master's
            user and publishes for someone it authenticated (salttwist-api's
            eauth users); the master takes it only from such a client.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused the job (the message says why).
        """
        async with self._channel() as channel:
            reply, gather = await self._publishAndGather(
                channel, tgt, tgtType, fun, arg, onPublished, onReturn, user
            )
            minions = list(reply.get("minions", []))
            result = JobResult(reply.get("jid", ""), minions)
            if gather is None:
                return result
            try:
                await gatherReturns(
                    result,
                    set(reply.get("connected", minions)),
                    gather.returns,
                    gather.waitFor,
                    lambda silent: self._findJob(channel, result.jid, silent, gatherJobTimeout),
                    lambda: channel.closed,
                    timeout,
                )
            finally:
                channel.collector.release(result.jid)
            return result

    @asynccontextmanager
    async def _channel(self) -> AsyncIterator[_Channel]:
        """
        The channel of one command: the shared one with C{keepConnected},
        else one of its own, closed when the command is done.
        """
        if self.keepConnected:
            yield await self._sharedChannel()
            return
        channel = await self._openChannel()
        try:
            yield channel
        finally:
            channel.close()

    async def _openChannel(self) -> _Channel:
        collector = _ReturnCollector(self.reactor)
        events, req = await self._connect(collector.onEvent, JOB_PREFIXES)
        return _Channel(events, req, collector, currentUser())

    async def _sharedChannel(self) -> _Channel:
        """
        @return: the shared channel, opened if there is none (or it was
            lost); commands that ask while it is being opened wait for it.
            The opening is not any one command's: cancelling a command
            that waits for it (its timeout) does not stop it for the
            others.
        """
        channel = self._shared
        if channel is not None and not channel.closed:
            return channel
        waiter: Deferred[_Channel] = Deferred()
        if self._opening is not None:
            self._opening.append(waiter)
            return await waiter
        self._opening = [waiter]
        Deferred.fromCoroutine(self._openChannel()).addCallbacks(
            self._channelOpened, self._channelNotOpened
        )
        return await waiter

    def _channelOpened(self, channel: _Channel) -> None:
        waiters, self._opening = self._opening or [], None
        self._shared = channel
        for waiter in waiters:
            if not waiter.called:
                waiter.callback(channel)

    def _channelNotOpened(self, failure: Failure) -> None:
        waiters, self._opening = self._opening or [], None
        for waiter in waiters:
            if not waiter.called:
                waiter.errback(failure)

    async def _publishAndGather(
        self,
        channel: _Channel,
        tgt: Any,
        tgtType: str,
        fun: str,
        arg: list[Any],
        onPublished: Callable[[str, list[str]], None] | None,
        onReturn: Callable[[str, dict[str, Any]], None] | None,
        user: str | None = None,
    ) -> tuple[dict[str, Any], _Gather | None]:
        """
        Publish one job and start gathering its returns, keeping those that
        come before the master's reply.

        @return: the master's reply, and the gather (L{None} when no minion
            was targeted).
        """
        collector = channel.collector
        token = collector.publishStarted()
        try:
            reply = await self._publish(channel, tgt, tgtType, fun, arg, user)
            minions = list(reply.get("minions", []))
            if not minions:
                return reply, None
            if onPublished is not None:
                onPublished(reply.get("jid", ""), minions)
            return reply, collector.gather(reply.get("jid", ""), minions, onReturn)
        finally:
            collector.publishEnded(token)

    async def publish(
        self, tgt: Any, fun: str, arg: list[Any], tgtType: str = "glob", user: str | None = None
    ) -> dict[str, Any]:
        """
        Publish one job without waiting for returns (C{salttwist --async}).

        Without C{keepConnected}, only a req session is opened: nothing
        waits for the returns, so the event bus is not subscribed to (it
        would send this client every job's returns meanwhile).

        @return: C{{"jid", "minions", "connected"}}.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused the job.
        """
        if self.keepConnected:
            async with self._channel() as channel:
                return await self._publish(channel, tgt, tgtType, fun, arg, user)
        req = await self._login()
        try:
            return await sessionRequest(
                req, publishRequest(tgt, tgtType, fun, arg, user or currentUser())
            )
        finally:
            req.transport.loseConnection()

    async def _publish(
        self,
        channel: _Channel,
        tgt: Any,
        tgtType: str,
        fun: str,
        arg: list[Any],
        user: str | None = None,
    ) -> dict[str, Any]:
        return await channel.request(publishRequest(tgt, tgtType, fun, arg, user or channel.user))

    async def _findJob(
        self,
        channel: _Channel,
        jid: str,
        minions: list[str],
        gatherJobTimeout: float,
    ) -> set[str]:
        """
        Ask C{minions} whether they still run C{jid}.

        @return: those that answered that they do.
        """
        reply, gather = await self._publishAndGather(
            channel, minions, "list", "saltutil.find_job", [jid], None, None
        )
        if gather is None:
            return set()
        try:
            await gather.waitFor(set(reply["minions"]), gatherJobTimeout)
        finally:
            channel.collector.release(reply.get("jid", ""))
        return {m for m, data in gather.returns.items() if data.get("return")}

    async def runner(self, fun: str, arg: list[Any], user: str | None = None) -> dict[str, Any]:
        """
        Run the runner function C{fun} in the master (Salt's C{salt-run}).

        @param user: the run's user (see L{run}).

        @return: C{{"jid": ..., "return": ...}}.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused or the runner failed.
        """
        async with self._channel() as channel:
            return await channel.request(
                {"cmd": "runner", "fun": fun, "arg": arg, "user": user or channel.user}
            )
