"""
C{benchmarks/failover_bench.py}: how long a swarm of failover minions takes
to move to a second master after C{kill -9} of the first.

Two real masters (C{salttwist-master} processes of this checkout's
virtualenv, ports from the OS) share one key pair, and each has every swarm
minion's key accepted. N simulated minions (L{benchmarks.swarmlib.Swarm}:
the real minion stack, one process) list both, with C{master_type:
failover}, and pin the shared key first. Once every minion is ready on A,
A gets SIGKILL; the script prints when 50 %, 90 % and all of the minions
are ready on B, and the CPU seconds master B spent meanwhile.

    .venv/bin/python benchmarks/failover_bench.py -n 1000 --reauth-delay 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.masterproc import runMaster  # noqa: E402
from benchmarks.swarmlib import (  # noqa: E402
    DEFAULT_KEYS_DIR,
    SharedVerification,
    Swarm,
    acceptKeys,
    ensureKeys,
    minionIdFor,
    raiseFileLimit,
)
from salttwist import crypt  # noqa: E402
from salttwist.config import loadMasterConfig  # noqa: E402


def _startMaster(directory: str, privatePem: bytes, publicPem: bytes) -> tuple[Any, int]:
    """
    Write a master's config and key pair under C{directory}, start it, and
    wait for its ports file.

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
            },
            f,
        )
    config = loadMasterConfig(directory, overrides={"root_dir": directory})
    os.makedirs(config["pki_dir"], mode=0o700, exist_ok=True)
    crypt.writePrivateFile(os.path.join(config["pki_dir"], "master.pem"), privatePem)
    with open(os.path.join(config["pki_dir"], "master.pub"), "wb") as f:
        f.write(publicPem)
    return runMaster(directory, config["sock_dir"], 60)


def _cpuSeconds(pid: int) -> float:
    """
    @return: the user and system CPU seconds of process C{pid}.
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--minions", type=int, default=1000)
    parser.add_argument(
        "--reauth-delay", type=float, default=5.0, help="random_reauth_delay (default 5)"
    )
    parser.add_argument("--alive", type=float, default=0, help="master_alive_interval (default 0)")
    parser.add_argument("--keys-dir", default=DEFAULT_KEYS_DIR)
    options = parser.parse_args(argv)
    raiseFileLimit()
    ensureKeys(options.keys_dir, options.minions)
    root = tempfile.mkdtemp(prefix="salttwist-failover-")
    masters: list[Any] = []
    try:
        return _run(options, root, masters)
    finally:
        for process in masters:
            if process.poll() is None:
                process.terminate()
                process.wait()
        shutil.rmtree(root, ignore_errors=True)


def _run(options: argparse.Namespace, root: str, masters: list[Any]) -> int:
    key = crypt.generatePrivateKey()
    privatePem, publicPem = crypt.privateKeyToPem(key), crypt.publicKeyToPem(key.public_key())
    ids = [(i, minionIdFor("swarm-", i)) for i in range(options.minions)]
    ports = []
    for name in ("A", "B"):
        directory = os.path.join(root, name)
        config = loadMasterConfig(directory, overrides={"root_dir": directory})
        acceptKeys(config["pki_dir"], options.keys_dir, ids, 2048)
        process, port = _startMaster(directory, privatePem, publicPem)
        masters.append(process)
        ports.append(port)
    a, b = masters
    from twisted.internet import reactor
    from twisted.internet.task import LoopingCall

    crypt.verify = SharedVerification(crypt.verify)  # type: ignore[assignment]
    swarm = Swarm(
        reactor,
        os.path.join(root, "minions"),
        options.keys_dir,
        [i for i, _ in ids],
        "127.0.0.1",
        ports[0],
        configOverrides={
            "master": [f"127.0.0.1:{port}" for port in ports],
            "master_type": "failover",
            "random_reauth_delay": options.reauth_delay,
            "master_alive_interval": options.alive,
        },
        masterPub=crypt.canonicalPublicPem(publicPem),
    )
    marks: dict[str, float] = {}
    state: dict[str, Any] = {"phase": "start", "cpu": 0.0}

    def readyOn(port: int) -> int:
        return sum(
            1 for m in swarm.minions if m.state == "ready" and m.masters.current.port == port
        )

    def look() -> None:
        now = time.monotonic()
        if state["phase"] == "start":
            if readyOn(ports[0]) == options.minions:
                print(f"{options.minions} minions ready on A in {now - marks['start']:.2f}s")
                state["cpu"] = _cpuSeconds(b.pid)
                marks["kill"] = time.monotonic()
                os.kill(a.pid, signal.SIGKILL)
                a.wait()
                state["phase"] = "failover"
            elif now - marks["start"] > 300:
                print("not every minion became ready on A within 300 s", file=sys.stderr)
                reactor.stop()
            return
        onB = readyOn(ports[1])
        for share in (0.5, 0.9, 1.0):
            label = f"{share:.0%}"
            if label not in marks and onB >= share * options.minions:
                marks[label] = now
                print(f"  {label} ({onB}) ready on B {now - marks['kill']:.2f}s after kill -9 of A")
        if onB == options.minions or now - marks["kill"] > 300:
            cpu = _cpuSeconds(b.pid) - state["cpu"]
            print(
                f"master B: {cpu:.2f} CPU seconds for {onB} minions "
                f"({1000 * cpu / max(onB, 1):.2f} ms per minion)"
            )
            swarm.stop()
            reactor.callLater(0.5, reactor.stop)
            looking.stop()

    looking = LoopingCall(look)

    def begin() -> None:
        marks["start"] = time.monotonic()
        swarm.start()
        looking.start(0.05)

    print(
        f"failover bench: {options.minions} minions, random_reauth_delay {options.reauth_delay}, "
        f"master_alive_interval {options.alive}"
    )
    reactor.callWhenRunning(begin)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
