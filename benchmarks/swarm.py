"""
C{benchmarks/swarm.py}: N simulated minions against a master, the
C{salttwist-swarm} command (the code is C{benchmarks/swarmlib.py}; see
C{benchmarks/README.md}, "The swarm"). Each swarm process runs this script.

    .venv/bin/python benchmarks/swarm.py -n 1000 --procs 2 --ports-file PORTS \\
        --accept-into MASTER_PKI_DIR --duration 120
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.swarmlib import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
