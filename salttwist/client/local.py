# -*- test-case-name: tests.test_local_client -*-
"""
The local client (Salt's LocalClient): publish a job through the master's req
channel and gather the returns from the master's event bus.

It subscribes to C{salt/job/} on the bus before it publishes, so no return
can be missed, and it authenticates with a MAC over the req connection's
challenge keyed with the root key in C{cachedir/.root_key}, which only the
master's user can read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import HostnameEndpoint

from salttwist import crypt, wire
from salttwist.daemon import readRuntimeFile
from salttwist.events.client import EventListenerProtocol, listenEvents
from salttwist.master.keys import readRootKey
from salttwist.master.service import EVENT_PUB_SOCKET, PORTS_FILE
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
        try:
            rootKey = readRootKey(config["cachedir"])
        except (OSError, ValueError) as e:
            events.transport.loseConnection()
            raise MasterUnavailable(
                f"cannot read the master's root key in {config['cachedir']}: "
                f"run salttwist as the master's user ({e})"
            ) from e
        ports = readRuntimeFile(os.path.join(config["sock_dir"], PORTS_FILE)) or {}
        port = ports.get("ret_port") or config["ret_port"]
        host = config["interface"]
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1" if host != "::" else "::1"
        endpoint = HostnameEndpoint(self.reactor, host, port, timeout=CONNECT_TIMEOUT)
        try:
            req = await endpoint.connect(reqClientFactory(config["max_frame_bytes"]))
            challenge = await req.hello.addTimeout(CONNECT_TIMEOUT, self.reactor)
        except Exception as e:
            events.transport.loseConnection()
            raise MasterUnavailable(
                f"cannot reach the master's req channel at {host}:{port} ({e})"
            ) from e
        nonce = os.urandom(32)
        mac = crypt.hmacSha256(rootKey, wire.clientAuthMessage(challenge, nonce))
        try:
            reply = await req.sendClear(
                {"cmd": "_client_auth", "nonce": nonce, "mac": mac}
            ).addTimeout(CONNECT_TIMEOUT, self.reactor)
        except Exception as e:
            req.transport.abortConnection()
            events.transport.loseConnection()
            raise MasterUnavailable(f"the master did not answer the client's login ({e})") from e
        if reply.get("ret") != "ok":
            req.transport.loseConnection()
            events.transport.loseConnection()
            raise MasterUnavailable(f"the master refused this client: {reply.get('error', reply)}")
        req.startSession(crypt.deriveKey(rootKey, wire.clientSessionContext(challenge, nonce)))
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
    ) -> JobResult:
        """
        Publish one job and gather its returns for at most C{timeout} seconds.

        @param onPublished: called with the jid and expected minions.
        @param onReturn: called with each minion's return event as it arrives.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused the job (the message says why).
        """
        early: list[tuple[str, dict[str, Any]]] = []
        result: JobResult | None = None
        finished: Deferred[None] = Deferred()

        def onEvent(tag: str, data: dict[str, Any]) -> None:
            if result is None:
                early.append((tag, data))
            else:
                gather(tag, data)

        def gather(tag: str, data: dict[str, Any]) -> None:
            assert result is not None
            minionId = data.get("id")
            if (
                tag.startswith(f"salt/job/{result.jid}/ret/")
                and minionId in result.minions
                and minionId not in result.returns
            ):
                result.returns[minionId] = data
                if onReturn is not None:
                    onReturn(minionId, data)
                if len(result.returns) == len(result.minions) and not finished.called:
                    finished.callback(None)

        events, req = await self._connect(onEvent, ["salt/job/"])
        try:
            reply = await req.request(
                {
                    "cmd": "publish",
                    "tgt": tgt,
                    "tgt_type": tgtType,
                    "fun": fun,
                    "arg": arg,
                    "user": _user(),
                }
            )
            result = JobResult(reply.get("jid", ""), list(reply.get("minions", [])))
            if not result.minions:
                return result
            if onPublished is not None:
                onPublished(result.jid, result.minions)
            for tag, data in early:
                gather(tag, data)
            if not finished.called:
                timer = self.reactor.callLater(
                    timeout, lambda: finished.called or finished.callback(None)
                )
                events.lost.addCallback(lambda _: finished.called or finished.callback(None))
                await finished
                if timer.active():
                    timer.cancel()
            result.missing = [m for m in result.minions if m not in result.returns]
            return result
        finally:
            req.transport.loseConnection()
            events.transport.loseConnection()

    async def runner(self, fun: str, arg: list[Any]) -> dict[str, Any]:
        """
        Run the runner function C{fun} in the master (Salt's C{salt-run}).

        @return: C{{"jid": ..., "return": ...}}.
        @raise MasterUnavailable: if the master cannot be reached.
        @raise RequestError: if the master refused or the runner failed.
        """
        events, req = await self._connect(lambda tag, data: None, ["salt/run/"])
        try:
            return await req.request({"cmd": "runner", "fun": fun, "arg": arg, "user": _user()})
        finally:
            req.transport.loseConnection()
            events.transport.loseConnection()


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        return "unknown"
