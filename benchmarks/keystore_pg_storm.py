"""
Auth storm against one real master, its keys as files or in PostgreSQL
(C{keys.cache_driver}): what the key store costs the master and its auth
workers (issue 23).

Modes (each a fresh master, C{worker_threads: 2}, and a fresh database):

  - C{files}, C{postgres}: N minions the master never met, accepted by
    C{auto_accept} (each writes a pending key, then the master moves it);
  - C{files-accepted}, C{postgres-accepted}: N minions whose keys are
    accepted before they connect (for PostgreSQL, copied in with
    L{salttwist.pki.stores.copyKeys}).

Printed per mode: seconds until every minion is ready, and the CPU seconds
of the master and its worker processes over that time (per minion). The
database server's CPU is not counted. Figures only; on this shared 2-core
machine the wall time varies with the other load, the CPU less so. Usage::

    .venv/bin/python benchmarks/keystore_pg_storm.py [-n 1000] [MODE ...]
        [--server 'host=127.0.0.1 port=5432 user=postgres dbname=postgres']
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

import psycopg
import psycopg.conninfo
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from salttwist.pki.keystore import FilesystemKeyStore  # noqa: E402
from salttwist.pki.keystore_pg import PostgresKeyStore  # noqa: E402
from salttwist.pki.stores import copyKeys  # noqa: E402

BIN = os.path.dirname(sys.executable)
MODES = ("files", "postgres", "files-accepted", "postgres-accepted")


def _cpuSeconds(pid: int) -> float:
    """
    @return: the user and system CPU seconds of C{pid} and its descendants
        alive now.
    """
    parents: dict[int, int] = {}
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(path.split("/")[2])] = int(fields[1])
    family, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, itsParent in parents.items():
            if itsParent == parent and child not in family:
                family.add(child)
                frontier.append(child)
    total = 0
    for member in family:
        try:
            with open(f"/proc/{member}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _waitForFile(pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = glob.glob(pattern)
        if found:
            return found[0]
        time.sleep(0.1)
    raise SystemExit(f"no {pattern} within {timeout} s")


def run(mode: str, n: int, server: str) -> None:
    """
    One storm in C{mode} with C{n} minions; prints its figures.
    """
    root = tempfile.mkdtemp(prefix="st-kstorm-")
    accepted = mode.endswith("-accepted")
    postgres = mode.startswith("postgres")
    config: dict[str, object] = {
        "root_dir": root,
        "interface": "127.0.0.1",
        "publish_port": 0,
        "ret_port": 0,
        "log_level": "warning",
        "auto_accept": not accepted,
        "worker_threads": 2,
    }
    database = None
    connection = psycopg.conninfo.conninfo_to_dict(server)
    if postgres:
        database = "salttwist_kstorm_" + secrets.token_hex(4)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        connection["dbname"] = database
        config.update(
            {
                "keys.cache_driver": "postgres",
                "keys.postgres.host": connection.get("host", "127.0.0.1"),
                "keys.postgres.port": int(connection.get("port", 5432)),
                "keys.postgres.user": connection.get("user", "postgres"),
                "keys.postgres.db": database,
            }
        )
    with open(os.path.join(root, "master"), "w") as f:
        yaml.safe_dump(config, f)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master = subprocess.Popen(
            [os.path.join(BIN, "salttwist-master"), "-c", root],
            stdout=open(os.path.join(root, "master.log"), "wb"),
            stderr=subprocess.STDOUT,
        )
        processes.append(master)
        ports = _waitForFile(os.path.join(root, "var/run/salttwist/master/master.ports"), 60)
        statusDir = os.path.join(root, "status")
        os.makedirs(statusDir)
        goFile = os.path.join(root, "go")
        acceptInto = os.path.join(root, "scratch-pki" if postgres else "etc/salttwist/pki/master")
        swarm = subprocess.Popen(
            [
                sys.executable, os.path.join(HERE, "swarm.py"), "-n", str(n), "--procs", "1",
                "--ports-file", ports, "--status-dir", statusDir, "--go-file", goFile,
                "--duration", "300", "--id-prefix", "kstorm-",
                *(["--accept-into", acceptInto] if accepted else []),
            ],
            stdout=open(os.path.join(root, "swarm.log"), "wb"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(swarm)
        # The swarm builds its minions (and writes their keys) before the
        # go file: wait until it says so.
        _waitForFile(os.path.join(statusDir, "shard-*.json"), 120)
        if accepted and postgres:
            store = PostgresKeyStore(connection)
            store.start()
            store.waitReady(30)
            copyKeys(FilesystemKeyStore(acceptInto), store)
            store.close()
            time.sleep(1)
        before = _cpuSeconds(master.pid)
        started = time.monotonic()
        open(goFile, "w").close()
        ready = 0
        while time.monotonic() - started < 240:
            ready = 0
            for path in glob.glob(os.path.join(statusDir, "shard-*.json")):
                try:
                    with open(path) as f:
                        ready += json.load(f)["ready"]
                except (OSError, ValueError, KeyError):
                    pass
            if ready >= n:
                break
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        cpu = _cpuSeconds(master.pid) - before
        print(
            f"{mode}: {ready}/{n} minions ready in {elapsed:.1f} s; master and workers "
            f"CPU {cpu:.1f} s ({cpu / max(ready, 1) * 1000:.2f} ms per minion)",
            flush=True,
        )
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait()
        if database is not None:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--minions", type=int, default=1000)
    parser.add_argument(
        "--server", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    parser.add_argument("modes", nargs="*", metavar="MODE", help=f"of {', '.join(MODES)}")
    options = parser.parse_args()
    unknown = [mode for mode in options.modes if mode not in MODES]
    if unknown:
        parser.error(f"unknown mode {unknown[0]!r}; choose from {', '.join(MODES)}")
    for mode in options.modes or MODES:
        run(mode, options.minions, options.server)


if __name__ == "__main__":
    main()
