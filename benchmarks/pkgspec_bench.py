# -*- test-case-name: tests.test_pkgspec -*-
"""
The cost of comparing Debian versions: L{salttwist.modules._pkgspec}'s
in-process port of dpkg's rules against running C{dpkg
--compare-versions} (what Salt's C{aptpkg.version_cmp} does, up to three
times per comparison).

Prints microseconds per comparison for each (best of C{--repeats} runs,
C{time.process_time} for the port; wall time for dpkg, whose work is in
child processes). The machine is shared: compare the spread of repeats.

    .venv/bin/python benchmarks/pkgspec_bench.py --pairs 200 --repeats 5
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import time

from salttwist.modules._pkgspec import compareVersions

VERSIONS = ["1.0", "1.0-1", "1.0~rc1", "1:0.5", "2.0+b1", "1.10", "1.9", "10.0-1~bpo12+1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200, help="comparisons per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each")
    options = parser.parse_args()
    pairs = list(
        itertools.islice(itertools.cycle(itertools.permutations(VERSIONS, 2)), options.pairs)
    )
    port = []
    dpkg = []
    for _ in range(options.repeats):
        start = time.process_time()
        for _ in range(100):
            for a, b in pairs:
                compareVersions(a, b)
        port.append((time.process_time() - start) / (100 * len(pairs)))
        start = time.perf_counter()
        for a, b in pairs:
            subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False)
        dpkg.append((time.perf_counter() - start) / len(pairs))
    print(f"in-process port: {min(port) * 1e6:.2f} us/comparison (worst {max(port) * 1e6:.2f})")
    print(
        f"dpkg --compare-versions, one call: {min(dpkg) * 1e6:.0f} us/comparison "
        f"(worst {max(dpkg) * 1e6:.0f}); Salt makes up to 3 calls"
    )


if __name__ == "__main__":
    main()
