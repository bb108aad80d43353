# -*- test-case-name: tests.test_client_api,tests.test_cli_salt -*-
"""
Salt's batch mode on the L{Deferred} core, shared by C{salttwist -b} and
L{salttwist.client.LocalClient.cmd_batch}: find the targeted minions that
answer C{test.ping}, then run the job on a batch of them at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Imported when a batch runs: the command line reads batch sizes with
    # this module before it needs the client.
    from salttwist.client.local import JobResult

#: A batch size: C{(number, isPercentage)}.
BatchSpec = tuple[int, bool]


def parseBatch(spec: str | int) -> BatchSpec:
    """
    Read a batch size as Salt writes it: C{N} minions (a whole number or
    its text) or C{N%} of them.

    @raise ValueError: if it is not a whole number >= 1 or a percentage
        1%..100%.
    """
    if isinstance(spec, bool) or not isinstance(spec, (str, int)):
        raise ValueError(f"batch size must be a number or a percentage, not {spec!r}")
    text = str(spec)
    percent = text.endswith("%")
    number = text[:-1] if percent else text
    if not number.isdigit() or int(number) < 1 or (percent and int(number) > 100):
        raise ValueError(
            f"batch size must be a whole number >= 1 or a percentage 1%..100%, not {spec!r}"
        )
    return int(number), percent


def batchSize(spec: BatchSpec, count: int) -> int:
    """
    @return: how many of C{count} minions one batch holds (at least 1; a
        percentage is rounded up).
    """
    number, percent = spec
    if percent:
        return max(1, -(-count * number // 100))
    return number


def failedReturns(result: JobResult) -> bool:
    """
    @return: whether a minion of C{result} returned a non-zero retcode.
    """
    return any((data.get("retcode") or 0) != 0 for data in result.returns.values())


async def runBatches(
    client: Any,
    reactor: Any,
    tgt: Any,
    fun: str,
    arg: list[Any],
    tgtType: str,
    spec: BatchSpec,
    timeout: float,
    gatherJobTimeout: float,
    batchWait: float = 0.0,
    failhard: bool = False,
    onUp: Callable[[list[str]], None] | None = None,
    onBatch: Callable[[list[str]], None] | None = None,
    onReturn: Callable[[str, dict[str, Any]], None] | None = None,
    onBatchDone: Callable[[JobResult], None] | None = None,
) -> tuple[JobResult, bool]:
    """
    Run C{fun} on the minions of C{tgt} that answer C{test.ping}, C{spec}
    of them at a time (in sorted order, each batch a C{list} target),
    waiting C{batchWait} seconds between batches and, with C{failhard},
    stopping after a batch in which a minion failed or did not return.

    @param client: a L{salttwist.client.local.LocalClient}.
    @param arg: the job's arguments in Salt's wire form.
    @param onUp: called with the minions that answered the ping.
    @param onBatch: called with each batch before it is published.
    @param onReturn: called with each return event as it arrives.
    @param onBatchDone: called with the L{JobResult} of each batch.
    @return: the returns of every batch together (with the minions that did
        not answer the ping as missing or not connected), and whether
        C{failhard} stopped the run early.
    @raise MasterUnavailable: if the master cannot be reached.
    @raise RequestError: if the master refused a job.
    """
    from twisted.internet.task import deferLater

    from salttwist.client.local import JobResult

    ping = await client.run(
        tgt, "test.ping", [], tgtType, timeout, gatherJobTimeout=gatherJobTimeout
    )
    combined = JobResult("", ping.minions, missing=list(ping.missing))
    combined.notConnected = list(ping.notConnected)
    up = sorted(ping.returns)
    if onUp is not None:
        onUp(up)
    size = batchSize(spec, len(up))
    for start in range(0, len(up), size):
        chunk = up[start : start + size]
        if start and batchWait:
            await deferLater(reactor, batchWait, lambda: None)
        if onBatch is not None:
            onBatch(chunk)
        result = await client.run(
            chunk,
            fun,
            arg,
            "list",
            timeout,
            onReturn=onReturn,
            gatherJobTimeout=gatherJobTimeout,
        )
        combined.returns.update(result.returns)
        combined.missing += result.missing
        combined.notConnected += result.notConnected
        if onBatchDone is not None:
            onBatchDone(result)
        if failhard and (failedReturns(result) or result.missing):
            return combined, True
    return combined, False
