# -*- test-case-name: tests.test_batch,tests.test_client_api,tests.test_cli_salt -*-
"""
Salt's batch mode on the L{Deferred} core, shared by C{salttwist -b} and
L{salttwist.client.LocalClient.cmd_batch}: find the targeted minions that
answer C{test.ping}, then run the job on a batch of them at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from salttwist.batching import BatchSpec as BatchSpec
from salttwist.batching import SlidingWindow as _SlidingWindow
from salttwist.batching import batchSize as batchSize
from salttwist.batching import parseBatch as parseBatch

if TYPE_CHECKING:
    # Imported when a batch runs: the command line reads batch sizes with
    # this module before it needs the client (or Twisted: the plain
    # command runs without it, see salttwist.client.direct).
    from salttwist.client.local import JobResult


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
    onPublished: Callable[[str, list[str]], None] | None = None,
) -> tuple[JobResult, bool]:
    """
    Run C{fun} on the minions of C{tgt} that answer C{test.ping}, at most
    C{spec} of them at a time, in a sliding window as Salt's batch mode
    does: as soon as a minion returns (or its job ends without its
    return), its place goes to the next minion, in sorted order. The
    minions that start together get one job (a C{list} target).

    @param client: a L{salttwist.client.local.LocalClient}.
    @param arg: the job's arguments in Salt's wire form.
    @param batchWait: seconds a freed place stays empty before the next
        minion takes it (Salt's C{--batch-wait}).
    @param failhard: start no minion after one returned a non-zero
        retcode or did not return; the jobs already running are waited for.
    @param onUp: called with the minions that answered the ping.
    @param onBatch: called with the minions of each job before it is
        published.
    @param onReturn: called with each return event as it arrives.
    @param onBatchDone: called with the L{JobResult} of each job.
    @param onPublished: called with the jid and minions of each job once
        the master published it (not for the ping).
    @return: the returns of every job together (with the minions that did
        not answer the ping as missing or not connected), and whether
        C{failhard} stopped the run (a minion failed).
    @raise MasterUnavailable: if the master cannot be reached.
    @raise RequestError: if the master refused a job.
    """
    from salttwist.client.local import JobResult

    ping = await client.run(
        tgt, "test.ping", [], tgtType, timeout, gatherJobTimeout=gatherJobTimeout
    )
    combined = JobResult("", ping.minions, missing=list(ping.missing))
    combined.notConnected = list(ping.notConnected)
    up = sorted(ping.returns)
    if onUp is not None:
        onUp(up)
    window = _SlidingWindow(
        reactor,
        up,
        batchSize(spec, len(up)),
        batchWait,
        failhard,
        lambda chunk, returned: client.run(
            chunk,
            fun,
            arg,
            "list",
            timeout,
            onReturn=returned,
            gatherJobTimeout=gatherJobTimeout,
            **({} if onPublished is None else {"onPublished": onPublished}),
        ),
        combined,
        onBatch,
        onReturn,
        onBatchDone,
    )
    stopped = await window.run()
    return combined, stopped
