"""
Start a C{salttwist-master} daemon for a benchmark and wait until it is
listening (shared by C{cluster_bench.py} and C{failover_bench.py}).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from salttwist.master.service import PORTS_FILE

#: This virtualenv's commands.
BIN = os.path.dirname(os.path.abspath(sys.executable))


def runMaster(directory: str, sockDir: str, timeout: float) -> tuple[subprocess.Popen, int]:
    """
    Start C{salttwist-master -c directory}, its output in
    C{directory/output.log}, and wait for the ports file it writes in
    C{sockDir}.

    @return: the process and its request port.
    @raise SystemExit: the master exited, or wrote no ports file within
        C{timeout} seconds (the message names its log).
    """
    log = open(os.path.join(directory, "output.log"), "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [os.path.join(BIN, "salttwist-master"), "-c", directory], stdout=log, stderr=log
    )
    path = os.path.join(sockDir, PORTS_FILE)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                ports = json.load(f)
            if ports.get("pid") == process.pid:
                return process, int(ports["ret_port"])
        except (OSError, ValueError):
            pass
        if process.poll() is not None:
            raise SystemExit(f"master {directory} exited; see {log.name}")
        time.sleep(0.05)
    raise SystemExit(f"master {directory} did not write {path}")
