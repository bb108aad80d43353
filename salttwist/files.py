# -*- test-case-name: tests.test_crypt,tests.test_daemon -*-
"""
Writing a file so that readers see the old contents or the new, never a
part, and nothing planted at the path is followed; reading the runtime
files a daemon writes that way.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

#: The runtime file, in a master's C{sock_dir}, with the ports it listens on.
PORTS_FILE = "master.ports"
#: The master's public key a minion pinned, in the minion's C{pki_dir}.
MASTER_PUB_FILE = "minion_master.pub"
#: The minion's public key, in its C{pki_dir}.
MINION_PUB_FILE = "minion.pub"


def atomicWrite(path: str, data: bytes, mode: int = 0o600, durable: bool = True) -> None:
    """
    Write C{data} to a new file beside C{path} and rename it over C{path}.

    The temporary name is random (a pid-based one would collide forever
    after a crash between create and rename where the pid is always 1); it
    is created exclusively without following a symlink, given exactly
    C{mode} whatever the umask, and removed if anything fails. A symlink at
    C{path} is replaced, never written through. It starts with a dot, so
    listings that skip dotfiles never see it.

    @param durable: fsync before the rename; a cache that is rebuilt anyway
        can skip that disk wait.
    """
    directory = os.path.dirname(path) or "."
    name = os.path.basename(path)
    if len(name) > 50:
        # At most 200 bytes of it, so that the temporary name stays within
        # NAME_MAX (255 bytes) even when the name itself is that long (a key
        # file named by a minion id of 255 bytes).
        name = os.fsdecode(os.fsencode(name)[:200])
    tmp = os.path.join(directory, f".{name}.{os.urandom(8).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode & 0o600)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
