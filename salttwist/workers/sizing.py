# -*- test-case-name: tests.test_workers -*-
"""
How many workers a L{salttwist.workers.pool.WorkerPool} keeps: its sizing
policy, apart from the dispatch of requests (borrowing ampoule's knobs,
C{min}, C{max} and C{maxIdle}; see C{../shared/style.md} section 7).

  - A fixed pool (C{minSize == size}) keeps C{size} workers.
  - An elastic pool (C{minSize < size}) starts C{minSize} workers. Whenever
    requests wait and fewer workers are starting than requests wait, more
    are spawned, up to C{size} workers in all (not while a failed start is
    being retried). A worker idle for C{idleTimeout} seconds while more
    than C{minSize} are up is told to shut down. Each worker is a process
    of its own with its modules and keys loaded (tens of MB), so an idle
    master keeps only C{minSize} of them.
  - A worker that fails to start, or dies while idle, is replaced after a
    back-off: L{RESTART_BACKOFF_BASE} seconds doubling to
    L{RESTART_BACKOFF_MAX}, reset when a worker starts.
"""

from __future__ import annotations

RESTART_BACKOFF_BASE = 0.5
RESTART_BACKOFF_MAX = 30.0


class SizingPolicy:
    """
    The number of workers a pool wants, and when it replaces one.

    @ivar size: the most workers.
    @ivar minSize: the workers started first and kept when idle.
    @ivar idleTimeout: seconds a worker beyond C{minSize} may stay idle.
    @ivar elastic: whether the pool grows and shrinks (C{minSize < size}).
    """

    def __init__(self, size: int, minSize: int | None = None, idleTimeout: float = 60.0) -> None:
        """
        @raise ValueError: if C{size} is below 1, C{minSize} not from 1 to
            C{size}, or C{idleTimeout} not positive.
        """
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        if minSize is None:
            minSize = size
        if not 1 <= minSize <= size:
            raise ValueError(f"minSize must be from 1 to size ({size}), not {minSize}")
        if idleTimeout <= 0:
            raise ValueError(f"idleTimeout must be positive, not {idleTimeout}")
        self.size = size
        self.minSize = minSize
        self.idleTimeout = idleTimeout
        self.elastic = minSize < size

    def toSpawn(self, live: int, starting: int, queued: int) -> int:
        """
        @param live: the workers starting, idle or busy.
        @param starting: those of them still starting.
        @param queued: the requests waiting for a worker.
        @return: how many more workers to spawn for the waiting requests:
            as many as wait beyond those already starting, up to C{size}
            in all.
        """
        return min(self.size - live, queued - starting)

    def mayRetire(self, live: int) -> bool:
        """
        @return: whether an idle worker may be told to shut down, with
            C{live} workers starting, idle or busy.
        """
        return live > self.minSize

    def restartDelay(self, failures: int) -> float:
        """
        @param failures: the failed starts in a row, at least 1.
        @return: seconds to wait before the next replacement is spawned.
        """
        return min(RESTART_BACKOFF_BASE * 2 ** (failures - 1), RESTART_BACKOFF_MAX)
