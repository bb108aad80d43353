# -*- test-case-name: tests.test_jobcache,tests.test_jobcache_worker -*-
"""
The queue of a job cache's operations, on the reactor: operations run one
at a time in the order they were called, and consecutive writes run as one
batch (see L{salttwist.master.jobcache} for why, and L{WRITE_INTERVAL}).

L{OperationQueue} knows nothing of SQL, arguments or backends: its owner,
L{salttwist.master.jobcache.BatchingJobCache}, checks the arguments, makes
the rows and gives it the function that runs an operation (on a thread, or
in a worker process).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

MAX_BATCH_ROWS = 10000
"""
The most rows one write transaction holds.
"""

MAX_BATCH_BYTES = 64 * 1024 * 1024
"""
The most serialised bytes one write transaction holds (a single larger row
still gets a transaction of its own).
"""

MAX_QUEUED_ROWS = 100000
"""
The most writes that may wait for a batch (the batch being written is not
counted): past it a write fails at once with L{JobCacheQueueFull}.
"""

MAX_QUEUED_BYTES = 128 * 1024 * 1024
"""
The most serialised bytes the writes waiting for a batch may hold: past it a
write fails at once with L{JobCacheQueueFull}.
"""

MAX_QUEUED_CALLS = 1000
"""
The most other operations (reads, a new job's reservation, a prune's steps)
that may wait to run alone (the operation in progress is not counted):
past it such an operation fails at once with L{JobCacheQueueFull}. A
barrier (C{flush}) and the close are always taken.
"""

UNBOUNDED_CALLS = frozenset({"open", "close"})
"""
The operations L{MAX_QUEUED_CALLS} never refuses (besides barriers): the
cache's own opening and closing.
"""

WRITE_INTERVAL = 0.05
"""
Seconds at least between the starts of two write batches while writes keep
coming. Nobody on a job's path waits for its rows (the master fires a
return's event at once), so a return may wait this long for the rows that
follow it: 20 minions' returns then cost one transaction, and one round trip
to the job cache worker, instead of one each. Reads, C{flush} and C{close}
never wait for it.
"""


class JobCacheClosed(RuntimeError):
    """
    Raised for an operation on a job cache that was closed.
    """


class JobCacheQueueFull(RuntimeError):
    """
    Raised for a write while L{MAX_QUEUED_ROWS} writes, or
    L{MAX_QUEUED_BYTES}, already wait, or for another operation while
    L{MAX_QUEUED_CALLS} wait: the database does not keep up (a server that
    hangs holds the operation in progress until its connection's timeout).
    Nothing was written; a return so refused is sent again by its minion, a
    job so refused (its reservation, or its row) is refused to its client,
    a read so refused fails.
    """


class _Write:
    """
    One queued C{storeJob} or C{storeReturn}: its row and the L{Deferred} of
    the call.
    """

    __slots__ = ("isJob", "row", "size", "result")

    def __init__(self, isJob: bool, row: tuple[Any, ...], size: int) -> None:
        self.isJob = isJob
        self.row = row
        self.size = size
        self.result: Deferred[None] = Deferred()


class _Call:
    """
    One queued operation that runs alone: the name of a
    L{salttwist.master.jobcache.JobCacheDatabase} method and its arguments,
    or, with no name, a barrier that fires once everything queued before it
    has finished (L{OperationQueue.barrier}).
    """

    __slots__ = ("operation", "args", "result")

    def __init__(self, operation: str | None, args: tuple[Any, ...]) -> None:
        self.operation = operation
        self.args = args
        self.result: Deferred[Any] = Deferred()


class OperationQueue:
    """
    Operations waiting to run, and the batching of writes.

    @ivar running: whether operations are handed to C{run}; while false they
        only wait (a worker-backed cache not yet started).
    @ivar closed: set by the owner once it queued its close: later calls
        fail with L{JobCacheClosed}.
    @ivar writeInterval: see L{WRITE_INTERVAL}.
    @ivar transactionCount: how many write batches have committed.
    @ivar rowsWritten: how many writes those batches held.
    """

    def __init__(
        self,
        reactor: Any,
        run: Callable[..., Deferred[Any]],
        batchFailed: Callable[[Failure, int], None],
        writeInterval: float,
        running: bool = True,
    ) -> None:
        """
        @param reactor: provides C{seconds} and C{callLater} when
            C{writeInterval} is positive.
        @param run: C{run(operation, *args)} runs one operation (C{writeBatch}
            for a batch, with its jobs' and returns' rows) and returns a
            L{Deferred} of its result; called with one operation at a time.
        @param batchFailed: called with the failure and the number of rows
            of a write batch that failed, before its callers' L{Deferred}s
            fail.
        @param writeInterval: see L{WRITE_INTERVAL}.
        @param running: whether operations may run at once.
        """
        self._reactor = reactor
        self._run = run
        self._batchFailed = batchFailed
        self.writeInterval = writeInterval
        self.running = running
        self.closed = False
        self.transactionCount = 0
        self.rowsWritten = 0
        self._queue: deque[_Write | _Call] = deque()
        #: How many of the queued items are not writes (reads, barriers,
        #: the close): while there is one, writes are not held back.
        self._queuedCalls = 0
        #: When the last write batch started (C{reactor.seconds()}).
        self._lastBatch = float("-inf")
        #: The delayed call that starts the writes held back.
        self._writeTimer: Any = None
        self._busy = False
        #: The bounds on the writes waiting (L{MAX_QUEUED_ROWS},
        #: L{MAX_QUEUED_BYTES}), and what they hold now.
        self.maxQueuedRows = MAX_QUEUED_ROWS
        self.maxQueuedBytes = MAX_QUEUED_BYTES
        self.queuedRows = 0
        self.queuedBytes = 0
        #: The bound on the other operations waiting (L{MAX_QUEUED_CALLS}),
        #: and how many wait now (barriers and L{UNBOUNDED_CALLS} not
        #: counted).
        self.maxQueuedCalls = MAX_QUEUED_CALLS
        self.queuedOperations = 0

    def write(self, isJob: bool, row: tuple[Any, ...], size: int) -> Deferred[None]:
        """
        Queue one row for the next write batch.

        @param isJob: a C{jobs} row, else a C{returns} row.
        @param size: its serialised bytes, for L{MAX_BATCH_BYTES} and
            L{maxQueuedBytes}.
        @return: a L{Deferred} firing once the batch holding it committed,
            or failing at once with L{JobCacheQueueFull} past the bounds on
            the writes waiting (a single write is taken whatever its size
            when none waits).
        """
        if self.closed:
            return fail(JobCacheClosed("the job cache is closed"))
        if self.queuedRows >= self.maxQueuedRows or (
            self.queuedRows and self.queuedBytes + size > self.maxQueuedBytes
        ):
            return fail(
                JobCacheQueueFull(
                    f"the job cache does not keep up: {self.queuedRows} writes "
                    f"({self.queuedBytes} bytes) wait already, at most {self.maxQueuedRows} "
                    f"({self.maxQueuedBytes} bytes)"
                )
            )
        item = _Write(isJob, row, size)
        self._queue.append(item)
        self.queuedRows += 1
        self.queuedBytes += size
        # A batch in progress, or writes held back by the timer, take this
        # one along when they are done: nothing to start now.
        if not self._busy and (self._writeTimer is None or len(self._queue) >= MAX_BATCH_ROWS):
            self.pump()
        return item.result

    def call(self, operation: str | None, *args: Any) -> Deferred[Any]:
        """
        Queue C{operation(*args)} to run alone, or with C{operation} L{None}
        a barrier (see L{barrier}).

        @return: a L{Deferred} of its result, failing at once with
            L{JobCacheQueueFull} while L{maxQueuedCalls} operations wait
            (not for a barrier or one of L{UNBOUNDED_CALLS}).
        """
        if self.closed:
            return fail(JobCacheClosed("the job cache is closed"))
        bounded = operation is not None and operation not in UNBOUNDED_CALLS
        if bounded:
            if self.queuedOperations >= self.maxQueuedCalls:
                return fail(
                    JobCacheQueueFull(
                        f"the job cache does not keep up: {self.queuedOperations} operations "
                        f"wait already, at most {self.maxQueuedCalls} ({operation} refused)"
                    )
                )
            self.queuedOperations += 1
        item = _Call(operation, args)
        self._queue.append(item)
        self._queuedCalls += 1
        self.pump()
        return item.result

    def barrier(self) -> Deferred[None]:
        """
        @return: a L{Deferred} that fires once every operation queued before
            it has finished (successfully or not); it costs no backend work.
        """
        return self.call(None)

    def takeAll(self) -> list[_Write | _Call]:
        """
        Empty the queue without running anything.

        @return: what was queued, in order; the caller fires their
            C{result}s.
        """
        items = list(self._queue)
        self._queue.clear()
        self._queuedCalls = 0
        self.queuedRows = self.queuedBytes = 0
        self.queuedOperations = 0
        return items

    def pump(self) -> None:
        """
        Hand the next operation, or the next batch of consecutive writes, to
        C{run} unless one is running, or unless the batch is held back
        (L{_holdWrites}).
        """
        if not self.running:
            return
        while self._queue and not self._busy:
            head = self._queue[0]
            if not isinstance(head, _Call) or head.operation is not None:
                break
            # A barrier: everything before it has finished.
            self._queue.popleft()
            self._queuedCalls -= 1
            head.result.callback(None)
        if self._busy or not self._queue:
            return
        head = self._queue[0]
        if isinstance(head, _Call):
            assert head.operation is not None
            self._queue.popleft()
            self._queuedCalls -= 1
            if head.operation not in UNBOUNDED_CALLS:
                self.queuedOperations -= 1
            self._busy = True
            d = self._run(head.operation, *head.args)
            d.addBoth(self._finished, [head])
            return
        if self._holdWrites():
            return
        if self._writeTimer is not None:
            if self._writeTimer.active():
                self._writeTimer.cancel()
            self._writeTimer = None
        head = self._queue.popleft()
        batch = [head]
        size = head.size
        while self._queue and len(batch) < MAX_BATCH_ROWS:
            following = self._queue[0]
            if not isinstance(following, _Write) or size + following.size > MAX_BATCH_BYTES:
                break
            batch.append(self._queue.popleft())
            size += following.size
        self.queuedRows -= len(batch)
        self.queuedBytes -= size
        jobs = [w.row for w in batch if w.isJob]
        returns = [w.row for w in batch if not w.isJob]
        self._busy = True
        if self.writeInterval > 0:
            self._lastBatch = self._reactor.seconds()
        d = self._run("writeBatch", jobs, returns)
        d.addBoth(self._finished, batch)

    def _holdWrites(self) -> bool:
        """
        Whether the writes at the head of the queue wait: less than
        C{writeInterval} seconds since the last write batch started, nothing
        but writes queued (a read, barrier or close behind them must not
        wait) and less than a full batch of them. If they wait, a delayed
        call starts them when the interval is over.
        """
        if self.writeInterval <= 0 or self._queuedCalls > 0 or len(self._queue) >= MAX_BATCH_ROWS:
            return False
        due = self._lastBatch + self.writeInterval
        now = self._reactor.seconds()
        if now >= due:
            return False
        if self._writeTimer is None or not self._writeTimer.active():
            self._writeTimer = self._reactor.callLater(due - now, self._writeTimerFired)
        return True

    def _writeTimerFired(self) -> None:
        """
        The writes held back may start now.
        """
        self._writeTimer = None
        self.pump()

    def _finished(self, result: object, items: list[_Write] | list[_Call]) -> None:
        """
        An operation or a batch ended: start the next one, then fire the
        callers' L{Deferred}s with C{result} (the batch's rows share it).
        """
        if isinstance(items[0], _Write):
            if isinstance(result, Failure):
                self._batchFailed(result, len(items))
            else:
                self.transactionCount += 1
                self.rowsWritten += len(items)
                result = None
        self._busy = False
        # Start the next batch first: the backend writes it while the
        # reactor runs the callbacks of this one.
        self.pump()
        for item in items:
            if isinstance(result, Failure):
                item.result.errback(result)
            else:
                item.result.callback(result)
