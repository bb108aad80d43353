# -*- test-case-name: tests.test_keystore_pg -*-
"""
Figures of the PostgreSQL key store (L{salttwist.pki.keystore_pg}), two
stores on one database as two masters of a cluster:

  1. writes: C{putKey} of N/2 accepted keys through store one, one at a
     time (each a transaction and a C{NOTIFY}), then N/2 more from
     C{--threads} threads at once (the writes that wait together share a
     transaction): writes/s;
  2. load: a third store started on the N keys: seconds to load;
  3. reads from the mirror: C{listKeys} of the N accepted ids and C{getKey};
  4. propagation: K rejections (C{moveKey}) through store one, each waited
     for on store two: the delay from the write's return on one to two's
     watcher, p50/p99/max;
  5. burst: K deletions through one back to back: seconds until two has
     taken them all.

Figures only, no assertions. On this shared 2-core machine repeat a run and
compare: the figures vary with the other load. Usage::

    .venv/bin/python benchmarks/keystore_pg_bench.py [--keys 10000] [--changes 200] [--threads 8]
        [--server 'host=127.0.0.1 port=5432 user=postgres dbname=postgres']
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import psycopg.conninfo

from salttwist.crypt import generatePrivateKey, publicKeyToPem
from salttwist.pki.keystore import ACCEPTED, REJECTED
from salttwist.pki.keystore_pg import PostgresKeyStore


def _open(options: dict[str, object]) -> PostgresKeyStore:
    store = PostgresKeyStore(options)
    store.start()
    store.waitReady(60)
    return store


def main(options: argparse.Namespace) -> None:
    name = "salttwist_bench_" + secrets.token_hex(4)
    with psycopg.connect(options.server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    connection = psycopg.conninfo.conninfo_to_dict(options.server)
    connection["dbname"] = name
    stores: list[PostgresKeyStore] = []
    try:
        one, two = _open(connection), _open(connection)
        stores += [one, two]
        pem = publicKeyToPem(generatePrivateKey().public_key())
        ids = [f"minion-{i:05d}" for i in range(options.keys)]
        print(f"{options.keys} keys, {options.changes} changes, database {name}")

        half = options.keys // 2
        start = time.perf_counter()
        for minionId in ids[:half]:
            one.putKey(ACCEPTED, minionId, pem)
        seconds = time.perf_counter() - start
        print(f"putKey     {half:>7} in {seconds:7.3f} s: {half / seconds:8.0f}/s (one caller)")
        batches = one.batches
        start = time.perf_counter()
        with ThreadPoolExecutor(options.threads) as pool:
            list(pool.map(lambda m: one.putKey(ACCEPTED, m, pem), ids[half:]))
        seconds = time.perf_counter() - start
        rest = len(ids) - half
        print(
            f"putKey     {rest:>7} in {seconds:7.3f} s: {rest / seconds:8.0f}/s"
            f" ({options.threads} callers, {one.batches - batches} transactions)"
        )

        start = time.perf_counter()
        three = _open(connection)
        stores.append(three)
        print(
            f"load       {len(three.listKeys(ACCEPTED)):>7} in {time.perf_counter() - start:7.3f} s"
        )

        start = time.perf_counter()
        for _ in range(20):
            one.listKeys(ACCEPTED)
        print(
            f"listKeys   {options.keys:>7} ids: {(time.perf_counter() - start) / 20 * 1e3:7.3f} ms"
        )
        start = time.perf_counter()
        for minionId in ids[:1000]:
            one.getKey(ACCEPTED, minionId)
        print(f"getKey     {(time.perf_counter() - start) / 1000 * 1e6:7.3f} us")

        seen: dict[str, float] = {}
        arrived = threading.Condition()

        def watcher(minionId: str, states: list[str]) -> None:
            with arrived:
                seen[minionId] = time.perf_counter()
                arrived.notify_all()

        two.watch(watcher)
        delays = []
        for minionId in ids[: options.changes]:
            one.moveKey(minionId, ACCEPTED, REJECTED)
            done = time.perf_counter()
            with arrived:
                if not arrived.wait_for(lambda m=minionId: m in seen, 10):
                    raise SystemExit(f"store two did not see {minionId} within 10 s")
            delays.append(seen[minionId] - done)
        delays.sort()
        p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))]
        print(
            f"propagation of {len(delays)} rejections:"
            f" p50 {statistics.median(delays) * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms,"
            f" max {delays[-1] * 1e3:.2f} ms"
        )

        burst = ids[options.changes : 2 * options.changes]
        seen.clear()
        start = time.perf_counter()
        for minionId in burst:
            one.deleteKey(ACCEPTED, minionId)
        written = time.perf_counter() - start
        with arrived:
            arrived.wait_for(lambda: all(m in seen for m in burst), 60)
        print(
            f"burst of {len(burst)} deletions: written in {written:.3f} s,"
            f" all seen by two after {time.perf_counter() - start:.3f} s"
        )
    finally:
        for store in stores:
            store.close()
        with psycopg.connect(options.server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--server", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    main(parser.parse_args())
