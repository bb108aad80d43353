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
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred

from salttwist import crypt, wire
from salttwist.daemon import PORTS_FILE, readRuntimeFile
from salttwist.events import EVENT_PUB_SOCKET
from salttwist.events.client import EventListenerProtocol, listenEvents
from salttwist.master.acl import readUserKey, userKeyFile
from salttwist.master.keys import ROOT_KEY_FILE, readRootKey
from salttwist.transport.interfaces import ROLE_CLIENT
from salttwist.transport.registry import findTransport
from salttwist.transport.reqclient import ReqClientProtocol, reqClientFactory

CONNECT_TIMEOUT = 2.0


class MasterUnavailable(Exception):
    """
    The master is not running, or this user may not talk to it.
    """


@dataclass
class JobResult:
    """
    What came back for one job.

    @ivar returns: the return events by minion id, in arrival order.
    @ivar missing: the targeted minions that did not return in time.
    """

    jid: str
    minions: list[str]
    returns: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notConnected: list[str] = field(default_factory=list)


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
    keeping those that arrive before the jid is known (a fast minion can
    answer before the publish reply is read).
    """

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor
        self._gathers: dict[str, _Gather] = {}
        self._early: deque[tuple[str, str, dict[str, Any]]] = deque(maxlen=100000)

    def onEvent(self, tag: str, data: dict[str, Any]) -> None:
        parts = tag.split("/")
        if len(parts) != 5 or parts[:2] != ["salt", "job"] or parts[3] != "ret":
            return
        jid, minionId = parts[2], parts[4]
        gather = self._gathers.get(jid)
        if gather is None:
            self._early.append((jid, minionId, data))
        else:
            gather.add(minionId, data)

    def gather(self, jid: str, minions: list[str], onReturn: Any) -> _Gather:
        gather = _Gather(self._reactor, minions, onReturn)
        self._gathers[jid] = gather
        for earlyJid, minionId, data in list(self._early):
            if earlyJid == jid:
                gather.add(minionId, data)
        return gather

    def abort(self) -> None:
        """
        The event bus went away: stop every wait.
        """
        for gather in list(self._gathers.values()):
            gather._finish(False)


class LocalClient:
    """
    Talks to the master running with C{config} on this machine.
    """

    def __init__(self, config: dict[str, Any], reactor: Any) -> None:
        self.config = config
        self.reactor = reactor

    async def _connect(
        self, onEvent: Callable[[str, dict[str, Any]], None], prefixes: list[str]
    ) -> tuple[EventListenerProtocol, ReqClientProtocol]:
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
        user = _user()
        try:
            clientKey = readClientKey(config["cachedir"], user)
        except MasterUnavailable:
            events.transport.loseConnection()
            raise
        ports = readRuntimeFile(os.path.join(config["sock_dir"], PORTS_FILE)) or {}
        port = ports.get("ret_port") or config["ret_port"]
        host = config["interface"]
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1" if host != "::" else "::1"
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
            events.transport.loseConnection()
            raise MasterUnavailable(
                f"cannot reach the master's req channel at {host}:{port} ({e})"
            ) from e
        nonce = os.urandom(32)
        mac = crypt.hmacSha256(clientKey, wire.clientAuthMessage(challenge, nonce, user))
        try:
            reply = await req.sendClear(
                {"cmd": "_client_auth", "nonce": nonce, "mac": mac, "user": user}
            ).addTimeout(CONNECT_TIMEOUT, self.reactor)
        except Exception as e:
            req.transport.abortConnection()
            events.transport.loseConnection()
            raise MasterUnavailable(f"the master did not answer the client's login ({e})") from e
        if reply.get("ret") != "ok":
            req.transport.loseConnection()
            events.transport.loseConnection()
            raise MasterUnavailable(f"the master refused this client: {reply.get('error', reply)}")
        req.startSession(crypt.deriveKey(clientKey, wire.clientSessionContext(challenge, nonce)))
        return events, req

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
        Publish one job and gather its returns, as Salt's LocalClient does:
        wait C{timeout} seconds for the connected targeted minions; then ask
        the silent ones with C{saltutil.find_job} (waiting up to
        C{gatherJobTimeout} for their answers) and keep waiting for those
        still running it, another C{timeout} at a time. Minions the master
        knew were not connected are not waited for at all.

        @param onPublished: called with the jid and expected minions.
        @param onReturn: called with each minion's return event as it arrives.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused the job (the message says why).
        """
        collector = _ReturnCollector(self.reactor)
        async with self._connection(collector.onEvent, ["salt/job/"]) as (events, req):
            events.lost.addCallback(lambda _: collector.abort())
            reply = await self._publish(req, tgt, tgtType, fun, arg)
            minions = list(reply.get("minions", []))
            result = JobResult(reply.get("jid", ""), minions)
            if not minions:
                return result
            connected = set(reply.get("connected", minions))
            if onPublished is not None:
                onPublished(result.jid, minions)
            gather = collector.gather(result.jid, minions, onReturn)
            waiting = connected
            while waiting - set(gather.returns):
                if await gather.waitFor(waiting, timeout):
                    break
                silent = sorted(waiting - set(gather.returns))
                stillRunning = await self._findJob(
                    req, collector, result.jid, silent, gatherJobTimeout
                )
                if not stillRunning:
                    break
                waiting = stillRunning
            result.returns = dict(gather.returns)
            result.notConnected = [
                m for m in minions if m not in connected and m not in result.returns
            ]
            result.missing = [
                m for m in minions if m not in result.returns and m not in result.notConnected
            ]
            return result

    @asynccontextmanager
    async def _connection(
        self, onEvent: Callable[[str, dict[str, Any]], None], prefixes: list[str]
    ) -> AsyncIterator[tuple[EventListenerProtocol, ReqClientProtocol]]:
        """
        The event bus subscription and the authenticated req session of one
        command, both closed when it is done.
        """
        events, req = await self._connect(onEvent, prefixes)
        try:
            yield events, req
        finally:
            req.transport.loseConnection()
            events.transport.loseConnection()

    async def publish(
        self, tgt: Any, fun: str, arg: list[Any], tgtType: str = "glob"
    ) -> dict[str, Any]:
        """
        Publish one job without waiting for returns (C{salttwist --async}).

        @return: C{{"jid", "minions", "connected"}}.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused the job.
        """
        async with self._connection(_ignoreEvent, ["salt/job/"]) as (_, req):
            return await self._publish(req, tgt, tgtType, fun, arg)

    async def _publish(
        self, req: ReqClientProtocol, tgt: Any, tgtType: str, fun: str, arg: list[Any]
    ) -> dict[str, Any]:
        return await req.request(
            {
                "cmd": "publish",
                "tgt": tgt,
                "tgt_type": tgtType,
                "fun": fun,
                "arg": arg,
                "user": _user(),
            }
        )

    async def _findJob(
        self,
        req: ReqClientProtocol,
        collector: _ReturnCollector,
        jid: str,
        minions: list[str],
        gatherJobTimeout: float,
    ) -> set[str]:
        """
        Ask C{minions} whether they still run C{jid}.

        @return: those that answered that they do.
        """
        reply = await self._publish(req, minions, "list", "saltutil.find_job", [jid])
        asked = list(reply.get("minions", []))
        if not asked:
            return set()
        gather = collector.gather(reply["jid"], asked, None)
        await gather.waitFor(set(asked), gatherJobTimeout)
        return {m for m, data in gather.returns.items() if data.get("return")}

    async def runner(self, fun: str, arg: list[Any]) -> dict[str, Any]:
        """
        Run the runner function C{fun} in the master (Salt's C{salt-run}).

        @return: C{{"jid": ..., "return": ...}}.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused or the runner failed.
        """
        async with self._connection(_ignoreEvent, ["salt/run/"]) as (_, req):
            return await req.request({"cmd": "runner", "fun": fun, "arg": arg, "user": _user()})


def _ignoreEvent(tag: str, data: dict[str, Any]) -> None:
    pass


def readClientKey(cachedir: str, user: str, euid: int | None = None) -> bytes:
    """
    The key this process proves itself with: the root key when it runs as
    root or as the master's user (the owner of C{.root_key}), else the key
    the master wrote for C{user} because C{publisher_acl} names it,
    C{cachedir/.<user>_key}.

    @param user: the user this process runs as (L{_user}).
    @param euid: its effective uid; by default C{os.geteuid()}.
    @raise MasterUnavailable: the key cannot be read; the message says which
        key and why.
    """
    if euid is None:
        euid = os.geteuid()
    try:
        owner: int | None = os.stat(os.path.join(cachedir, ROOT_KEY_FILE)).st_uid
    except OSError:
        owner = None
    if euid == 0 or owner == euid:
        try:
            return readRootKey(cachedir)
        except (OSError, ValueError) as e:
            raise MasterUnavailable(
                f"cannot read the master's root key in {cachedir}: "
                f"run salttwist as the master's user ({e})"
            ) from e
    try:
        path = userKeyFile(cachedir, user)
    except ValueError as e:
        raise MasterUnavailable(f"user {user!r} may not publish: {e}") from e
    try:
        return readUserKey(cachedir, user)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise MasterUnavailable(
            f"user {user} may not publish: no readable key {path} ({reason}). The master"
            " writes one at start for each user its publisher_acl names, and the user"
            f" needs to be able to search {cachedir} and the directories above it; see"
            " 'Letting other users publish: publisher_acl' in the README"
        ) from e


def _user() -> str:
    """
    The user this process runs as; run by root through sudo,
    C{sudo_<user>} as Salt names it (C{publisher_acl_blacklist} can tell
    those apart from root itself).
    """
    try:
        import pwd

        name = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return "unknown"
    sudoUser = os.environ.get("SUDO_USER")
    if os.geteuid() == 0 and sudoUser and sudoUser != name:
        return f"sudo_{sudoUser}"
    return name
