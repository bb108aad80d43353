# -*- test-case-name: tests.test_minion -*-
"""
Core grains: facts about the machine the minion runs on.
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

import salttwist


def _osRelease() -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        with open("/etc/os-release") as f:
            for line in f:
                key, sep, value = line.strip().partition("=")
                if sep:
                    values[key] = value.strip().strip('"')
    except OSError:
        pass
    return values


def coreGrains(minionId: str, configGrains: dict[str, Any]) -> dict[str, Any]:
    """
    Gather the core grains (blocking: called once at start), with the
    C{grains:} of the minion config on top.
    """
    release = _osRelease()
    fqdn = socket.getfqdn()
    grains: dict[str, Any] = {
        "id": minionId,
        "kernel": platform.system(),
        "kernelrelease": platform.release(),
        "os": release.get("NAME", platform.system()).split()[0] if release else platform.system(),
        "os_family": (release.get("ID_LIKE") or release.get("ID", "")).split(" ")[0].capitalize(),
        "osrelease": release.get("VERSION_ID", ""),
        "oscodename": release.get("VERSION_CODENAME", ""),
        "cpuarch": platform.machine(),
        "num_cpus": os.cpu_count() or 1,
        "fqdn": fqdn,
        "host": fqdn.split(".")[0],
        "domain": fqdn.partition(".")[2],
        "pythonversion": list(platform.python_version_tuple()),
        "saltversion": salttwist.__version__,
    }
    grains.update(configGrains)
    return grains
