"""
C{make demo}: a master and two minions on 127.0.0.1 under a temporary
root_dir, their keys accepted with salttwist-key, and real jobs run with the
salttwist CLI. Everything it starts, it stops.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN = os.path.dirname(sys.executable)
MINIONS = ("demo-minion1", "demo-minion2")


def command(name: str, *args: str, show: bool = True) -> subprocess.CompletedProcess[str]:
    """
    Run a salttwist command, echoing it and its output.
    """
    argv = [os.path.join(BIN, name), *args]
    if show:
        print(f"\n$ {name} {' '.join(_quote(a) for a in args)}", flush=True)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if show:
        sys.stdout.write(result.stdout)
        sys.stdout.write(result.stderr)
    return result


def _quote(arg: str) -> str:
    return f"'{arg}'" if (" " in arg or "*" in arg) else arg


def waitFor(what: str, check, timeout: float = 30.0):
    """
    Poll C{check()} until it returns something true.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"demo: timed out waiting for {what}")


def writeRoots(root: str) -> None:
    """
    The master's file roots and pillar: a file, a state tree (a templated
    motd for each minion, under the demo's folder), and a role for each
    minion (the first one is the web server).
    """
    files = {
        "srv/salt/motd": "Welcome to this host, managed by salttwist\n",
        "srv/salt/top.sls": "base:\n  '*':\n    - motd\n",
        "srv/salt/motd.sls": (
            "motd:\n"
            "  file.managed:\n"
            f"    - name: {root}/out/{{{{ grains['id'] }}}}/motd\n"
            "    - source: salt://motd.jinja\n"
            "    - template: jinja\n"
            "    - makedirs: True\n"
        ),
        "srv/salt/motd.jinja": (
            "Welcome to {{ grains['id'] }}, the {{ pillar['role'] }} server of"
            " {{ pillar['site'] }}, managed by salttwist\n"
        ),
        "srv/pillar/top.sls": (
            f"base:\n  '*':\n    - common\n  {MINIONS[0]}:\n    - web\n  {MINIONS[1]}:\n    - db\n"
        ),
        "srv/pillar/common.sls": "site: example.org\n",
        "srv/pillar/web.sls": "role: web\n",
        "srv/pillar/db.sls": "role: db\n",
    }
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def main() -> int:
    """
    Run the demo.
    """
    root = tempfile.mkdtemp(prefix="salttwist-demo-")
    masterDir = os.path.join(root, "master-config")
    os.makedirs(masterDir)
    with open(os.path.join(masterDir, "master"), "w") as f:
        f.write(
            f"root_dir: {root}/master\ninterface: 127.0.0.1\npublish_port: 0\nret_port: 0\n"
            f"file_roots: {{base: [{root}/srv/salt]}}\n"
            f"pillar_roots: {{base: [{root}/srv/pillar]}}\n"
        )
    writeRoots(root)
    processes: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        print(f"demo: root_dir {root}")
        log = open(os.path.join(root, "master.log"), "wb")
        logs.append(log)
        processes.append(
            subprocess.Popen(
                [os.path.join(BIN, "salttwist-master"), "-c", masterDir, "-l", "info"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        portsFile = os.path.join(root, "master/var/run/salttwist/master/master.ports")
        waitFor("the master to listen", lambda: os.path.exists(portsFile))
        with open(portsFile) as f:
            ports = json.load(f)
        print(
            "demo: master listening on 127.0.0.1, ports "
            f"{ports['publish_port']} and {ports['ret_port']}"
        )
        for minionId in MINIONS:
            configDir = os.path.join(root, f"{minionId}-config")
            os.makedirs(configDir)
            with open(os.path.join(configDir, "minion"), "w") as f:
                f.write(
                    f"root_dir: {root}/{minionId}\nid: {minionId}\nmaster: 127.0.0.1\n"
                    f"master_port: {ports['ret_port']}\nacceptance_wait_time: 0.5\n"
                    "random_reauth_delay: 0\n"
                )
            log = open(os.path.join(root, f"{minionId}.log"), "wb")
            logs.append(log)
            processes.append(
                subprocess.Popen(
                    [os.path.join(BIN, "salttwist-minion"), "-c", configDir, "-l", "info"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

        def pending() -> bool:
            out = command("salttwist-key", "-c", masterDir, "-L", "--out", "json", show=False)
            return out.returncode == 0 and len(json.loads(out.stdout)["minions_pre"]) == len(
                MINIONS
            )

        waitFor("the minions' keys to arrive", pending)
        command("salttwist-key", "-c", masterDir, "-L")
        command("salttwist-key", "-c", masterDir, "-A", "-y")

        def allUp() -> bool:
            out = command(
                "salttwist",
                "-c",
                masterDir,
                "*",
                "test.ping",
                "-t",
                "1",
                "--static",
                "--out",
                "json",
                show=False,
            )
            return out.returncode == 0

        waitFor("the minions to authenticate", allUp)
        command("salttwist", "-c", masterDir, "*", "test.ping")
        command("salttwist", "-c", masterDir, "*", "cmd.run", "uname -sr")
        command(
            "salttwist",
            "-c",
            masterDir,
            "*",
            "grains.item",
            "os",
            "kernel",
            "--out",
            "json",
            "--static",
        )
        command("salttwist", "-c", masterDir, "*", "pillar.items")
        command("salttwist", "-c", masterDir, "-I", "role:web", "test.ping")
        command("salttwist", "-c", masterDir, "*", "cp.list_master")
        command("salttwist", "-c", masterDir, MINIONS[0], "cp.get_file_str", "salt://motd")
        command("salttwist", "-c", masterDir, "*", "state.apply", "test=True")
        command("salttwist", "-c", masterDir, "*", "state.apply")
        command("salttwist", "-c", masterDir, "*", "state.apply", "--state-output=terse")
        motd = os.path.join(root, "out", MINIONS[0], "motd")
        command("salttwist", "-c", masterDir, MINIONS[0], "cmd.run", f"cat {motd}")
        print("\ndemo: done; stopping the master and the minions")
        return 0
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()
        if os.environ.get("SALTTWIST_DEMO_KEEP"):
            print(f"demo: kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
