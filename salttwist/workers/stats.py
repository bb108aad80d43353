# -*- test-case-name: tests.test_master_stats,tests.test_runners_manage -*-
"""
The figures of a worker pool as the master reports them: in its
C{salt/master/stats} events and the C{manage.workers} runner.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NO_WORKERS", "poolStats"]

#: The figures of a master without a worker pool (authentication runs in
#: threads): the same keys as L{salttwist.workers.pool.WorkerPool.stats}.
NO_WORKERS = {
    "size": 0,
    "busy": 0,
    "idle": 0,
    "queued": 0,
    "restarts": 0,
    "completed": 0,
    "failed": 0,
}


def poolStats(pool: Any) -> dict[str, Any]:
    """
    The worker pool's figures (C{size}, C{busy}, C{idle}, C{queued},
    C{restarts}, C{completed}, C{failed}) and C{running}: whether the pool
    checks authentication. Until it is up, or if it cannot start, it does
    not (authentication runs in threads) and every figure is 0.

    @param pool: the master's L{IWorkerPool <salttwist.interfaces.IWorkerPool>},
        or L{None} when it has none (yet).
    """
    if pool is None:
        return {"running": False, **NO_WORKERS}
    return {"running": True, **pool.stats()}
