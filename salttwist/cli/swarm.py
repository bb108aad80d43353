# -*- test-case-name: tests.test_swarm -*-
"""
C{salttwist-swarm}: the benchmark swarm of simulated minions, which lives in
a checkout (C{benchmarks/swarm.py}), not in the installed package. Installed
from a checkout (C{pip install -e .}, C{make}), this command runs that
script with the same arguments; installed from a wheel, it says where the
swarm is.
"""

from __future__ import annotations

import os
import sys

import salttwist

#: The swarm's command, where an editable install's checkout has it.
SWARM_SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(salttwist.__file__))),
    "benchmarks",
    "swarm.py",
)


def main(argv: list[str] | None = None) -> int:
    """
    Replace this process with C{benchmarks/swarm.py} and C{argv} (by
    default this command's arguments), so signals and the exit status are
    the swarm's own.

    @return: 2, with a message, when there is no checkout to run it from.
    """
    if not os.path.isfile(SWARM_SCRIPT):
        sys.stderr.write(
            "salttwist-swarm: the swarm is a benchmark tool of a salttwist checkout"
            f" (benchmarks/swarm.py), and {SWARM_SCRIPT} does not exist: run it from a"
            " checkout, or install salttwist from one with pip install -e.\n"
        )
        return 2
    args = sys.argv[1:] if argv is None else argv
    os.execv(sys.executable, [sys.executable, SWARM_SCRIPT, *args])
    return 0  # pragma: no cover (execv does not return)
