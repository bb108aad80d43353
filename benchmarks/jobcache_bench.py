# -*- test-case-name: tests.test_jobcache -*-
"""
Throughput of the master's job cache (L{salttwist.master.jobcache}).

Stores N jobs of M minions each, then M returns per job, through the public
API on the real reactor, and prints returns per second. Two arrival
patterns are measured:

  - burst: each job's M returns are handed over in one reactor turn;
  - trickle: the returns of all jobs arrive a few per reactor turn, the way
    they come off the network, while the writer is busy.

Figures only, no assertions. Usage::

    .venv/bin/python benchmarks/jobcache_bench.py [--jobs 100] [--minions 1000]
        [--return-bytes 64] [--per-turn 50] [--path FILE] [--worker]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred, gatherResults

from salttwist.master.jobcache import SQLiteJobCache
from salttwist.master.jobcacheworker import WorkerJobCache


def _jid(n: int) -> str:
    return f"20240101{n:012d}"


def _ret(size: int) -> dict[str, Any]:
    return {"return": "x" * size, "retcode": 0, "success": True}


async def _storeJobs(cache: SQLiteJobCache, first: int, jobs: int, minions: list[str]) -> None:
    load = {"fun": "test.ping", "arg": [], "tgt": "*", "tgt_type": "glob", "user": "root"}
    await gatherResults([cache.storeJob(_jid(first + j), load, minions) for j in range(jobs)])


async def _burst(cache: SQLiteJobCache, first: int, jobs: int, minions: list[str], size: int):
    ret = _ret(size)
    start = time.perf_counter()
    for j in range(jobs):
        jid = _jid(first + j)
        await gatherResults([cache.storeReturn(jid, m, ret) for m in minions])
    return time.perf_counter() - start


async def _trickle(
    reactor: Any,
    cache: SQLiteJobCache,
    first: int,
    jobs: int,
    minions: list[str],
    size: int,
    perTurn: int,
) -> float:
    ret = _ret(size)
    pending: list[Deferred[None]] = []
    calls = [(_jid(first + j), m) for m in minions for j in range(jobs)]
    start = time.perf_counter()
    for offset in range(0, len(calls), perTurn):
        for jid, m in calls[offset : offset + perTurn]:
            pending.append(cache.storeReturn(jid, m, ret))
        # Let the reactor turn, as it would between two network reads.
        await task.deferLater(reactor, 0, lambda: None)
    await gatherResults(pending)
    return time.perf_counter() - start


def _report(name: str, count: int, seconds: float, transactions: int) -> None:
    print(
        f"{name:8} {count:>8} returns in {seconds:7.3f} s = {count / seconds:>9,.0f} returns/s"
        f"  ({transactions} transactions, {count / max(transactions, 1):,.0f} rows each)"
    )


async def main(reactor: Any, options: argparse.Namespace) -> None:
    directory = None
    path = options.path
    if path is None:
        directory = tempfile.mkdtemp(prefix="jobcache-bench-")
        path = os.path.join(directory, "jobs.sqlite")
    if options.worker:
        cache = WorkerJobCache(path, reactor)
        cache.start()
    else:
        cache = SQLiteJobCache(path, reactor)
    try:
        await cache.whenOpen()
        minions = [f"minion-{i:05d}" for i in range(options.minions)]
        jobs, total = options.jobs, options.jobs * options.minions
        print(
            f"{jobs} jobs x {options.minions} minions, {options.return_bytes}-byte returns,"
            f" database {path}"
        )

        start = time.perf_counter()
        await _storeJobs(cache, 0, jobs, minions)
        print(f"storeJob {jobs:>8} jobs    in {time.perf_counter() - start:7.3f} s")

        before = cache.transactionCount
        seconds = await _burst(cache, 0, jobs, minions, options.return_bytes)
        _report("burst", total, seconds, cache.transactionCount - before)

        await _storeJobs(cache, jobs, jobs, minions)
        before = cache.transactionCount
        seconds = await _trickle(
            reactor, cache, jobs, jobs, minions, options.return_bytes, options.per_turn
        )
        _report(f"trickle/{options.per_turn}", total, seconds, cache.transactionCount - before)

        start = time.perf_counter()
        returns = await cache.getReturns(_jid(0))
        print(
            f"getReturns of one job ({len(returns)} returns): {time.perf_counter() - start:.3f} s"
        )
        start = time.perf_counter()
        listed = await cache.listJobs(searchFunction="test.*", limit=100)
        seconds = time.perf_counter() - start
        print(f"listJobs(test.*, limit=100): {len(listed)} jobs in {seconds:.3f} s")
        print(f"database size: {os.path.getsize(path) / 1e6:.1f} MB (plus WAL)")
    finally:
        await cache.close()
        if directory is not None:
            for name in os.listdir(directory):
                os.unlink(os.path.join(directory, name))
            os.rmdir(directory)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--minions", type=int, default=1000)
    parser.add_argument("--return-bytes", type=int, default=64)
    parser.add_argument("--per-turn", type=int, default=50, help="trickle: returns per turn")
    parser.add_argument("--path", help="database file (default: a temporary one)")
    parser.add_argument(
        "--worker", action="store_true", help="the job cache worker process (WorkerJobCache)"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse()
    task.react(lambda reactor: Deferred.fromCoroutine(main(reactor, options)))
