# -*- test-case-name: tests.test_daemon -*-
"""
What the master and the minion share when they start: their private
directories, and the runtime file that tells local tools the ports a daemon
actually listens on (so a config with port 0 works).
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from salttwist.files import atomicWrite

#: The runtime file, in a master's C{sock_dir}, with the ports it listens on.
PORTS_FILE = "master.ports"


class StartupError(Exception):
    """
    The daemon cannot start; the message says why and what to do.
    """


def ensurePrivateDir(path: str) -> None:
    """
    Create C{path} (and parents) with mode 0700 if missing, and refuse one
    that other users could write to (they could plant keys or sockets).

    @raise StartupError: if it cannot be created or is writable by others.
    """
    try:
        _makePrivateDirs(path)
        info = os.lstat(path)
    except OSError as e:
        raise StartupError(f"cannot create directory {path}: {e.strerror}") from e
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StartupError(f"{path} must be a directory, not a link or file")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StartupError(
            f"refusing to start: {path} is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):o}); run chmod go-w {path}"
        )


def _makePrivateDirs(path: str) -> None:
    # Not os.makedirs: it gives its mode to the last directory only, and
    # creates the parents 0777 & ~umask, which a loose umask (002) leaves
    # writable by others, who could then swap the private directory itself.
    parent = os.path.dirname(path.rstrip(os.sep))
    if parent and not os.path.isdir(parent):
        _makePrivateDirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass


def writeRuntimeFile(path: str, data: dict[str, Any]) -> None:
    """
    Atomically write C{data} as JSON to C{path} (mode 0644).
    """
    atomicWrite(path, json.dumps(data).encode("utf-8"), 0o644, durable=False)


def readRuntimeFile(path: str) -> dict[str, Any] | None:
    """
    @return: the JSON map in C{path}, or L{None} if it is missing or unreadable.
    """
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
