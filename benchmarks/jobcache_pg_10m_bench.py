# -*- test-case-name: tests.test_jobcache_pg -*-
"""
The PostgreSQL job cache (L{salttwist.master.jobcache_pg}) at ten million returns.

Makes a database of its own (C{salttwist_bench_jobcache_<pid>}, dropped at the
end unless C{--keep}), opens it with the real L{PostgresJobCacheDatabase} so
the real migrations make the schema and the real code makes the hourly
partitions, then fills it server-side (C{INSERT ... SELECT} over small tables
COPYed in, one statement per hour of jids): by default 99,000 jobs of 100
returns and 10 jobs of 10,000 returns spread over the last 48 hours, a fleet
of 10,000 minions, realistic C{fun}/C{tgt} values (glob and list targets),
about 100-byte msgpack returns. Then C{VACUUM ANALYZE}, as autovacuum would.

Then it times, through the real cache API on the reactor (L{PostgresJobCache}),
what the master and the runners ask: C{getJob}, C{getReturns}, the
C{jobs.lookup_jid} and C{jobs.list_jobs} runners, C{listJobs} with and
without filters, C{storeReturn} batches into the full table, and the hourly
C{keep_jobs} prune; each several times, printing medians and p95 in ms, the
table and index sizes, and C{EXPLAIN (ANALYZE, BUFFERS)} of the SQL of every
query slower than C{--slow} ms.

Figures only, no assertions. Usage::

    .venv/bin/python benchmarks/jobcache_pg_10m_bench.py [--jobs 99000]
        [--minions-per-job 100] [--big-jobs 10] [--hours 48] [--repeat 15]
        [--keep] [--reuse DBNAME] [--reads-only] [--json FILE]
        [--server 'host=127.0.0.1 port=5432 user=postgres dbname=postgres']
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import psycopg
import psycopg.conninfo
from twisted.internet import task
from twisted.internet.defer import Deferred

from salttwist import serial
from salttwist.master.jobcache import _patternList
from salttwist.master.jobcache_pg import PostgresJobCache
from salttwist.master.jobcache_pgsql import (
    GET_JOB,
    GET_RETURNS,
    PostgresJobCacheDatabase,
    _jidAt,
    _partitionKey,
    listJobsQuery,
)
from salttwist.runners import RunnerContext
from salttwist.runners import jobs as jobsRunners

FLEET = 10_000
ROLES = ("web", "db", "app", "cache", "lb")
FUNCTIONS = (
    # (fun, arg, weight): what a fleet's job cache holds, find_job included
    # (the CLI asks silent minions with it).
    ("test.ping", [], 30),
    ("saltutil.find_job", ["20261127000000000000"], 15),
    ("cmd.run", ["uptime"], 20),
    ("state.apply", [], 8),
    ("state.highstate", [], 2),
    ("grains.items", [], 8),
    ("pkg.install", ["nginx"], 4),
    ("service.restart", ["nginx"], 4),
    ("test.version", [], 5),
    ("disk.usage", [], 4),
)


def _minionId(n: int) -> str:
    group = n // 100
    return f"{ROLES[group % len(ROLES)]}{n:05d}.dc{1 + group % 2}.example.com"


def _load() -> tuple[float, float]:
    one, five, _ = os.getloadavg()
    return one, five


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


# Filling --------------------------------------------------------------------


def fill(options: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """
    Make the schema and the partitions with the real code, then fill the
    tables server-side.

    @return: what was filled (counts, seconds, the jids to query).
    """
    database = PostgresJobCacheDatabase(options)
    database.open()
    now = time.time()
    span = args.hours * 3600.0
    start0 = now - span
    total = args.jobs + args.big_jobs
    rng = random.Random(23)
    weights = [w for _, _, w in FUNCTIONS]
    bigEvery = max(1, total // max(1, args.big_jobs)) if args.big_jobs else 0
    jobs = []  # (k, jid, start, grp, f)
    bigSeen = 0
    for k in range(total):
        start = start0 + span * k / total + rng.random() * 0.001
        if bigEvery and k % bigEvery == bigEvery // 2 and bigSeen < args.big_jobs:
            grp, f = -1, 0
            bigSeen += 1
        else:
            grp = (k * 37) % (FLEET // args.minions_per_job)
            f = rng.choices(range(len(FUNCTIONS)), weights)[0]
        jobs.append((k, _jidAt(start), start, grp, f))
    # Jids must be unique and increasing (the generator's): bump as it does.
    previous = 0
    for i, (k, jid, start, grp, f) in enumerate(jobs):
        value = max(int(jid), previous + 1)
        previous = value
        jobs[i] = (k, f"{value:020d}", start, grp, f)
    keys = sorted({_partitionKey(j[1]) for j in jobs})
    database._withConnection(lambda c: database._ensurePartitions(c, keys))
    database.close()

    groups = []  # (grp, minions, tgt, tgt_type, tgt_match)
    perJob = args.minions_per_job
    for g in range(FLEET // perJob):
        ids = [_minionId(n) for n in range(g * perJob, (g + 1) * perJob)]
        if g % 5 == 4:
            tgt: Any = ids
            tgtType = "list"
        else:
            tgt = f"{ROLES[(g * perJob // 100) % len(ROLES)]}{g * perJob:05d}"[:-(2)] + "*"
            tgtType = "glob"
        match = ids if isinstance(tgt, list) else [tgt]
        groups.append((g, serial.dumps(ids), serial.dumps(tgt), serial.dumps(tgtType), match))
    everyone = [_minionId(n) for n in range(FLEET)]
    groups.append((-1, serial.dumps(everyone), serial.dumps("*"), serial.dumps("glob"), ["*"]))

    stats: dict[str, Any] = {"jobs": total, "hours": args.hours, "partitions": len(keys)}
    begin = time.perf_counter()
    with psycopg.connect(**options, autocommit=True) as connection:
        connection.execute("SET synchronous_commit = off")
        connection.execute(
            'CREATE TEMP TABLE bench_jobs (k int, jid text COLLATE "C", start float8,'
            " grp int, f int)"
        )
        with connection.cursor().copy("COPY bench_jobs FROM STDIN") as copy:
            for row in jobs:
                copy.write_row(row)
        connection.execute(
            "CREATE TEMP TABLE bench_groups (grp int, minions bytea, tgt bytea,"
            " tgt_type bytea, tgt_match text[])"
        )
        with connection.cursor().copy("COPY bench_groups FROM STDIN") as copy:
            for row in groups:
                copy.write_row(row)
        connection.execute("CREATE TEMP TABLE bench_funs (f int, fun text, arg bytea)")
        with connection.cursor().copy("COPY bench_funs FROM STDIN") as copy:
            for f, (fun, arg, _) in enumerate(FUNCTIONS):
                copy.write_row((f, fun, serial.dumps(arg)))
        connection.execute("CREATE TEMP TABLE bench_members (grp int, id text)")
        with connection.cursor().copy("COPY bench_members FROM STDIN") as copy:
            for n in range(FLEET):
                copy.write_row((n // perJob, _minionId(n)))
                copy.write_row((-1, _minionId(n)))
        connection.execute("CREATE INDEX ON bench_jobs (jid)")
        connection.execute("CREATE INDEX ON bench_members (grp)")
        connection.execute("ANALYZE bench_jobs, bench_groups, bench_funs, bench_members")
        user = serial.dumps("root")
        returns = 0
        for i, key in enumerate(keys):
            upper = f"{int(key) + 1:010d}"
            connection.execute(
                "INSERT INTO salttwist_jobs"
                ' (jid, fun, arg, tgt, tgt_match, tgt_type, "user", minions, start_time)'
                " SELECT j.jid, fn.fun, fn.arg, g.tgt, g.tgt_match, g.tgt_type, %s,"
                " g.minions, j.start FROM bench_jobs j JOIN bench_groups g USING (grp)"
                " JOIN bench_funs fn USING (f) WHERE j.jid >= %s AND j.jid < %s",
                (user, key, upper),
            )
            # A 97-character string (msgpack str8: 0xd9 0x61), different for
            # every return; retcode 0, success 1; received within 30 s.
            cursor = connection.execute(
                'INSERT INTO salttwist_returns (jid, id, "return", retcode, success, time)'
                " SELECT j.jid, m.id,"
                " '\\xd961'::bytea || convert_to(left(md5(j.jid || m.id) || md5(m.id || j.jid)"
                " || md5(m.id) || 'abcdefgh', 97), 'UTF8'),"
                " '\\x00'::bytea, '\\x01'::bytea, j.start + 0.2 + (hashtext(m.id) & 31)"
                " FROM bench_jobs j JOIN bench_members m USING (grp)"
                " WHERE j.jid >= %s AND j.jid < %s ORDER BY j.jid, m.id",
                (key, upper),
            )
            returns += cursor.rowcount
            print(
                f"  filled hour {key} ({i + 1}/{len(keys)}): {returns:,} returns,"
                f" {time.perf_counter() - begin:.0f} s",
                flush=True,
            )
        stats["returns"] = returns
        stats["fill_seconds"] = round(time.perf_counter() - begin, 1)
        begin = time.perf_counter()
        connection.execute("VACUUM ANALYZE salttwist_jobs")
        connection.execute("VACUUM ANALYZE salttwist_returns")
        stats["vacuum_analyze_seconds"] = round(time.perf_counter() - begin, 1)
    return stats


def sampleJids(options: dict[str, Any]) -> dict[str, list[str]]:
    """
    @return: jids to query: normal jobs, big jobs, and jobs of the newest
        hours.
    """
    with psycopg.connect(**options, autocommit=True) as connection:
        normal = [
            r[0]
            for r in connection.execute(
                "SELECT jid FROM salttwist_jobs WHERE tgt_match <> '{*}'"
                " ORDER BY md5(jid) LIMIT 400"
            )
        ]
        big = [
            r[0]
            for r in connection.execute("SELECT jid FROM salttwist_jobs WHERE tgt_match = '{*}'")
        ]
    random.Random(7).shuffle(normal)
    return {"normal": normal, "big": big}


def sizes(options: dict[str, Any]) -> dict[str, Any]:
    """
    @return: the tables' and indexes' sizes (all partitions), in MB, and row
        counts.
    """
    with psycopg.connect(**options, autocommit=True) as connection:
        out: dict[str, Any] = {}
        for table in ("salttwist_jobs", "salttwist_returns"):
            row = connection.execute(
                "SELECT sum(pg_table_size(c.oid)), sum(pg_indexes_size(c.oid)),"
                " sum(c.reltuples), count(*)"
                " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = %s::regclass",
                (table,),
            ).fetchone()
            assert row is not None
            out[table] = {
                "table_mb": round(int(row[0] or 0) / 2**20, 1),
                "indexes_mb": round(int(row[1] or 0) / 2**20, 1),
                "rows_estimate": int(row[2] or 0),
                "partitions": int(row[3]),
            }
        indexes = connection.execute(
            "SELECT p.relname, sum(pg_relation_size(c.oid))"
            " FROM pg_class p JOIN pg_inherits i ON i.inhparent = p.oid"
            " JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE p.relkind = 'I' AND p.relname LIKE 'salttwist_%%' GROUP BY 1 ORDER BY 1"
        ).fetchall()
        out["indexes_mb"] = {name: round(int(size) / 2**20, 1) for name, size in indexes}
        out["database_mb"] = round(
            int(connection.execute("SELECT pg_database_size(current_database())").fetchone()[0])  # type: ignore[index]
            / 2**20,
            1,
        )
        return out


def explain(options: dict[str, Any], sql: str, params: Any) -> str:
    """
    @return: C{EXPLAIN (ANALYZE, BUFFERS)} of C{sql} (in a transaction that
        is rolled back: a C{DELETE} deletes nothing).
    """
    with psycopg.connect(**options) as connection:
        rows = connection.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
        connection.rollback()
    return "\n".join(r[0] for r in rows)


# Timing ---------------------------------------------------------------------


class Timings:
    """
    The measured queries, their figures and the SQL to explain.
    """

    def __init__(self, repeat: int) -> None:
        self.repeat = repeat
        self.results: list[dict[str, Any]] = []

    async def measure(
        self,
        name: str,
        call: Callable[[int], Awaitable[Any]],
        sql: tuple[str, Any] | None = None,
        repeat: int | None = None,
        size: Callable[[Any], int] = len,
    ) -> None:
        seconds: list[float] = []
        count = 0
        for i in range(repeat or self.repeat):
            start = time.perf_counter()
            result = await call(i)
            seconds.append((time.perf_counter() - start) * 1000)
            count = size(result)
        entry = {
            "query": name,
            "median_ms": round(statistics.median(seconds), 2),
            "p95_ms": round(_percentile(seconds, 0.95), 2),
            "min_ms": round(min(seconds), 2),
            "runs": len(seconds),
            "rows": count,
        }
        if sql is not None:
            entry["sql"] = sql
        self.results.append(entry)
        print(
            f"{name:<62} median {entry['median_ms']:>9.2f} ms  p95 {entry['p95_ms']:>9.2f} ms"
            f"  ({count} rows, {len(seconds)} runs)",
            flush=True,
        )


async def run(reactor: Any, args: argparse.Namespace) -> None:
    admin = args.server
    name = args.reuse or f"salttwist_bench_jobcache_{os.getpid()}"
    connection = psycopg.conninfo.conninfo_to_dict(admin)
    connection["dbname"] = name
    report: dict[str, Any] = {
        "benchmark": "benchmarks/jobcache_pg_10m_bench.py",
        "argv": sys.argv[1:],
        "machine": {"cpus": os.cpu_count(), "load_before": _load()},
        "database": name,
    }
    with psycopg.connect(admin, autocommit=True) as server:
        report["postgresql"] = server.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        report["settings"] = {
            s: server.execute(f"SHOW {s}").fetchone()[0]  # type: ignore[index]
            for s in ("shared_buffers", "work_mem", "effective_cache_size", "jit")
        }
        if not args.reuse:
            server.execute(f'CREATE DATABASE "{name}"')
    try:
        if not args.reuse:
            print(
                f"filling {name}: {args.jobs:,} jobs of {args.minions_per_job} returns and"
                f" {args.big_jobs} of {FLEET:,} over {args.hours} h",
                flush=True,
            )
            report["fill"] = fill(connection, args)
            print(f"filled: {report['fill']}", flush=True)
            report["load_after_fill"] = _load()
        report["sizes"] = sizes(connection)
        print(json.dumps(report["sizes"], indent=1), flush=True)
        await measureAll(reactor, connection, args, report)
        report["sizes_after"] = sizes(connection)
    finally:
        report["machine"]["load_after"] = _load()
        if not args.keep and not args.reuse:
            with psycopg.connect(admin, autocommit=True) as server:
                server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1, default=str)
                f.write("\n")
            print(f"wrote {args.json}")


async def measureAll(
    reactor: Any, connection: dict[str, Any], args: argparse.Namespace, report: dict[str, Any]
) -> None:
    jids = sampleJids(connection)
    normal, big = jids["normal"], jids["big"]
    cache = PostgresJobCache(connection, reactor, keepJobsHours=args.hours)
    await cache.whenOpen()
    timings = Timings(args.repeat)
    context = RunnerContext(master=SimpleNamespace(jobCache=cache))  # type: ignore[arg-type]
    now = time.time()
    try:
        await measureReads(cache, context, timings, normal, big, now, connection, args, report)
    finally:
        await cache.close()
    report["results"] = timings.results
    for r in timings.results:
        r.pop("sql", None)


async def measureReads(
    cache: PostgresJobCache,
    context: RunnerContext,
    timings: Timings,
    normal: list[str],
    big: list[str],
    now: float,
    connection: dict[str, Any],
    args: argparse.Namespace,
    report: dict[str, Any],
) -> None:
    """
    Time the reads, then (unless C{--reads-only}) the writes and prunes.
    """
    await timings.measure(
        "getJob (a 100-minion job)",
        lambda i: cache.getJob(normal[i]),
        (GET_JOB, (normal[0],)),
        size=lambda job: 1 if job else 0,
    )
    await timings.measure(
        "getReturns (100 returns)",
        lambda i: cache.getReturns(normal[50 + i]),
        (GET_RETURNS, (normal[50],)),
    )
    await timings.measure(
        f"getReturns ({FLEET:,} returns)",
        lambda i: cache.getReturns(big[i % len(big)]),
        (GET_RETURNS, (big[0],)),
    )
    await timings.measure(
        "jobs.lookup_jid runner (100 returns)",
        lambda i: jobsRunners.lookup_jid(context, normal[100 + i]),
    )
    await timings.measure(
        f"jobs.lookup_jid runner ({FLEET:,} returns)",
        lambda i: jobsRunners.lookup_jid(context, big[i % len(big)]),
    )
    hour = 3600.0
    listings: list[tuple[str, dict[str, Any]]] = [
        ("listJobs(limit=100)", {"limit": 100}),
        ("listJobs(fun=test.ping, limit=100)", {"searchFunction": "test.ping", "limit": 100}),
        ("listJobs(fun=state.*, limit=100)", {"searchFunction": "state.*", "limit": 100}),
        ("listJobs(fun=pkg.install, limit=10)", {"searchFunction": "pkg.install", "limit": 10}),
        ("listJobs(tgt=web*, limit=100)", {"searchTarget": "web*", "limit": 100}),
        (
            "listJobs(tgt=lb00442.dc1.example.com, limit=100)",
            {"searchTarget": "lb00442.dc1.example.com", "limit": 100},
        ),
        (
            "listJobs(fun=cmd.run,tgt=[ab]*, limit=100)",
            {"searchFunction": "cmd.run", "searchTarget": "[ab]*", "limit": 100},
        ),
        (
            "listJobs(last hour)",
            {"startTime": now - hour},
        ),
        (
            "listJobs(a 1-hour window 24 h ago)",
            {"startTime": now - 25 * hour, "endTime": now - 24 * hour},
        ),
        (
            "listJobs(fun=test.ping, 1-hour window, limit=100)",
            {
                "searchFunction": "test.ping",
                "startTime": now - 25 * hour,
                "endTime": now - 24 * hour,
                "limit": 100,
            },
        ),
    ]
    for label, kwargs in listings:
        query = listJobsQuery(
            _patternList("searchFunction", kwargs.get("searchFunction")),
            _patternList("searchTarget", kwargs.get("searchTarget")),
            kwargs.get("startTime"),
            kwargs.get("endTime"),
            kwargs.get("limit"),
        )
        await timings.measure(
            label,
            lambda i, kw=kwargs: cache.listJobs(**kw),  # type: ignore[misc]
            (query[0], query[1]),
            repeat=max(5, args.repeat // 2),
        )
    await timings.measure(
        "jobs.list_jobs runner (search_function=test.ping, last 2 h)",
        lambda i: jobsRunners.list_jobs(
            context, search_function="test.ping", start_time=now - 2 * hour
        ),
        repeat=5,
    )
    await timings.measure(
        "jobs.list_jobs runner (no filter: every job)",
        lambda i: jobsRunners.list_jobs(context),
        repeat=3,
    )

    async def listedAndSent(i: int) -> dict[str, Any]:
        # What salttwist-run gets: the master's reply encoded, and
        # decoded by the command (not printed).
        listed = await jobsRunners.list_jobs(context)
        reply = serial.dumps({"jid": "20261127000000000000", "return": listed})
        sizesSent.append(len(reply))
        return serial.loads(reply)["return"]  # type: ignore[no-any-return]

    sizesSent: list[int] = []
    await timings.measure(
        "jobs.list_jobs runner, no filter, reply encoded and decoded",
        listedAndSent,
        repeat=3,
    )
    report["list_jobs_reply_bytes"] = sizesSent[-1]
    # The plans of the slow reads, before anything is pruned.
    explainSlow(connection, timings, args.slow, report)
    if args.reads_only:
        return
    # Writes into the full table: a new job's reservation; a new job of
    # 1,000 minions and its returns, handed over at once, committed.
    await timings.measure(
        "reserveJob (a new job's row, committed)",
        lambda i: cache.reserveJob(
            f"{int(_jidAt(time.time())) + i:020d}",
            {"fun": "test.ping", "arg": [], "tgt": "web*", "tgt_type": "glob", "user": "root"},
            [_minionId(n) for n in range(100)],
        ),
        size=lambda held: int(held),
    )

    async def storeBatch(i: int) -> list[None]:
        jid = f"{int(_jidAt(time.time())) + 1000 + i:020d}"
        minions = [_minionId(n) for n in range(1000)]
        await cache.storeJob(
            jid,
            {"fun": "test.ping", "arg": [], "tgt": "*", "tgt_type": "glob", "user": "root"},
            minions,
        )
        stores = [
            cache.storeReturn(jid, m, {"return": "x" * 90, "retcode": 0, "success": True})
            for m in minions
        ]
        await cache.flush()
        return [await d for d in stores]

    await timings.measure("storeJob + 1,000 storeReturn, committed", storeBatch, repeat=10)
    # The hourly keep_jobs prune, each one an hour later than the last.
    # First with an exact cutoff in the middle of an hour (IJobCache.prune
    # as a caller asks it): the hour before it is dropped, the half hour
    # before the cutoff deleted row by row.
    prunes: list[int] = []

    async def pruneMidHour(i: int) -> int:
        removed = await cache.prune((args.hours - i - 0.5) * hour)
        prunes.append(removed)
        return removed

    await timings.measure(
        "prune, exact cutoff mid-hour (drops 1 hour, deletes 1/2 hour)",
        pruneMidHour,
        repeat=5,
        size=lambda n: n,
    )
    # What the DELETEs cost at the next cutoff, rolled back.
    report["prune_sql"] = explainPrune(connection, time.time() - (args.hours - 5.5) * hour)
    # Then as the master's automatic prune: keep_jobs rounded up to the
    # hour's start (PostgresJobCache._automaticPruneAge): drops only.

    async def pruneAutomatic(i: int) -> int:
        cache.keepJobsHours = args.hours - 6 - i
        removed = await cache.prune(cache._automaticPruneAge())
        prunes.append(removed)
        return removed

    await timings.measure(
        "automatic prune (keep_jobs, cutoff on the hour: drops 1 hour)",
        pruneAutomatic,
        repeat=5,
        size=lambda n: n,
    )
    report["prunes_removed"] = prunes


def explainSlow(
    options: dict[str, Any], timings: Timings, slow: float, report: dict[str, Any]
) -> None:
    """
    Explain the SQL of every query measured so far whose median is above
    C{slow} ms.
    """
    report.setdefault("explain", {})
    for entry in timings.results:
        if entry["median_ms"] <= slow or "sql" not in entry:
            continue
        sql, params = entry["sql"]
        plan = explain(options, sql, params)
        report["explain"][entry["query"]] = plan
        print(f"\nEXPLAIN (ANALYZE, BUFFERS) of {entry['query']}:\n{plan}", flush=True)


def explainPrune(options: dict[str, Any], cutoff: float) -> dict[str, str]:
    """
    @return: the plans of the prune's C{DELETE}s at C{cutoff} (in one
        transaction, rolled back), as L{PostgresJobCacheDatabase.prune}
        runs them.
    """
    cutoffJid = _jidAt(cutoff)
    plans = {}
    with psycopg.connect(**options) as connection:

        def explainOne(label: str, sql: str, params: Any) -> None:
            rows = connection.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
            plans[label] = "\n".join(r[0] for r in rows)
            print(f"\nEXPLAIN (ANALYZE, BUFFERS) of prune: {label}:\n{plans[label]}", flush=True)

        expired = [
            jid
            for (jid,) in connection.execute(
                "SELECT jid FROM salttwist_jobs WHERE start_time < %s", (cutoff,)
            )
        ]
        plans["expired jobs"] = str(len(expired))
        explainOne(
            "delete expired jobs",
            "DELETE FROM salttwist_jobs WHERE start_time < %s RETURNING jid",
            (cutoff,),
        )
        explainOne(
            "delete their returns",
            "DELETE FROM salttwist_returns WHERE jid = ANY(%s)",
            (expired,),
        )
        explainOne(
            "delete orphan returns",
            "DELETE FROM salttwist_returns r WHERE r.jid < %s AND NOT EXISTS"
            " (SELECT 1 FROM salttwist_jobs j WHERE j.jid = r.jid AND j.jid < %s)",
            (cutoffJid, cutoffJid),
        )
        connection.rollback()
    return plans


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--jobs", type=int, default=99_000, help="jobs of --minions-per-job")
    parser.add_argument("--minions-per-job", type=int, default=100)
    parser.add_argument("--big-jobs", type=int, default=10, help=f"jobs of all {FLEET:,} minions")
    parser.add_argument("--hours", type=int, default=48, help="hours of jids the jobs span")
    parser.add_argument("--repeat", type=int, default=15, help="runs of each fast query")
    parser.add_argument("--slow", type=float, default=50.0, help="explain queries slower (ms)")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument(
        "--reads-only",
        action="store_true",
        help="time the reads only (no writes, no prunes): a database kept can be reused again",
    )
    parser.add_argument("--reuse", help="measure this database (filled and kept before)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--server",
        default="host=127.0.0.1 port=5432 user=postgres dbname=postgres",
        help="libpq connection string of a database from which to make the run's own",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    task.react(lambda reactor: Deferred.fromCoroutine(run(reactor, arguments)))
