"""
A real SysV init script for the service tests: it starts a small daemon
(a C{sleep}) that writes a pidfile under a temporary directory, and logs
each action it runs, so tests can see what the service module ran.
"""

from __future__ import annotations

import os
import signal
import uuid

from twisted.trial.unittest import SynchronousTestCase

SCRIPT = """\
#!/bin/sh
### BEGIN INIT INFO
# Provides:          {name}
# Required-Start:
# Required-Stop:
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: salttwist test service
### END INIT INFO
PIDFILE={state}/pid
LOG={state}/log
# A killed daemon may stay a zombie (no init reaps it in a container).
running() {{
    [ -f "$PIDFILE" ] || return 1
    status=/proc/$(cat "$PIDFILE")/status
    [ -f "$status" ] && ! grep -q '^State:.*Z' "$status"
}}
do_start() {{
    running && return 0
    [ -f {state}/fail-start ] && return 1
    setsid sleep 3600 </dev/null >/dev/null 2>&1 &
    echo $! > "$PIDFILE"
}}
do_stop() {{
    if running; then
        kill "$(cat "$PIDFILE")"
        while running; do sleep 0.05; done
    fi
    rm -f "$PIDFILE"
}}
echo "$1" >> "$LOG"
case "$1" in
    start) do_start ;;
    stop) do_stop ;;
    restart|force-reload) do_stop; do_start ;;
    reload) running || exit 7 ;;
    status) running || exit 3 ;;
    *) echo "Usage: $0 {{start|stop|restart|reload|force-reload|status}}" >&2; exit 2 ;;
esac
"""


def newName() -> str:
    """
    @return: a service name no other test uses.
    """
    return f"salttwist-test-{uuid.uuid4().hex[:8]}"


def installScript(case: SynchronousTestCase, initDir: str, name: str) -> str:
    """
    Write C{name}'s init script into C{initDir}; its state (pidfile, log)
    goes to a temporary directory. The daemon is killed when the test ends.

    @return: the state directory.
    """
    state = os.path.abspath(case.mktemp())
    os.makedirs(state)
    os.makedirs(initDir, exist_ok=True)
    path = os.path.join(initDir, name)
    with open(path, "w") as f:
        f.write(SCRIPT.format(name=name, state=state))
    os.chmod(path, 0o755)
    case.addCleanup(_remove, path)
    case.addCleanup(killDaemon, state)
    return state


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)


def daemonPid(state: str) -> int | None:
    """
    @return: the running daemon's pid, or L{None}.
    """
    try:
        with open(os.path.join(state, "pid")) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            zombie = any(
                line.startswith("State:") and "Z" in line for line in f.read().splitlines()
            )
    except OSError:
        return None
    return None if zombie else pid


def killDaemon(state: str) -> None:
    """
    Kill the daemon of C{state}, if it runs.
    """
    pid = daemonPid(state)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)


def actions(state: str) -> list[str]:
    """
    @return: the actions the script ran, in order.
    """
    try:
        with open(os.path.join(state, "log")) as f:
            return f.read().split()
    except FileNotFoundError:
        return []
