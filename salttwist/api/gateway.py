# -*- test-case-name: tests.integration.test_api -*-
"""
The real L{IMasterGateway}: the master reached over the wire, as the
command line reaches it (L{salttwist.client.local.LocalClient}, one
shared connection, authenticated as the master's user: the API runs as
that user, on the master's host), and the key store opened directly, as
C{salttwist-key} opens it.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from salttwist.api.hooks import busFirer
from salttwist.api.interfaces import IMasterGateway
from salttwist.api.wheel import KeyWheel
from salttwist.batching import parseBatch
from salttwist.client.base import CONNECT_TIMEOUT, MasterUnavailable
from salttwist.client.batch import runBatches
from salttwist.client.local import LocalClient
from salttwist.client.sync import cmdReturns
from salttwist.events import EVENT_PUB_SOCKET
from salttwist.events.client import listenEvents

__all__ = ["MasterGateway"]

_log = Logger()


class _AsUser:
    """
    A local client whose jobs are C{user}'s (for L{runBatches}, which
    calls C{run} only).
    """

    def __init__(self, client: LocalClient, user: str) -> None:
        self._client = client
        self._user = user

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        return await self._client.run(*args, **kwargs, user=self._user)


@implementer(IMasterGateway)
class MasterGateway:
    """
    The master of C{config}, on this host.
    """

    def __init__(
        self, config: dict[str, Any], reactor: Any, wheel: KeyWheel, runBlocking: Any
    ) -> None:
        """
        @param wheel: the key functions.
        @param runBlocking: runs C{wheel}'s blocking calls on a thread.
        """
        self.config = config
        self.reactor = reactor
        self.client = LocalClient(config, reactor, keepConnected=True)
        self.keyWheel = wheel
        self.runBlocking = runBlocking
        self._fire = busFirer(reactor, config["sock_dir"])

    def close(self) -> None:
        """
        Close the connection to the master.
        """
        self.client.close()

    def _gatherTimeout(self) -> float:
        return float(self.config.get("gather_job_timeout", 10))

    def run(
        self,
        tgt: Any,
        tgtType: str,
        fun: Any,
        arg: list[Any],
        timeout: float,
        full: bool,
        user: str,
    ) -> Deferred[dict[str, Any]]:
        async def run() -> dict[str, Any]:
            result = await self.client.run(
                tgt, fun, arg, tgtType, timeout, gatherJobTimeout=self._gatherTimeout(), user=user
            )
            return cmdReturns(result, full)

        return Deferred.fromCoroutine(run())

    def publish(self, tgt: Any, tgtType: str, fun: Any, arg: list[Any], user: str) -> Deferred[Any]:
        return Deferred.fromCoroutine(self.client.publish(tgt, fun, arg, tgtType, user))

    def batch(
        self,
        tgt: Any,
        tgtType: str,
        fun: Any,
        arg: list[Any],
        batch: str,
        timeout: float,
        user: str,
    ) -> Deferred[list[dict[str, Any]]]:
        try:
            spec = parseBatch(batch)
        except ValueError as e:
            raise ValueError(f"invalid batch {batch!r}: {e}") from None
        returns: list[dict[str, Any]] = []

        def returned(minionId: str, data: dict[str, Any]) -> None:
            returns.append({minionId: data.get("return")})

        async def run() -> list[dict[str, Any]]:
            await runBatches(
                _AsUser(self.client, user),
                self.reactor,
                tgt,
                fun,
                arg,
                tgtType,
                spec,
                timeout,
                self._gatherTimeout(),
                onReturn=returned,
            )
            return returns

        return Deferred.fromCoroutine(run())

    def runner(self, fun: str, arg: list[Any], user: str | None = None) -> Deferred[dict[str, Any]]:
        return Deferred.fromCoroutine(self.client.runner(fun, arg, user))

    def runnerAsync(self, fun: str, arg: list[Any], user: str) -> Deferred[dict[str, Any]]:
        """
        Start a runner and answer once the master has given it a jid (its
        C{salt/run/<jid>/new} event), not waiting for its end. The runner's
        return comes as C{salt/run/<jid>/ret} on the bus.
        """
        return Deferred.fromCoroutine(self._runnerAsync(fun, arg, user))

    async def _runnerAsync(self, fun: str, arg: list[Any], user: str) -> dict[str, Any]:
        started: Deferred[str] = Deferred()

        def onEvent(tag: str, data: dict[str, Any]) -> None:
            # The first new run of this function with these arguments for
            # this user: two such runs started at once are the same
            # request, whichever gets which jid.
            if (
                not started.called
                and tag.endswith("/new")
                and data.get("fun") == fun
                and data.get("arg") == arg
                and data.get("user") == user
            ):
                started.callback(str(data.get("jid", "")))

        sockPath = os.path.join(self.config["sock_dir"], EVENT_PUB_SOCKET)
        try:
            listener = await listenEvents(
                self.reactor, sockPath, ["salt/run/"], onEvent, timeout=CONNECT_TIMEOUT
            )
        except Exception as e:
            raise MasterUnavailable(
                f"cannot reach the master's event bus at {sockPath} ({e})"
            ) from e
        try:
            running = Deferred.fromCoroutine(self.client.runner(fun, arg, user))

            def failed(failure: Any) -> None:
                # Refused before it started (an unknown runner): the
                # request fails; later, the failure is only logged (the
                # client reads it from salt/run/<jid>/ret).
                if not started.called:
                    started.errback(failure)
                else:
                    _log.failure("api: runner_async {fun} failed", failure, fun=fun)

            running.addErrback(failed)
            jid = await started.addTimeout(CONNECT_TIMEOUT, self.reactor)
        finally:
            listener.transport.loseConnection()
        return {"tag": f"salt/run/{jid}", "jid": jid}

    def wheel(self, fun: str, kwargs: dict[str, Any]) -> Deferred[Any]:
        return self.runBlocking(self.keyWheel.call, fun, kwargs)

    def fire(self, tag: str, data: dict[str, Any]) -> Deferred[bool]:
        return Deferred.fromCoroutine(self._fire(tag, data))

    def grains(self, tgt: Any, tgtType: str) -> Deferred[dict[str, Any]]:
        async def grains() -> dict[str, Any]:
            reply = await self.client.runner(
                "cache.grains", [{"tgt": tgt, "tgt_type": tgtType, "__kwarg__": True}]
            )
            return reply.get("return") or {}

        return Deferred.fromCoroutine(grains())
