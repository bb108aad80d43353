# -*- test-case-name: tests.test_api_events -*-
"""
C{GET /events} under load: a real master, N swarm minions
(C{salttwist-swarm}), C{salttwist-api} (plain HTTP on 127.0.0.1) and C
event-stream clients (in another process), then R rounds of C{POST /}
C{local} C{test.ping} to every minion. Prints the events each client got,
how many were dropped, and the CPU seconds and resident memory of the API
and the master before, with the clients connected, and after.

With C{--narrow}, the clients' user has C{['test.*']} instead of
C{'@events'}, so each stream judges each event by its permissions.
With C{--no-read}, the clients never read: each should be dropped once it
falls 1 MiB behind (after the kernel's socket buffers fill), and the API's
memory must stay bounded meanwhile.

Figures only, no assertions. Usage::

    .venv/bin/python benchmarks/api_events_bench.py [--minions 1000] [--clients 100]
        [--rounds 5] [--no-read] [--narrow]
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import yaml
from passlib.hash import bcrypt

from salttwist.api.events import MAX_PER_TOKEN

BIN = os.path.dirname(sys.executable)


def _freePort() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _usage(pid: int) -> tuple[float, int, int]:
    """
    @return: the process's CPU seconds (user + system), its resident and
        peak resident memory in MiB.
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f)
    return cpu, int(status["VmRSS"].split()[0]) // 1024, int(status["VmHWM"].split()[0]) // 1024


def _waitFor(check: Any, what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def clients(port: int, tokens: list[str], count: int, read: bool) -> None:
    """
    The client process: C{count} streams, spread over C{tokens} (the API
    takes at most L{MAX_PER_TOKEN} streams of one token); on SIGTERM, print
    the events each got and how many connections the API closed, as JSON.
    """
    selector = selectors.DefaultSelector()
    counts = [0] * count
    for index in range(count):
        token = tokens[index // MAX_PER_TOKEN]
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"GET /events HTTP/1.1\r\nHost: api\r\nX-Auth-Token: {token}\r\n\r\n".encode())
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, index)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    closed = 0
    while not stopping:
        if not read:
            time.sleep(0.2)
            continue
        for key, _ in selector.select(timeout=0.5):
            data = key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
            if not data:
                selector.unregister(key.fileobj)
                closed += 1
                continue
            counts[key.data] += data.count(b"\ntag: ") + data.startswith(b"tag: ")
    if not read:
        # Was each connection closed by the API? Drain what the kernel holds.
        for key in list(selector.get_map().values()):
            try:
                while key.fileobj.recv(1 << 20):  # type: ignore[union-attr]
                    pass
                closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
    print(json.dumps({"min_events": min(counts), "max_events": max(counts), "closed": closed}))


def _call(port: int, path: str, body: Any, token: str | None = None) -> Any:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["X-Auth-Token"] = token
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), headers=headers
    )
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.load(answer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minions", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-read", action="store_true")
    parser.add_argument(
        "--narrow",
        action="store_true",
        help="the clients' user has ['test.*'], not '@events': each event is filtered",
    )
    parser.add_argument("--keys-dir", default=os.path.join(tempfile.gettempdir(), "st-bench-keys"))
    parser.add_argument("--clients-process", nargs=3, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.clients_process:
        port, tokens, count = options.clients_process
        clients(int(port), tokens.split(","), int(count), not options.no_read)
        return

    root = tempfile.mkdtemp(prefix="st-sse-")
    processes: list[subprocess.Popen[Any]] = []
    try:
        masterDir = os.path.join(root, "master")
        os.makedirs(masterDir)
        htpasswd = os.path.join(root, "htpasswd")
        with open(htpasswd, "w") as f:
            f.write(f"bench:{bcrypt.using(rounds=4).hash('bench-pw')}\n")
        port = _freePort()
        config = {
            "root_dir": masterDir,
            "interface": "127.0.0.1",
            "publish_port": 0,
            "ret_port": 0,
            "log_level": "warning",
            "netapi_enable_clients": ["local"],
            "external_auth": {
                "file": {
                    "^filename": htpasswd,
                    "^filetype": "htpasswd",
                    "bench": ["test.*"] if options.narrow else [".*", "@events"],
                }
            },
            "rest_cherrypy": {"port": port, "host": "127.0.0.1", "disable_ssl": True},
        }
        with open(os.path.join(masterDir, "master"), "w") as f:
            yaml.safe_dump(config, f)
        log = open(os.path.join(root, "daemons.log"), "w")
        master = subprocess.Popen(
            [os.path.join(BIN, "salttwist-master"), "-c", masterDir], stdout=log, stderr=log
        )
        processes.append(master)
        portsFile = os.path.join(masterDir, "var/run/salttwist/master/master.ports")
        _waitFor(lambda: os.path.exists(portsFile), "the master")
        swarm = subprocess.Popen(
            [
                os.path.join(BIN, "salttwist-swarm"),
                *("-n", str(options.minions), "--procs", "2", "--ports-file", portsFile),
                *("--accept-into", os.path.join(masterDir, "etc/salttwist/pki/master")),
                *("--keys-dir", options.keys_dir, "--root", os.path.join(root, "swarm")),
                *("--status-dir", os.path.join(root, "status"), "--duration", "3600"),
            ],
            stdout=log,
            stderr=log,
        )
        processes.append(swarm)

        def ready() -> bool:
            total = 0
            statusDir = os.path.join(root, "status")
            for name in os.listdir(statusDir) if os.path.isdir(statusDir) else ():
                try:
                    with open(os.path.join(statusDir, name)) as f:
                        total += json.load(f).get("ready", 0)
                except (OSError, ValueError):
                    pass
            return total >= options.minions

        _waitFor(ready, "the swarm", timeout=600)
        api = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from salttwist.cli.daemons import apiMain;"
                " sys.exit(apiMain(sys.argv[1:]))",
                *("-c", masterDir, "-l", "warning"),
            ],
            stdout=log,
            stderr=log,
        )
        processes.append(api)

        def token() -> str | None:
            try:
                login = {"username": "bench", "password": "bench-pw", "eauth": "file"}
                return _call(port, "/login", login)["return"][0]["token"]
            except OSError:
                return None

        authToken = _waitFor(token, "salttwist-api")
        # One token per MAX_PER_TOKEN streams, as clients of several users.
        streamTokens = [authToken]
        while len(streamTokens) * MAX_PER_TOKEN < options.clients:
            streamTokens.append(_waitFor(token, "a login"))
        pids = {"api": api.pid, "master": master.pid}
        before = {name: _usage(pid) for name, pid in pids.items()}
        readFlag = ["--no-read"] if options.no_read else []
        streams = subprocess.Popen(
            [
                sys.executable,
                __file__,
                *readFlag,
                "--clients-process",
                str(port),
                ",".join(streamTokens),
                str(options.clients),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        processes.append(streams)
        time.sleep(3)
        connected = {name: _usage(pid) for name, pid in pids.items()}
        start = time.monotonic()
        for _ in range(options.rounds):
            chunk = {"client": "local", "tgt": "*", "fun": "test.ping", "timeout": 60}
            returns = _call(port, "/", [chunk], authToken)["return"][0]
            answered = sum(1 for value in returns.values() if value is True)
            print(f"round: {answered} returns, {time.monotonic() - start:.1f} s since the first")
        time.sleep(3)
        after = {name: _usage(pid) for name, pid in pids.items()}
        streams.send_signal(signal.SIGTERM)
        print("clients:", streams.communicate(timeout=60)[0].strip())
        events = options.rounds * (options.minions + 1)
        print(
            f"{options.clients} clients ({'not reading' if options.no_read else 'reading'}"
            f"{', filtered' if options.narrow else ''}),"
            f" {options.minions} minions, {options.rounds} rounds: {events} events per client"
        )
        for name in pids:
            b, c, a = before[name], connected[name], after[name]
            print(
                f"{name}: CPU {c[0] - b[0]:.2f} s connecting the clients,"
                f" {a[0] - c[0]:.2f} s during the rounds; memory {b[1]} MiB before,"
                f" {c[1]} MiB with the clients, {a[1]} MiB after (peak {a[2]} MiB)"
            )
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
