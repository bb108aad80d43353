# -*- test-case-name: tests.test_jobcache_pg -*-
"""
Throughput of the PostgreSQL job cache (L{salttwist.master.jobcache_pg}).

The same measures as C{jobcache_bench.py} (N jobs of M minions, their
returns handed over in a burst per job, then trickling a few per reactor
turn), on a database made for the run and dropped after it; then the same
returns replayed (stored once: C{ON CONFLICT DO NOTHING}), the reads, and a
prune that drops the partitions.

Figures only, no assertions. Usage::

    .venv/bin/python benchmarks/jobcache_pg_bench.py [--jobs 100] [--minions 1000]
        [--return-bytes 64] [--per-turn 50]
        [--server 'host=127.0.0.1 port=5432 user=postgres dbname=postgres']
"""

from __future__ import annotations

import argparse
import secrets
import time
from typing import Any

import psycopg
import psycopg.conninfo
from jobcache_bench import _burst, _jid, _report, _storeJobs, _trickle
from twisted.internet import task
from twisted.internet.defer import Deferred

from salttwist.master.jobcache_pg import PostgresJobCache


async def main(reactor: Any, options: argparse.Namespace) -> None:
    name = "salttwist_bench_" + secrets.token_hex(4)
    with psycopg.connect(options.server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    connection = psycopg.conninfo.conninfo_to_dict(options.server)
    connection["dbname"] = name
    cache = PostgresJobCache(connection, reactor)
    try:
        await cache.whenOpen()
        minions = [f"minion-{i:05d}" for i in range(options.minions)]
        jobs, total = options.jobs, options.jobs * options.minions
        print(
            f"{jobs} jobs x {options.minions} minions, {options.return_bytes}-byte returns,"
            f" database {name} on {options.server!r}"
        )
        start = time.perf_counter()
        await _storeJobs(cache, 0, jobs, minions)  # type: ignore[arg-type]
        print(f"storeJob {jobs:>8} jobs    in {time.perf_counter() - start:7.3f} s")

        before = cache.transactionCount
        seconds = await _burst(cache, 0, jobs, minions, options.return_bytes)  # type: ignore[arg-type]
        _report("burst", total, seconds, cache.transactionCount - before)

        before = cache.transactionCount
        seconds = await _burst(cache, 0, jobs, minions, options.return_bytes)  # type: ignore[arg-type]
        _report("replayed", total, seconds, cache.transactionCount - before)

        await _storeJobs(cache, jobs, jobs, minions)  # type: ignore[arg-type]
        before = cache.transactionCount
        seconds = await _trickle(
            reactor,
            cache,  # type: ignore[arg-type]
            jobs,
            jobs,
            minions,
            options.return_bytes,
            options.per_turn,
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
        start = time.perf_counter()
        removed = await cache.prune(0)
        seconds = time.perf_counter() - start
        print(f"prune (drops the partitions): {removed} rows in {seconds:.3f} s")
    finally:
        await cache.close()
        with psycopg.connect(options.server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--minions", type=int, default=1000)
    parser.add_argument("--return-bytes", type=int, default=64)
    parser.add_argument("--per-turn", type=int, default=50, help="trickle: returns per turn")
    parser.add_argument(
        "--server",
        default="host=127.0.0.1 port=5432 user=postgres dbname=postgres",
        help="libpq connection string of a database from which to make the run's own",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse()
    task.react(lambda reactor: Deferred.fromCoroutine(main(reactor, options)))
