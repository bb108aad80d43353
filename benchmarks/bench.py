# -*- test-case-name: tests.test_swarm -*-
"""
C{make bench}: measure a real C{salttwist-master} process against a swarm of
simulated minions (C{benchmarks/swarmlib.py}, in other processes), everything on
127.0.0.1 with ports chosen by the OS, and print a table; the figures go to
C{benchmarks/results/<date>-<host>.json}.

For each swarm size N (C{--sizes}, default 100,1000), on a fresh master:

  1. auth storm: N minions with accepted keys start connecting at once;
     seconds until all are authenticated and subscribed, and master CPU
     seconds per authentication;
  2. memory: master RSS with the N minions idle, per minion;
  3. CLI: C{salttwist '*' test.ping} wall time with the N swarm minions;
  4. fan-out: C{test.ping} to all N through L{LocalClient.run}, publish to
     last return and per-minion p50/p99 latency, C{--fanout-repeats} times;
  5. rotation: a C{salt/key} delete event makes the master rotate the
     publication key; seconds until all N minions hold it, master CPU, and
     whether any minion had to re-authenticate;
  6. throughput: C{test.ping} to all N published back to back for
     C{--throughput-seconds} (one C{LocalClient.publish} per job, at most
     C{--in-flight} unfinished), the returns counted on one subscriber of
     the master's bus: jobs/s and returns/s, checked against the rows in
     the master's job cache afterwards.

Then, on another fresh master with one real C{salttwist-minion} process:
start-up to first job, minion RSS, one big return (C{--big-bytes}, 50 MB,
made by C{cmd.run}) with the master's peak RSS, C{salttwist --version} and
C{salttwist '*' test.ping} wall times (median of C{--cli-repeats}), and
SIGTERM-to-exit times.

Every process it starts it stops, by pid. With C{--py-spy}, each phase of
the swarm runs is profiled with py-spy (which must be installed) and the
hottest functions of the master are added to the results.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import UNIXClientEndpoint

from salttwist import crypt
from salttwist.client.local import LocalClient
from salttwist.config import loadMasterConfig, loadMinionConfig
from salttwist.events import EVENT_PUB_SOCKET
from salttwist.events.client import EventListenerProtocol, listenEvents
from salttwist.events.fire import fireMasterEvent
from salttwist.pki.keystore import ACCEPTED, FilesystemKeyStore
from salttwist.transport.framing import quietFactory

BIN = os.path.dirname(os.path.abspath(sys.executable))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.swarmlib import (  # noqa: E402
    STATUS_INTERVAL,
    SWARM_SCRIPT,
    ensureKeys,
    raiseFileLimit,
    readStatus,
)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
REAL_MINION = "bench-real-minion"


# -- /proc --------------------------------------------------------------------


def cpuSeconds(pid: int) -> float:
    """
    @return: user + system CPU seconds of process C{pid} (all its threads).
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def childPids(pid: int) -> list[int]:
    """
    @return: the pids of the processes whose parent is C{pid} (the master's
        worker processes).
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def treeCpuSeconds(pid: int) -> float:
    """
    @return: CPU seconds of C{pid} and of its live children, plus what its
        ended children used (C{cutime}, C{cstime}).
    """
    total = 0.0
    for child in childPids(pid):
        try:
            total += cpuSeconds(child)
        except OSError:
            pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return total + sum(int(x) for x in fields[11:15]) / CLOCK_TICKS


def memory(pid: int) -> dict[str, float]:
    """
    @return: C{rss_mb} and C{hwm_mb} (peak RSS) of process C{pid}.
    """
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, kb = line.split()[:2]
                values[name] = int(kb) / 1024.0
    return {"rss_mb": round(values["VmRSS:"], 1), "hwm_mb": round(values["VmHWM:"], 1)}


def loadAverage() -> list[float]:
    """
    @return: the 1, 5 and 15 minute load averages.
    """
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def percentile(values: list[float], p: float) -> float:
    """
    @return: the nearest-rank C{p}th percentile of C{values}.
    """
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, int(round(p / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def sleep(seconds: float) -> Deferred[None]:
    """
    @return: a L{Deferred} firing after C{seconds} on the reactor.
    """
    from twisted.internet import reactor

    return task.deferLater(reactor, seconds, lambda: None)


async def waitUntil(check: Any, what: str, timeout: float, interval: float = 0.02) -> Any:
    """
    Poll C{check()} until it returns something true, and return that.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        await sleep(interval)


# -- processes ----------------------------------------------------------------


class Processes:
    """
    Every process the benchmark starts, stopped by pid at the end.
    """

    def __init__(self, logDir: str) -> None:
        self.logDir = logDir
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        log = open(os.path.join(self.logDir, f"{name}.log"), "ab")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, **kwargs)
        log.close()
        self.started.append((name, process))
        return process

    def log(self, name: str) -> str:
        try:
            with open(os.path.join(self.logDir, f"{name}.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    async def stop(self, process: subprocess.Popen[bytes], grace: float = 10.0) -> float:
        """
        SIGTERM, then SIGKILL after C{grace} seconds.

        @return: seconds from SIGTERM to exit.
        """
        start = time.monotonic()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        while process.poll() is None and time.monotonic() - start < grace:
            await sleep(0.005)
        elapsed = time.monotonic() - start
        if process.poll() is None:
            process.kill()
            process.wait()
        return elapsed

    def stopAllNow(self) -> None:
        for _, process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, process in self.started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class Profiler:
    """
    py-spy attached to one pid for one phase, if asked for.
    """

    def __init__(self, processes: Processes, outDir: str | None) -> None:
        self.processes = processes
        self.outDir = outDir
        self.files: dict[str, str] = {}

    def start(self, name: str, pid: int) -> subprocess.Popen[bytes] | None:
        if self.outDir is None:
            return None
        path = os.path.join(self.outDir, f"{name}.txt")
        self.files[name] = path
        return self.processes.start(
            f"py-spy-{name}",
            [
                os.path.join(BIN, "py-spy"),
                "record",
                "--pid",
                str(pid),
                "--format",
                "raw",
                "--rate",
                "200",
                "--threads",
                "--output",
                path,
                "--nonblocking",
            ],
        )

    async def stop(self, spy: subprocess.Popen[bytes] | None) -> None:
        if spy is None:
            return
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)
        for _ in range(500):
            if spy.poll() is not None:
                return
            await sleep(0.02)
        spy.kill()
        spy.wait()


def summariseProfile(path: str, top: int = 12) -> dict[str, Any]:
    """
    Read a py-spy raw (collapsed stacks) file.

    @return: the share of samples whose innermost frame (C{self}) or any
        frame (C{total}) is each function, the C{top} of each, and the
        sample count.
    """
    selfCounts: Counter[str] = Counter()
    totalCounts: Counter[str] = Counter()
    samples = 0
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return {"samples": 0}
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [
            frame for frame in stack.split(";") if not frame.startswith(("thread (", "process "))
        ]
        names = [_frameName(frame) for frame in frames]
        if not names:
            continue
        samples += n
        selfCounts[names[-1]] += n
        for name in set(names):
            totalCounts[name] += n

    def share(counts: Counter[str]) -> list[list[Any]]:
        return [[name, round(100.0 * c / samples, 1)] for name, c in counts.most_common(top)]

    return {"samples": samples, "self_pct": share(selfCounts), "total_pct": share(totalCounts)}


def _frameName(frame: str) -> str:
    # "function (path/to/file.py:123)" -> "function (salttwist/x.py)"
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("/site-packages/", "/salttwist/", "/lib/python3"):
        if marker in where:
            where = where.split(marker, 1)[1]
            if marker == "/salttwist/":
                where = "salttwist/" + where
            break
    return f"{name} ({where})"


# -- the master ------------------------------------------------------------------


class MasterRun:
    """
    One fresh C{salttwist-master} process under a temporary C{root_dir}.
    """

    def __init__(
        self, processes: Processes, root: str, name: str, command: list[str] | None = None
    ) -> None:
        self.processes = processes
        self.command = command
        self.name = name
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, "master"), "w") as f:
            f.write(
                f"root_dir: {self.dir}\ninterface: 127.0.0.1\npublish_port: 0\nret_port: 0\n"
                "log_level: warning\n"
            )
        self.config = loadMasterConfig(self.dir)
        self.process: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, Any] = {}

    @property
    def portsFile(self) -> str:
        return os.path.join(self.config["sock_dir"], "master.ports")

    @property
    def pid(self) -> int:
        return int(self.ports["pid"])

    async def start(self) -> None:
        command = self.command or [os.path.join(BIN, "salttwist-master")]
        self.process = self.processes.start(self.name, [*command, "-c", self.dir])

        def ready() -> dict[str, Any] | None:
            if self.process.poll() is not None:
                raise RuntimeError(f"the master exited:\n{self.processes.log(self.name)}")
            try:
                with open(self.portsFile) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None

        self.ports = await waitUntil(ready, "the master's ports file", 60)

    def client(self) -> TimedClient:
        return TimedClient(self.config, _reactor())

    def cpu(self) -> float:
        return cpuSeconds(self.pid)

    def treeCpu(self) -> float:
        """
        @return: CPU seconds of the master and its worker processes.
        """
        return treeCpuSeconds(self.pid)

    def memory(self) -> dict[str, float]:
        return memory(self.pid)

    async def stop(self) -> float:
        assert self.process is not None
        return await self.processes.stop(self.process)

    def cachedReturns(self) -> int:
        """
        @return: the rows in the job cache's C{returns} table (call after
            the master stopped and flushed it).
        """
        path = os.path.join(self.config["cachedir"], "jobs.sqlite")
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT count(*) FROM returns").fetchone()[0])


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class TimedClient(LocalClient):
    """
    A L{LocalClient} that notes when it sent its (first) publish request,
    and when each return arrived.
    """

    publishedAt: float | None = None

    async def _publish(self, req: Any, *args: Any) -> dict[str, Any]:
        if self.publishedAt is None:
            self.publishedAt = time.perf_counter()
        return await super()._publish(req, *args)

    async def timedRun(
        self, tgt: Any, fun: str, arg: list[Any], timeout: float
    ) -> tuple[Any, dict[str, float]]:
        """
        @return: the L{JobResult} and each minion's seconds from publish to
            its return.
        """
        self.publishedAt = None
        arrived: dict[str, float] = {}

        def onReturn(minionId: str, data: dict[str, Any]) -> None:
            arrived[minionId] = time.perf_counter()

        result = await self.run(tgt, fun, arg, timeout=timeout, onReturn=onReturn)
        published = self.publishedAt or time.perf_counter()
        return result, {m: t - published for m, t in arrived.items()}


# -- phases with a swarm ----------------------------------------------------------


async def swarmRun(options: argparse.Namespace, processes: Processes, root: str, n: int):
    """
    Every swarm phase for N = C{n}, on a fresh master.
    """
    out: dict[str, Any] = {"n": n, "load_before": loadAverage()}
    phases = set(options.phases.split(","))
    profiler = Profiler(processes, options.profile_dir)
    master = MasterRun(processes, root, f"master-{n}", options.master_command)
    await master.start()
    await sleep(1.0)
    base = master.memory()
    out["master_rss_empty_mb"] = base["rss_mb"]
    procs = options.procs or (1 if n <= 1000 else 2)
    swarmDir = os.path.join(root, f"swarm-{n}")
    statusDir = os.path.join(swarmDir, "status")
    goFile = os.path.join(swarmDir, "go")
    os.makedirs(statusDir)
    print(f"bench: N={n}: building the swarm ({procs} process(es))", flush=True)
    built = time.monotonic()
    swarm = processes.start(
        f"swarm-{n}",
        [
            sys.executable,
            SWARM_SCRIPT,
            "--minions",
            str(n),
            "--procs",
            str(procs),
            "--ports-file",
            master.portsFile,
            "--accept-into",
            master.config["pki_dir"],
            "--keys-dir",
            options.keys_dir,
            "--root",
            swarmDir,
            "--status-dir",
            statusDir,
            "--go-file",
            goFile,
            "--duration",
            "3600",
            *(["--single-connection"] if options.single_connection else []),
            *(
                []
                if options.first_contact
                else ["--pin-master", os.path.join(master.config["pki_dir"], "master.pub")]
            ),
        ],
    )

    def status() -> dict[str, Any]:
        if swarm.poll() is not None:
            raise RuntimeError(f"the swarm exited:\n{processes.log(f'swarm-{n}')}")
        return readStatus(statusDir)

    try:
        await waitUntil(
            lambda: status()["shards"] == procs, "the swarm to be built", 120 + n * 0.05
        )
        out["swarm_build_s"] = round(time.monotonic() - built, 2)
        swarmPids = status()["pids"]

        # 1. auth storm
        out["load_storm"] = loadAverage()
        spy = profiler.start(f"{n}-storm", master.pid)
        swarmSpy = profiler.start(f"{n}-storm-swarm", swarmPids[0])
        cpu0, swarmCpu0 = master.cpu(), sum(cpuSeconds(p) for p in swarmPids)
        tree0 = master.treeCpu()
        goAt = time.time()
        with open(goFile, "w"):
            pass
        final = await waitUntil(
            lambda: (s := status())["ever_ready"] == n and s,
            "every minion to authenticate",
            60 + n * 0.1,
        )
        cpu1, swarmCpu1 = master.cpu(), sum(cpuSeconds(p) for p in swarmPids)
        tree1 = master.treeCpu()
        await profiler.stop(spy)
        await profiler.stop(swarmSpy)
        out["auth_storm"] = {
            "all_ready_s": round(final["last_ready_at"] - goAt, 3),
            "first_ready_s": round(final["first_ready_at"] - goAt, 3),
            "master_cpu_s": round(cpu1 - cpu0, 2),
            "master_cpu_ms_per_auth": round(1000 * (cpu1 - cpu0) / n, 3),
            "master_and_workers_cpu_ms_per_auth": round(1000 * (tree1 - tree0) / n, 3),
            "swarm_cpu_s": round(swarmCpu1 - swarmCpu0, 2),
            "failed_attempts": final["attempt_failures"],
            "failure_reasons": final["failure_reasons"],
            "authentications": final["auths"],
        }
        print(f"bench: N={n}: auth storm {out['auth_storm']}", flush=True)

        # 2. memory, idle
        if "memory" in phases:
            # The storm's tail first (the minions' grains, written to the
            # master's cache in batches): idle means once the master has
            # spent under 5% of a core for half a second (15 s at most).
            settled = time.monotonic()
            while time.monotonic() - settled < 15.0:
                before = master.cpu()
                await sleep(0.5)
                if master.cpu() - before < 0.025:
                    break
            settleS = time.monotonic() - settled
            idle0 = master.cpu()
            await sleep(3.0)
            idleCpu = (master.cpu() - idle0) / 3.0
            mem = master.memory()
            out["memory"] = {
                "master_rss_mb": mem["rss_mb"],
                "master_settle_s": round(settleS, 1),
                "master_idle_cpu_pct": round(100 * idleCpu, 1),
                "master_rss_per_minion_kb": round(1024 * (mem["rss_mb"] - base["rss_mb"]) / n, 1),
                "swarm_rss_per_minion_kb": round(
                    1024 * sum(memory(p)["rss_mb"] for p in swarmPids) / n, 1
                ),
            }

        # 3. the CLI against the swarm
        if "cli" in phases:
            profileTo = None
            if options.profile_dir is not None:
                profileTo = os.path.join(options.profile_dir, f"{n}-cli.txt")
                profiler.files[f"{n}-cli"] = profileTo
            out["cli_ping_swarm_s"] = await cliPing(master, options.cli_swarm_repeats, profileTo)

        # 4. fan-out
        if "fanout" in phases:
            out["load_fanout"] = loadAverage()
            spy = profiler.start(f"{n}-fanout", master.pid)
            swarmSpy = profiler.start(f"{n}-fanout-swarm", swarmPids[0])
            runs = []
            latencies: list[float] = []
            cpu0, tree0 = master.cpu(), master.treeCpu()
            for _ in range(options.fanout_repeats):
                result, lat = await master.client().timedRun("*", "test.ping", [], timeout=60)
                runs.append(
                    {
                        "returns": len(result.returns),
                        "last_s": max(lat.values(), default=float("nan")),
                        "p50_s": percentile(list(lat.values()), 50),
                        "p99_s": percentile(list(lat.values()), 99),
                    }
                )
                latencies.extend(lat.values())
            cpu1, tree1 = master.cpu(), master.treeCpu()
            await profiler.stop(spy)
            await profiler.stop(swarmSpy)
            lasts = [r["last_s"] for r in runs]
            out["fanout"] = {
                "repeats": len(runs),
                "all_returned": all(r["returns"] == n for r in runs),
                "last_return_p50_s": round(statistics.median(lasts), 3),
                "last_return_max_s": round(max(lasts), 3),
                "minion_latency_p50_s": round(percentile(latencies, 50), 3),
                "minion_latency_p99_s": round(percentile(latencies, 99), 3),
                "master_cpu_ms_per_job": round(1000 * (cpu1 - cpu0) / len(runs), 1),
                "master_and_workers_cpu_ms_per_job": round(1000 * (tree1 - tree0) / len(runs), 1),
            }
            print(f"bench: N={n}: fan-out {out['fanout']}", flush=True)

        # 5. rotation
        if "rotation" in phases:
            out["load_rotation"] = loadAverage()
            rotations = []
            spy = profiler.start(f"{n}-rotation", master.pid)
            for i in range(options.rotations):
                before = status()
                kid = max(before["kids"])
                cpu0 = master.cpu()
                firedAt = time.time()
                fireMasterEvent(
                    master.config["sock_dir"], "salt/key", {"act": "delete", "id": "bench-dummy"}
                )
                after = await waitUntil(
                    lambda kid=kid: (s := status())["kids"].get(kid + 1) == n and s,
                    "every minion to hold the new key",
                    60,
                    interval=0.005,
                )
                cpu1 = master.cpu()
                rotations.append(
                    {
                        "s": round(after["kid_last_at"][kid + 1] - firedAt, 3),
                        "master_cpu_s": round(cpu1 - cpu0, 3),
                        "reauthentications": after["auths"] - before["auths"],
                    }
                )
                if i + 1 < options.rotations:
                    await sleep(1.2)
            await profiler.stop(spy)
            out["rotation"] = {
                "runs": rotations,
                "median_s": round(statistics.median(r["s"] for r in rotations), 3),
                "master_cpu_s_median": round(
                    statistics.median(r["master_cpu_s"] for r in rotations), 3
                ),
                "reauthentications": sum(r["reauthentications"] for r in rotations),
            }
            print(f"bench: N={n}: rotation {out['rotation']}", flush=True)

        # 6. throughput
        if "throughput" in phases:
            out["load_throughput"] = loadAverage()
            returnsBefore = status()["returns"]
            spy = profiler.start(f"{n}-throughput", master.pid)
            swarmSpy = profiler.start(f"{n}-throughput-swarm", swarmPids[0])
            cpu0, swarmCpu0 = master.cpu(), sum(cpuSeconds(p) for p in swarmPids)
            tree0 = master.treeCpu()
            out["throughput"] = await measureThroughput(
                master,
                n,
                options.throughput_seconds,
                options.in_flight or max(1, min(8, 10000 // n)),
            )
            cpu1, swarmCpu1 = master.cpu(), sum(cpuSeconds(p) for p in swarmPids)
            tree1 = master.treeCpu()
            await profiler.stop(spy)
            await profiler.stop(swarmSpy)
            received = out["throughput"]["returns_received"]
            out["throughput"].update(
                {
                    "master_cpu_s": round(cpu1 - cpu0, 2),
                    "master_cpu_us_per_return": round(1e6 * (cpu1 - cpu0) / max(1, received), 1),
                    "master_and_workers_cpu_us_per_return": round(
                        1e6 * (tree1 - tree0) / max(1, received), 1
                    ),
                    "swarm_cpu_s": round(swarmCpu1 - swarmCpu0, 2),
                    "swarm_cpu_us_per_return": round(
                        1e6 * (swarmCpu1 - swarmCpu0) / max(1, received), 1
                    ),
                    "swarm_returns_sent": status()["returns"] - returnsBefore,
                }
            )
            print(f"bench: N={n}: throughput {out['throughput']}", flush=True)
        out["load_after"] = loadAverage()
        # The swarm writes its counters every STATUS_INTERVAL: wait for a
        # write made after the last return was sent.
        await sleep(3 * STATUS_INTERVAL)
        returnsSent = status()["returns"]
    finally:
        await processes.stop(swarm)
        out["master_sigterm_to_exit_s"] = round(await master.stop(), 3)
    # Every return the swarm sent is in the job cache once the master
    # flushed it at its stop (find_job returns included).
    out["job_cache"] = {"returns_sent": returnsSent, "rows": master.cachedReturns()}
    if profiler.files:
        out["profiles"] = {
            name: summariseProfile(path) for name, path in sorted(profiler.files.items())
        }
    return out


#: The start of every event frame the master's bus sends: a map of two,
#: whose first key is C{tag} (L{salttwist.events.bus.EventPublisherFactory}).
_TAG_KEY = b"\x82\xa3tag"


def leadingTag(frame: bytes) -> str | None:
    """
    The tag of an event frame, read from its first bytes without decoding
    the event's data; L{None} if the frame does not start as the bus's
    frames do (it is then decoded whole).
    """
    if not frame.startswith(_TAG_KEY) or len(frame) < 7:
        return None
    head = frame[5]
    if 0xA0 <= head <= 0xBF:  # fixstr
        start, size = 6, head - 0xA0
    elif head == 0xD9:  # str 8
        start, size = 7, frame[6]
    else:
        return None
    try:
        return frame[start : start + size].decode()
    except UnicodeDecodeError:
        return None


class ReturnCounter(EventListenerProtocol):
    """
    The throughput phase's subscriber to C{salt/job/}: a job's return is
    counted from its tag alone (C{salt/job/<jid>/ret/<id>}), without
    decoding the return itself, so that the benchmark's own process takes
    as little as it can of the CPU the master and the swarm share; every
    other event is decoded and handed to C{onEvent}.
    """

    def __init__(
        self,
        onReturn: Callable[[str], None],
        onEvent: Callable[[str, dict[str, Any]], None],
        maxFrame: int = 104857600,
    ) -> None:
        super().__init__(["salt/job/"], onEvent, maxFrame)
        self._onReturn = onReturn

    def stringReceived(self, data: bytes) -> None:
        tag = leadingTag(data)
        if tag is not None:
            parts = tag.split("/")
            if len(parts) == 5 and parts[3] == "ret" and parts[:2] == ["salt", "job"]:
                self._onReturn(parts[2])
                return
        super().stringReceived(data)


async def measureThroughput(
    master: MasterRun, n: int, seconds: float, inFlight: int
) -> dict[str, Any]:
    """
    Publish C{test.ping} to all N (C{salttwist --async}'s way: one
    L{LocalClient.publish} per job), keeping C{inFlight} jobs unfinished
    (the next is published as soon as one finishes), for C{seconds}; count
    the returns on one subscriber of the master's bus (L{ReturnCounter}),
    then wait (up to 60 s) for the last jobs to finish.

    @return: jobs and returns per second over the whole run, returns per
        second while publishing, any events the bus dropped, and the CPU
        seconds of this benchmark's own process meanwhile.
    """
    reactor = _reactor()
    perJid: Counter[str] = Counter()
    unfinished: set[str] = set()
    waiting: list[Deferred[None]] = []
    dropped = [0]

    def wake() -> None:
        while waiting:
            waiter = waiting.pop()
            if not waiter.called:
                waiter.callback(None)

    def onReturn(jid: str) -> None:
        perJid[jid] += 1
        if perJid[jid] >= n and jid in unfinished:
            unfinished.discard(jid)
            wake()

    def onEvent(tag: str, data: dict[str, Any]) -> None:
        if tag == "salt/event/dropped":
            dropped[0] += int(data.get("dropped", 0))

    endpoint = UNIXClientEndpoint(
        reactor, os.path.join(master.config["sock_dir"], EVENT_PUB_SOCKET), timeout=2.0
    )
    listener = await endpoint.connect(quietFactory(lambda: ReturnCounter(onReturn, onEvent)))
    await listener.subscribed.addTimeout(2.0, reactor)
    client = LocalClient(master.config, reactor)
    jids: list[str] = []
    cpu0 = _ownCpu()
    try:
        start = time.perf_counter()
        deadline = start + seconds
        while (now := time.perf_counter()) < deadline:
            if len(unfinished) >= inFlight:
                # Until a job finishes, or the window closes.
                waiter: Deferred[None] = Deferred()
                waiting.append(waiter)
                timer = reactor.callLater(deadline - now, wake)
                await waiter
                if timer.active():
                    timer.cancel()
                continue
            reply = await client.publish("*", "test.ping", [])
            jids.append(reply["jid"])
            if perJid[reply["jid"]] < n:
                unfinished.add(reply["jid"])
        window = time.perf_counter() - start
        inWindow = sum(perJid[jid] for jid in jids)
        cpuInWindow = _ownCpu() - cpu0
        try:
            await waitUntil(lambda: all(perJid[jid] >= n for jid in jids), "the last returns", 60)
        except RuntimeError:
            pass
        elapsed = time.perf_counter() - start
    finally:
        listener.transport.loseConnection()
    received = sum(perJid[jid] for jid in jids)
    return {
        "seconds": round(elapsed, 2),
        "in_flight": inFlight,
        "jobs": len(jids),
        "jobs_complete": sum(1 for jid in jids if perJid[jid] >= n),
        "jobs_per_s": round(len(jids) / elapsed, 2),
        "returns_received": received,
        "returns_per_s": round(received / elapsed, 1),
        "returns_per_s_while_publishing": round(inWindow / window, 1),
        "bus_events_dropped": dropped[0],
        "bench_cpu_us_per_return": round(1e6 * cpuInWindow / max(1, inWindow), 1),
    }


def _ownCpu() -> float:
    """
    @return: this process's CPU seconds (user and system).
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def cliPing(master: MasterRun, repeats: int, profileTo: str | None = None) -> dict[str, Any]:
    """
    @param profileTo: if given, one more run (not timed) under py-spy,
        which writes its samples there.
    @return: wall times of C{salttwist -c DIR '*' test.ping} (median, all).
    """
    times = []
    codes = set()
    if profileTo is not None:
        await _runQuiet(
            [
                *(os.path.join(BIN, "py-spy"), "record", "--format", "raw", "--rate", "200"),
                *("--output", profileTo, "--"),
                *(os.path.join(BIN, "salttwist"), "-c", master.dir, "*", "test.ping"),
            ]
        )
    for _ in range(repeats):
        start = time.perf_counter()
        done = await _runQuiet([os.path.join(BIN, "salttwist"), "-c", master.dir, "*", "test.ping"])
        times.append(time.perf_counter() - start)
        codes.add(done)
    return {
        "median_s": round(statistics.median(times), 3) if times else None,
        "min_s": round(min(times), 3) if times else None,
        "exit_codes": sorted(codes),
    }


async def _runQuiet(argv: list[str]) -> int:
    """
    Run a command with its output thrown away, polling for its end without
    blocking the reactor (there may be a master client on it).
    """
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while process.poll() is None:
        await sleep(0.002)
    return process.returncode


# -- one real minion ------------------------------------------------------------


async def realMinionRun(options: argparse.Namespace, processes: Processes, root: str):
    """
    A fresh master and one real C{salttwist-minion} process: start-up to
    first job, RSS, a big return, the CLI, SIGTERM.
    """
    out: dict[str, Any] = {"load_before": loadAverage()}
    master = MasterRun(processes, root, "master-real", options.master_command)
    await master.start()
    # Measure the minion's start, not the master's: its worker processes
    # are still starting when the ports file appears.
    await sleep(1.0)
    minionDir = os.path.join(root, REAL_MINION)
    os.makedirs(minionDir)
    with open(os.path.join(minionDir, "minion"), "w") as f:
        f.write(
            f"root_dir: {minionDir}\nid: {REAL_MINION}\nmaster: 127.0.0.1\n"
            f"master_port: {master.ports['ret_port']}\nrandom_reauth_delay: 0\n"
            "log_level: warning\n"
        )
    pkiDir = loadMinionConfig(minionDir)["pki_dir"]
    os.makedirs(pkiDir, mode=0o700)
    os.makedirs(options.keys_dir, mode=0o700, exist_ok=True)
    keyPath = os.path.join(options.keys_dir, f"{REAL_MINION}.pem")
    if not os.path.exists(keyPath):
        key = crypt.generatePrivateKey(2048)
        crypt.writePrivateFile(keyPath, crypt.privateKeyToPem(key))
    with open(keyPath, "rb") as f:
        privatePem = f.read()
    crypt.writePrivateFile(os.path.join(pkiDir, "minion.pem"), privatePem)
    publicPem = crypt.publicKeyToPem(crypt.loadPrivateKey(privatePem).public_key())
    FilesystemKeyStore(master.config["pki_dir"]).putKey(ACCEPTED, REAL_MINION, publicPem)

    started: dict[str, float] = {}
    events = await listenEvents(
        _reactor(),
        os.path.join(master.config["sock_dir"], EVENT_PUB_SOCKET),
        ["salt/minion/"],
        lambda tag, data: started.setdefault(tag, time.perf_counter()),
    )
    spawnAt = time.perf_counter()
    minion = processes.start(REAL_MINION, [os.path.join(BIN, "salttwist-minion"), "-c", minionDir])
    try:
        await waitUntil(lambda: started, "the real minion to start", 60, interval=0.002)
        readyAt = min(started.values())
        result, _ = await master.client().timedRun(REAL_MINION, "test.ping", [], timeout=10)
        firstJobAt = time.perf_counter()
        out["minion_start_to_ready_s"] = round(readyAt - spawnAt, 3)
        out["minion_start_to_first_job_s"] = round(firstJobAt - spawnAt, 3)
        out["first_job_ok"] = result.returns.get(REAL_MINION, {}).get("return") is True
        await sleep(1.0)
        out["minion_rss_mb"] = memory(minion.pid)["rss_mb"]
        out["master_rss_mb"] = master.memory()["rss_mb"]

        # CLI
        times = []
        for _ in range(options.cli_repeats):
            start = time.perf_counter()
            await _runQuiet([os.path.join(BIN, "salttwist"), "--version"])
            times.append(time.perf_counter() - start)
        out["cli_version_s"] = round(statistics.median(times), 3)
        out["cli_ping_1_minion"] = await cliPing(master, options.cli_repeats)

        # big return
        if options.big_bytes:
            profiler = Profiler(processes, options.profile_dir)
            spies = [
                profiler.start("big-return-master", master.pid),
                profiler.start("big-return-minion", minion.pid),
                profiler.start("big-return-client", os.getpid()),
            ]
            before = master.memory()
            command = f"head -c {options.big_bytes} /dev/zero | tr '\\0' a"
            start = time.perf_counter()
            result, _ = await master.client().timedRun(
                REAL_MINION, "cmd.run", [command], timeout=120
            )
            elapsed = time.perf_counter() - start
            returned = result.returns.get(REAL_MINION, {}).get("return")
            after = master.memory()
            for spy in spies:
                await profiler.stop(spy)
            out["big_return"] = {
                "bytes": options.big_bytes,
                "received_bytes": len(returned) if isinstance(returned, str) else None,
                "s": round(elapsed, 3),
                "master_rss_before_mb": before["rss_mb"],
                "master_hwm_before_mb": before["hwm_mb"],
                "master_hwm_after_mb": after["hwm_mb"],
                "minion_hwm_mb": memory(minion.pid)["hwm_mb"],
            }
            if profiler.files:
                out["profiles"] = {
                    name: summariseProfile(path) for name, path in sorted(profiler.files.items())
                }
            print(f"bench: big return {out['big_return']}", flush=True)
    finally:
        events.transport.loseConnection()
        out["minion_sigterm_to_exit_s"] = round(await processes.stop(minion), 3)
        out["master_sigterm_to_exit_s"] = round(await master.stop(), 3)
    out["load_after"] = loadAverage()
    return out


# -- report -------------------------------------------------------------------------


def table(results: dict[str, Any]) -> str:
    """
    @return: the figures as a readable table.
    """
    lines = [
        f"salttwist benchmarks  {results['date']}  host {results['host']}  "
        f"{results['cpus']} cores  fd limit {results['fd_limit']}"
        + ("  single_connection" if results["options"].get("single_connection") else ""),
        "",
    ]
    rows = [
        ("auth storm: all authenticated (s)", lambda r: r["auth_storm"]["all_ready_s"]),
        ("auth storm: master CPU ms / auth", lambda r: r["auth_storm"]["master_cpu_ms_per_auth"]),
        ("auth storm: swarm CPU (s)", lambda r: r["auth_storm"]["swarm_cpu_s"]),
        ("auth storm: failed attempts", lambda r: r["auth_storm"]["failed_attempts"]),
        ("memory: master RSS idle (MB)", lambda r: r["memory"]["master_rss_mb"]),
        ("memory: master KB / minion", lambda r: r["memory"]["master_rss_per_minion_kb"]),
        ("memory: swarm KB / minion", lambda r: r["memory"]["swarm_rss_per_minion_kb"]),
        ("idle: master CPU % (N idle minions)", lambda r: r["memory"]["master_idle_cpu_pct"]),
        ("CLI '*' test.ping, N minions (s)", lambda r: r["cli_ping_swarm_s"]["median_s"]),
        ("fan-out: last return p50 (s)", lambda r: r["fanout"]["last_return_p50_s"]),
        ("fan-out: last return max (s)", lambda r: r["fanout"]["last_return_max_s"]),
        ("fan-out: minion latency p50 (s)", lambda r: r["fanout"]["minion_latency_p50_s"]),
        ("fan-out: minion latency p99 (s)", lambda r: r["fanout"]["minion_latency_p99_s"]),
        ("fan-out: all returned", lambda r: r["fanout"]["all_returned"]),
        ("fan-out: master CPU ms / job", lambda r: r["fanout"]["master_cpu_ms_per_job"]),
        ("rotation: all minions (s, median)", lambda r: r["rotation"]["median_s"]),
        ("rotation: master CPU (s)", lambda r: r["rotation"]["master_cpu_s_median"]),
        ("rotation: re-authentications", lambda r: r["rotation"]["reauthentications"]),
        ("throughput: jobs/s", lambda r: r["throughput"]["jobs_per_s"]),
        ("throughput: returns/s", lambda r: r["throughput"]["returns_per_s"]),
        (
            "throughput: master CPU us / return",
            lambda r: r["throughput"]["master_cpu_us_per_return"],
        ),
        (
            "throughput: jobs complete / jobs",
            lambda r: "{jobs_complete}/{jobs}".format(**r["throughput"]),
        ),
        ("throughput: bus events dropped", lambda r: r["throughput"]["bus_events_dropped"]),
        (
            "job cache rows / returns sent",
            lambda r: "{rows}/{returns_sent}".format(**r["job_cache"]),
        ),
        ("master SIGTERM to exit (s)", lambda r: r["master_sigterm_to_exit_s"]),
        ("load average at storm (1 min)", lambda r: r["load_storm"][0]),
    ]
    runs = results["swarm"]
    width = 38
    lines.append("N".ljust(width) + "".join(str(r["n"]).rjust(12) for r in runs))
    for label, get in rows:
        cells = []
        for r in runs:
            try:
                cells.append(str(get(r)).rjust(12))
            except (KeyError, TypeError):
                cells.append("-".rjust(12))
        lines.append(label.ljust(width) + "".join(cells))
    real = results.get("real_minion")
    if real:
        lines += ["", "one real salttwist-minion process:"]
        big = real.get("big_return", {})
        for label, value in [
            ("minion start to authenticated (s)", real.get("minion_start_to_ready_s")),
            ("minion start to first job (s)", real.get("minion_start_to_first_job_s")),
            ("minion RSS (MB)", real.get("minion_rss_mb")),
            ("master RSS, 1 minion (MB)", real.get("master_rss_mb")),
            ("salttwist --version (s, median)", real.get("cli_version_s")),
            (
                "salttwist '*' test.ping (s, median)",
                real.get("cli_ping_1_minion", {}).get("median_s"),
            ),
            ("big return: bytes received", big.get("received_bytes")),
            ("big return: seconds", big.get("s")),
            ("big return: master peak RSS before (MB)", big.get("master_hwm_before_mb")),
            ("big return: master peak RSS after (MB)", big.get("master_hwm_after_mb")),
            ("minion SIGTERM to exit (s)", real.get("minion_sigterm_to_exit_s")),
            ("master SIGTERM to exit (s)", real.get("master_sigterm_to_exit_s")),
        ]:
            lines.append(label.ljust(width + 4) + str(value))
    return "\n".join(lines)


def _inFlight(text: str) -> int:
    """
    C{--in-flight}: a whole number of jobs, 1 or more, or 0 for the default.
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of jobs >= 1 (0: the default), not {text!r}"
        )
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000", help="Swarm sizes (default 100,1000).")
    parser.add_argument("--procs", type=int, default=0, help="Swarm processes (default: auto).")
    parser.add_argument("--keys-dir", default=os.path.join(HERE, ".keys"))
    parser.add_argument("--fanout-repeats", type=int, default=20)
    parser.add_argument("--rotations", type=int, default=3)
    parser.add_argument("--throughput-seconds", type=float, default=10.0)
    parser.add_argument(
        "--in-flight",
        type=_inFlight,
        default=0,
        help="Unfinished jobs kept in the throughput phase (default: 8, fewer for more "
        "minions, so the returns in flight stay within the event queue of the benchmark's "
        "own subscriber, event_queue_max 10,000: 2 for 5,000 minions, 1 for 10,000).",
    )
    parser.add_argument("--cli-repeats", type=int, default=10)
    parser.add_argument("--cli-swarm-repeats", type=int, default=3)
    parser.add_argument("--big-bytes", type=int, default=50_000_000)
    parser.add_argument("--no-real-minion", action="store_true", help="Skip the one-minion part.")
    parser.add_argument("--py-spy", action="store_true", help="Profile the master's phases.")
    parser.add_argument("--results-dir", default=os.path.join(HERE, "results"))
    parser.add_argument("--no-save", action="store_true", help="Print only; write no JSON.")
    parser.add_argument(
        "--master-command",
        type=str.split,
        default=None,
        help="Start the master with this command instead of salttwist-master "
        "(to compare builds); it is given -c DIR.",
    )
    parser.add_argument("--keep", action="store_true", help="Keep the logs and temp files.")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="Leave the bytecode settings of the environment as they are (by default the "
        "measured commands write and reuse .pyc files under the temporary directory).",
    )
    parser.add_argument(
        "--single-connection",
        action="store_true",
        help=(
            "Simulated minions with single_connection: one connection each (to ret_port), "
            "so the master needs one file descriptor per minion instead of two."
        ),
    )
    parser.add_argument(
        "--first-contact",
        action="store_true",
        help=(
            "Auth storm of minions that never met this master: each pins the master's key "
            "(writes minion_master.pub) during the storm. By default they hold it already, "
            "as after a master restart."
        ),
    )
    parser.add_argument(
        "--phases",
        default="memory,cli,fanout,rotation,throughput",
        help="Swarm phases after the auth storm (default: all of %(default)s).",
    )
    return parser


async def main(reactor: Any, argv: list[str]) -> None:
    options = _parser().parse_args(argv)
    sizes = [int(s) for s in options.sizes.split(",") if s.strip()]
    limits = raiseFileLimit()
    root = tempfile.mkdtemp(prefix="stb-")
    if not options.no_bytecode_cache:
        # Installed packages have their bytecode; this environment may say
        # PYTHONDONTWRITEBYTECODE and the checkout has none, so every
        # process would compile its modules at each start. The commands
        # measured write and reuse a cache in the temporary directory (the
        # first process to import a module compiles it, untimed).
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(root, "pycache")
    processes = Processes(root)
    options.profile_dir = None
    if options.py_spy:
        options.profile_dir = os.path.join(root, "profiles")
        os.makedirs(options.profile_dir)
    results: dict[str, Any] = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "fd_limit": limits[0],
        "options": {k: v for k, v in vars(options).items() if k not in ("profile_dir",)},
        "swarm": [],
    }
    try:
        start = time.monotonic()
        made = ensureKeys(options.keys_dir, max(sizes, default=0))
        if made:
            print(f"bench: generated {made} key pairs ({time.monotonic() - start:.0f}s)")
        for n in sizes:
            # The master holds a socket per connection: two per minion, or
            # one with single_connection.
            minFds = (1 if options.single_connection else 2) * n + 200
            if limits[0] < minFds:
                print(f"bench: N={n} skipped: the fd limit {limits[0]} is under {minFds}")
                continue
            results["swarm"].append(await swarmRun(options, processes, root, n))
        if not options.no_real_minion:
            results["real_minion"] = await realMinionRun(options, processes, root)
    finally:
        processes.stopAllNow()
        if options.py_spy or options.keep:
            print(f"bench: logs and raw profiles kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(table(results))
    if not options.no_save:
        os.makedirs(options.results_dir, exist_ok=True)
        stem = f"{datetime.date.today().isoformat()}-{socket.gethostname()}"
        path = os.path.join(options.results_dir, f"{stem}.json")
        run = 1
        while os.path.exists(path):  # never overwrite an earlier run's figures
            run += 1
            path = os.path.join(options.results_dir, f"{stem}-{run}.json")
        with open(path, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"\nbench: results written to {os.path.relpath(path)}")


if __name__ == "__main__":
    task.react(main, (sys.argv[1:],))
