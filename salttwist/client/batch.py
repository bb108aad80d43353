# -*- test-case-name: tests.test_batch,tests.test_client_api,tests.test_cli_salt -*-
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
    # this module before it needs the client (or Twisted: the plain
    # command runs without it, see salttwist.client.direct).
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

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


class _SlidingWindow:
    """
    The state of one batch run (see L{runBatches}): which minions wait for
    a place, which run, how many places are held empty by C{batchWait}.
    """

    def __init__(
        self,
        reactor: Any,
        minions: list[str],
        size: int,
        batchWait: float,
        failhard: bool,
        runJob: Callable[[list[str], Callable[[str, dict[str, Any]], None]], Any],
        combined: JobResult,
        onBatch: Callable[[list[str]], None] | None,
        onReturn: Callable[[str, dict[str, Any]], None] | None,
        onBatchDone: Callable[[JobResult], None] | None,
    ) -> None:
        from collections import deque

        from twisted.internet.defer import Deferred

        self.reactor = reactor
        self.queue = deque(minions)
        self.size = size
        self.batchWait = batchWait
        self.failhard = failhard
        self.runJob = runJob
        self.combined = combined
        self.onBatch = onBatch
        self.onReturn = onReturn
        self.onBatchDone = onBatchDone
        self.running: set[str] = set()
        self.jobs: set[Deferred[Any]] = set()
        self.held: list[Any] = []
        self.stopped = False
        self.failure: Failure | None = None
        self.filling = False
        self.fillAgain = False
        self.done: Deferred[bool] = Deferred()

    async def run(self) -> bool:
        """
        Run every minion through the window.

        @return: whether C{failhard} stopped the run.
        """
        self.fill()
        self.checkDone()
        return await self.done

    def fill(self) -> None:
        """
        Start the next minions in the free places. A job whose returns
        arrive while it starts (or while another does) fills again after
        it, not from inside it.
        """
        if self.filling:
            self.fillAgain = True
            return
        self.filling = True
        try:
            self.fillAgain = True
            while self.fillAgain:
                self.fillAgain = False
                self.startNext()
        finally:
            self.filling = False

    def startNext(self) -> None:
        free = self.size - len(self.running) - len(self.held)
        if self.stopped or self.failure is not None or free <= 0 or not self.queue:
            return
        chunk = [self.queue.popleft() for _ in range(min(free, len(self.queue)))]
        self.running.update(chunk)
        if self.onBatch is not None:
            self.onBatch(chunk)
        from twisted.internet.defer import ensureDeferred

        job = ensureDeferred(self.runJob(chunk, self.returned))
        if not job.called:
            self.jobs.add(job)
        job.addBoth(self.jobEnded, job, chunk)

    def returned(self, minionId: str, data: dict[str, Any]) -> None:
        self.combined.returns[minionId] = data
        if self.onReturn is not None:
            self.onReturn(minionId, data)
        if self.failhard and (data.get("retcode") or 0) != 0:
            self.stopped = True
        self.release([minionId])

    def release(self, minionIds: list[str]) -> None:
        """
        Free the places of C{minionIds} (those still running): at once, or
        after C{batchWait}; places freed together start one job.
        """
        freed = [minionId for minionId in minionIds if minionId in self.running]
        if not freed:
            return
        self.running.difference_update(freed)
        if self.batchWait and self.queue and not self.stopped:
            for _ in freed:
                self.held.append(self.reactor.callLater(self.batchWait, self.heldEnded))
        else:
            self.fill()

    def heldEnded(self) -> None:
        self.held = [hold for hold in self.held if hold.active()]
        self.fill()
        self.checkDone()

    def jobEnded(self, result: Any, job: Deferred[Any], chunk: list[str]) -> None:
        from twisted.python.failure import Failure

        self.jobs.discard(job)
        if isinstance(result, Failure):
            if self.failure is None:
                self.failure = result
        else:
            self.combined.returns.update(result.returns)
            self.combined.missing += result.missing
            self.combined.notConnected += result.notConnected
            if self.onBatchDone is not None:
                self.onBatchDone(result)
            if self.failhard and result.missing:
                self.stopped = True
        self.release(chunk)
        self.checkDone()

    def checkDone(self) -> None:
        """
        Fire L{done} once no job runs and no minion can start any more.
        """
        if self.done.called or self.jobs or self.filling:
            return
        if not (self.stopped or self.failure is not None or not self.queue):
            # A place held empty by batchWait starts the next minions.
            return
        for hold in self.held:
            if hold.active():
                hold.cancel()
        self.held = []
        if self.failure is not None:
            self.done.errback(self.failure)
        else:
            self.done.callback(self.stopped)
