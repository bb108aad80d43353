"""
Jobs per second through Salt's own Python API, in one process: run with the
Python of the virtualenv that has Salt installed (C{run.py} does that).

    SALT_VENV/bin/python salt_jobs.py MASTER_CONFIG_DIR --jobs 100 --expect 20

Builds one C{salt.client.LocalClient} from C{MASTER_CONFIG_DIR/master}, runs
C{--warmup} untimed jobs, then C{--jobs} timed calls of
C{client.cmd('*', 'test.ping', timeout=...)} one after the other (stopping
early once C{--max-seconds} have passed), and prints one JSON object on
standard output: the jobs run, the loop's wall time, jobs per second, the
client's CPU seconds per job, each job's latency (median, p90, max) and the
jobs in which fewer than C{--expect} minions returned C{True} (failures).

Only the standard library and Salt are imported here: this runs in Salt's
virtualenv, not salttwist's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """
    Run the loop and print its figures as JSON.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config_dir")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--expect", type=int, required=True, help="minions per job")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--max-seconds", type=float, default=float("inf"))
    options = parser.parse_args(argv)

    started = time.perf_counter()
    import salt.client
    import salt.config

    opts = salt.config.client_config(os.path.join(options.config_dir, "master"))
    client = salt.client.LocalClient(mopts=opts)
    setup = time.perf_counter() - started

    def oneJob() -> tuple[float, int]:
        t0 = time.perf_counter()
        ret = client.cmd("*", "test.ping", timeout=options.timeout)
        elapsed = time.perf_counter() - t0
        return elapsed, sum(1 for value in ret.values() if value is True)

    for _ in range(options.warmup):
        oneJob()
    latencies = []
    failures = 0
    returns = 0
    loopStart = time.perf_counter()
    cpuStart = time.process_time()
    for _ in range(options.jobs):
        elapsed, returned = oneJob()
        latencies.append(elapsed)
        returns += returned
        if returned < options.expect:
            failures += 1
        if time.perf_counter() - loopStart > options.max_seconds:
            break
    total = time.perf_counter() - loopStart
    cpu = time.process_time() - cpuStart
    done = len(latencies)
    ordered = sorted(latencies)
    json.dump(
        {
            "api": "salt.client.LocalClient().cmd",
            "jobs": done,
            "warmup": options.warmup,
            "expect": options.expect,
            "setup_s": round(setup, 4),
            "loop_s": round(total, 4),
            "jobs_per_s": round(done / total, 3),
            "client_cpu_ms_per_job": round(1000 * cpu / done, 2),
            "latency_median_s": round(statistics.median(ordered), 4),
            "latency_p90_s": round(ordered[int(0.9 * (len(ordered) - 1))], 4),
            "latency_max_s": round(ordered[-1], 4),
            "returns": returns,
            "failures": failures,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")
    client.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
