# -*- test-case-name: tests.test_direct_client,tests.integration.test_end_to_end -*-
"""
The direct client: the local client without Twisted, for one command.

A C{salttwist '*' test.ping} is a fresh interpreter that opens two
connections, sends three requests and reads a few frames. Importing
Twisted and starting a reactor for that costs more than everything else
the command does (about 0.2 s of its 0.4 s on a 2-core machine), so the
C{salttwist} command talks to a master on the plain C{tcp} transport with
blocking sockets and C{poll} instead: the same event bus subscription, the
same login, the same sealed session and the same way of gathering returns
as L{salttwist.client.local.LocalClient}, whose Twisted core everything
else uses (batches, the C{tls} transport, the Python API, the daemons).

Its L{DirectClient.run} and L{DirectClient.publish} are coroutines that
never suspend: they block until they are done. The command's job code
(L{salttwist.cli.salt.runJob}) awaits them as it awaits the Twisted
client's, and L{runToCompletion} runs it without any event loop.
"""

from __future__ import annotations

import os
import select
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

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
from salttwist.serial import SerialError
from salttwist.transport.errors import RequestError
from salttwist.transport.frames import FrameError, FrameReader, encodeFrame
from salttwist.transport.session import SessionCipher, SessionError

__all__ = ["DirectClient", "runToCompletion"]

#: Bytes read from a socket at a time.
_READ_SIZE = 256 * 1024
#: Returns of jobs not (yet) known kept while a publish waits for its
#: reply, as L{salttwist.client.local} keeps them.
_EARLY_LIMIT = 100000


def runToCompletion(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """
    Run a coroutine that never suspends (it awaits only L{DirectClient}'s
    methods, or other coroutines that block) and return its value.

    @raise RuntimeError: if it suspends after all: it waited for something
        only an event loop could deliver.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the command waited for an event loop; the direct client has none")


class _Link:
    """
    One connection to the master: its socket and the frames read from it.

    @ivar name: what the connection is, for error messages.
    @ivar closed: whether the master closed it.
    """

    def __init__(self, sock: socket.socket, name: str, maxFrame: int | None = None) -> None:
        self.sock = sock
        self.name = name
        self.reader = FrameReader() if maxFrame is None else FrameReader(maxFrame)
        self.frames: list[dict[str, Any]] = []
        self.closed = False

    def send(self, message: dict[str, Any]) -> None:
        """
        Send one frame, blocking until the system took all of it.
        """
        try:
            self.sock.sendall(encodeFrame(message))
        except OSError as e:
            self.closed = True
            raise MasterUnavailable(
                f"the connection to the master's {self.name} failed: {e}"
            ) from e

    def receive(self) -> None:
        """
        Read what the socket has (it is readable) into L{frames}.

        @raise MasterUnavailable: the master broke the frame format.
        """
        try:
            data = self.sock.recv(_READ_SIZE)
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return
        try:
            self.frames.extend(self.reader.feed(data))
        except FrameError as e:
            self.closed = True
            raise MasterUnavailable(f"the master's {self.name} broke the protocol: {e}") from e

    def close(self) -> None:
        self.sock.close()


class _Gather:
    """
    The returns of one job as they arrive.
    """

    def __init__(
        self, minions: list[str], onReturn: Callable[[str, dict[str, Any]], None] | None
    ) -> None:
        self.expected = set(minions)
        self.returns: dict[str, dict[str, Any]] = {}
        self.onReturn = onReturn

    def add(self, minionId: str, data: dict[str, Any]) -> None:
        if minionId not in self.expected or minionId in self.returns:
            return
        self.returns[minionId] = data
        if self.onReturn is not None:
            self.onReturn(minionId, data)


def _connectUnix(path: str, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _connectTcp(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class DirectClient:
    """
    Talks to the master running with C{config} on this machine, over
    blocking sockets, for one command: it connects on first use and stays
    connected until L{close}.

    @param connectUnix: C{(path, timeout) -> socket}, for the event bus.
    @param connectTcp: C{(host, port, timeout) -> socket}, for the req
        channel.
    @param clock: seconds, monotonic.
    @param wait: C{(sockets, timeout) -> file descriptors}: waits up to
        C{timeout} seconds (L{None}: no limit) until some of C{sockets} are
        readable and returns theirs (none: the time passed).
    """

    def __init__(
        self,
        config: dict[str, Any],
        connectUnix: Callable[[str, float], socket.socket] = _connectUnix,
        connectTcp: Callable[[str, int, float], socket.socket] = _connectTcp,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[list[socket.socket], float | None], set[int]] | None = None,
    ) -> None:
        self.config = config
        self._connectUnix = connectUnix
        self._connectTcp = connectTcp
        self._clock = clock
        self._wait = _readable if wait is None else wait
        self._events: _Link | None = None
        self._req: _Link | None = None
        self._session: SessionCipher | None = None
        self._user = ""
        self._nextRid = 1
        self._gathers: dict[str, _Gather] = {}
        #: Returns of unknown jids read while a publish waited for its reply.
        self._early: list[tuple[str, str, dict[str, Any]]] = []
        self._publishing = False

    # Opening and closing

    def _open(self) -> None:
        """
        Connect and log in, unless that is done: subscribe to the job events
        on the event bus first, so no return can be missed, then open the
        session on the req channel.

        @raise MasterUnavailable: either step failed (the message says
            which and why), or the connections were lost since.
        """
        if self._req is not None:
            if self._events is None or self._events.closed or self._req.closed:
                raise MasterUnavailable("the connection to the master was lost")
            return
        config = self.config
        if self._events is None:
            sockPath = os.path.join(config["sock_dir"], EVENT_PUB_SOCKET)
            try:
                self._events = self._subscribe(sockPath)
            except (OSError, MasterUnavailable) as e:
                raise MasterUnavailable(
                    "the salttwist master is not running, or this user cannot reach its "
                    f"event bus at {sockPath} ({e})"
                ) from e
        user = currentUser()
        clientKey = readClientKey(config["cachedir"], user)
        host, port = masterReqAddress(config)
        try:
            req = _Link(self._connectTcp(host, port, CONNECT_TIMEOUT), "req channel")
        except OSError as e:
            raise MasterUnavailable(
                f"cannot reach the master's req channel at {host}:{port} ({e})"
            ) from e
        try:
            try:
                self._waitFor(req, lambda: bool(req.frames))
            except MasterUnavailable as e:
                raise MasterUnavailable(
                    f"cannot reach the master's req channel at {host}:{port} ({e})"
                ) from e
            sessionKey = self._login(req, clientKey, user)
        except BaseException:
            req.close()
            raise
        self._req = req
        self._session = SessionCipher(sessionKey, isServer=False)
        req.reader.maxFrame = config["max_frame_bytes"]
        self._user = user

    def _subscribe(self, sockPath: str) -> _Link:
        """
        @return: a connection to the event bus at C{sockPath}, subscribed to
            the job events once the bus confirmed it.
        """
        events = _Link(self._connectUnix(sockPath, CONNECT_TIMEOUT), "event bus")
        try:
            events.reader.maxFrame = self.config["max_frame_bytes"]
            events.send({"subscribe": JOB_PREFIXES})
            self._waitFor(events, lambda: any(f.get("subscribed") is True for f in events.frames))
        except BaseException:
            events.close()
            raise
        events.frames = [f for f in events.frames if f.get("subscribed") is not True]
        return events

    def _login(self, req: _Link, clientKey: bytes, user: str) -> bytes:
        """
        Answer the master's greeting on C{req} with the login of C{user}.

        @return: the key of the session the login opened.
        """
        hello = req.frames.pop(0)
        challenge = hello.get("challenge")
        if hello.get("cmd") != "hello" or not isinstance(challenge, bytes):
            raise MasterUnavailable("the master's req channel did not greet with a challenge")
        login, sessionKey = clientLogin(clientKey, challenge, user)
        req.send(login)
        try:
            self._waitFor(req, lambda: bool(req.frames))
        except MasterUnavailable as e:
            raise MasterUnavailable(f"the master did not answer the client's login ({e})") from e
        reply = req.frames.pop(0)
        if reply.get("ret") != "ok":
            raise MasterUnavailable(f"the master refused this client: {reply.get('error', reply)}")
        return sessionKey

    def _waitFor(self, link: _Link, done: Callable[[], bool]) -> None:
        """
        Read from C{link} alone until C{done()}, for at most
        L{CONNECT_TIMEOUT} seconds (before the session is open).
        """
        link.sock.settimeout(None)
        deadline = self._clock() + CONNECT_TIMEOUT
        while not done():
            if link.closed:
                raise MasterUnavailable("the master closed the connection")
            remaining = deadline - self._clock()
            if remaining <= 0 or not self._wait([link.sock], remaining):
                raise MasterUnavailable(f"no answer within {CONNECT_TIMEOUT:g} seconds")
            link.receive()

    def close(self) -> None:
        """
        Close the connections.
        """
        for link in (self._req, self._events):
            if link is not None:
                link.close()
        self._req = self._events = None

    # Reading

    def _pump(self, deadline: float | None) -> bool:
        """
        Wait until a connection is readable or C{deadline} passes; read and
        dispatch what came.

        @return: whether anything was read (L{False}: the deadline passed).
        """
        assert self._events is not None and self._req is not None
        links = [link for link in (self._events, self._req) if not link.closed]
        if not links:
            return False
        timeout = None if deadline is None else max(0.0, deadline - self._clock())
        ready = self._wait([link.sock for link in links], timeout)
        if not ready:
            return False
        for link in links:
            if link.sock.fileno() in ready:
                link.receive()
        self._dispatchEvents()
        return True

    def _dispatchEvents(self) -> None:
        assert self._events is not None
        frames, self._events.frames = self._events.frames, []
        for frame in frames:
            tag, data = frame.get("tag"), frame.get("data")
            if not isinstance(tag, str) or not isinstance(data, dict):
                continue
            found = jobReturnTag(tag)
            if found is None:
                continue
            jid, minionId = found
            gather = self._gathers.get(jid)
            if gather is not None:
                gather.add(minionId, data)
            elif self._publishing and len(self._early) < _EARLY_LIMIT:
                self._early.append((jid, minionId, data))

    def _request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """
        Send one session request and read until its reply, dispatching the
        events that come meanwhile.

        @raise RequestError: the master answered with an error.
        @raise MasterUnavailable: the connection was lost.
        """
        self._open()
        assert self._req is not None and self._session is not None
        rid = self._nextRid
        self._nextRid += 1
        try:
            self._req.send(self._session.seal(dict(payload, rid=rid)))
        except SerialError as e:
            raise RequestError(f"the request cannot be sent: {e}") from e
        while True:
            reply = self._takeReply(rid)
            if reply is not None:
                break
            if self._req.closed:
                raise MasterUnavailable("the connection to the master was lost")
            self._pump(None)
        if "error" in reply:
            raise RequestError(str(reply["error"]))
        return reply

    def _takeReply(self, rid: int) -> dict[str, Any] | None:
        assert self._req is not None and self._session is not None
        while self._req.frames:
            frame = self._req.frames.pop(0)
            try:
                payload = self._session.open(frame)
            except SessionError as e:
                self._req.closed = True
                raise MasterUnavailable(f"the master's req channel broke the protocol: {e}") from e
            if payload.get("rid") == rid:
                return payload
            # Anything else is a push; the command has no use for it.
        return None

    def _waitReturns(self, gather: _Gather, minions: set[str], timeout: float) -> bool:
        """
        @return: L{True} once all of C{minions} returned, L{False} after
            C{timeout} seconds or when the event bus connection is lost.
        """
        deadline = self._clock() + timeout
        while not minions <= gather.returns.keys():
            if self._eventsLost():
                return False
            if not self._pump(deadline) and self._clock() >= deadline:
                return False
        return True

    # Commands

    def _publishAndGather(
        self,
        tgt: Any,
        tgtType: str,
        fun: str,
        arg: list[Any],
        onReturn: Callable[[str, dict[str, Any]], None] | None,
    ) -> tuple[dict[str, Any], _Gather | None]:
        self._publishing = True
        try:
            reply = self._request(publishRequest(tgt, tgtType, fun, arg, self._user))
        finally:
            self._publishing = False
            early, self._early = self._early, []
        minions = list(reply.get("minions", []))
        if not minions:
            return reply, None
        jid = reply.get("jid", "")
        gather = _Gather(minions, onReturn)
        self._gathers[jid] = gather
        for earlyJid, minionId, data in early:
            if earlyJid == jid:
                gather.add(minionId, data)
        return reply, gather

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
    ) -> JobResult:
        """
        Publish one job and gather its returns, exactly as
        L{salttwist.client.local.LocalClient.run} does: wait C{timeout}
        seconds for the connected targeted minions; then ask the silent
        ones with C{saltutil.find_job} (waiting up to C{gatherJobTimeout}
        for their answers) and keep waiting for those still running it,
        another C{timeout} at a time.

        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused the job.
        """
        self._open()
        reply, gather = self._publishAndGather(tgt, tgtType, fun, arg, None)
        minions = list(reply.get("minions", []))
        result = JobResult(reply.get("jid", ""), minions)
        if gather is None:
            return result
        if onPublished is not None:
            onPublished(result.jid, minions)
        if onReturn is not None:
            for minionId, data in gather.returns.items():
                onReturn(minionId, data)
            gather.onReturn = onReturn

        async def waitFor(waiting: set[str], seconds: float) -> bool:
            return self._waitReturns(gather, waiting, seconds)

        async def findJob(silent: list[str]) -> set[str]:
            return self._findJob(result.jid, silent, gatherJobTimeout)

        try:
            await gatherReturns(
                result,
                set(reply.get("connected", minions)),
                gather.returns,
                waitFor,
                findJob,
                self._eventsLost,
                timeout,
            )
        finally:
            self._gathers.pop(result.jid, None)
        return result

    def _eventsLost(self) -> bool:
        return self._events is None or self._events.closed

    def _findJob(self, jid: str, minions: list[str], gatherJobTimeout: float) -> set[str]:
        """
        Ask C{minions} whether they still run C{jid}.

        @return: those that answered that they do.
        """
        reply, gather = self._publishAndGather(minions, "list", "saltutil.find_job", [jid], None)
        if gather is None:
            return set()
        try:
            self._waitReturns(gather, set(reply["minions"]), gatherJobTimeout)
        finally:
            self._gathers.pop(reply.get("jid", ""), None)
        return {m for m, data in gather.returns.items() if data.get("return")}

    async def publish(
        self, tgt: Any, fun: str, arg: list[Any], tgtType: str = "glob"
    ) -> dict[str, Any]:
        """
        Publish one job without waiting for returns (C{salttwist --async}).

        @return: C{{"jid", "minions", "connected"}}.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused the job.
        """
        return self._request(publishRequest(tgt, tgtType, fun, arg, self._user))


def _readable(socks: list[socket.socket], timeout: float | None) -> set[int]:
    """
    @return: the file descriptors of C{socks} that are readable (or
        closed) within C{timeout} seconds (L{None}: no limit).
    """
    poller = select.poll()
    for sock in socks:
        poller.register(sock.fileno(), select.POLLIN)
    try:
        events = poller.poll(None if timeout is None else timeout * 1000)
    except InterruptedError:
        return set()
    return {fd for fd, _ in events}
