# -*- test-case-name: tests.test_workers -*-
"""
L{TaskBatcher}: many small requests to a pool, sent as few task calls.

Each task call costs the parent and the worker the same fixed work whatever
it carries (an AMP box each way, a pipe write that wakes the other process,
the pool's bookkeeping): in an authentication storm that was about as much
CPU as the authentication itself. A batcher keeps at most as many calls in
flight as the pool has workers; requests that arrive while they are all out
wait, and go together in the next call (up to C{maxBatch} of them). A
request that finds no call in flight is sent at once, alone.

With C{holdFor}, while requests keep coming at most one call goes every
C{holdFor} seconds, unless C{maxBatch} requests wait: a request that finds
a call in flight (even if another worker is free), or one sent less than
C{holdFor} seconds ago, waits with the others until then. So a steady
stream of requests goes in batches, to one worker while it keeps up; more
workers (which an elastic pool starts on demand, each costing a start-up)
are used only once one falls behind. A request after a quiet spell is
still sent at once.

The batch task takes the list of items (then any extra arguments) and
returns one answer per item, in order: C{{"result": value}}, or
C{{"errorType": name, "errorMessage": text}} when that item failed, which
fails that item alone with L{TaskError}. A failure of the whole call
(L{WorkerFailed}, L{TaskError}, ...) fails every item of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import IO, Any

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from salttwist.interfaces import IWorkerPool
from salttwist.workers import TaskError
from salttwist.workers.tasks import failureAnswer, taskName


def runEach(
    function: Callable[..., Any],
    items: Sequence[Sequence[Any]],
    *extra: Any,
    errorStream: IO[str] | None = None,
) -> list[dict[str, Any]]:
    """
    The body of a batch task: C{function(*item, *extra)} for each item, its
    result or its error kept apart from the others' (see the module
    docstring).

    @param errorStream: where the traceback of an item's failure is written
        (C{sys.stderr} by default, which a worker's pool logs).
    """
    answers: list[dict[str, Any]] = []
    for item in items:
        try:
            answers.append({"result": function(*item, *extra)})
        except Exception as e:
            answers.append(failureAnswer(e, "a batch item", errorStream))
    return answers


#: With C{holdFor}, how many times C{holdFor} a request that finds a call
#: in flight waits for it before it goes to another worker (a hung worker
#: is killed only after the pool's task timeout).
BUSY_PATIENCE = 20
_EPSILON = 1e-9


class TaskBatcher:
    """
    Sends requests to one batch task of a pool, several per call when the
    pool is busy.

    @ivar inFlight: the batch calls sent and not yet answered.
    """

    def __init__(
        self,
        pool: IWorkerPool,
        task: Any,
        extraArguments: Callable[[], Sequence[Any]] = tuple,
        maxBatch: int = 32,
        maxInFlight: int | None = None,
        clock: Any = None,
        holdFor: float = 0.0,
    ) -> None:
        """
        @param task: the batch task (its name or its function).
        @param extraArguments: returns the arguments passed after the list
            of items, read when a batch is sent (so they are current then).
        @param maxBatch: the most items in one call.
        @param maxInFlight: the most calls in flight (the pool's C{size} by
            default: one per worker).
        @param clock: an L{IReactorTime}, needed for C{holdFor}.
        @param holdFor: while requests keep coming, at most one call is
            sent every this many seconds (a full batch goes at once): a
            request that finds a call sent less than C{holdFor} seconds ago
            waits for more to go with it, and one that finds a call in
            flight waits for it to come back (for L{BUSY_PATIENCE} times
            C{holdFor} at most: then it goes to another worker); one that
            finds neither is sent at once.
        """
        if maxBatch < 1:
            raise ValueError("maxBatch must be at least 1")
        self.pool = pool
        self._task = taskName(task)
        self._extra = extraArguments
        self._maxBatch = maxBatch
        self._maxInFlight = maxInFlight or max(1, int(pool.stats()["size"]))
        self._waiting: list[tuple[list[Any], Deferred[Any]]] = []
        self._sending = False
        self._clock = clock
        self._holdFor = holdFor if clock is not None else 0.0
        self._holdCall: Any = None
        self._holdAt = 0.0
        self._lastSent = float("-inf")
        #: When the oldest request waiting began to (with C{holdFor}).
        self._waitingSince = 0.0
        self.inFlight = 0

    def run(self, *item: Any) -> Deferred[Any]:
        """
        Run the batch task for one item (its msgpack-able values).

        @return: a L{Deferred} firing with that item's result, or failing
            with L{TaskError} (that item, or the whole call, failed) or with
            whatever the pool's C{run} failed with. Cancelling it drops the
            item if it has not been sent yet.
        """
        entry: tuple[list[Any], Deferred[Any]]

        def cancel(d: Deferred[Any]) -> None:
            try:
                self._waiting.remove(entry)
            except ValueError:
                pass

        d: Deferred[Any] = Deferred(cancel)
        entry = (list(item), d)
        if not self._waiting and self._holdFor > 0:
            self._waitingSince = self._clock.seconds()
        self._waiting.append(entry)
        self._send()
        return d

    def _send(self) -> None:
        if self._sending:
            # Called back from a call answered at once (an inline pool):
            # the loop below goes on.
            return
        self._sending = True
        try:
            while self._waiting and self.inFlight < self._maxInFlight:
                if self._holdFor > 0 and len(self._waiting) < self._maxBatch:
                    now = self._clock.seconds()
                    wait = self._holdTime(now)
                    if wait > _EPSILON:
                        self._holdUntil(now, wait)
                        break
                batch = self._waiting[: self._maxBatch]
                del self._waiting[: self._maxBatch]
                self.inFlight += 1
                if self._holdFor > 0:
                    self._lastSent = self._waitingSince = self._clock.seconds()
                try:
                    d = self.pool.run(self._task, [item for item, _ in batch], *self._extra())
                except Exception:
                    d = Deferred()
                    d.errback(Failure())
                d.addCallbacks(self._answered, self._failed, (batch,), None, (batch,))
            if not self._waiting:
                self._cancelHold()
        finally:
            self._sending = False

    def _holdTime(self, now: float) -> float:
        """
        @return: how much longer (from C{now}) the waiting requests wait for
            others (see C{holdFor}): until C{holdFor} after the last call
            was sent, or while a call is in flight until it comes back, for
            L{BUSY_PATIENCE} times C{holdFor} at most.
        """
        if self.inFlight:
            return self._waitingSince + BUSY_PATIENCE * self._holdFor - now
        return self._lastSent + self._holdFor - now

    def _holdUntil(self, now: float, wait: float) -> None:
        """
        Come back to the waiting requests C{wait} seconds after C{now} (or
        when a call comes back, whichever is first).
        """
        when = now + wait
        if self._holdCall is not None and abs(self._holdAt - when) <= _EPSILON:
            return
        self._cancelHold()
        self._holdAt = when
        self._holdCall = self._clock.callLater(wait, self._holdOver)

    def _cancelHold(self) -> None:
        call, self._holdCall = self._holdCall, None
        if call is not None and call.active():
            call.cancel()

    def _holdOver(self) -> None:
        """
        The waiting requests have waited long enough: send them as soon as
        the in-flight limit allows.
        """
        self._holdCall = None
        self._send()

    def _answered(self, answers: Any, batch: list[tuple[list[Any], Deferred[Any]]]) -> None:
        self.inFlight -= 1
        if not isinstance(answers, list) or len(answers) != len(batch):
            self._failed(
                Failure(
                    TaskError(
                        self._task,
                        "salttwist.serial.SerialError",
                        f"expected {len(batch)} answers, got {answers!r:.200}",
                    )
                ),
                batch,
                counted=True,
            )
            return
        self._send()
        for (_, d), answer in zip(batch, answers, strict=True):
            if d.called:
                # Cancelled after it was sent: the answer is dropped.
                continue
            if not isinstance(answer, dict) or "result" not in answer:
                errorType = answer.get("errorType") if isinstance(answer, dict) else None
                message = answer.get("errorMessage") if isinstance(answer, dict) else None
                d.errback(
                    TaskError(
                        self._task,
                        str(errorType or "salttwist.serial.SerialError"),
                        str(message or f"malformed answer {answer!r:.200}"),
                    )
                )
            else:
                d.callback(answer["result"])

    def _failed(
        self,
        failure: Failure,
        batch: list[tuple[list[Any], Deferred[Any]]],
        counted: bool = False,
    ) -> None:
        if not counted:
            self.inFlight -= 1
        self._send()
        for _, d in batch:
            if not d.called:
                d.errback(failure)
