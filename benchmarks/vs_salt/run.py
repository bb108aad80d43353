"""
salttwist beside Salt on this machine, measured the same way.

For each system (Salt from the virtualenv given with C{--salt-venv}, and
salttwist from this checkout's C{.venv}), everything runs as real processes
on 127.0.0.1 under a temporary C{root_dir}:

  a. CLI start-up: C{salt --version} against C{salttwist --version}, and
     C{salt-call --local test.ping} against C{salttwist-call --local
     test.ping} (median of C{--repeats} wall times, each a fresh process);
  b. for each minion count N of C{--minions}: one master and N minion
     daemons, started in the foreground with C{-l error}, and waited for
     until every minion answers C{test.ping}; then C{salt '*' test.ping}
     against C{salttwist '*' test.ping}, C{-t 10}, each a fresh CLI process
     (median of C{--repeats});
  c. jobs per second through each system's Python client to the N minions:
     C{--jobs} jobs of C{test.ping} one after the other in one process
     (Salt's C{salt.client.LocalClient().cmd}; salttwist's Deferred
     C{salttwist.client.local.LocalClient.run}, and its synchronous
     C{salttwist.client.LocalClient.cmd} facade when it exists), C{--rounds}
     times; and salttwist's Deferred core with C{--concurrency} jobs at
     once through one client (throughput; Salt's is measured one job at a
     time only, so that row has no ratio);
  d. memory: C{VmRSS} (and PSS) of the master's and of each minion's
     process tree after those runs, and the clusters' idle CPU before them;
  e. a new minion's start and stop, C{--firstjob-repeats} times on each
     running cluster: a fresh id's key pair made and its public key
     accepted on the master beforehand, its daemon spawned as the
     cluster's minions are, timed to its C{salt/minion/ID/start} event and
     to its first successful C{test.ping} (sent through a client already
     warmed up), then from SIGTERM to its exit (C{salt_firstjob.py} /
     C{salttwist_firstjob.py}, run with each system's Python; its key
     deleted afterwards with C{salt-key}/C{salttwist-key -d}).

The CLI start-up samples of the two systems are interleaved (one Salt
sample, one salttwist sample, the order swapped every repeat) so that the
load of other users of the machine falls on both alike. The N-minion
clusters run one system at a time, so that neither's idle minions and
forked job processes slow the other (C{--together} runs both at once and
interleaves their samples too). The 1-minute load average is recorded for
every phase, and the CPU the master and the minions spent per job (which
does not depend on the load) beside the wall times. Each sample's outcome
is checked (every minion returned C{True}) and the failures are counted.

Every timed phase of both systems, and every cluster's start, waits first
for the machine to be quiet (L{QuietWait}): all CPUs together busy less
than C{--quiet-cores} plus C{--quiet-per-minion} for each minion daemon
running, over a window of C{--quiet-window} seconds (C{/proc/stat}),
window after window for at most C{--quiet-timeout} seconds. The wait
after a cluster has started is the one before its first phase, so a
cluster still busy starting is not measured. The seconds waited and the
cores busy in the last window go beside each phase's figures; a phase
that never had a quiet window still runs, and is marked as not quiet in
the JSON and the table.

The script uses the standard library only and imports neither system: each
is driven through its own commands and its own virtualenv's Python. It
stops every process it started, by pid (and the children they forked, by
pid and start time). Results: a table on standard output and JSON in
C{benchmarks/results/<date>-vs-salt.json}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(REPO, "benchmarks", "results")
DEFAULT_SALT_VENV = os.path.join(REPO, ".salt-venv")
#: The Salt release measured, installed from PyPI when C{--salt-venv} has
#: none (see L{saltInstallSteps}).
SALT_VERSION = "3008.5"
DEFAULT_SALTTWIST_VENV = os.path.join(REPO, ".venv")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STOP_GRACE = 15.0
POLL = 0.2
#: Environment variables that would change which config a command reads or
#: how a daemon logs; the children never see them.
_STRIPPED_ENV = ("SALT_CONFIG_DIR", "SALTTWIST_CONFIG_DIR")


# -- installing Salt -----------------------------------------------------------


def saltInstallSteps(venv: str, python: str, version: str = SALT_VERSION) -> list[list[str]]:
    """
    The commands that put Salt C{version} from PyPI into a new virtualenv
    C{venv} made by C{python}. A plain C{pip install salt==3008.*} resolves
    to an older 3008 release when the newest one pins a C{certifi} that pip
    cannot have yet; so the series is installed first, with its
    dependencies, then the release itself over it without them.
    """
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q"]
    series = version.split(".")[0]
    return [
        [python, "-m", "venv", venv],
        [*pip, "--upgrade", "pip"],
        [*pip, f"salt=={series}.*"],
        [*pip, "--no-deps", f"salt=={version}"],
    ]


def ensureSalt(
    venv: str, version: str = SALT_VERSION, install: bool = True, python: str | None = None
) -> str | None:
    """
    Make sure C{venv} holds Salt, installing C{version} from PyPI into it
    first when it has no C{salt-master} (a new virtualenv of its own: never
    salttwist's, never in the repository's history; C{.salt-venv} is
    ignored by git). An install that fails removes what it made, so that
    the next run starts it again.

    @param python: the Python that makes the virtualenv (default:
        C{python3} on C{PATH}, else this one).
    @return: L{None} when Salt is there, else why it is not.
    """
    if os.path.exists(os.path.join(venv, "bin", "salt-master")):
        return None
    if not install:
        return f"no salt-master in {venv}/bin (and --no-install-salt)"
    if os.path.exists(venv) and os.listdir(venv):
        return f"{venv} exists and is not a virtualenv with Salt: give another --salt-venv"
    python = python or shutil.which("python3") or sys.executable
    print(f"installing Salt {version} from PyPI into {venv}", flush=True)
    for argv in saltInstallSteps(venv, python, version):
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if result.returncode != 0:
            # It was absent or empty: nothing but this install is lost.
            shutil.rmtree(venv, ignore_errors=True)
            output = result.stdout.decode(errors="replace")[-2000:]
            return (
                f"{' '.join(argv)} failed ({result.returncode}); removed {venv}, "
                f"run again to retry:\n{output}"
            )
    return None


# -- /proc --------------------------------------------------------------------


def loadAverage() -> list[float]:
    """
    @return: the 1, 5 and 15 minute load averages.
    """
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def readProcStat() -> str:
    """
    @return: the first line of C{/proc/stat}: the jiffies of all CPUs.
    """
    with open("/proc/stat") as f:
        return f.readline()


def machineCpu(readStat: Callable[[], str] = readProcStat) -> tuple[int, int]:
    """
    @param readStat: returns the text of C{/proc/stat} (its first line, the
        C{cpu} line, is read).
    @return: busy and total jiffies of all CPUs since boot: busy is user,
        nice, system, irq, softirq and steal; idle and iowait are not.
    """
    values = [int(x) for x in readStat().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return total - idle, total


def busyCores(before: tuple[int, int], after: tuple[int, int], cpus: int | None = None) -> float:
    """
    @param before: L{machineCpu} at the start of a window.
    @param after: L{machineCpu} at its end.
    @param cpus: the number of cores (default: this machine's).
    @return: the cores busy on average over the window, rounded to 0.01.
    """
    elapsed = max(1, after[1] - before[1])
    return round((after[0] - before[0]) / elapsed * (cpus or os.cpu_count() or 1), 2)


class QuietWait:
    """
    The rule every timed phase of both systems starts by: wait until the
    machine is quiet, that is until all its CPUs together were busy (see
    L{machineCpu}; ours and other users') less than C{cores} cores, plus
    C{perMinion} for each minion daemon running, on average over one
    window of C{window} seconds. The windows follow one another; after
    C{timeout} seconds the phase starts anyway, and is marked as not quiet.

    The allowance per minion is for a cluster's own idle work, which
    the phase will have beside it whenever it runs: 20 idle Salt minions
    keep about 0.16 of a core busy and 50 about 0.44 (2026-11-22), so a
    flat limit of 0.2 would never be met by Salt's larger clusters.

    @ivar cores: the limit with no minion running.
    @ivar perMinion: what the limit grows by for each minion running.
    @ivar window: the seconds of one window.
    @ivar timeout: the seconds after which the phase runs anyway.
    """

    def __init__(
        self,
        cores: float = 0.2,
        window: float = 5.0,
        timeout: float = 120.0,
        perMinion: float = 0.01,
        cpus: int | None = None,
        readStat: Callable[[], str] = readProcStat,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        """
        @param cpus: the number of cores (default: this machine's).
        @param readStat: returns the text of C{/proc/stat}.
        @param clock: seconds, monotonic.
        @param sleep: waits the seconds it is given.
        """
        self.cores = cores
        self.window = window
        self.timeout = timeout
        self.perMinion = perMinion
        self._cpus = cpus
        self._readStat = readStat
        self._clock = clock
        self._sleep = sleep

    @classmethod
    def fromOptions(cls, options: argparse.Namespace) -> QuietWait:
        """
        @return: the rule set by C{--quiet-cores}, C{--quiet-per-minion},
            C{--quiet-window} and C{--quiet-timeout}.
        """
        return cls(
            cores=options.quiet_cores,
            window=options.quiet_window,
            timeout=options.quiet_timeout,
            perMinion=options.quiet_per_minion,
        )

    def wait(self, minions: int = 0) -> dict[str, Any]:
        """
        Measure windows one after the other until one is quiet or
        C{timeout} has passed (at least one window, always).

        @param minions: the minion daemons running now (of every cluster).
        @return: C{quiet} (whether the last window was), C{quiet_wait_s}
            (the seconds waited, the last window included),
            C{quiet_busy_cores} (the cores busy in the last window),
            C{quiet_limit_cores} and C{quiet_windows}.
        """
        limit = round(self.cores + self.perMinion * minions, 3)
        started = self._clock()
        before = machineCpu(self._readStat)
        windows = 0
        while True:
            self._sleep(self.window)
            after = machineCpu(self._readStat)
            windows += 1
            busy = busyCores(before, after, self._cpus)
            waited = self._clock() - started
            if busy < limit or waited >= self.timeout:
                return {
                    "quiet": busy < limit,
                    "quiet_wait_s": round(waited, 1),
                    "quiet_busy_cores": busy,
                    "quiet_limit_cores": limit,
                    "quiet_windows": windows,
                }
            before = after


def waitQuiet(quiet: QuietWait, minions: int = 0) -> dict[str, Any]:
    """
    Wait for the machine to be quiet (L{QuietWait.wait}) and say what the
    wait found.

    @param minions: the minion daemons running now.
    @return: what L{QuietWait.wait} returned.
    """
    found = quiet.wait(minions)
    state = "quiet" if found["quiet"] else "NOT quiet (running anyway)"
    print(
        f"    {state} after {found['quiet_wait_s']:g} s: "
        f"{found['quiet_busy_cores']:.2f} cores busy (limit {found['quiet_limit_cores']:g})",
        flush=True,
    )
    return found


class Phase:
    """
    What the machine did while one phase ran: the 1-minute load average
    before and after (it lags: a minute's exponential average) and the
    cores busy on average over the phase (everything: ours and others');
    and, when it started by L{QuietWait}, what that wait found.
    """

    def __init__(self, quiet: dict[str, Any] | None = None) -> None:
        """
        @param quiet: what L{QuietWait.wait} returned before the phase.
        """
        self.quiet = quiet or {}
        self.load = loadAverage()
        self.cpu = machineCpu()

    @classmethod
    def whenQuiet(cls, quiet: QuietWait, minions: int = 0) -> Phase:
        """
        Start a phase once the machine is quiet (L{waitQuiet}).

        @param minions: the minion daemons running now.
        """
        return cls(waitQuiet(quiet, minions))

    def end(self) -> dict[str, Any]:
        """
        @return: the quiet wait's figures (see L{QuietWait.wait}), if any,
            then C{load1_before_after} and C{machine_busy_cores}.
        """
        return {
            **self.quiet,
            "load1_before_after": [self.load[0], loadAverage()[0]],
            "machine_busy_cores": busyCores(self.cpu, machineCpu()),
        }


def _stat(pid: int) -> tuple[int, int, float] | None:
    """
    @return: C{(ppid, starttime, cpuSeconds)} of C{pid}, or L{None} if it
        has gone; the CPU seconds are user + system, its own and those of
        the children it has reaped (Salt forks a process per job).
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[19]), sum(int(x) for x in fields[11:15]) / CLOCK_TICKS


def processTree(pid: int) -> list[tuple[int, int]]:
    """
    @return: C{(pid, starttime)} of C{pid} and of all its descendants
        alive now.
    """
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _stat(int(name))
            if info is not None:
                children.setdefault(info[0], []).append(int(name))
                starts[int(name)] = info[1]
    if pid not in starts:
        return []
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append((current, starts.get(current, -1)))
        todo.extend(children.get(current, []))
    return tree


def _statusKb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pssKb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def treeMemory(pid: int) -> dict[str, Any]:
    """
    @return: C{VmRSS} of C{pid} alone, and C{VmRSS} and PSS summed over its
        process tree (MB), with the number of processes. Summed RSS counts
        pages shared between the processes (a forked Salt worker) once per
        process; PSS divides them among the sharers.
    """
    pids = [p for p, _ in processTree(pid)]
    return {
        "processes": len(pids),
        "main_rss_mb": round(_statusKb(pid, "VmRSS:") / 1024, 1),
        "tree_rss_mb": round(sum(_statusKb(p, "VmRSS:") for p in pids) / 1024, 1),
        "tree_pss_mb": round(sum(_pssKb(p) for p in pids) / 1024, 1),
    }


def treeCpu(pids: list[int]) -> float:
    """
    @return: CPU seconds of the process trees of C{pids} (see L{_stat}).
    """
    total = 0.0
    for pid in pids:
        for p, _ in processTree(pid):
            info = _stat(p)
            total += info[2] if info else 0.0
    return total


# -- processes ----------------------------------------------------------------


def childEnvironment(binDir: str) -> dict[str, str]:
    """
    Our environment with C{binDir} first on C{PATH}, without the variables
    that pick a config directory or salttwist's log settings.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _STRIPPED_ENV and not k.startswith("SALTTWIST_LOG_")
    }
    env["PATH"] = os.pathsep.join([binDir, *filter(None, env.get("PATH", "").split(os.pathsep))])
    return env


class Processes:
    """
    The daemons this run started; each stopped by pid, with the processes
    it forked (by pid and start time, so a reused pid is never signalled).
    """

    def __init__(self) -> None:
        self.running: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
        """
        Start a daemon, its output going to the file C{log}.
        """
        with open(log, "ab") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        self.running.append(process)
        return process

    def stop(self, processes: list[subprocess.Popen[bytes]]) -> None:
        """
        SIGTERM C{processes}, SIGKILL those still running after
        L{STOP_GRACE} seconds, then the same for any process they forked
        that is still alive.
        """
        forked = []
        for process in processes:
            tree = processTree(process.pid)
            forked += [(p, start) for p, start in tree if p != process.pid]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process in self.running:
                self.running.remove(process)
        leftovers = [(p, s) for p, s in forked if (_stat(p) or (0, None))[1] == s]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid, start in leftovers:
                info = _stat(pid)
                if info is not None and info[1] == start:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and any(
                (_stat(p) or (0, None))[1] == s for p, s in leftovers
            ):
                time.sleep(0.05)

    def stopAll(self) -> None:
        """
        Stop every daemon still running.
        """
        self.stop(list(self.running))


def freePorts(count: int) -> list[int]:
    """
    @return: C{count} distinct TCP ports of 127.0.0.1 free now (for Salt,
        which cannot be given port 0).
    """
    sockets, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    return ports


def timed(argv: list[str], env: dict[str, str], timeout: float = 120.0) -> dict[str, Any]:
    """
    Run one command to completion.

    @return: C{elapsed} wall seconds, C{code}, C{out} and C{err}.
    """
    start = time.perf_counter()
    try:
        result = subprocess.run(
            argv, capture_output=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL
        )
        code, out, err = result.returncode, result.stdout, result.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = -1, e.stdout or b"", e.stderr or b""
    return {
        "elapsed": time.perf_counter() - start,
        "code": code,
        "out": out.decode("utf-8", "replace"),
        "err": err.decode("utf-8", "replace"),
    }


def parseReturns(text: str) -> dict[str, Any]:
    """
    @return: the minion returns printed by C{--out json} (one document, or
        one per line).
    """
    text = text.strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else {}
    except ValueError:
        pass
    merged: dict[str, Any] = {}
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            merged.update(value)
    return merged


def writeConfig(path: str, config: dict[str, Any]) -> None:
    """
    Write a config file (JSON is YAML, so both systems read it).
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


# -- the two systems ----------------------------------------------------------


class System:
    """
    How to configure and run one system. Subclasses fill in the names and
    the config files.
    """

    name = ""
    master = minion = cli = call = ""

    def __init__(self, venv: str) -> None:
        self.venv = venv
        self.binDir = os.path.join(venv, "bin")
        self.python = os.path.join(self.binDir, "python")
        self.env = childEnvironment(self.binDir)

    def useBytecodeCache(self, directory: str) -> None:
        """
        Let this system's processes write and read compiled bytecode in
        C{directory} (C{PYTHONPYCACHEPREFIX}), even where the environment
        says C{PYTHONDONTWRITEBYTECODE}: an installed package has its
        bytecode, and a checkout run with that variable set compiles every
        module from source at every start.
        """
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env["PYTHONPYCACHEPREFIX"] = directory

    def bin(self, name: str) -> str:
        """
        @return: the path of command C{name} of this system's virtualenv.
        """
        return os.path.join(self.binDir, name)

    def version(self) -> str:
        """
        @return: what C{CLI --version} prints.
        """
        return timed([self.bin(self.cli), "--version"], self.env)["out"].strip()

    def masterConfig(self, root: str) -> dict[str, Any]:
        raise NotImplementedError()

    def minionConfig(self, root: str, minionId: str, retPort: int) -> dict[str, Any]:
        raise NotImplementedError()

    def callConfig(self, root: str) -> dict[str, Any]:
        """
        @return: the minion config that C{*-call --local} reads.
        """
        return self.minionConfig(root, "bench-call", 1)

    def masterRetPort(self, root: str, config: dict[str, Any]) -> int | None:
        """
        @return: the master's ret port once it is known, else L{None}.
        """
        return config["ret_port"]

    def pingArgv(self, masterDir: str, timeout: float, out: str) -> list[str]:
        """
        @return: the C{'*' test.ping} command line.
        """
        argv = [self.bin(self.cli), "-c", masterDir, "*", "test.ping", "-t", f"{timeout:g}"]
        return argv + (["--out", "json", "--static"] if out == "json" else ["--out", "quiet"])

    def jobsArgv(self, masterDir: str, options: argparse.Namespace, n: int, api: str) -> list[str]:
        raise NotImplementedError()


class Salt(System):
    """
    Salt from its own virtualenv: ZeroMQ transport (the default),
    C{auto_accept} (for the benchmark only), C{open_mode: False}.
    """

    name = "salt"
    master, minion, cli, call = "salt-master", "salt-minion", "salt", "salt-call"

    def __init__(self, venv: str) -> None:
        super().__init__(venv)
        self._ports: dict[str, list[int]] = {}

    def _paths(self, root: str, daemon: str) -> dict[str, Any]:
        return {
            "root_dir": root,
            "user": "root",
            "pki_dir": f"{root}/etc/salt/pki/{daemon}",
            "cachedir": f"{root}/var/cache/salt/{daemon}",
            "sock_dir": f"{root}/var/run/salt/{daemon}",
            "pidfile": f"{root}/var/run/salt-{daemon}.pid",
            "log_file": f"{root}/var/log/salt/{daemon}",
            "log_level": "error",
            # Unused, but inside root_dir rather than /srv.
            "file_roots": {"base": [f"{root}/srv/salt"]},
            "pillar_roots": {"base": [f"{root}/srv/pillar"]},
        }

    def masterConfig(self, root: str) -> dict[str, Any]:
        publishPort, retPort = freePorts(2)
        return {
            **self._paths(root, "master"),
            "interface": "127.0.0.1",
            "publish_port": publishPort,
            "ret_port": retPort,
            "open_mode": False,
            "auto_accept": True,
        }

    def minionConfig(self, root: str, minionId: str, retPort: int) -> dict[str, Any]:
        return {
            **self._paths(root, "minion"),
            "id": minionId,
            "master": "127.0.0.1",
            "master_port": retPort,
            "acceptance_wait_time": 1,
            "random_reauth_delay": 0,
        }

    def jobsArgv(self, masterDir: str, options: argparse.Namespace, n: int, api: str) -> list[str]:
        return [
            self.python,
            os.path.join(HERE, "salt_jobs.py"),
            masterDir,
            "--jobs",
            str(options.jobs),
            "--expect",
            str(n),
            "--timeout",
            f"{options.timeout:g}",
            "--max-seconds",
            f"{options.jobs_seconds:g}",
        ]


class SaltTwist(System):
    """
    salttwist from this checkout's virtualenv; the master listens on ports
    chosen by the OS and writes them to its C{master.ports} file.
    """

    name = "salttwist"
    master, minion, cli, call = (
        "salttwist-master",
        "salttwist-minion",
        "salttwist",
        "salttwist-call",
    )

    def masterConfig(self, root: str) -> dict[str, Any]:
        return {
            "root_dir": root,
            "interface": "127.0.0.1",
            "publish_port": 0,
            "ret_port": 0,
            "auto_accept": True,
            "log_level": "error",
        }

    def minionConfig(self, root: str, minionId: str, retPort: int) -> dict[str, Any]:
        return {
            "root_dir": root,
            "id": minionId,
            "master": "127.0.0.1",
            "master_port": retPort,
            "acceptance_wait_time": 0.5,
            "recon_default": 200,
            "recon_max": 1000,
            "random_reauth_delay": 0,
            "log_level": "error",
            # Under root_dir like the default, but short: the minion's bus
            # socket path must fit AF_UNIX's 107 bytes, and the default
            # (var/run/salttwist/minion) under this benchmark's deep
            # temporary directories does not.
            "sock_dir": "/run",
        }

    def masterRetPort(self, root: str, config: dict[str, Any]) -> int | None:
        # The default sock_dir under root_dir.
        path = os.path.join(root, "var/run/salttwist/master/master.ports")
        try:
            with open(path) as f:
                return int(json.load(f)["ret_port"]) or None
        except (OSError, ValueError, KeyError):
            return None

    def jobsArgv(self, masterDir: str, options: argparse.Namespace, n: int, api: str) -> list[str]:
        concurrency = ["--concurrency", str(options.concurrency)] if api == "concurrent" else []
        return [
            self.python,
            os.path.join(HERE, "salttwist_jobs.py"),
            masterDir,
            "--api",
            "deferred" if api == "concurrent" else api,
            *concurrency,
            "--jobs",
            str(options.jobs),
            "--expect",
            str(n),
            "--timeout",
            f"{options.timeout:g}",
            "--max-seconds",
            f"{options.jobs_seconds:g}",
        ]

    def hasSyncFacade(self) -> bool:
        """
        @return: whether C{salttwist.client.LocalClient} (with C{.cmd})
            exists in this checkout.
        """
        probe = (
            "import salttwist.client as c; print(hasattr(getattr(c, 'LocalClient', None), 'cmd'))"
        )
        return timed([self.python, "-c", probe], self.env)["out"].strip() == "True"


# -- a master and its minions -------------------------------------------------


class Cluster:
    """
    One system's master and N minions under C{root}.
    """

    def __init__(self, system: System, root: str, n: int, processes: Processes) -> None:
        self.system = system
        self.root = root
        self.n = n
        self.processes = processes
        self.masterDir = os.path.join(root, "master")
        self.ids = [f"{system.name}-m{i:02d}" for i in range(n)]
        self.master: subprocess.Popen[bytes] | None = None
        self.minions: list[subprocess.Popen[bytes]] = []
        self.readySeconds: float | None = None

    def _log(self, name: str) -> str:
        return os.path.join(self.root, f"{name}.log")

    def logTail(self, lines: int = 20) -> str:
        """
        @return: the last lines of every daemon log, for error messages.
        """
        text = []
        for name in ["master", *self.ids]:
            try:
                with open(self._log(name), errors="replace") as f:
                    tail = f.read().splitlines()[-lines:]
            except OSError:
                continue
            if tail:
                text.append(f"--- {name} ---\n" + "\n".join(tail))
        return "\n".join(text)

    def start(self, readyTimeout: float) -> None:
        """
        Start the master and the minions, and wait until every minion
        answers C{test.ping}.
        """
        system = self.system
        started = time.monotonic()
        masterRoot = os.path.join(self.root, "master-root")
        config = system.masterConfig(masterRoot)
        writeConfig(os.path.join(self.masterDir, "master"), config)
        self.master = self.processes.start(
            [system.bin(system.master), "-c", self.masterDir, "-l", "error"],
            system.env,
            self._log("master"),
        )
        retPort = self._waitFor(
            lambda: system.masterRetPort(masterRoot, config), "the master's ports", readyTimeout
        )
        for minionId in self.ids:
            minionDir = os.path.join(self.root, minionId)
            writeConfig(
                os.path.join(minionDir, "minion"),
                system.minionConfig(os.path.join(minionDir, "root"), minionId, retPort),
            )
            self.minions.append(
                self.processes.start(
                    [system.bin(system.minion), "-c", minionDir, "-l", "error"],
                    system.env,
                    self._log(minionId),
                )
            )
        self._waitFor(self._allAnswer, f"{self.n} minions to answer test.ping", readyTimeout)
        self.readySeconds = time.monotonic() - started

    def _allAnswer(self) -> bool:
        result = timed(self.system.pingArgv(self.masterDir, 5, "json"), self.system.env, 60)
        returns = parseReturns(result["out"])
        return all(returns.get(minionId) is True for minionId in self.ids)

    def _waitFor(self, check: Callable[[], Any], what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for process in [self.master, *self.minions]:
                if process is not None and process.poll() is not None:
                    raise RuntimeError(
                        f"{self.system.name}: a daemon exited ({process.args})\n{self.logTail()}"
                    )
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.system.name}: timed out waiting for {what}\n{self.logTail()}"
                )
            time.sleep(POLL)

    def pids(self) -> list[int]:
        """
        @return: the master's and the minions' pids.
        """
        return [p.pid for p in [self.master, *self.minions] if p is not None]

    def ping(self, timeout: float, out: str) -> dict[str, Any]:
        """
        One C{'*' test.ping} CLI run.

        @return: C{elapsed}, C{code} and C{returned} (minions that returned
            C{True}; with C{--out quiet}, all or none by the exit code).
        """
        result = timed(self.system.pingArgv(self.masterDir, timeout, out), self.system.env)
        if out == "json":
            returns = parseReturns(result["out"])
            returned = sum(1 for m in self.ids if returns.get(m) is True)
        else:
            returned = self.n if result["code"] == 0 else 0
        return {"elapsed": result["elapsed"], "code": result["code"], "returned": returned}

    def memory(self) -> dict[str, Any]:
        """
        @return: the master's process tree memory, and each minion's.
        """
        assert self.master is not None
        minions = [treeMemory(p.pid) for p in self.minions]

        def median(key: str) -> float:
            return round(statistics.median(m[key] for m in minions), 1)

        return {
            "master": treeMemory(self.master.pid),
            "minion_median": {
                "processes": median("processes"),
                "main_rss_mb": median("main_rss_mb"),
                "tree_rss_mb": median("tree_rss_mb"),
                "tree_pss_mb": median("tree_pss_mb"),
            },
            "minions_total_tree_rss_mb": round(sum(m["tree_rss_mb"] for m in minions), 1),
            "minions_total_tree_pss_mb": round(sum(m["tree_pss_mb"] for m in minions), 1),
        }

    def stop(self) -> None:
        """
        Stop the minions, then the master.
        """
        self.processes.stop(self.minions)
        if self.master is not None:
            self.processes.stop([self.master])


# -- measurements -------------------------------------------------------------


def summary(samples: list[float], failures: int, phase: dict[str, Any]) -> dict[str, Any]:
    """
    @return: the median, min and max of C{samples} (seconds), the samples,
        the failed samples, and the machine's load during them (L{Phase}).
    """
    return {
        "median_s": round(statistics.median(samples), 4) if samples else None,
        "min_s": round(min(samples), 4) if samples else None,
        "max_s": round(max(samples), 4) if samples else None,
        "samples_s": [round(s, 4) for s in samples],
        "failures": failures,
        **phase,
    }


def interleaved(
    names: list[str], repeats: int, sample: Callable[[str], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """
    Take C{repeats} samples of each of C{names}, one of each in turn, the
    order reversed every other repeat.
    """
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for i in range(repeats):
        for name in names if i % 2 == 0 else list(reversed(names)):
            results[name].append(sample(name))
    return results


def ratio(slow: Any, fast: Any) -> float | None:
    """
    @return: C{slow / fast}, rounded, or L{None} when either is missing.
    """
    if not slow or not fast:
        return None
    return round(slow / fast, 2)


def measureCliStartup(
    systems: dict[str, System], options: argparse.Namespace, root: str, quiet: QuietWait
) -> dict[str, Any]:
    """
    C{--version} and C{*-call --local test.ping} wall times, each figure's
    samples started once the machine is quiet.
    """
    callDirs = {}
    for name, system in systems.items():
        callDirs[name] = os.path.join(root, name, "call")
        writeConfig(
            os.path.join(callDirs[name], "minion"),
            system.callConfig(os.path.join(callDirs[name], "root")),
        )
    results: dict[str, Any] = {}
    commands: dict[str, Callable[[System, str], list[str]]] = {
        "version": lambda s, d: [s.bin(s.cli), "--version"],
        "call_local_ping": lambda s, d: [
            s.bin(s.call),
            "-c",
            d,
            "--local",
            "test.ping",
            "--out",
            "json",
        ],
    }
    for label, argvOf in commands.items():

        def sample(
            name: str,
            argvOf: Callable[[System, str], list[str]] = argvOf,
            label: str = label,
        ) -> Any:
            system = systems[name]
            result = timed(argvOf(system, callDirs[name]), system.env)
            ok = result["code"] == 0 and (
                label == "version" or parseReturns(result["out"]).get("local") is True
            )
            if not ok:
                sys.stderr.write(f"{name} {label} failed: {result['err'][-500:]}\n")
            return {"elapsed": result["elapsed"], "ok": ok}

        for name in systems:
            sample(name)  # untimed: compiles bytecode, warms the page cache
        phase = Phase.whenQuiet(quiet)
        samples = interleaved(list(systems), options.repeats, sample)
        machine = phase.end()
        results[label] = {
            name: summary([s["elapsed"] for s in values], sum(not s["ok"] for s in values), machine)
            for name, values in samples.items()
        }
    return results


def minionsUp(clusters: dict[str, Cluster]) -> int:
    """
    @return: the minion daemons of C{clusters}, for L{QuietWait.wait}.
    """
    return sum(c.n for c in clusters.values())


def measureIdle(clusters: dict[str, Cluster], seconds: float, quiet: QuietWait) -> dict[str, Any]:
    """
    CPU of each cluster (master and minion process trees) while idle, once
    the machine is quiet.
    """
    phase = Phase.whenQuiet(quiet, minionsUp(clusters))
    before = {name: treeCpu(c.pids()) for name, c in clusters.items()}
    time.sleep(seconds)
    machine = phase.end()
    return {
        name: {
            "cpu_pct": round(100 * (treeCpu(c.pids()) - before[name]) / seconds, 1),
            **machine,
        }
        for name, c in clusters.items()
    }


def measureCliPing(
    clusters: dict[str, Cluster], options: argparse.Namespace, quiet: QuietWait
) -> dict[str, Any]:
    """
    C{'*' test.ping} wall time, each a fresh CLI process, the samples
    started once the machine is quiet.
    """

    def sample(name: str) -> dict[str, Any]:
        return clusters[name].ping(options.timeout, options.cli_out)

    for name in clusters:
        sample(name)
    phase = Phase.whenQuiet(quiet, minionsUp(clusters))
    samples = interleaved(list(clusters), options.repeats, sample)
    machine = phase.end()
    results = {}
    for name, values in samples.items():
        n = clusters[name].n
        failures = sum(1 for s in values if s["returned"] < n or s["code"] != 0)
        results[name] = summary([s["elapsed"] for s in values], failures, machine)
        results[name]["returned"] = [s["returned"] for s in values]
    return results


def measureJobs(
    clusters: dict[str, Cluster],
    options: argparse.Namespace,
    apis: dict[str, list[str]],
    quiet: QuietWait,
) -> dict[str, Any]:
    """
    C{--rounds} loops of C{--jobs} jobs through each system's Python client
    (each loop a fresh process), interleaved, started once the machine is
    quiet.
    """
    labels = [(name, api) for name in clusters for api in apis[name]]

    def sample(label: str) -> dict[str, Any]:
        name, api = label.split(":")
        cluster = clusters[name]
        argv = cluster.system.jobsArgv(cluster.masterDir, options, cluster.n, api)
        assert cluster.master is not None
        minionPids = [p.pid for p in cluster.minions]
        masterCpu, minionCpu = treeCpu([cluster.master.pid]), treeCpu(minionPids)
        result = timed(argv, cluster.system.env, timeout=options.jobs_seconds * 3 + 300)
        masterCpu = treeCpu([cluster.master.pid]) - masterCpu
        minionCpu = treeCpu(minionPids) - minionCpu
        try:
            figures = json.loads(result["out"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            figures = {"error": result["err"][-2000:], "code": result["code"]}
            sys.stderr.write(f"{label} jobs loop failed:\n{result['err'][-2000:]}\n")
        if "jobs" in figures:
            # The warm-up jobs ran in the same window; idle CPU is in it too.
            jobs = figures["jobs"] + figures.get("warmup", 0)
            figures["master_cpu_ms_per_job"] = round(1000 * masterCpu / jobs, 2)
            figures["minions_cpu_ms_per_job"] = round(1000 * minionCpu / jobs, 2)
        return figures

    phase = Phase.whenQuiet(quiet, minionsUp(clusters))
    samples = interleaved([f"{n}:{a}" for n, a in labels], options.rounds, sample)
    machine = phase.end()
    results: dict[str, Any] = {}
    for label, rounds in samples.items():
        ok = [r for r in rounds if "jobs_per_s" in r]
        if rounds and rounds[0].get("available") is False:
            results[label] = {"available": False}
            continue

        def median(key: str, ok: list[dict[str, Any]] = ok) -> Any:
            values = [r[key] for r in ok if r.get(key) is not None]
            return round(statistics.median(values), 4) if values else None

        results[label] = {
            "api": ok[0]["api"] if ok else None,
            "jobs_per_round": [r["jobs"] for r in ok],
            "jobs_per_s_median": median("jobs_per_s"),
            "jobs_per_s_rounds": [r["jobs_per_s"] for r in ok],
            "client_cpu_ms_per_job": median("client_cpu_ms_per_job"),
            "master_cpu_ms_per_job": median("master_cpu_ms_per_job"),
            "minions_cpu_ms_per_job": median("minions_cpu_ms_per_job"),
            "latency_median_s": median("latency_median_s"),
            "latency_p90_s": median("latency_p90_s"),
            "latency_max_s": max((r["latency_max_s"] for r in ok), default=None),
            "failed_jobs": sum(r.get("failures", 0) for r in ok),
            "failed_rounds": len(rounds) - len(ok),
            **machine,
        }
    return results


#: The figures of a first-job sample (C{salt_firstjob.py}), in seconds.
FIRST_JOB_FIGURES = (
    "spawn_to_start_event",
    "spawn_to_first_job",
    "first_job_latency",
    "second_job_latency",
    "sigterm_to_exit",
    "sigterm_to_tree_exit",
)


def _killSpawned(pidFile: str) -> None:
    """
    Kill the minion a first-job script spawned, and what it forked, if a
    failed script left them running (C{pidFile} holds its pid and start
    time, so a reused pid is never signalled).
    """
    try:
        with open(pidFile) as f:
            pid, start = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return
    info = _stat(pid)
    if info is None or info[1] != start:
        return
    for p, s in reversed(processTree(pid)):
        if (_stat(p) or (0, None))[1] == s:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def firstJobSample(cluster: Cluster, index: int, options: argparse.Namespace) -> dict[str, Any]:
    """
    One new minion on C{cluster}'s master: its key accepted beforehand, its
    daemon started as the cluster's are, timed from the spawn to its
    C{salt/minion/ID/start} event and to its first successful
    C{test.ping}, then from SIGTERM to its exit, by the system's
    C{<name>_firstjob.py} run with the system's Python. Its key is deleted
    afterwards with the system's key command (a dead minion's accepted key
    would make Salt's C{'*'} jobs wait out their timeout).

    @return: the script's figures (or C{error}).
    """
    system = cluster.system
    minionId = f"{system.name}-fj{index:02d}"
    minionDir = os.path.join(cluster.root, minionId)
    with open(os.path.join(cluster.masterDir, "master")) as f:
        masterConfig = json.load(f)
    retPort = system.masterRetPort(os.path.join(cluster.root, "master-root"), masterConfig)
    assert retPort is not None
    writeConfig(
        os.path.join(minionDir, "minion"),
        system.minionConfig(os.path.join(minionDir, "root"), minionId, retPort),
    )
    pidFile = os.path.join(minionDir, "spawned.pid")
    argv = [
        system.python,
        os.path.join(HERE, f"{system.name}_firstjob.py"),
        cluster.masterDir,
        "--id",
        minionId,
        "--minion-config-dir",
        minionDir,
        "--warm-target",
        cluster.ids[0],
        "--log",
        cluster._log(minionId),
        "--pid-file",
        pidFile,
        "--timeout",
        f"{options.timeout:g}",
        "--",
        system.bin(system.minion),
        "-c",
        minionDir,
        "-l",
        "error",
    ]
    try:
        result = timed(argv, system.env, timeout=600)
        try:
            figures = json.loads(result["out"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            figures = {"error": result["err"][-2000:], "code": result["code"], "ok": False}
        if not figures.get("ok"):
            sys.stderr.write(
                f"{system.name} first job of {minionId} failed: {figures.get('error')}\n"
                f"{result['err'][-1000:]}\n"
            )
    finally:
        _killSpawned(pidFile)
        deleted = timed(
            [system.bin(f"{system.cli}-key"), "-c", cluster.masterDir, "-d", minionId, "-y"],
            system.env,
        )
    accepted = figures.get("accepted_key")
    if deleted["code"] != 0 or (accepted and os.path.exists(accepted)):
        figures["key_delete_error"] = (deleted["err"] or deleted["out"])[-500:]
        if accepted and os.path.exists(accepted):
            os.remove(accepted)
    return figures


def measureFirstJob(
    clusters: dict[str, Cluster], options: argparse.Namespace, quiet: QuietWait
) -> dict[str, Any]:
    """
    C{--firstjob-repeats} new minions per cluster, one at a time (see
    L{firstJobSample}), the systems' samples interleaved, started once the
    machine is quiet.
    """
    counts = dict.fromkeys(clusters, 0)

    def sample(name: str) -> dict[str, Any]:
        counts[name] += 1
        return firstJobSample(clusters[name], counts[name], options)

    phase = Phase.whenQuiet(quiet, minionsUp(clusters))
    samples = interleaved(list(clusters), options.firstjob_repeats, sample)
    machine = phase.end()
    results: dict[str, Any] = {}
    for name, values in samples.items():
        ok = [s for s in values if s.get("ok")]
        out: dict[str, Any] = {}
        for figure in FIRST_JOB_FIGURES:
            times = [s[f"{figure}_s"] for s in values if s.get(f"{figure}_s") is not None]
            out[figure] = summary(times, len(values) - len(times), {})
        out["attempts"] = [s.get("attempts") for s in values]
        out["killed_after_stop_timeout"] = sum(1 for s in values if s.get("killed"))
        out["forked_processes"] = [s.get("forked_processes") for s in values]
        out["leftover_processes"] = sum(s.get("leftover_processes") or 0 for s in values)
        out["failures"] = len(values) - len(ok)
        out["errors"] = [s["error"] for s in values if s.get("error")]
        out["key_delete_errors"] = [
            s["key_delete_error"] for s in values if "key_delete_error" in s
        ]
        results[name] = {**out, **machine}
    return results


def runClusters(
    systems: dict[str, System],
    n: int,
    options: argparse.Namespace,
    root: str,
    processes: Processes,
    apis: dict[str, list[str]],
    quiet: QuietWait,
) -> dict[str, Any]:
    """
    Everything measured with N minions, for the clusters of C{systems} up
    at once (their samples interleaved when there are several). Each
    cluster starts, and each phase after, once the machine is quiet
    (C{quiet}); the first phase's wait is the one that lets a cluster's
    start settle.
    """
    clusters = {
        name: Cluster(system, os.path.join(root, f"{name}-{n}"), n, processes)
        for name, system in systems.items()
    }
    label = "+".join(clusters)
    try:
        ready: dict[str, float] = {}
        readyQuiet: dict[str, dict[str, Any]] = {}
        for name, cluster in clusters.items():
            print(f"  starting {name}: master and {n} minions", flush=True)
            up = {other: clusters[other] for other in ready}
            readyQuiet[name] = waitQuiet(quiet, minionsUp(up))
            cluster.start(options.ready_timeout)
            ready[name] = round(cluster.readySeconds or 0.0, 2)
            print(f"    all {n} answer test.ping after {ready[name]} s", flush=True)
        time.sleep(options.settle)
        out: dict[str, Any] = {
            "ready_s": ready,
            "ready_quiet": readyQuiet,
            "load": {label: {"start": loadAverage()}},
        }
        print(f"  idle CPU ({options.idle_seconds:g} s)", flush=True)
        out["idle"] = measureIdle(clusters, options.idle_seconds, quiet)
        print("  CLI '*' test.ping", flush=True)
        out["cli_ping"] = measureCliPing(clusters, options, quiet)
        print(
            f"  {options.rounds} x {options.jobs} jobs (at most {options.jobs_seconds:g} s) "
            "through the Python clients",
            flush=True,
        )
        out["jobs"] = measureJobs(clusters, options, apis, quiet)
        print("  memory", flush=True)
        phase = Phase.whenQuiet(quiet, minionsUp(clusters))
        memory = {name: c.memory() for name, c in clusters.items()}
        machine = phase.end()
        out["memory"] = {name: {**figures, **machine} for name, figures in memory.items()}
        if options.firstjob_repeats > 0:
            print(
                f"  {options.firstjob_repeats} new minion(s): start to first job, SIGTERM to exit",
                flush=True,
            )
            out["first_job"] = measureFirstJob(clusters, options, quiet)
        out["load"][label]["end"] = loadAverage()
        return out
    finally:
        for cluster in clusters.values():
            cluster.stop()


def runMinions(
    systems: dict[str, System],
    n: int,
    options: argparse.Namespace,
    root: str,
    processes: Processes,
    apis: dict[str, list[str]],
    quiet: QuietWait,
) -> dict[str, Any]:
    """
    Everything measured with N minions per system: one system's cluster at
    a time (the default), or with C{--together} both at once.
    """
    if options.together:
        return runClusters(systems, n, options, root, processes, apis, quiet)
    merged: dict[str, Any] = {}
    for name, system in systems.items():
        out = runClusters({name: system}, n, options, root, processes, apis, quiet)
        for key, value in out.items():
            merged.setdefault(key, {}).update(value)
    return merged


# -- output -------------------------------------------------------------------


def addRatios(results: dict[str, Any]) -> None:
    """
    Add C{salt / salttwist} ratios: for times and memory, above 1 means
    salttwist is faster or smaller; for jobs per second, C{salttwist /
    salt}, above 1 means salttwist is faster.
    """
    cli = results.get("cli", {})
    for values in cli.values():
        if "salt" in values and "salttwist" in values:
            values["ratio_salt_over_salttwist"] = ratio(
                values["salt"]["median_s"], values["salttwist"]["median_s"]
            )
    for run in results.get("runs", {}).values():
        ping = run.get("cli_ping", {})
        if "salt" in ping and "salttwist" in ping:
            ping["ratio_salt_over_salttwist"] = ratio(
                ping["salt"]["median_s"], ping["salttwist"]["median_s"]
            )
        jobs = run.get("jobs", {})
        saltRate = jobs.get("salt:cmd", {}).get("jobs_per_s_median")
        for label, values in jobs.items():
            if (
                label.startswith("salttwist:")
                and label != "salttwist:concurrent"
                and values.get("jobs_per_s_median")
            ):
                values["ratio_over_salt"] = ratio(values["jobs_per_s_median"], saltRate)
        firstJob = run.get("first_job", {})
        if "salt" in firstJob and "salttwist" in firstJob:
            firstJob["ratio_salt_over_salttwist"] = {
                figure: ratio(
                    firstJob["salt"][figure]["median_s"], firstJob["salttwist"][figure]["median_s"]
                )
                for figure in FIRST_JOB_FIGURES
            }
        memory = run.get("memory", {})
        if "salt" in memory and "salttwist" in memory:
            memory["ratio_salt_over_salttwist"] = {
                "master_tree_rss": ratio(
                    memory["salt"]["master"]["tree_rss_mb"],
                    memory["salttwist"]["master"]["tree_rss_mb"],
                ),
                "master_tree_pss": ratio(
                    memory["salt"]["master"]["tree_pss_mb"],
                    memory["salttwist"]["master"]["tree_pss_mb"],
                ),
                "minion_tree_rss": ratio(
                    memory["salt"]["minion_median"]["tree_rss_mb"],
                    memory["salttwist"]["minion_median"]["tree_rss_mb"],
                ),
                "minion_tree_pss": ratio(
                    memory["salt"]["minion_median"]["tree_pss_mb"],
                    memory["salttwist"]["minion_median"]["tree_pss_mb"],
                ),
            }


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def _notQuiet(node: Any) -> bool:
    """
    @return: whether C{node}, a phase's figures, says the phase ran
        without a quiet window (see L{QuietWait.wait}).
    """
    return _get(node, "quiet") is False


def table(results: dict[str, Any]) -> str:
    """
    @return: the figures as a readable table: Salt, salttwist, and the
        ratio (how many times better salttwist is; below 1 it is worse).
        Under each phase, how long it waited for the machine to be quiet
        and the cores busy then; a figure whose phase never had a quiet
        window is marked C{*} and listed under the table.
    """
    lines = [
        f"salttwist vs {results['versions'].get('salt', 'salt')}  {results['date']}  "
        f"{results['cpus']} cores  load at start {results['load_at_start']}",
    ]
    options = results.get("options", {})
    if "quiet_cores" in options:
        lines.append(
            f"each phase waited for quiet: all CPUs busy under {options['quiet_cores']:g} cores "
            f"+ {options['quiet_per_minion']:g} per minion over {options['quiet_window']:g} s, "
            f"at most {options['quiet_timeout']:g} s"
        )
    lines += ["", f"{'':46} {'salt':>10} {'salttwist':>10} {'ratio':>7}  failures"]
    #: The phases that ran without a quiet window, for the footnote.
    notQuiet: list[str] = []
    quietRows = 0

    def row(
        label: str,
        salt: Any,
        twist: Any,
        better: Any,
        failures: str = "",
        phases: tuple[Any, Any] = (None, None),
    ) -> None:
        """
        One figure of each system; C{phases} are the figures of the
        phase each was measured in, to mark those that were not quiet.
        """
        cells = [
            _fmt(salt) + ("*" if _notQuiet(phases[0]) else ""),
            _fmt(twist) + ("*" if _notQuiet(phases[1]) else ""),
        ]
        lines.append(f"{label:46} {cells[0]:>10} {cells[1]:>10} {_fmt(better):>7}  {failures}")

    def quietRow(where: str, salt: Any, twist: Any) -> None:
        """
        The quiet wait before one phase, of each system: the seconds
        waited and the cores busy in the last window (C{*}: not quiet).
        Results from before the rule have none: no row.
        """
        nonlocal quietRows
        cells = []
        for name, node in (("salt", salt), ("salttwist", twist)):
            if _get(node, "quiet") is None:
                cells.append("-")
                continue
            cell = f"{node['quiet_wait_s']:.0f}s {node['quiet_busy_cores']:.2f}"
            if _notQuiet(node):
                cell += "*"
                notQuiet.append(
                    f"  {name}, {where}: {node['quiet_busy_cores']:.2f} cores busy "
                    f"(limit {node['quiet_limit_cores']:g}) after {node['quiet_wait_s']:g} s"
                )
            cells.append(cell)
        if cells != ["-", "-"]:
            quietRows += 1
            lines.append(
                f"{'    waited for quiet (s, busy cores)':46} {cells[0]:>10} {cells[1]:>10}"
            )

    def failures(node: Any) -> str:
        counts = [str(_get(node, name, "failures")) for name in ("salt", "salttwist")]
        return "/".join(counts)

    cli = results.get("cli", {})
    for label, text in (
        ("version", "--version (s, median)"),
        ("call_local_ping", "*-call --local test.ping (s, median)"),
    ):
        node = cli.get(label, {})
        phases = (node.get("salt"), node.get("salttwist"))
        row(
            text,
            _get(node, "salt", "median_s"),
            _get(node, "salttwist", "median_s"),
            node.get("ratio_salt_over_salttwist"),
            failures(node),
            phases,
        )
        quietRow(text.split(" (")[0], *phases)
    for n, run in results.get("runs", {}).items():
        loads = "; ".join(
            f"{name} {v.get('start', ['-'])[0]} -> {v.get('end', ['-'])[0]}"
            for name, v in run.get("load", {}).items()
        )
        lines.append(f"-- {n} minion(s); 1-min load average {loads}")
        ready = run.get("ready_s", {})
        readyQuiet = run.get("ready_quiet", {})
        phases = (readyQuiet.get("salt"), readyQuiet.get("salttwist"))
        row(
            "  start to all answering (s)",
            ready.get("salt"),
            ready.get("salttwist"),
            None,
            phases=phases,
        )
        quietRow(f"{n} minion(s), start", *phases)
        idle = run.get("idle", {})
        phases = (idle.get("salt"), idle.get("salttwist"))
        row(
            "  idle CPU, master + minions (%)",
            _get(idle, "salt", "cpu_pct"),
            _get(idle, "salttwist", "cpu_pct"),
            None,
            phases=phases,
        )
        row(
            "  machine busy cores then (all users)",
            _get(idle, "salt", "machine_busy_cores"),
            _get(idle, "salttwist", "machine_busy_cores"),
            None,
            phases=phases,
        )
        quietRow(f"{n} minion(s), idle CPU", *phases)
        ping = run.get("cli_ping", {})
        phases = (ping.get("salt"), ping.get("salttwist"))
        row(
            "  CLI '*' test.ping (s, median)",
            _get(ping, "salt", "median_s"),
            _get(ping, "salttwist", "median_s"),
            ping.get("ratio_salt_over_salttwist"),
            failures(ping),
            phases,
        )
        quietRow(f"{n} minion(s), CLI '*' test.ping", *phases)
        jobs = run.get("jobs", {})
        concurrency = results.get("options", {}).get("concurrency")
        for label, text in (
            ("salttwist:deferred", "  jobs/s, LocalClient (Deferred core)"),
            ("salttwist:sync", "  jobs/s, LocalClient.cmd (sync facade)"),
            ("salttwist:concurrent", f"  jobs/s, Deferred core, {concurrency} at once"),
        ):
            # Salt's client was measured one job at a time only.
            salt = jobs.get("salt:cmd", {}) if label != "salttwist:concurrent" else {}
            twist = jobs.get(label)
            if twist is None:
                if label != "salttwist:deferred" or not salt:
                    continue
                # Salt measured alone (--systems salt): its row still shows.
                twist = {}
            if twist.get("available") is False:
                lines.append(f"{text:46} {'(no sync facade in this checkout)':>30}")
                continue
            phases = (salt, twist)
            row(
                text,
                salt.get("jobs_per_s_median"),
                twist.get("jobs_per_s_median"),
                twist.get("ratio_over_salt"),
                f"{salt.get('failed_jobs')}/{twist.get('failed_jobs')} jobs",
                phases,
            )
            row(
                "    per job latency (s, median)",
                salt.get("latency_median_s"),
                twist.get("latency_median_s"),
                ratio(salt.get("latency_median_s"), twist.get("latency_median_s")),
                phases=phases,
            )
            for key, text in (
                ("master_cpu_ms_per_job", "    master CPU ms / job"),
                ("minions_cpu_ms_per_job", "    all minions' CPU ms / job"),
                ("client_cpu_ms_per_job", "    client CPU ms / job"),
            ):
                row(
                    text,
                    salt.get(key),
                    twist.get(key),
                    ratio(salt.get(key), twist.get(key)),
                    phases=phases,
                )
        # One phase ran all of a system's job loops: one wait each.
        twistJobs = [v for k, v in jobs.items() if k.startswith("salttwist:") and "quiet" in v]
        quietRow(
            f"{n} minion(s), jobs through the clients",
            jobs.get("salt:cmd"),
            twistJobs[0] if twistJobs else None,
        )
        memory = run.get("memory", {})
        ratios = memory.get("ratio_salt_over_salttwist", {})
        phases = (memory.get("salt"), memory.get("salttwist"))
        for key, text, path in (
            ("master_tree_rss", "  master RSS, process tree (MB)", ("master", "tree_rss_mb")),
            ("master_tree_pss", "  master PSS, process tree (MB)", ("master", "tree_pss_mb")),
            (
                "minion_tree_rss",
                "  minion RSS, process tree (MB, median)",
                ("minion_median", "tree_rss_mb"),
            ),
            (
                "minion_tree_pss",
                "  minion PSS, process tree (MB, median)",
                ("minion_median", "tree_pss_mb"),
            ),
        ):
            row(
                text,
                _get(memory, "salt", *path),
                _get(memory, "salttwist", *path),
                ratios.get(key),
                phases=phases,
            )
        row(
            "  master processes",
            _get(memory, "salt", "master", "processes"),
            _get(memory, "salttwist", "master", "processes"),
            None,
            phases=phases,
        )
        quietRow(f"{n} minion(s), memory", *phases)
        firstJob = run.get("first_job", {})
        ratios = firstJob.get("ratio_salt_over_salttwist", {})
        phases = (firstJob.get("salt"), firstJob.get("salttwist"))
        for figure, text in (
            ("spawn_to_start_event", "  new minion: spawn to start event (s, median)"),
            ("spawn_to_first_job", "  new minion: spawn to first job (s, median)"),
            ("first_job_latency", "    that job's latency (s, median)"),
            ("second_job_latency", "    the next job's latency (s, median)"),
            ("sigterm_to_exit", "  minion SIGTERM to exit (s, median)"),
            ("sigterm_to_tree_exit", "    to its forked processes' exit (s, median)"),
        ):
            if not firstJob:
                break
            row(
                text,
                _get(firstJob, "salt", figure, "median_s"),
                _get(firstJob, "salttwist", figure, "median_s"),
                ratios.get(figure),
                "/".join(
                    str(_get(firstJob, name, figure, "failures")) for name in ("salt", "salttwist")
                ),
                phases,
            )
        if firstJob:
            quietRow(f"{n} minion(s), new minions", *phases)
    lines.append("")
    lines.append("ratio: salt / salttwist for times and memory, salttwist / salt for jobs/s;")
    lines.append("above 1, salttwist is faster or smaller.")
    if quietRows:
        lines.append(
            "waited for quiet: the seconds a phase waited for a quiet window, that one "
            "included, and"
        )
        lines.append("the cores busy (all CPUs, all users) in its last window.")
    if notQuiet:
        lines.append(
            "* not quiet: no window was quiet within --quiet-timeout; the phase ran anyway:"
        )
        lines += notQuiet
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------


def gitState() -> dict[str, Any]:
    """
    @return: the checkout's HEAD and its modified files under C{salttwist/}
        (read-only git commands).
    """

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    changed = git("status", "--porcelain", "--", "salttwist")
    return {
        "head": git("rev-parse", "HEAD"),
        "salttwist_files_changed": len(changed.splitlines()) if changed else 0,
    }


def pickSystems(
    options: argparse.Namespace, makers: dict[str, Callable[[], System]]
) -> dict[str, System] | str:
    """
    The systems C{--systems} names (C{options.systems}, comma-separated),
    each made by its entry of C{makers}; Salt installed first into
    C{options.salt_venv} unless C{options.no_install_salt}.

    @return: C{{name: system}}, or the error to print (an unknown name,
        Salt that cannot be installed).
    """
    systems: dict[str, System] = {}
    for name in options.systems.split(","):
        if name not in makers:
            return f"unknown system {name}"
        if name == "salt":
            problem = ensureSalt(options.salt_venv, install=not options.no_install_salt)
            if problem is not None:
                return f"salt: {problem}"
        systems[name] = makers[name]()
    return systems


def resultsHead(options: argparse.Namespace, systems: dict[str, System]) -> dict[str, Any]:
    """
    @return: what every benchmark's JSON starts with: the date, the
        machine, its load, both systems' versions, salttwist's git state
        and the options (but C{output}, C{no_save} and C{keep}).
    """
    return {
        "date": options.date,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_at_start": loadAverage(),
        "versions": {name: system.version() for name, system in systems.items()},
        "salttwist_git": gitState(),
        "options": {
            k: v for k, v in vars(options).items() if k not in ("output", "no_save", "keep")
        },
    }


def addSystemArguments(p: argparse.ArgumentParser) -> None:
    """
    Add the options every side-by-side script shares: where the two systems
    are (C{--salt-venv}, C{--no-install-salt}, C{--salttwist-venv}).
    """
    p.add_argument("--salt-venv", default=DEFAULT_SALT_VENV)
    p.add_argument("--no-install-salt", action="store_true")
    p.add_argument("--salttwist-venv", default=DEFAULT_SALTTWIST_VENV)


def addRunArguments(p: argparse.ArgumentParser) -> None:
    """
    Add the options every side-by-side script shares at the end of its
    command line: start-up and quiet waits (C{--ready-timeout},
    C{--quiet-*}), C{--no-bytecode-cache}, and the results file
    (C{--date}, C{--output}, C{--no-save}, C{--keep}).
    """
    p.add_argument("--ready-timeout", type=float, default=600.0)
    p.add_argument("--quiet-cores", type=float, default=0.2)
    p.add_argument("--quiet-per-minion", type=float, default=0.01)
    p.add_argument("--quiet-window", type=float, default=5.0)
    p.add_argument("--quiet-timeout", type=float, default=120.0)
    p.add_argument("--no-bytecode-cache", action="store_true")
    p.add_argument("--date", default=datetime.date.today().isoformat())
    p.add_argument("--output", default=None)
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")


def parser() -> argparse.ArgumentParser:
    """
    The command line.
    """
    p = argparse.ArgumentParser(
        description="Measure salttwist beside Salt on this machine (see README.md)."
    )
    p.add_argument(
        "--salt-venv",
        default=DEFAULT_SALT_VENV,
        help=f"Salt's virtualenv (default .salt-venv in the checkout; made, with Salt "
        f"{SALT_VERSION} from PyPI, when it does not exist)",
    )
    p.add_argument(
        "--no-install-salt",
        action="store_true",
        help="stop with an error instead of installing Salt when --salt-venv has none",
    )
    p.add_argument(
        "--salttwist-venv", default=DEFAULT_SALTTWIST_VENV, help="salttwist's virtualenv"
    )
    p.add_argument("--minions", default="1,20", help="comma-separated minion counts (default 1,20)")
    p.add_argument("--jobs", type=int, default=100, help="jobs per client loop (default 100)")
    p.add_argument("--rounds", type=int, default=3, help="client loops per system (default 3)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="jobs at once in salttwist's extra throughput loop (default 8; 0: no such loop)",
    )
    p.add_argument("--repeats", type=int, default=10, help="samples per CLI figure (default 10)")
    p.add_argument(
        "--firstjob-repeats",
        type=int,
        default=5,
        help="new minions per cluster timed from start to first job and from SIGTERM to "
        "exit (default 5; 0: skip)",
    )
    p.add_argument("--timeout", type=float, default=10.0, help="job timeout, -t (default 10)")
    p.add_argument(
        "--cli-out",
        choices=("json", "quiet"),
        default="json",
        help="outputter of the timed '*' test.ping runs: json (default) lets every run be "
        "checked for all returns; quiet checks the exit code only",
    )
    p.add_argument(
        "--systems", default="salt,salttwist", help="which systems (default salt,salttwist)"
    )
    p.add_argument("--skip-cli", action="store_true", help="skip the CLI start-up figures")
    p.add_argument(
        "--jobs-seconds",
        type=float,
        default=60.0,
        help="stop a client loop early after this many seconds (default 60)",
    )
    p.add_argument(
        "--together",
        action="store_true",
        help="run both systems' clusters at once and interleave their samples "
        "(default: one cluster at a time)",
    )
    p.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="run the commands with the environment's bytecode settings as they are "
        "(default: PYTHONPYCACHEPREFIX in the temporary directory, bytecode written; "
        "the first, untimed run of each command compiles)",
    )
    p.add_argument("--ready-timeout", type=float, default=600.0)
    p.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="fixed seconds to wait once all minions answer, before the quiet rule (default 0)",
    )
    p.add_argument(
        "--quiet-cores",
        type=float,
        default=0.2,
        help="a phase starts once all CPUs together are busy less than this many cores over "
        "a window, plus --quiet-per-minion per minion running (default 0.2)",
    )
    p.add_argument(
        "--quiet-per-minion",
        type=float,
        default=0.01,
        help="cores allowed for each minion daemon running, for its idle work (default 0.01)",
    )
    p.add_argument(
        "--quiet-window",
        type=float,
        default=5.0,
        help="seconds of one window of the quiet rule (default 5)",
    )
    p.add_argument(
        "--quiet-timeout",
        type=float,
        default=120.0,
        help="seconds after which a phase starts anyway, marked as not quiet (default 120)",
    )
    p.add_argument("--idle-seconds", type=float, default=5.0)
    p.add_argument("--date", default=datetime.date.today().isoformat())
    p.add_argument("--output", default=None, help="JSON file (default results/DATE-vs-salt.json)")
    p.add_argument("--no-save", action="store_true", help="print the table only")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return p


def main(argv: list[str] | None = None) -> int:
    """
    Run the benchmark.
    """
    options = parser().parse_args(argv)
    if options.quiet_window <= 0:
        sys.stderr.write("--quiet-window must be above 0\n")
        return 2
    known = {
        "salt": lambda: Salt(options.salt_venv),
        "salttwist": lambda: SaltTwist(options.salttwist_venv),
    }
    systems: dict[str, System] = {}
    for name in options.systems.split(","):
        if name == "salt":
            problem = ensureSalt(options.salt_venv, install=not options.no_install_salt)
            if problem is not None:
                sys.stderr.write(f"salt: {problem}\n")
                return 2
        systems[name] = known[name]()
        if not os.path.exists(systems[name].bin(systems[name].master)):
            sys.stderr.write(f"{name}: no {systems[name].master} in {systems[name].binDir}\n")
            return 2
    sizes = [int(x) for x in options.minions.split(",") if x]
    apis: dict[str, list[str]] = {}
    if "salt" in systems:
        apis["salt"] = ["cmd"]
    if "salttwist" in systems:
        twist = systems["salttwist"]
        assert isinstance(twist, SaltTwist)
        apis["salttwist"] = ["deferred"] + (["sync"] if twist.hasSyncFacade() else [])
        if options.concurrency > 0:
            apis["salttwist"].append("concurrent")

    results: dict[str, Any] = {
        **resultsHead(options, systems),
        "notes": [
            "Both systems: one master, N minion daemons (-l error, foreground) on "
            "127.0.0.1, temp root_dir, auto_accept for the benchmark only; Salt with "
            "ZeroMQ (default), open_mode False, user root, its other defaults.",
            "Bytecode: unless --no-bytecode-cache, every process writes and reads .pyc "
            "files under PYTHONPYCACHEPREFIX in the temporary directory (this machine sets "
            "PYTHONDONTWRITEBYTECODE=1, and the checkout has no .pyc: without the cache "
            "every salttwist process compiled its modules from source at each start, "
            "while Salt's were compiled by pip at install).",
            "CLI start-up samples alternate between the systems; the N-minion clusters "
            "run one at a time unless --together.",
            "ratio: salt/salttwist for times and memory; salttwist/salt for jobs/s.",
            "quiet: every timed phase of both systems (each cluster's start too) waits "
            "until all CPUs together were busy less than quiet_cores + quiet_per_minion x "
            "(minion daemons running) cores over a quiet_window (/proc/stat), at most "
            "quiet_timeout s; then it runs. Beside each phase: quiet (false: it ran without "
            "a quiet window), quiet_wait_s, quiet_busy_cores (the last window), "
            "quiet_limit_cores, quiet_windows; a cluster start's are in ready_quiet.",
            "machine_busy_cores: all CPUs' busy time over the phase (/proc/stat), "
            "ours and other users'; load1 lags (1-minute average).",
            "first_job: a new minion per sample (fresh id, key pre-accepted, no key "
            "generation), timed from its spawn to its salt/minion/ID/start event and to its "
            "first successful test.ping through an already warm client; then SIGTERM to the "
            "spawned process's exit (sigterm_to_tree_exit: until the processes it had forked "
            "are gone too). Measured after the memory figures, on the same cluster.",
        ],
        "cli": {},
        "runs": {},
    }
    root = tempfile.mkdtemp(prefix="vs-salt-")
    if not options.no_bytecode_cache:
        for system in systems.values():
            system.useBytecodeCache(os.path.join(root, "pycache"))
    processes = Processes()
    quiet = QuietWait.fromOptions(options)
    print(f"root {root}; {', '.join(results['versions'].values())}", flush=True)
    try:
        if not options.skip_cli:
            print("CLI start-up", flush=True)
            results["cli"] = measureCliStartup(systems, options, root, quiet)
        for n in sizes:
            print(f"{n} minion(s)", flush=True)
            results["runs"][str(n)] = runMinions(systems, n, options, root, processes, apis, quiet)
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
        path = options.output or os.path.join(RESULTS, f"{options.date}-vs-salt.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
        print(f"\nwritten {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
