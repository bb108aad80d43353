# -*- test-case-name: tests.test_batch,tests.test_states_saltmod_batch -*-
"""
Salt's batch mode without a client: batch sizes (C{10}, C{25%}) and the
sliding window that runs a job on a few minions at a time, freeing a place
as each returns. L{salttwist.client.batch} (C{salttwist -b},
C{LocalClient.cmd_batch}) and the orchestration's C{salt.state} with
C{batch} (L{salttwist.states.saltmod}) both run it, each with its own way
to publish a job.

Twisted is imported only when a window runs: the plain C{salttwist}
command reads batch sizes without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure


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


class SlidingWindow:
    """
    The state of one batch run (see L{salttwist.client.batch.runBatches}):
    which minions wait for a place, which run, how many places are held
    empty by C{batchWait}.

    C{runJob(minions, returned)} publishes one job to C{minions}, calls
    C{returned(minion, event)} as each returns and gives (or fires with) a
    result with C{returns} (events by minion), C{missing} and
    C{notConnected} (lists); C{combined} is such a result, which gathers
    every job's.
    """

    def __init__(
        self,
        reactor: Any,
        minions: list[str],
        size: int,
        batchWait: float,
        failhard: bool,
        runJob: Callable[[list[str], Callable[[str, dict[str, Any]], None]], Any],
        combined: Any,
        onBatch: Callable[[list[str]], None] | None,
        onReturn: Callable[[str, dict[str, Any]], None] | None,
        onBatchDone: Callable[[Any], None] | None,
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
