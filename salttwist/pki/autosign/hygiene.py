# -*- test-case-name: tests.test_autosign_hygiene -*-
"""
File hygiene of the autosign policy files: C{autosign_file},
C{autoreject_file}, C{autosign_policy}, C{autosign_grains_dir} and the
grain files in it.

Whoever can write one of these files decides which keys are accepted (or, for
a policy executable, runs code as the master's user). So the master uses one
only if it, and every directory above it, can be changed by no one but root
and the master's user:

 - the file (or the grains directory) is owned by root or the master's
   (effective) user, and is not writable by its group or by others;
 - every directory above it, both as named in the configuration and once
   symbolic links are resolved, is owned by root or the master's user and is
   not writable by its group or others, unless it has the sticky bit (as
   C{/tmp}: there, others cannot rename or replace what they do not own);
 - a whitelist, reject file, grain file or policy executable is a regular
   file (a FIFO would block the reading thread for ever).

Everything here blocks (C{stat}): call it in a thread.
"""

from __future__ import annotations

import os
import pwd
import shlex
import stat
from collections.abc import Iterator, Mapping
from typing import Any

_WRITABLE = stat.S_IWGRP | stat.S_IWOTH


class UntrustedPathError(Exception):
    """
    A policy file that anyone but root and the master's user could change.

    The message names the file, what is wrong and the command that fixes it.
    """


def _trustedOwners(euid: int | None) -> tuple[int, ...]:
    euid = os.geteuid() if euid is None else euid
    return (0, euid) if euid != 0 else (0,)


def _userName(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _ancestors(path: str) -> Iterator[str]:
    """
    The directories above an absolute path, nearest first, up to C{/}.
    """
    current = os.path.dirname(path)
    while True:
        yield current
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def _ownerProblem(path: str, info: os.stat_result, what: str, euid: int | None) -> str | None:
    owners = _trustedOwners(euid)
    if info.st_uid in owners:
        return None
    master = owners[-1]
    return (
        f"{what} {path} is owned by {_userName(info.st_uid)} (uid {info.st_uid}), not by root"
        f" or the master's user, so another user can change it; the master does not use it"
        f" until it is fixed: chown {_userName(master)} {shlex.quote(path)}"
    )


def checkTrusted(path: str, what: str, directory: bool = False, euid: int | None = None) -> None:
    """
    Check that only root and the master's user can change C{path}.

    @param path: an existing file (or directory, if C{directory}).
    @param what: what it is, for the message (C{"autosign_file"}...).
    @param directory: C{path} must be a directory rather than a regular file.
    @param euid: the master's user; defaults to L{os.geteuid}.
    @raise FileNotFoundError: C{path} does not exist.
    @raise OSError: it cannot be examined.
    @raise UntrustedPathError: it, or a directory above it, could be changed
        by someone else; or it is not a regular file (a directory).
    """
    absolute = os.path.abspath(path)
    info = os.stat(absolute)
    if directory and not stat.S_ISDIR(info.st_mode):
        raise UntrustedPathError(f"{what} {path} is not a directory")
    if not directory and not stat.S_ISREG(info.st_mode):
        raise UntrustedPathError(f"{what} {path} is not a regular file")
    problem = _ownerProblem(path, info, what, euid)
    if problem is not None:
        raise UntrustedPathError(problem)
    if info.st_mode & _WRITABLE:
        raise UntrustedPathError(
            f"{what} {path} is writable by its group or by others"
            f" (mode {stat.S_IMODE(info.st_mode):04o}); the master does not use it until it"
            f" is fixed: chmod go-w {shlex.quote(path)}"
        )
    seen: set[str] = set()
    for top in (absolute, os.path.realpath(absolute)):
        for parent in _ancestors(top):
            if parent in seen:
                continue
            seen.add(parent)
            parentInfo = os.stat(parent)
            problem = _ownerProblem(parent, parentInfo, f"the directory above {what}", euid)
            if problem is not None:
                raise UntrustedPathError(f"{problem} (it holds {path})")
            if parentInfo.st_mode & _WRITABLE and not parentInfo.st_mode & stat.S_ISVTX:
                raise UntrustedPathError(
                    f"the directory {parent}, above {what} {path}, is writable by its group or"
                    f" by others (mode {stat.S_IMODE(parentInfo.st_mode):04o}), so they can"
                    f" replace the file; the master does not use it until it is fixed:"
                    f" chmod go-w {shlex.quote(parent)}"
                )


def checkAutosignFiles(config: Mapping[str, Any], euid: int | None = None) -> list[str]:
    """
    Check the hygiene of every configured autosign file, as at the master's
    start. Missing files are not problems here (each policy says what a
    missing file means).

    @param config: the master config.
    @param euid: the master's user; defaults to L{os.geteuid}.
    @return: a message per problem (each naming the file and the fix).
    """
    problems: list[str] = []
    for option in ("autosign_file", "autoreject_file", "autosign_policy"):
        path = config.get(option)
        if not path:
            continue
        try:
            checkTrusted(path, option, euid=euid)
        except FileNotFoundError:
            continue
        except (OSError, UntrustedPathError) as e:
            problems.append(str(e))
    directory = config.get("autosign_grains_dir")
    if directory:
        try:
            checkGrainsDir(directory, euid)
        except FileNotFoundError:
            pass
        except (OSError, UntrustedPathError) as e:
            problems.append(str(e))
    return problems


def checkGrainsDir(directory: str, euid: int | None = None) -> list[str]:
    """
    Check C{autosign_grains_dir} and every grain file in it (names not
    starting with C{.}; other entries than files are ignored by the policy
    and here).

    @return: the grain file names, sorted.
    @raise FileNotFoundError: the directory does not exist.
    @raise UntrustedPathError: the directory or a grain file is untrusted.
    """
    checkTrusted(directory, "autosign_grains_dir", directory=True, euid=euid)
    names = []
    for name in sorted(os.listdir(directory)):
        if name.startswith("."):
            continue
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        checkTrusted(path, "the autosign_grains_dir file", euid=euid)
        names.append(name)
    return names
