# -*- test-case-name: tests.test_modules_status -*-
"""
Salt's C{status} module on Linux: uptime, load, memory and CPU, read from
C{/proc} in a thread.
"""

from __future__ import annotations

import datetime
import os
import struct
import time
from typing import Any

from salttwist.modules import CommandExecutionError

#: struct utmp on Linux: ut_type is the first 4 bytes of a 384-byte record.
_UTMP_RECORD = 384
_USER_PROCESS = 7


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise CommandExecutionError(f"File {path} was not found.") from e


def _loggedInUsers(path: str = "/var/run/utmp") -> int:
    """
    The number of login sessions (C{who}'s lines), from C{utmp}.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return 0
    count = 0
    for offset in range(0, len(data) - _UTMP_RECORD + 1, _UTMP_RECORD):
        (kind,) = struct.unpack_from("<i", data, offset)
        if kind == _USER_PROCESS:
            count += 1
    return count


def uptime() -> dict[str, Any]:
    """
    Return how long the minion has been up, as Salt does: C{{"seconds",
    "since_iso", "since_t", "days", "time" ("H:M"), "users"}}.

    CLI Example:

        salttwist '*' status.uptime
    """
    now = time.time()
    seconds = int(float(_read("/proc/uptime").split()[0]))
    boot = datetime.datetime.fromtimestamp(now - seconds, tz=datetime.UTC)
    up = datetime.timedelta(seconds=seconds)
    return {
        "seconds": seconds,
        "since_iso": boot.replace(tzinfo=None).isoformat(),
        "since_t": int(now - seconds),
        "days": up.days,
        "time": f"{up.seconds // 3600}:{up.seconds % 3600 // 60}",
        "users": _loggedInUsers(),
    }


def loadavg() -> dict[str, float]:
    """
    Return the load averages: C{{"1-min", "5-min", "15-min"}}.

    CLI Example:

        salttwist '*' status.loadavg
    """
    try:
        one, five, fifteen = os.getloadavg()
    except OSError as e:
        raise CommandExecutionError("status.loadavg is not available") from e
    return {"1-min": one, "5-min": five, "15-min": fifteen}


def _parseMeminfo(text: str) -> dict[str, dict[str, str]]:
    """
    Parse C{/proc/meminfo} as Salt does: C{{"MemTotal": {"value":
    "16318112", "unit": "kB"}, "HugePages_Total": {"value": "0"}, ...}}.
    """
    ret: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        comps = line.split()
        if len(comps) < 2:
            continue
        key = comps[0].replace(":", "")
        ret[key] = {"value": comps[1]}
        if len(comps) > 2:
            ret[key]["unit"] = comps[2]
    return ret


def meminfo() -> dict[str, dict[str, str]]:
    """
    Return C{/proc/meminfo}: C{{name: {"value", "unit"}}}, as Salt does.

    CLI Example:

        salttwist '*' status.meminfo
    """
    return _parseMeminfo(_read("/proc/meminfo"))


def _parseCpuinfo(text: str) -> dict[str, Any]:
    """
    Parse C{/proc/cpuinfo} as Salt does: one flat map (later processors
    overwrite earlier ones), with C{flags} as a list.
    """
    ret: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        ret[key] = value.split() if key == "flags" else value.strip()
    return ret


def cpuinfo() -> dict[str, Any]:
    """
    Return C{/proc/cpuinfo} as a map, as Salt does (C{flags} a list).

    CLI Example:

        salttwist '*' status.cpuinfo
    """
    return _parseCpuinfo(_read("/proc/cpuinfo"))
