# -*- test-case-name: tests.test_state_runhooks -*-
"""
The CPU cost of the state runner's Salt hooks (L{salttwist.state.runhooks}):
a run of N trivial states (a state function that returns at once) with
aggregation off, with C{state_aggregate} on for states whose module has a
C{mod_aggregate} (all merged into the first), and a chain of N such states
each requiring the one before (none mergeable: each waits for the one
before).

Prints the best and the median CPU seconds (C{time.process_time}) of
C{--repeats} runs of each; the machine's noise shows in their spread.

    .venv/bin/python benchmarks/runhooks_bench.py --states 3000 --repeats 7
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

from salttwist.state.runner import StateRunner
from salttwist.states import StateContext


def _install(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    return {"name": name, "result": True, "changes": {}, "comment": ""}


def _aggregate(ctx: StateContext, low: dict, chunks: list, running: dict) -> dict:
    for chunk in chunks:
        if chunk is not low and not chunk.get("__agg__"):
            chunk["__agg__"] = True
    return low


STATES = {"bench.install": _install, "bench.mod_aggregate": _aggregate}


def _chunks(count: int, chain: bool) -> list[dict[str, Any]]:
    chunks = []
    for i in range(count):
        low = {
            "state": "bench",
            "fun": "install",
            "__id__": f"n{i}",
            "name": f"n{i}",
            "__sls__": "bench",
            "__env__": "base",
        }
        if chain and i:
            low["require"] = [f"n{i - 1}"]
        chunks.append(low)
    return chunks


def _cpu(count: int, chain: bool, aggregate: bool) -> float:
    base = StateContext(salt={}, opts={"state_aggregate": aggregate})
    runner = StateRunner(STATES, lambda low: dataclasses.replace(base, low=low))
    chunks = _chunks(count, chain)
    start = time.process_time()
    runner.run(chunks)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    cases = [
        ("flat, no aggregation", False, False),
        ("flat, state_aggregate", False, True),
        ("chain, no aggregation", True, False),
        ("chain, state_aggregate", True, True),
    ]
    print(f"{options.states} states, {options.repeats} runs each, CPU seconds")
    for label, chain, aggregate in cases:
        runs = [_cpu(options.states, chain, aggregate) for _ in range(options.repeats)]
        print(f"  {label:24} best {min(runs):.3f}  median {statistics.median(runs):.3f}")


if __name__ == "__main__":
    main()
