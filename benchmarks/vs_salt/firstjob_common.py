"""
What C{salt_firstjob.py} and C{salttwist_firstjob.py} share: spawning the
new minion, timing its SIGTERM, stopping what it forked, and the command
line. Standard library only: each system's Python imports it from this
directory (the scripts' own), so both are measured by the same code.

One sample, by either script:

  1. the system's client is built and warmed up (one untimed C{test.ping}
     to a minion of the running cluster, C{--warm-target}): the first job
     to the new minion must not pay the client's own start;
  2. a key pair is made for the new minion id in its C{pki_dir} and its
     public key put in the master's accepted keys (as C{salt-key -a} would
     leave it), so the minion neither generates a key nor waits to be
     accepted;
  3. the script subscribes to the master's event bus, spawns the minion
     (C{MINION_ARGV}, after C{--}) and waits for
     C{salt/minion/<id>/start} (C{spawn_to_start_event_s});
  4. it runs C{test.ping} to that id through the client until one returns
     C{True} (C{spawn_to_first_job_s}; a job the minion missed is sent
     again, C{attempts} counts them), and one more job at once (its
     latency, C{second_job_latency_s}, tells what the first one cost
     more);
  5. it sends the minion SIGTERM and waits for it to exit
     (C{sigterm_to_exit_s}; SIGKILL after C{--stop-timeout},
     C{killed}), then for the processes it had forked
     (C{sigterm_to_tree_exit_s}; those still alive after 5 more seconds
     are killed and counted in C{leftover_processes}).

The result is one JSON object on standard output. The key is left on the
master: C{run.py} deletes it with the system's key command.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

#: Seconds the processes the minion forked get to exit after it did.
TREE_GRACE = 5.0


def parser(description: str) -> argparse.ArgumentParser:
    """
    @return: the command line both scripts take.
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument("master_config_dir")
    p.add_argument("--id", required=True, help="the new minion's id")
    p.add_argument("--minion-config-dir", required=True)
    p.add_argument("--warm-target", required=True, help="a minion of the cluster, for warm-up")
    p.add_argument("--log", required=True, help="the new minion's output goes here")
    p.add_argument("--pid-file", required=True, help="'PID STARTTIME' of the spawned minion")
    p.add_argument("--timeout", type=float, default=10.0, help="test.ping timeout (-t)")
    p.add_argument(
        "--start-timeout", type=float, default=120.0, help="give up on the minion after this"
    )
    p.add_argument("--stop-timeout", type=float, default=30.0, help="SIGKILL after this")
    return p


def parseArguments(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """
    @return: the parsed command line, with C{minion_argv}: what follows
        C{--}, the minion's command.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("no minion command after --")
    split = argv.index("--")
    options = parser(description).parse_args(argv[:split])
    options.minion_argv = argv[split + 1 :]
    if not options.minion_argv:
        raise SystemExit("no minion command after --")
    return options


def stat(pid: int) -> tuple[int, int] | None:
    """
    @return: C{(ppid, starttime)} of C{pid}, or L{None} if it has gone.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def descendants(pid: int) -> list[tuple[int, int]]:
    """
    @return: C{(pid, starttime)} of every live descendant of C{pid}.
    """
    children: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = stat(int(name))
            if info is not None:
                children.setdefault(info[0], []).append((int(name), info[1]))
    found: list[tuple[int, int]] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def alive(processes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """
    @return: those of C{processes} still running (same pid, same start).
    """
    return [(p, s) for p, s in processes if (stat(p) or (0, None))[1] == s]


def spawn(options: argparse.Namespace) -> tuple[subprocess.Popen[bytes], float]:
    """
    Start the minion, its output to C{--log}, and write its pid file.

    @return: the process and the C{time.perf_counter()} just before it was
        spawned.
    """
    with open(options.log, "ab") as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            options.minion_argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    info = stat(process.pid)
    with open(options.pid_file, "w") as f:
        f.write(f"{process.pid} {info[1] if info else -1}\n")
    return process, started


def stop(process: subprocess.Popen[bytes], stopTimeout: float) -> dict[str, Any]:
    """
    SIGTERM the minion and time its exit, then its forked processes'.

    @return: C{sigterm_to_exit_s}, C{killed}, C{exit_code},
        C{sigterm_to_tree_exit_s}, C{forked_processes} (alive at SIGTERM)
        and C{leftover_processes} (killed after L{TREE_GRACE}).
    """
    if process.poll() is not None:
        return {"sigterm_to_exit_s": None, "exit_code": process.returncode, "exited_early": True}
    forked = descendants(process.pid)
    started = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    killed = False
    try:
        process.wait(timeout=stopTimeout)
    except subprocess.TimeoutExpired:
        killed = True
        process.kill()
        process.wait()
    exited = time.perf_counter() - started
    deadline = time.perf_counter() + TREE_GRACE
    while alive(forked) and time.perf_counter() < deadline:
        time.sleep(0.02)
    treeExited = time.perf_counter() - started
    leftovers = alive(forked)
    for pid, _ in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return {
        "sigterm_to_exit_s": round(exited, 4),
        "killed": killed,
        "exit_code": process.returncode,
        "forked_processes": len(forked),
        "sigterm_to_tree_exit_s": round(treeExited, 4) if not leftovers else None,
        "leftover_processes": len(leftovers),
    }


def killQuietly(process: subprocess.Popen[bytes] | None) -> None:
    """
    Kill the minion (and what it forked) if a failure left it running.
    """
    if process is None or process.poll() is not None:
        return
    forked = descendants(process.pid)
    process.kill()
    process.wait()
    for pid, _ in alive(forked):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def writeAcceptedKey(path: str, pem: bytes) -> None:
    """
    Put a minion's public key at C{path} in the master's accepted keys
    directory, atomically (the master may read it at any moment).
    """
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as f:
        f.write(pem)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def report(figures: dict[str, Any]) -> None:
    """
    Print the sample's figures as one JSON line.
    """
    json.dump(figures, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


async def timeJobs(
    figures: dict[str, Any],
    ping: Callable[[], Awaitable[bool]],
    process: subprocess.Popen[bytes],
    spawned: float,
    deadline: float,
) -> None:
    """
    Step 4 of a sample, once the start event came: C{ping()} (one
    C{test.ping} to the new minion, L{True} if it answered) until one
    succeeds, then once more; record C{spawn_to_first_job_s},
    C{first_job_latency_s}, C{second_job_latency_s} and C{attempts} in
    C{figures}, or C{error} when C{deadline} passed or the minion exited.
    """
    attempts = 0
    while "spawn_to_start_event_s" in figures:
        if time.perf_counter() > deadline or process.poll() is not None:
            figures["error"] = "no successful job"
            break
        attempts += 1
        sent = time.perf_counter()
        if await ping():
            now = time.perf_counter()
            figures["spawn_to_first_job_s"] = round(now - spawned, 4)
            figures["first_job_latency_s"] = round(now - sent, 4)
            # The next job, for what the first one cost more.
            sent = time.perf_counter()
            if await ping():
                figures["second_job_latency_s"] = round(time.perf_counter() - sent, 4)
            break
    figures["attempts"] = attempts


def runBlocking(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """
    Run a coroutine whose awaits all block instead of suspending (Salt's
    script: its client is synchronous) and return its value.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the coroutine suspended; it needs an event loop")
