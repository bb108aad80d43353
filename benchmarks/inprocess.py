"""
What the in-process benchmarks (C{return_path_bench.py},
C{minion_path_bench.py}) share: the CPU time of their loop, optionally
under cProfile, and the command line that prints their figures.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import Any


def cpuTimed(work: Callable[[], None], profile: bool, top: int) -> tuple[float, str | None]:
    """
    Run C{work} and measure the process CPU seconds it took
    (C{time.process_time}), under cProfile (CPU time) if C{profile}.

    @return: the seconds, and the profile's C{top} functions by own time
        (or L{None}).
    """
    profiler = cProfile.Profile(time.process_time) if profile else None
    if profiler is not None:
        profiler.enable()
    start = time.process_time()
    work()
    cpu = time.process_time() - start
    if profiler is None:
        return cpu, None
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return cpu, text.getvalue()


def parser(description: str) -> argparse.ArgumentParser:
    """
    @return: a parser with the options every in-process benchmark takes
        (C{--profile}, C{--top}).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--profile", action="store_true", help="cProfile (CPU time) the run")
    parser.add_argument("--top", type=int, default=25)
    return parser


def report(out: dict[str, Any], width: int) -> int:
    """
    Print the figures of C{out}, one per line (their names in C{width}
    columns), then its C{"profile"} if there is one.

    @return: the exit status, 0.
    """
    profile = out.pop("profile", None)
    for key, value in out.items():
        print(f"{key:{width}} {value}")
    if profile:
        print(profile)
    return 0
