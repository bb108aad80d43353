"""
C{make bench-cluster}: a cluster of real masters on this machine, with N
simulated failover minions spread over them (issue 23, docs/cluster.md
"Capacity").

Three C{salttwist-master} processes (this checkout's virtualenv, ports from
the OS) form one cluster through the machine's NATS JetStream server (a
cluster id of the run's own, its stream deleted at the end), with their
keys (C{keys.cache_driver: postgres}) and job cache (C{master_job_cache:
pgjsonb}) in one PostgreSQL database made for the run and dropped at the
end, and one key pair. The swarm (C{benchmarks/swarm.py --masters}, several
processes) lists every master in failover mode, each process starting on
another one. Phases:

  1. start: every minion authenticates (an auth storm over the masters);
  2. fan-out: C{test.ping} to all, published through master A
     (C{salttwist --async}); the returns' rows are counted in PostgreSQL
     until all are there: returns/s into PostgreSQL, and the CPU seconds
     the masters (with their worker processes), the database's backends
     (C{pg_stat_activity} for the run's database) and the broker
     (C{nats-server}, shared with whatever else uses it) spent per return;
  3. failover: C{kill -9} of master C; how long its minions take to be
     ready on A or B (50 %, 90 %, all), and A's and B's CPU for it;
  4. fan-out again through A, to every minion on the two masters left.

It prints figures and writes C{benchmarks/results/<date>-cluster-<host>.json};
it asserts no time.

    .venv/bin/python benchmarks/cluster_bench.py -n 5000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import psycopg  # noqa: E402
import psycopg.conninfo  # noqa: E402

from benchmarks.masterproc import runMaster  # noqa: E402
from benchmarks.swarmlib import (  # noqa: E402
    DEFAULT_KEYS_DIR,
    minionIdFor,
    raiseFileLimit,
    readKeyPair,
    readStatus,
)
from salttwist import crypt  # noqa: E402
from salttwist.config import loadMasterConfig  # noqa: E402
from salttwist.pki.keystore import ACCEPTED  # noqa: E402
from salttwist.pki.keystore_pg import PostgresKeyStore  # noqa: E402

BIN = os.path.dirname(os.path.abspath(sys.executable))
PREFIX = "cb-"
JID = re.compile(r"\b(\d{20})\b")
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


# -- processes and CPU ---------------------------------------------------------------------


def cpuSeconds(pid: int) -> float:
    """
    @return: the user and system CPU seconds of process C{pid} (0 if it is
        gone).
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def descendants(pids: list[int]) -> list[int]:
    """
    @return: C{pids} and every process below them (a master's worker
        processes), read from C{/proc}.
    """
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def processesNamed(name: str) -> list[int]:
    """
    @return: the pids whose C{comm} is C{name} (to read their CPU only).
    """
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() == name:
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


class CpuMeter:
    """
    CPU seconds of groups of processes between L{start} and L{stop}. The
    groups are listed again at each end: a process that ended meanwhile is
    not counted, one that started meanwhile counts all its CPU.
    """

    def __init__(self, groups: Any) -> None:
        """
        @param groups: returns C{{group name: [pid, ...]}} as things are now.
        """
        self.groups = groups
        self.before: dict[int, float] = {}

    def start(self) -> None:
        self.before = {pid: cpuSeconds(pid) for pids in self.groups().values() for pid in pids}

    def stop(self) -> dict[str, float]:
        """
        @return: each group's CPU seconds since L{start}.
        """
        return {
            name: round(
                sum(max(0.0, cpuSeconds(pid) - self.before.get(pid, 0.0)) for pid in pids), 3
            )
            for name, pids in self.groups().items()
        }


def loadAverage() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


# -- services ------------------------------------------------------------------------------


def deleteStream(url: str, clusterId: str) -> None:
    """
    Delete the run's JetStream stream (a plain NATS request; the answer is
    not read).
    """
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.recv(4096)  # INFO
        subject = f"$JS.API.STREAM.DELETE.SALTTWIST_{clusterId}"
        connection.sendall(
            b'CONNECT {"verbose":false,"pedantic":false}\r\n'
            + f"PUB {subject} _INBOX.bench 2\r\n{{}}\r\nPING\r\n".encode()
        )
        buffer = b""
        while b"PONG" not in buffer:
            data = connection.recv(4096)
            if not data:
                break
            buffer += data


def acceptInDatabase(database: dict[str, Any], count: int, keysDir: str) -> float:
    """
    Accept the swarm's keys C{0..count-1} in the PostgreSQL key store,
    written from many threads so the store batches its commits.

    @return: the seconds it took.
    """
    started = time.monotonic()
    store = PostgresKeyStore(database)
    store.start()
    try:
        store.waitReady(60)

        def accept(index: int) -> None:
            store.putKey(ACCEPTED, minionIdFor(PREFIX, index), readKeyPair(keysDir, index)[1])

        with ThreadPoolExecutor(64) as pool:
            list(pool.map(accept, range(count)))
    finally:
        store.close()
    return time.monotonic() - started


def startMaster(
    directory: str, options: dict[str, Any], keyPair: tuple[bytes, bytes], clusterKey: str
) -> tuple[Any, int]:
    """
    Write a master's config, key pair and cluster key under C{directory},
    start it, and wait for its ports file.

    @return: its process and its C{ret_port}.
    """
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "master"), "w") as f:
        json.dump(
            {
                "root_dir": directory,
                "interface": "127.0.0.1",
                "publish_port": 0,
                "ret_port": 0,
                "log_level": "warning",
                **options,
            },
            f,
        )
    config = loadMasterConfig(directory, overrides={"root_dir": directory})
    os.makedirs(os.path.join(config["pki_dir"], "cluster"), mode=0o700, exist_ok=True)
    crypt.writePrivateFile(os.path.join(config["pki_dir"], "master.pem"), keyPair[0])
    with open(os.path.join(config["pki_dir"], "master.pub"), "wb") as f:
        f.write(keyPair[1])
    crypt.writePrivateFile(
        os.path.join(config["pki_dir"], "cluster", "cluster.key"), clusterKey.encode()
    )
    return runMaster(directory, config["sock_dir"], 120)


# -- phases --------------------------------------------------------------------------------


def waitStatus(statusDir: str, done: Any, timeout: float, every: float = 0.1) -> dict[str, Any]:
    """
    Read the swarm's status until C{done(status)} or C{timeout} seconds.

    @return: the last status read.
    """
    deadline = time.monotonic() + timeout
    while True:
        status = readStatus(statusDir)
        if done(status) or time.monotonic() > deadline:
            return status
        time.sleep(every)


def fanOut(
    masterDir: str, database: dict[str, Any], expected: int, meter: CpuMeter, timeout: float
) -> dict[str, Any]:
    """
    Publish C{test.ping} to all through the master of C{masterDir}
    (C{salttwist --async}) and count its returns' rows in PostgreSQL until
    C{expected} are there.

    C{stored_at_s} and C{returns_per_s_stored} count from the start of the
    CLI (its own start-up included: C{publish_cli_s} is when it exited);
    C{*_received_s} and C{returns_per_s_received} from the job's
    C{start_time} to the returns' C{time}, both by the masters' clocks.
    """
    load = loadAverage()
    meter.start()
    started = time.monotonic()
    published = subprocess.run(
        [os.path.join(BIN, "salttwist"), "-c", masterDir, "*", "test.ping", "--async"],
        capture_output=True,
        text=True,
    )
    publishSeconds = time.monotonic() - started
    match = JID.search(published.stdout)
    if published.returncode != 0 or match is None:
        raise SystemExit(f"publish failed: {published.stdout}{published.stderr}")
    jid = match.group(1)
    marks: dict[str, float] = {}
    stored = 0
    with psycopg.connect(**database, autocommit=True) as connection:
        deadline = started + timeout
        while time.monotonic() < deadline:
            [(stored,)] = connection.execute(
                "SELECT count(*) FROM salttwist_returns WHERE jid = %s", (jid,)
            ).fetchall()
            now = time.monotonic() - started
            for share in (0.5, 0.9, 1.0):
                label = f"{share:.0%}"
                if label not in marks and stored >= share * expected:
                    marks[label] = round(now, 3)
            if stored >= expected:
                break
            time.sleep(0.05)
        [(rows, distinct)] = connection.execute(
            "SELECT count(*), count(DISTINCT id) FROM salttwist_returns WHERE jid = %s", (jid,)
        ).fetchall()
        # The masters' own clocks: when the job was made, and when each
        # return was received (before its batch was written).
        [(jobStart, firstReturn, lastReturn)] = connection.execute(
            "SELECT j.start_time, min(r.time), max(r.time) FROM salttwist_jobs j"
            " JOIN salttwist_returns r USING (jid) WHERE jid = %s GROUP BY j.start_time",
            (jid,),
        ).fetchall()
    elapsed = time.monotonic() - started
    cpu = meter.stop()
    perReturn = {
        f"{name}_ms_per_return": round(1000 * seconds / max(stored, 1), 3)
        for name, seconds in cpu.items()
    }
    return {
        "jid": jid,
        "expected": expected,
        "stored": rows,
        "stored_distinct": distinct,
        "publish_cli_s": round(publishSeconds, 3),
        "stored_at_s": marks,
        "returns_per_s_stored": round(rows / marks.get("100%", elapsed), 1),
        "first_return_received_s": round(firstReturn - jobStart, 3),
        "last_return_received_s": round(lastReturn - jobStart, 3),
        "returns_per_s_received": round(rows / max(lastReturn - jobStart, 1e-3), 1),
        "cpu_s": cpu,
        **perReturn,
        "load_before": load,
        "load_after": loadAverage(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--minions", type=int, default=10000)
    parser.add_argument("--masters", type=int, default=3)
    parser.add_argument(
        "--procs", type=int, default=0, help="Swarm processes (default: 2 per master)."
    )
    parser.add_argument("--reauth-delay", type=float, default=5.0, help="random_reauth_delay (5)")
    parser.add_argument("--alive", type=float, default=10.0, help="master_alive_interval (10)")
    parser.add_argument("--keys-dir", default=DEFAULT_KEYS_DIR)
    parser.add_argument(
        "--broker", default=os.environ.get("SALTTWIST_TEST_NATS", "nats://127.0.0.1:4222")
    )
    parser.add_argument(
        "--postgres", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    )
    parser.add_argument("--results-dir", default=os.path.join(HERE, "results"))
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary directory (logs).")
    options = parser.parse_args(argv)
    available = 0
    while os.path.exists(os.path.join(options.keys_dir, f"rsa2048-{available:05d}.pub")):
        available += 1
    if available < options.minions:
        print(
            f"cluster bench: {available} key pairs in {options.keys_dir}, not {options.minions}:"
            f" running {available} minions (make more with benchmarks/swarm.py -n N)",
            flush=True,
        )
        options.minions = available
    raiseFileLimit()
    root = tempfile.mkdtemp(prefix="salttwist-cluster-bench-")
    name = "salttwist_bench_" + secrets.token_hex(4)
    clusterId = "bench" + secrets.token_hex(4)
    processes: list[Any] = []
    admin = psycopg.connect(options.postgres, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    database = dict(psycopg.conninfo.conninfo_to_dict(options.postgres), dbname=name)
    try:
        result = run(options, root, database, clusterId, processes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
        try:
            deleteStream(options.broker, clusterId)
        except OSError as e:
            print(f"cluster bench: stream SALTTWIST_{clusterId} not deleted: {e}")
        if options.keep:
            print(f"cluster bench: kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2))
    if not options.no_save:
        os.makedirs(options.results_dir, exist_ok=True)
        path = os.path.join(
            options.results_dir,
            f"{time.strftime('%Y-%m-%d', time.gmtime())}-cluster-{socket.gethostname()}.json",
        )
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print(f"cluster bench: wrote {path}")
    return 0


def run(
    options: argparse.Namespace,
    root: str,
    database: dict[str, Any],
    clusterId: str,
    processes: list[Any],
) -> dict[str, Any]:
    n = options.minions
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "minions": n,
        "masters": options.masters,
        "random_reauth_delay": options.reauth_delay,
        "master_alive_interval": options.alive,
        "load_start": loadAverage(),
    }
    print(f"cluster bench: {n} minions, {options.masters} masters", flush=True)
    out["accept_keys_s"] = round(acceptInDatabase(database, n, options.keys_dir), 2)
    postgres = {
        "host": database.get("host", "127.0.0.1"),
        "port": int(database.get("port", 5432)),
        "user": database.get("user", "postgres"),
        "db": database["dbname"],
    }
    common = {
        "cluster_id": clusterId,
        "cluster_broker": options.broker,
        "keys.cache_driver": "postgres",
        "master_job_cache": "pgjsonb",
        **{f"keys.postgres.{k}": v for k, v in postgres.items()},
        **{f"returner.pgjsonb.{k}": v for k, v in postgres.items()},
    }
    key = crypt.generatePrivateKey()
    keyPair = (crypt.privateKeyToPem(key), crypt.publicKeyToPem(key.public_key()))
    clusterKey = secrets.token_hex(32)
    names = [chr(ord("A") + i) for i in range(options.masters)]
    masters, ports, dirs = [], [], []
    for label in names:
        directory = os.path.join(root, label)
        process, port = startMaster(
            directory, dict(common, cluster_master_id=f"bench-{label}"), keyPair, clusterKey
        )
        processes.append(process)
        masters.append(process)
        ports.append(port)
        dirs.append(directory)
    time.sleep(2)  # the masters connect to the broker
    pinned = os.path.join(root, "master.pub")
    with open(pinned, "wb") as f:
        f.write(keyPair[1])
    statusDir = os.path.join(root, "status")
    goFile = os.path.join(root, "go")
    procs = options.procs or 2 * options.masters
    swarm = subprocess.Popen(
        [
            sys.executable, os.path.join(HERE, "swarm.py"), "-n", str(n), "--procs", str(procs),
            "--port", str(ports[0]), "--status-dir", statusDir, "--go-file", goFile,
            "--root", os.path.join(root, "swarm"), "--duration", "1800", "--id-prefix", PREFIX,
            "--keys-dir", options.keys_dir, "--single-connection", "--pin-master", pinned,
            "--masters", ",".join(f"127.0.0.1:{port}" for port in ports),
            f"--option=random_reauth_delay={options.reauth_delay}",
            f"--option=master_alive_interval={options.alive}",
        ],
        stdout=open(os.path.join(root, "swarm.log"), "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    processes.append(swarm)
    status = waitStatus(statusDir, lambda s: s["shards"] == procs, 600, every=0.5)
    if status["shards"] != procs:
        raise SystemExit(f"the swarm did not build within 600 s; see {root}/swarm.log")
    broker = processesNamed("nats-server")

    def groups() -> dict[str, list[int]]:
        live = {label: p for label, p in zip(names, masters, strict=True) if p.poll() is None}
        masterPids = {label: descendants([p.pid]) for label, p in live.items()}
        with psycopg.connect(**database, autocommit=True) as connection:
            backends = [
                row[0]
                for row in connection.execute(
                    "SELECT pid FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    (database["dbname"],),
                ).fetchall()
            ]
        return {
            "masters": [pid for pids in masterPids.values() for pid in pids],
            **{f"master_{label}": pids for label, pids in masterPids.items()},
            "postgres_backends": backends,
            "broker": broker,
            "swarm": descendants([swarm.pid]),
        }

    listed = groups()
    out["postgres_backends"] = len(listed["postgres_backends"])
    out["master_processes"] = {label: len(listed[f"master_{label}"]) for label in names}

    # 1. start
    meter = CpuMeter(groups)
    meter.start()
    out["load_storm"] = loadAverage()
    started = time.monotonic()
    open(goFile, "w").close()
    status = waitStatus(statusDir, lambda s: s["ready"] >= n, 900, every=0.25)
    out["start"] = {
        "ready": status["ready"],
        "all_ready_s": round(time.monotonic() - started, 2),
        "ready_by_master": status["ready_by_master"],
        "cpu_s": meter.stop(),
        "failure_reasons": status["failure_reasons"],
    }
    print(f"cluster bench: start {out['start']}", flush=True)
    time.sleep(3)

    # 2. fan-out through A
    out["fanout"] = [fanOut(dirs[0], database, n, meter, 300) for _ in range(2)]
    for one in out["fanout"]:
        print(f"cluster bench: fan-out {one}", flush=True)

    # 3. failover: kill -9 of the last master
    victim = names[-1]
    victimPort = f"127.0.0.1:{ports[-1]}"
    status = readStatus(statusDir)
    moving = status["ready_by_master"].get(victimPort, 0)
    survivors = {f"127.0.0.1:{port}" for port in ports[:-1]}
    meter.start()
    load = loadAverage()
    killed = time.monotonic()
    os.kill(masters[-1].pid, signal.SIGKILL)
    masters[-1].wait()
    marks: dict[str, float] = {}

    def moved(s: dict[str, Any]) -> bool:
        onSurvivors = sum(v for k, v in s["ready_by_master"].items() if k in survivors)
        gained = onSurvivors - (n - moving)
        now = round(time.monotonic() - killed, 2)
        for share in (0.5, 0.9, 1.0):
            label = f"{share:.0%}"
            if label not in marks and gained >= share * moving:
                marks[label] = now
        return gained >= moving

    status = waitStatus(statusDir, moved, 300, every=0.1)
    cpu = meter.stop()
    out["failover"] = {
        "killed": victim,
        "minions_moving": moving,
        "ready_after": status["ready"],
        "ready_by_master": status["ready_by_master"],
        "moved_at_s": marks,
        "cpu_s": cpu,
        "survivors_ms_per_minion_moved": round(1000 * cpu["masters"] / max(moving, 1), 3),
        "load_before": load,
        "load_after": loadAverage(),
    }
    print(f"cluster bench: failover {out['failover']}", flush=True)
    time.sleep(3)

    # 4. fan-out again through A, two masters left
    out["fanout_after_failover"] = fanOut(dirs[0], database, n, meter, 300)
    print(f"cluster bench: fan-out after failover {out['fanout_after_failover']}", flush=True)
    out["load_end"] = loadAverage()
    return out


if __name__ == "__main__":
    sys.exit(main())
