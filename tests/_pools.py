"""
A worker pool stand-in shared by the tests of the pool's users.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred


class RecordingPool:
    """
    An L{salttwist.workers.IWorkerPool} stand-in that records each
    C{run} and answers when the test says so (through the L{Deferred} it
    recorded).

    @ivar calls: C{(task, args, Deferred)} of each C{run} not yet answered
        or taken, in order.
    """

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self.calls: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

    def run(self, task: Any, *args: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.calls.append((task, args, d))
        return d

    def stats(self) -> dict[str, int]:
        return {"size": self.size}
