"""
salttwist-api beside Salt's salt-api (C{rest_cherrypy}), on this machine,
in one run (issue 24's performance figures), measured the same way for
both: real master, minion and API daemons on 127.0.0.1 under a temporary
C{root_dir}, one system's cluster at a time, every timed phase started
once the machine is quiet (L{run.QuietWait}, the rule of C{run.py}),
processes stopped by pid.

Both APIs get the same settings: C{rest_cherrypy} with C{host: 127.0.0.1},
a port picked free, TLS with the same self-signed certificate (EC P-256,
made here with C{openssl}), C{netapi_enable_clients: [local]}, and the
C{file} eauth backend with one user in an htpasswd file (bcrypt, passlib's
default cost), C{bench: ['.*']}. Salt reads that file with passlib (from
C{libpass}) in its own virtualenv.

Phases:

  1. C{ping}: C{--minions} minion daemons; C{--clients} clients in one
     process outside both systems (C{api_load.py}: threads, C{http.client},
     one kept HTTPS connection and one login each) send C{POST /}
     C{[{"client": "local", "tgt": "*", "fun": "test.ping", "timeout":
     --timeout}]} (the same job timeout for both, 60 s: at Salt's default
     of 5 s, Salt's 20 busy minions miss it) until
     C{--requests} were sent (or C{--max-seconds} passed), C{--repeats}
     times; a request counts only if every minion returned C{True}.
     Figures: requests/s, latency p50/p90/p99, and the CPU seconds of the
     master's, the API's and the minions' process trees (from C{/proc})
     per request, and their memory after.
  2. C{events} (salttwist only: the swarm's simulated minions have no
     Salt counterpart): C{benchmarks/api_events_bench.py}, C{--sse-clients}
     clients on C{GET /events} while C{--swarm-minions} swarm minions
     return C{--event-rounds} C{test.ping} jobs; its CPU and memory lines
     are kept.

Ratios: salttwist / Salt for requests/s, Salt / salttwist for seconds
(above 1, salttwist is faster). Results: a table on standard output and
JSON in C{benchmarks/results/<date>-api-vs-salt.json}. Standard library
only (and C{run.py}'s pieces); the bcrypt hash is made by salttwist's
Python.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import run  # noqa: E402

PHASES = ("ping", "events")
USER, PASSWORD = "bench", "bench-api-pw"
EVENTS_BENCH = os.path.join(os.path.dirname(HERE), "api_events_bench.py")


# -- the shared settings -------------------------------------------------------


def makeCertificate(directory: str) -> tuple[str, str]:
    """
    Make a self-signed certificate for C{127.0.0.1} (EC P-256, one day)
    with C{openssl}.

    @return: the paths of the certificate and of its key.
    """
    crt, key = os.path.join(directory, "api.crt"), os.path.join(directory, "api.key")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-days",
            "1",
            "-keyout",
            key,
            "-out",
            crt,
        ],
        check=True,
        capture_output=True,
    )
    os.chmod(key, 0o600)
    return crt, key


def makeHtpasswd(path: str, python: str) -> None:
    """
    Write an htpasswd file with C{USER}'s bcrypt hash (passlib's default
    cost), made by C{python} (a virtualenv with passlib).
    """
    script = (
        "import sys; from passlib.hash import bcrypt; sys.stdout.write(bcrypt.hash(sys.argv[1]))"
    )
    hashed = subprocess.run(
        [python, "-c", script, PASSWORD], check=True, capture_output=True, text=True
    ).stdout.strip()
    with open(path, "w") as f:
        f.write(f"{USER}:{hashed}\n")


class Shared:
    """
    What both APIs are given: the certificate, the htpasswd file, and a
    port for each.
    """

    def __init__(self, directory: str, python: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.crt, self.key = makeCertificate(directory)
        self.htpasswd = os.path.join(directory, "htpasswd")
        makeHtpasswd(self.htpasswd, python)

    def apiConfig(self, port: int) -> dict[str, Any]:
        """
        @return: the master config keys of the API (the same for both).
        """
        return {
            "rest_cherrypy": {
                "host": "127.0.0.1",
                "port": port,
                "ssl_crt": self.crt,
                "ssl_key": self.key,
            },
            "netapi_enable_clients": ["local"],
            "external_auth": {
                "file": {"^filename": self.htpasswd, "^filetype": "htpasswd", USER: [".*"]}
            },
        }


#: What salt-api with C{rest_cherrypy} and the htpasswd C{file} eauth needs
#: in Salt's virtualenv (Salt does not depend on them): CherryPy, passlib
#: (C{libpass}, the maintained fork salttwist uses) and bcrypt.
SALT_API_PACKAGES = ("cherrypy", "libpass==1.9.4", "bcrypt==5.0.0")


def ensureSaltApi(venv: str, install: bool = True) -> str | None:
    """
    Make sure Salt's virtualenv C{venv} can run salt-api here, installing
    L{SALT_API_PACKAGES} into it with its pip when they are missing.

    @return: L{None} when it can, else why not.
    """
    python = os.path.join(venv, "bin", "python")
    probe = [python, "-c", "import cherrypy, bcrypt, passlib.apache"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return None
    if not install:
        return f"{venv} lacks {', '.join(SALT_API_PACKAGES)} (and --no-install-salt)"
    print(f"installing {', '.join(SALT_API_PACKAGES)} into {venv}", flush=True)
    argv = [python, "-m", "pip", "install", "-q", *SALT_API_PACKAGES]
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        return f"{' '.join(argv)} failed: {result.stdout.decode(errors='replace')[-2000:]}"
    return None


class ApiSalt(run.Salt):
    """
    Salt with salt-api (C{rest_cherrypy}).
    """

    api = "salt-api"

    def __init__(self, venv: str, shared: Shared) -> None:
        super().__init__(venv)
        self.shared = shared
        self.port = 0

    def masterConfig(self, root: str) -> dict[str, Any]:
        (self.port,) = run.freePorts(1)
        return {
            **super().masterConfig(root),
            **self.shared.apiConfig(self.port),
            "api_logfile": f"{root}/var/log/salt/api",
            "api_pidfile": f"{root}/var/run/salt-api.pid",
        }


class ApiSaltTwist(run.SaltTwist):
    """
    salttwist with salttwist-api.
    """

    api = "salttwist-api"

    def __init__(self, venv: str, shared: Shared) -> None:
        super().__init__(venv)
        self.shared = shared
        self.port = 0

    def masterConfig(self, root: str) -> dict[str, Any]:
        (self.port,) = run.freePorts(1)
        return {**super().masterConfig(root), **self.shared.apiConfig(self.port)}


# -- figures -------------------------------------------------------------------


def percentile(ordered: list[float], fraction: float) -> float | None:
    """
    @param ordered: samples, sorted.
    @return: the nearest-rank percentile C{fraction} (0.5, 0.9, 0.99) of
        C{ordered}, or L{None} when empty.
    """
    if not ordered:
        return None
    rank = max(1, math.ceil(fraction * len(ordered) - 1e-9))
    return ordered[min(len(ordered), rank) - 1]


def loadFigures(result: dict[str, Any]) -> dict[str, Any]:
    """
    @param result: what C{api_load.py} printed.
    @return: requests/s (good requests over the wall time), latency
        percentiles in ms, counts.
    """
    latencies = sorted(result.get("latencies_s") or [])
    elapsed = result.get("elapsed_s") or 0.0

    def ms(fraction: float) -> float | None:
        value = percentile(latencies, fraction)
        return None if value is None else round(value * 1000, 2)

    return {
        "requests": result.get("sent", 0),
        "ok": len(latencies),
        "failures": result.get("failures", 0),
        "elapsed_s": round(elapsed, 3),
        "requests_per_s": round(len(latencies) / elapsed, 2) if elapsed else None,
        "minion_returns_per_s": (
            round(result.get("returned_true", 0) / elapsed, 2) if elapsed else None
        ),
        "p50_ms": ms(0.5),
        "p90_ms": ms(0.9),
        "p99_ms": ms(0.99),
        "max_ms": round(latencies[-1] * 1000, 2) if latencies else None,
        "failure_texts": result.get("failure_texts", []),
        "warmup_failures": result.get("warmup_failures", []),
    }


# -- a system's cluster and its API --------------------------------------------


class ApiCluster(run.Cluster):
    """
    A L{run.Cluster} with the system's API daemon beside its master.
    """

    def __init__(self, system: ApiSalt | ApiSaltTwist, root: str, n: int, processes: run.Processes):
        super().__init__(system, root, n, processes)
        self.apiSystem = system
        self.api: Any = None

    def startApi(self, timeout: float, loadPython: str) -> float:
        """
        Start the API and wait until a login through it succeeds.

        @return: the seconds that took.
        """
        system = self.apiSystem
        started = time.monotonic()
        self.api = self.processes.start(
            [system.bin(system.api), "-c", self.masterDir, "-l", "error"],
            system.env,
            self._log("api"),
        )
        probe = (
            "import sys, ssl, http.client, json\n"
            "c = http.client.HTTPSConnection('127.0.0.1', int(sys.argv[1]), timeout=30,"
            " context=ssl.create_default_context(cafile=sys.argv[2]))\n"
            "c.request('POST', '/login', json.dumps({'username': sys.argv[3],"
            " 'password': sys.argv[4], 'eauth': 'file'}),"
            " {'Content-Type': 'application/json', 'Accept': 'application/json'})\n"
            "r = c.getresponse(); r.read(); sys.exit(0 if r.status == 200 else 1)\n"
        )
        argv = [loadPython, "-c", probe, str(system.port), system.shared.crt, USER, PASSWORD]

        def loggedIn() -> bool:
            if self.api.poll() is not None:
                raise RuntimeError(f"{system.api} exited\n{self.logTail()}")
            return run.timed(argv, os.environ.copy(), 60)["code"] == 0

        self._waitFor(loggedIn, f"{system.api} to accept a login", timeout)
        return time.monotonic() - started

    def logTail(self, lines: int = 20) -> str:
        text = super().logTail(lines)
        try:
            with open(self._log("api"), errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
        except OSError:
            return text
        return text + ("\n--- api ---\n" + "\n".join(tail) if tail else "")

    def cpu(self) -> dict[str, float]:
        """
        @return: CPU seconds of the master's, the API's and the minions'
            process trees.
        """
        assert self.master is not None and self.api is not None
        return {
            "master": run.treeCpu([self.master.pid]),
            "api": run.treeCpu([self.api.pid]),
            "minions": run.treeCpu([p.pid for p in self.minions]),
        }

    def stop(self) -> None:
        if self.api is not None:
            self.processes.stop([self.api])
        super().stop()


def runLoad(
    cluster: ApiCluster, options: argparse.Namespace, loadPython: str, quiet: run.QuietWait
) -> dict[str, Any]:
    """
    One round of the C{ping} phase: start C{api_load.py}, let it log in
    and warm up, wait for quiet, then time it and read the daemons' CPU
    before and after.
    """
    system = cluster.apiSystem
    argv = [
        loadPython,
        os.path.join(HERE, "api_load.py"),
        *("--port", str(system.port), "--cafile", system.shared.crt),
        *("--username", USER, "--password", PASSWORD, "--eauth", "file"),
        *("--clients", str(options.clients), "--requests", str(options.requests)),
        *("--max-seconds", f"{options.max_seconds:g}", "--expect", str(cluster.n)),
        *("--job-timeout", f"{options.timeout:g}"),
    ]
    load = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert load.stdout is not None and load.stdin is not None
        line = load.stdout.readline()
        if line.strip() != "ready":
            load.wait(60)
            raise RuntimeError(f"api_load.py: {line!r} {load.stderr.read()[-2000:]}")  # type: ignore[union-attr]
        phase = run.Phase.whenQuiet(quiet, cluster.n)
        before = cluster.cpu()
        load.stdin.write("go\n")
        load.stdin.flush()
        out, err = load.communicate(timeout=options.max_seconds + 300)
        after = cluster.cpu()
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    lines = [x for x in out.splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError(f"api_load.py printed no result: {err[-2000:]}")
    figures = loadFigures(json.loads(lines[-1]))
    ok = figures["ok"] or 0
    cpu = {name: round(after[name] - before[name], 3) for name in before}
    figures["cpu_s"] = cpu
    figures["cpu_ms_per_request"] = {
        name: round(seconds * 1000 / ok, 3) if ok else None for name, seconds in cpu.items()
    }
    figures.update(phase.end())
    return figures


def measureSystem(
    system: ApiSalt | ApiSaltTwist,
    options: argparse.Namespace,
    root: str,
    processes: run.Processes,
    quiet: run.QuietWait,
    loadPython: str,
    out: dict[str, Any],
) -> dict[str, Any]:
    """
    The C{ping} figures of one system, into C{out}.
    """
    name = system.name
    cluster = ApiCluster(system, os.path.join(root, name), options.minions, processes)
    try:
        print(f"  starting {name}: master, {options.minions} minions and {system.api}", flush=True)
        out["ready_quiet"] = run.waitQuiet(quiet)
        cluster.start(options.ready_timeout)
        out["ready_s"] = round(cluster.readySeconds or 0.0, 2)
        out["api_ready_s"] = round(cluster.startApi(options.ready_timeout, loadPython), 2)
        rounds = []
        for index in range(options.repeats):
            print(f"  {name}: POST / test.ping, round {index + 1} of {options.repeats}", flush=True)
            rounds.append(runLoad(cluster, options, loadPython, quiet))
            r = rounds[-1]
            print(
                f"    {r['ok']} ok, {r['failures']} failed, {r['requests_per_s']} requests/s, "
                f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms",
                flush=True,
            )
        out["rounds"] = rounds
        out["ping"] = bestOf(rounds)
        out["memory"] = {
            **cluster.memory(),
            "api": run.treeMemory(cluster.api.pid),
        }
    finally:
        cluster.stop()
    return out


def bestOf(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """
    @return: the round of median requests/s (the lower middle one of an
        even count), standing for the phase.
    """
    ranked = sorted(rounds, key=lambda r: r.get("requests_per_s") or 0.0)
    return ranked[(len(ranked) - 1) // 2] if ranked else {}


# -- the events phase (salttwist only) -----------------------------------------

_EVENTS_LINE = re.compile(
    r"^(?P<name>api|master): CPU (?P<connect>[\d.]+) s connecting the clients, "
    r"(?P<rounds>[\d.]+) s during the rounds; memory (?P<before>\d+) MiB before, "
    r"(?P<with>\d+) MiB with the clients, (?P<after>\d+) MiB after \(peak (?P<peak>\d+) MiB\)"
)


def parseEventsOutput(text: str) -> dict[str, Any]:
    """
    @return: what C{api_events_bench.py} printed: per daemon its CPU
        seconds and memory (MiB), the clients' counts, the rounds' lines.
    """
    figures: dict[str, Any] = {"rounds": [], "daemons": {}}
    for line in text.splitlines():
        match = _EVENTS_LINE.match(line)
        if match:
            g = match.groupdict()
            figures["daemons"][g["name"]] = {
                "cpu_connecting_s": float(g["connect"]),
                "cpu_rounds_s": float(g["rounds"]),
                "rss_before_mib": int(g["before"]),
                "rss_with_clients_mib": int(g["with"]),
                "rss_after_mib": int(g["after"]),
                "rss_peak_mib": int(g["peak"]),
            }
        elif line.startswith("clients: "):
            try:
                figures["clients"] = json.loads(line[len("clients: ") :])
            except ValueError:
                figures["clients"] = line
        elif line.startswith("round: "):
            figures["rounds"].append(line[len("round: ") :])
    return figures


#: How each direct child of C{api_events_bench.py} is told, by its command line.
_EVENTS_ROLES = (
    ("clients", "--clients-process"),
    ("master", "salttwist-master"),
    ("swarm", "swarm"),  # salttwist-swarm, which runs benchmarks/swarm.py
    ("api", "apiMain"),
)


def _commandLine(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def eventsRoles(benchPid: int) -> dict[str, int]:
    """
    @return: C{{role: pid}} of the daemons C{api_events_bench.py} (pid
        C{benchPid}) started, by their command lines (see L{_EVENTS_ROLES}).
    """
    roles: dict[str, int] = {}
    for pid, _ in run.processTree(benchPid):
        info = run._stat(pid)
        if info is None or info[0] != benchPid:
            continue
        line = _commandLine(pid)
        for role, mark in _EVENTS_ROLES:
            if mark in line and role not in roles:
                roles[role] = pid
                break
    return roles


class TreeSampler:
    """
    The CPU seconds and summed RSS of some process trees, sampled: the
    first, the peak and the last RSS, and the most CPU seen (a process
    that exits takes its figures with it, so the last sample may hold
    less).
    """

    def __init__(self) -> None:
        self.figures: dict[str, dict[str, float]] = {}

    def sample(self, roles: dict[str, int]) -> None:
        """
        Sample every tree of C{roles}.
        """
        for role, pid in roles.items():
            pids = [p for p, _ in run.processTree(pid)]
            if not pids:
                continue
            rss = round(sum(run._statusKb(p, "VmRSS:") for p in pids) / 1024, 1)
            cpu = round(run.treeCpu([pid]), 2)
            node = self.figures.setdefault(
                role, {"tree_rss_first_mb": rss, "tree_rss_peak_mb": rss, "processes": 0}
            )
            node["tree_rss_peak_mb"] = max(node["tree_rss_peak_mb"], rss)
            node["tree_rss_last_mb"] = rss
            node["tree_cpu_s"] = max(node.get("tree_cpu_s", 0.0), cpu)
            node["processes"] = max(node["processes"], len(pids))


def measureEvents(
    options: argparse.Namespace, python: str, env: dict[str, str], quiet: run.QuietWait
) -> dict[str, Any]:
    """
    Run C{api_events_bench.py} once the machine is quiet, sampling its
    daemons' process trees every 0.5 s (C{trees}: master, API, swarm and
    clients, each its first and peak RSS and the CPU seconds of the whole
    run).
    """
    phase = run.Phase.whenQuiet(quiet)
    argv = [
        python,
        EVENTS_BENCH,
        *("--minions", str(options.swarm_minions), "--clients", str(options.sse_clients)),
        *("--rounds", str(options.event_rounds)),
    ]
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        bench = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        sampler = TreeSampler()
        try:
            while bench.poll() is None:
                if time.monotonic() - started > options.events_timeout:
                    raise RuntimeError(f"api_events_bench.py ran over {options.events_timeout} s")
                sampler.sample(eventsRoles(bench.pid))
                time.sleep(0.5)
        finally:
            if bench.poll() is None:
                bench.terminate()
                bench.wait(30)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    figures = parseEventsOutput(text)
    figures.update(
        {
            "trees": sampler.figures,
            "wall_s": round(time.monotonic() - started, 1),
            "code": bench.returncode,
            "output": text[-3000:],
            "stderr": errors[-2000:],
            **phase.end(),
        }
    )
    return figures


# -- results -------------------------------------------------------------------

#: (label, path under a system's figures, ratio: "up" when more is better).
ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("requests/s", ("ping", "requests_per_s"), "up"),
    ("minions returning True per s", ("ping", "minion_returns_per_s"), "up"),
    ("latency p50 (ms)", ("ping", "p50_ms"), "down"),
    ("latency p90 (ms)", ("ping", "p90_ms"), "down"),
    ("latency p99 (ms)", ("ping", "p99_ms"), "down"),
    ("master CPU per request (ms)", ("ping", "cpu_ms_per_request", "master"), "down"),
    ("API CPU per request (ms)", ("ping", "cpu_ms_per_request", "api"), "down"),
    ("minions' CPU per request (ms)", ("ping", "cpu_ms_per_request", "minions"), "down"),
    ("failed requests", ("ping", "failures"), ""),
    ("master tree RSS after (MB)", ("memory", "master", "tree_rss_mb"), "down"),
    ("API tree RSS after (MB)", ("memory", "api", "tree_rss_mb"), "down"),
    ("minions' total tree RSS (MB)", ("memory", "minions_total_tree_rss_mb"), "down"),
)


def addRatios(results: dict[str, Any]) -> None:
    """
    Add C{ratios}: above 1, salttwist is better (requests/s: salttwist /
    Salt; the others: Salt / salttwist).
    """
    systems = results.get("systems", {})
    salt, twist = systems.get("salt", {}), systems.get("salttwist", {})
    ratios: dict[str, float | None] = {}
    for _label, path, way in ROWS:
        if not way:
            continue
        a, b = run._get(salt, *path), run._get(twist, *path)
        ratios["/".join(path)] = run.ratio(b, a) if way == "up" else run.ratio(a, b)
    results["ratios"] = ratios


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 100 else f"{value:.0f}"
    return str(value)


def table(results: dict[str, Any]) -> str:
    """
    @return: the figures as a text table, then the events phase, then any
        failures.
    """
    systems = results.get("systems", {})
    salt, twist = systems.get("salt", {}), systems.get("salttwist", {})
    options = results.get("options", {})
    ratios = results.get("ratios", {})
    lines = [
        f"POST / local test.ping to {options.get('minions')} minions, "
        f"{options.get('clients')} clients, {options.get('requests')} requests a round "
        f"(at most {options.get('max_seconds')} s), median of {options.get('repeats')} rounds",
        f"{'':34} {'salt':>9} {'salttwist':>9} {'ratio':>7}",
    ]
    for label, path, _way in ROWS:
        key = "/".join(path)
        lines.append(
            f"{label:34} {_cell(run._get(salt, *path)):>9} {_cell(run._get(twist, *path)):>9} "
            f"{_cell(ratios.get(key)):>7}"
        )
    for label, node in (("salt", salt), ("salttwist", twist)):
        ping = node.get("ping") or {}
        if ping:
            state = "quiet" if ping.get("quiet") else "NOT quiet"
            lines.append(
                f"  {label}: {ping.get('quiet_busy_cores')} cores busy before ({state}), "
                f"{ping.get('machine_busy_cores')} during"
            )
    lines.append("ratio above 1: salttwist better (req/s: salttwist/salt; others salt/salttwist)")
    events = results.get("events")
    if events:
        lines.append(
            f"events: {options.get('sse_clients')} SSE clients, {options.get('swarm_minions')} "
            f"swarm minions, {options.get('event_rounds')} rounds (salttwist only), "
            f"exit {events.get('code')}, clients {events.get('clients')}"
        )
        for name, d in (events.get("daemons") or {}).items():
            lines.append(
                f"  {name}: CPU {d['cpu_connecting_s']} s connecting, {d['cpu_rounds_s']} s in "
                f"the rounds; RSS {d['rss_before_mib']} / {d['rss_with_clients_mib']} / "
                f"{d['rss_after_mib']} MiB (before / with clients / after), peak "
                f"{d['rss_peak_mib']} MiB"
            )
        for name, t in (events.get("trees") or {}).items():
            lines.append(
                f"  {name} process tree ({t['processes']:g} processes, sampled every 0.5 s): "
                f"CPU {t.get('tree_cpu_s')} s over the run; RSS first {t['tree_rss_first_mb']} "
                f"MB, peak {t['tree_rss_peak_mb']} MB, last {t.get('tree_rss_last_mb')} MB"
            )
    failures = []
    for name, node in (("salt", salt), ("salttwist", twist)):
        if node.get("error"):
            failures.append(f"  {name}: {node['error']}")
        for r in node.get("rounds") or []:
            for text in r.get("failure_texts", []) + r.get("warmup_failures", []):
                failures.append(f"  {name}: {text}")
    if events and events.get("code"):
        failures.append(f"  events: {events.get('stderr', '')[-1000:]}")
    if failures:
        lines.append("failures:")
        lines += failures[:30]
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    """
    The command line.
    """
    p = argparse.ArgumentParser(description="salttwist-api beside salt-api (see README.md).")
    run.addSystemArguments(p)
    p.add_argument("--only", choices=("salt", "salttwist"), help="one system only")
    p.add_argument("--phases", default=",".join(PHASES), help=f"default {','.join(PHASES)}")
    p.add_argument("--minions", type=int, default=20)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--requests", type=int, default=2000, help="a round's requests, all clients")
    p.add_argument("--max-seconds", type=float, default=45.0, help="a round's longest")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the ping phase")
    p.add_argument(
        "--timeout", type=float, default=60.0, help="the job's timeout, in every request's chunk"
    )
    p.add_argument("--sse-clients", type=int, default=100)
    p.add_argument("--swarm-minions", type=int, default=1000)
    p.add_argument("--event-rounds", type=int, default=5)
    p.add_argument("--events-timeout", type=float, default=900.0)
    run.addRunArguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """
    Run the benchmark.
    """
    options = parser().parse_args(argv)
    options.phases = [p for p in options.phases.split(",") if p]
    unknown = set(options.phases) - set(PHASES)
    if unknown:
        sys.stderr.write(f"unknown phases: {', '.join(sorted(unknown))}\n")
        return 2
    options.systems = options.only or "salt,salttwist"
    root = tempfile.mkdtemp(prefix="api-bench-")
    twistPython = os.path.join(options.salttwist_venv, "bin", "python")
    shared = Shared(os.path.join(root, "shared"), twistPython)
    picked = run.pickSystems(
        options,
        {
            "salt": lambda: ApiSalt(options.salt_venv, shared),
            "salttwist": lambda: ApiSaltTwist(options.salttwist_venv, shared),
        },
    )
    if isinstance(picked, str):
        sys.stderr.write(f"{picked}\n")
        shutil.rmtree(root, ignore_errors=True)
        return 2
    systems: dict[str, Any] = picked
    if "salt" in systems and "ping" in options.phases:
        problem = ensureSaltApi(options.salt_venv, install=not options.no_install_salt)
        if problem is not None:
            sys.stderr.write(f"salt: {problem}\n")
            shutil.rmtree(root, ignore_errors=True)
            return 2
    results: dict[str, Any] = {
        **run.resultsHead(options, systems),
        "notes": [
            "Both systems: master, minion daemons and the API (-l error) on 127.0.0.1, temp "
            "root_dir, auto_accept for the benchmark only, every other option at the "
            "system's defaults; one system's cluster at a time.",
            "Both APIs: rest_cherrypy host 127.0.0.1, TLS with the same self-signed EC P-256 "
            "certificate, netapi_enable_clients [local], external_auth file (htpasswd, one "
            "bcrypt user, passlib's default cost) with ['.*'].",
            "Load: api_load.py, one process outside both systems (Python threads, "
            "http.client, a kept HTTPS connection each), each client logged in once and "
            "sent 1 untimed request first (all at once); each chunk has the job's timeout "
            "(--timeout, both); a request counts only if every minion returned True. "
            "requests_per_s = good requests / the round's wall seconds.",
            "CPU: user + system seconds of each process tree from /proc over the timed part "
            "(reaped children included), divided by the good requests.",
            "events: benchmarks/api_events_bench.py (salttwist only, plain HTTP), its "
            "printed figures.",
            "quiet: each timed phase waits until all CPUs together were busy less than "
            "quiet_cores + quiet_per_minion x minions over quiet_window s (run.py's rule).",
        ],
        "systems": {},
    }
    if not options.no_bytecode_cache:
        for system in systems.values():
            system.useBytecodeCache(os.path.join(root, "pycache"))
    processes = run.Processes()
    quiet = run.QuietWait.fromOptions(options)
    print(f"root {root}; {', '.join(results['versions'].values())}", flush=True)
    try:
        if "ping" in options.phases:
            for name, system in systems.items():
                print(name, flush=True)
                out = results["systems"][name] = {}
                try:
                    measureSystem(system, options, root, processes, quiet, twistPython, out)
                except Exception as e:
                    out["error"] = f"{type(e).__name__}: {e}"[-3000:]
                    sys.stderr.write(f"{name}: {out['error']}\n")
        if "events" in options.phases and "salttwist" in systems:
            print(
                f"events: {options.sse_clients} SSE clients, {options.swarm_minions} swarm minions",
                flush=True,
            )
            results["events"] = measureEvents(options, twistPython, systems["salttwist"].env, quiet)
    finally:
        processes.stopAll()
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    addRatios(results)
    print()
    print(table(results))
    if not options.no_save:
        path = options.output or os.path.join(run.RESULTS, f"{options.date}-api-vs-salt.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(results, f, indent=2, default=str)
            f.write("\n")
        print(f"\nwritten {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
