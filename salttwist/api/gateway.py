# -*- test-case-name: tests.integration.test_api -*-
"""
The real L{IMasterGateway}: the master reached over the wire, as the
command line reaches it (L{salttwist.client.local.LocalClient}, one
shared connection, authenticated as the master's user: the API runs as
that user, on the master's host), and the key store opened directly, as
C{salttwist-key} opens it.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from zope.interface import implementer

from salttwist.api.interfaces import IMasterGateway
from salttwist.api.wheel import KeyWheel
from salttwist.batching import parseBatch
from salttwist.client.batch import runBatches
from salttwist.client.local import LocalClient
from salttwist.client.sync import cmdReturns

__all__ = ["MasterGateway"]


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

    def close(self) -> None:
        """
        Close the connection to the master.
        """
        self.client.close()

    def _gatherTimeout(self) -> float:
        return float(self.config.get("gather_job_timeout", 10))

    def run(
        self, tgt: Any, tgtType: str, fun: Any, arg: list[Any], timeout: float, full: bool
    ) -> Deferred[dict[str, Any]]:
        async def run() -> dict[str, Any]:
            result = await self.client.run(
                tgt, fun, arg, tgtType, timeout, gatherJobTimeout=self._gatherTimeout()
            )
            return cmdReturns(result, full)

        return Deferred.fromCoroutine(run())

    def publish(self, tgt: Any, tgtType: str, fun: Any, arg: list[Any]) -> Deferred[Any]:
        return Deferred.fromCoroutine(self.client.publish(tgt, fun, arg, tgtType))

    def batch(
        self, tgt: Any, tgtType: str, fun: Any, arg: list[Any], batch: str, timeout: float
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
                self.client,
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

    def runner(self, fun: str, arg: list[Any]) -> Deferred[dict[str, Any]]:
        return Deferred.fromCoroutine(self.client.runner(fun, arg))

    def wheel(self, fun: str, kwargs: dict[str, Any]) -> Deferred[Any]:
        return self.runBlocking(self.keyWheel.call, fun, kwargs)

    def grains(self, tgt: Any, tgtType: str) -> Deferred[dict[str, Any]]:
        async def grains() -> dict[str, Any]:
            reply = await self.client.runner(
                "cache.grains", [{"tgt": tgt, "tgt_type": tgtType, "__kwarg__": True}]
            )
            return reply.get("return") or {}

        return Deferred.fromCoroutine(grains())
