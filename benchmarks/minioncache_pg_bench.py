# -*- test-case-name: tests.test_minioncache_pg -*-
"""
Figures of the PostgreSQL grains and pillar caches
(L{salttwist.master.minioncache_pg}), two stores on one database as two
masters of a cluster, on the real reactor:

  1. storm: N minions report their grains to master one at once (an auth
     storm after a restart): seconds until every write is committed, and
     until master two holds them all (notifications and reads);
  2. pillars: N pillars of C{--pillar-keys} keys stored on one: seconds
     until two holds them all;
  3. load: a third store started on the N grains and N pillars: seconds
     until it has read every row, and the reactor's longest stall while
     it did (the rows are decoded on the reactor, in chunks);
  4. one change: K grains updates on one, each awaited on two, one at a
     time: the delay, p50/p99/max.

Figures only, no assertions. The grains are this machine's core grains
(about 1 KB as msgpack), with the minion id changed. Usage::

    .venv/bin/python benchmarks/minioncache_pg_bench.py [--minions 10000] [--changes 200]
        [--pillar-keys 200] [--server 'host=127.0.0.1 port=5432 user=postgres dbname=postgres']
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time
from typing import Any

import psycopg
import psycopg.conninfo
from twisted.internet import defer, task
from twisted.internet.defer import Deferred, ensureDeferred

from salttwist import serial
from salttwist.grains import coreGrains
from salttwist.master.minioncache_pg import (
    MinionDataStore,
    PostgresGrainsCache,
    PostgresPillarCache,
)


async def _until(reactor: Any, condition: Any) -> float:
    started = time.perf_counter()
    while not condition():
        await task.deferLater(reactor, 0.005, lambda: None)
    return time.perf_counter() - started


#: Seconds of CPU each delivery of rows took on the reactor (thread time).
DELIVERIES: list[float] = []


async def _open(reactor: Any, options: dict[str, Any]) -> tuple[Any, Any, Any]:
    store = MinionDataStore(options, reactor)
    deliver = store._deliver

    def timed(*args: Any) -> None:
        started = time.thread_time()
        deliver(*args)
        DELIVERIES.append(time.thread_time() - started)

    store._deliver = timed  # type: ignore[method-assign]
    grains, pillars = PostgresGrainsCache(store), PostgresPillarCache(store)
    store.startService()
    await store.whenLoaded()
    return store, grains, pillars


async def run(reactor: Any, options: argparse.Namespace, connection: dict[str, Any]) -> None:
    stores = []
    try:
        base = coreGrains("minion", {})
        print(f"grains of one minion: {len(serial.dumps(base))} bytes as msgpack")
        storeOne, grainsOne, pillarsOne = await _open(reactor, connection)
        storeTwo, grainsTwo, pillarsTwo = await _open(reactor, connection)
        stores += [storeOne, storeTwo]
        ids = [f"minion-{i:05d}" for i in range(options.minions)]

        started = time.perf_counter()
        writes = [grainsOne.update(m, {**base, "id": m}) for m in ids]
        await defer.gatherResults(writes)
        committed = time.perf_counter() - started
        await _until(reactor, lambda: len(grainsTwo.grains) == len(ids))
        seen = time.perf_counter() - started
        print(
            f"storm: {len(ids)} grains committed in {committed:.2f} s "
            f"({len(ids) / committed:.0f}/s), all on master two after {seen:.2f} s"
        )

        pillar = {f"key{k}": f"value-{k}-" + "x" * 20 for k in range(options.pillar_keys)}
        size = len(serial.dumps(pillar))
        started = time.perf_counter()
        for m in ids:
            pillarsOne.store(m, pillar)
        await _until(reactor, lambda: len(pillarsTwo.pillars) == len(ids))
        seen = time.perf_counter() - started
        print(f"pillars: {len(ids)} of {size} bytes, all on master two after {seen:.2f} s")

        stalls: list[float] = []
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            stalls.append(now - last[0])
            last[0] = now

        ticker = task.LoopingCall(tick)
        ticker.start(0.001)
        del DELIVERIES[:]
        started = time.perf_counter()
        storeThree, grainsThree, pillarsThree = await _open(reactor, connection)
        loaded = time.perf_counter() - started
        ticker.stop()
        stores.append(storeThree)
        print(
            f"load: {len(grainsThree.grains)} grains and {len(pillarsThree.pillars)} pillars "
            f"read by a new master in {loaded:.2f} s; reactor's CPU for it "
            f"{sum(DELIVERIES):.2f} s, at most {max(DELIVERIES) * 1000:.1f} ms at a time; "
            f"longest stall of a 1 ms timer {max(stalls) * 1000:.0f} ms"
        )

        delays = []
        for i in range(options.changes):
            m = ids[i % len(ids)]
            value = {**base, "id": m, "change": i}
            started = time.perf_counter()
            grainsOne.update(m, value)
            await _until(reactor, lambda m=m, i=i: grainsTwo.grains[m].get("change") == i)
            delays.append(time.perf_counter() - started)
        delays.sort()
        print(
            f"one change, one to two: p50 {statistics.median(delays) * 1000:.1f} ms, "
            f"p99 {delays[int(len(delays) * 0.99) - 1] * 1000:.1f} ms, "
            f"max {delays[-1] * 1000:.1f} ms ({len(delays)} changes)"
        )
    finally:
        for store in stores:
            await store.stopService()


def main(reactor: Any, options: argparse.Namespace) -> Deferred[None]:
    name = "salttwist_bench_" + secrets.token_hex(4)
    with psycopg.connect(options.server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    connection = psycopg.conninfo.conninfo_to_dict(options.server)
    connection["dbname"] = name

    def drop(result: object) -> object:
        with psycopg.connect(options.server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        return result

    return ensureDeferred(run(reactor, options, connection)).addBoth(drop)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minions", type=int, default=10000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--pillar-keys", type=int, default=200)
    parser.add_argument(
        "--server", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    task.react(main, [parser.parse_args()])
