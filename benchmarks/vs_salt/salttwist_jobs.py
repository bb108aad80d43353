"""
Jobs per second through salttwist's Python API, in one process: run with the
Python of salttwist's virtualenv (C{run.py} does that).

    .venv/bin/python salttwist_jobs.py MASTER_CONFIG_DIR --jobs 100 --expect 20
    .venv/bin/python salttwist_jobs.py MASTER_CONFIG_DIR --api sync ...

C{--api deferred} (the default) drives the Deferred core,
L{salttwist.client.local.LocalClient}, on the reactor:
C{await client.run('*', 'test.ping', [], timeout=...)} one job after the
other, on one client that keeps its connections (C{keepConnected}, as
Salt's LocalClient keeps its event subscription); C{--reconnect} makes it
open and close them for every job instead, as a command line does.
C{--api sync} uses the synchronous facade
C{salttwist.client.LocalClient(...).cmd('*', 'test.ping')}, when salttwist
has one (it prints C{{"available": false}} otherwise).

C{--concurrency K} keeps K jobs running at once through the one client
(K coroutines, or K threads for C{--api sync}), each starting its next
job when its last one ended: jobs per second is then throughput, not one
over the latency.

Either way: C{--warmup} untimed jobs, then C{--jobs} timed ones (stopping
early once C{--max-seconds} have passed), and one JSON object on standard
output with the jobs run, the loop's wall time, jobs per second, the
client's CPU seconds per job (all threads), each job's latency (median,
p90, max) and the jobs in which fewer than C{--expect} minions returned
C{True} (failures).
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def summarise(
    api: str,
    options: argparse.Namespace,
    setup: float,
    total: float,
    cpu: float,
    latencies: list[float],
) -> dict[str, Any]:
    """
    @return: the figures of one loop, as C{salt_jobs.py} reports them.
    """
    ordered = sorted(latencies)
    done = len(latencies)
    return {
        "api": api,
        "jobs": done,
        "concurrency": options.concurrency,
        "reconnect": options.reconnect,
        "warmup": options.warmup,
        "expect": options.expect,
        "setup_s": round(setup, 4),
        "loop_s": round(total, 4),
        "jobs_per_s": round(done / total, 3),
        "client_cpu_ms_per_job": round(1000 * cpu / done, 2),
        "latency_median_s": round(statistics.median(ordered), 4),
        "latency_p90_s": round(ordered[int(0.9 * (len(ordered) - 1))], 4),
        "latency_max_s": round(ordered[-1], 4),
    }


def runDeferred(options: argparse.Namespace) -> dict[str, Any]:
    """
    The loop over the Deferred core, inside one C{task.react}.
    """
    started = time.perf_counter()
    from twisted.internet import defer, task

    from salttwist.client.local import LocalClient
    from salttwist.config import loadMasterConfig

    config = loadMasterConfig(options.config_dir)
    figures: dict[str, Any] = {}

    async def loop(reactor: Any) -> None:
        # Without keepConnected each job has its own connections (and a
        # checkout older than keepConnected can be measured that way too).
        client = (
            LocalClient(config, reactor)
            if options.reconnect
            else LocalClient(config, reactor, keepConnected=True)
        )
        setup = time.perf_counter() - started

        async def oneJob() -> tuple[float, int]:
            t0 = time.perf_counter()
            result = await client.run("*", "test.ping", [], timeout=options.timeout)
            elapsed = time.perf_counter() - t0
            returned = sum(1 for data in result.returns.values() if data.get("return") is True)
            return elapsed, returned

        for _ in range(options.warmup):
            await oneJob()
        latencies: list[float] = []
        counts = {"returns": 0, "failures": 0, "started": 0}
        loopStart = time.perf_counter()
        cpuStart = time.process_time()

        async def worker() -> None:
            while (
                counts["started"] < options.jobs
                and time.perf_counter() - loopStart <= options.max_seconds
            ):
                counts["started"] += 1
                elapsed, returned = await oneJob()
                latencies.append(elapsed)
                counts["returns"] += returned
                counts["failures"] += returned < options.expect

        await defer.gatherResults(
            [defer.Deferred.fromCoroutine(worker()) for _ in range(options.concurrency)],
            consumeErrors=True,
        )
        total = time.perf_counter() - loopStart
        cpu = time.process_time() - cpuStart
        if not options.reconnect:
            client.close()
        figures.update(
            summarise(
                "salttwist.client.local.LocalClient.run", options, setup, total, cpu, latencies
            )
        )
        figures.update(returns=counts["returns"], failures=counts["failures"])

    try:
        task.react(lambda reactor: defer.Deferred.fromCoroutine(loop(reactor)))
    except SystemExit as e:
        # react() always exits; a failure has been logged on stderr.
        if e.code not in (0, None):
            raise
    return figures


def findFacade() -> Callable[..., Any] | None:
    """
    @return: the synchronous C{salttwist.client.LocalClient} facade, or
        L{None} when salttwist has none yet.
    """
    import salttwist.client

    facade = getattr(salttwist.client, "LocalClient", None)
    if facade is None or not hasattr(facade, "cmd"):
        return None
    return facade


def buildFacade(facade: Callable[..., Any], configDir: str) -> Any:
    """
    Construct the facade for the master whose config is in C{configDir},
    with whichever of Salt's spellings (C{c_path}) or salttwist's
    (C{configDir}, C{config_dir}) it takes.
    """
    parameters = inspect.signature(facade).parameters
    for name in ("c_path", "configDir", "config_dir"):
        if name in parameters:
            return facade(**{name: configDir})
    return facade(configDir)


def runSync(options: argparse.Namespace) -> dict[str, Any]:
    """
    The loop over the synchronous facade, when there is one.
    """
    started = time.perf_counter()
    facade = findFacade()
    if facade is None:
        return {"api": "salttwist.client.LocalClient.cmd", "available": False}
    client = buildFacade(facade, options.config_dir)
    setup = time.perf_counter() - started

    def oneJob() -> tuple[float, int]:
        t0 = time.perf_counter()
        ret = client.cmd("*", "test.ping", timeout=options.timeout)
        elapsed = time.perf_counter() - t0
        return elapsed, sum(1 for value in ret.values() if value is True)

    for _ in range(options.warmup):
        oneJob()
    latencies: list[float] = []
    counts = {"returns": 0, "failures": 0, "started": 0}
    lock = threading.Lock()
    loopStart = time.perf_counter()
    cpuStart = time.process_time()

    def worker() -> None:
        while True:
            with lock:
                if (
                    counts["started"] >= options.jobs
                    or time.perf_counter() - loopStart > options.max_seconds
                ):
                    return
                counts["started"] += 1
            elapsed, returned = oneJob()
            with lock:
                latencies.append(elapsed)
                counts["returns"] += returned
                counts["failures"] += returned < options.expect

    threads = [threading.Thread(target=worker) for _ in range(options.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = time.perf_counter() - loopStart
    cpu = time.process_time() - cpuStart
    figures = summarise("salttwist.client.LocalClient.cmd", options, setup, total, cpu, latencies)
    figures.update(available=True, returns=counts["returns"], failures=counts["failures"])
    for name in ("destroy", "close"):
        if callable(getattr(client, name, None)):
            getattr(client, name)()
            break
    return figures


def main(argv: list[str] | None = None) -> int:
    """
    Run the loop and print its figures as JSON.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config_dir")
    parser.add_argument("--api", choices=("deferred", "sync"), default="deferred")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--expect", type=int, required=True, help="minions per job")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--max-seconds", type=float, default=float("inf"))
    parser.add_argument(
        "--concurrency", type=int, default=1, help="jobs running at once (default 1)"
    )
    parser.add_argument(
        "--reconnect",
        action="store_true",
        help="deferred API: connect, authenticate and subscribe for every job (as the CLI)",
    )
    options = parser.parse_args(argv)
    figures = runDeferred(options) if options.api == "deferred" else runSync(options)
    json.dump(figures, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
