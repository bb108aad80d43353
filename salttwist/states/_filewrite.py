# -*- test-case-name: tests.test_states_file -*-
"""
How the C{file} states write: atomically (a temporary file in the target's
directory, renamed over it, keeping the old owner and mode), with Salt's
minion-side backups under C{cachedir/file_backup}, parent directories made
with modes derived as Salt does, and directories cleaned of what no state
keeps (Salt's C{_clean_dir}).

Blocking: called from a state function's thread.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from typing import Any

from salttwist.modules import CommandExecutionError
from salttwist.modules.filemod import _backupMinion, group_to_gid, user_to_uid


def currentUmask() -> int:
    """
    @return: this process's umask, read from C{/proc} (changing it to read
        it is not thread-safe); C{0o022} when it cannot be read.
    """
    try:
        with open("/proc/self/status") as f:
            for text in f:
                if text.startswith("Umask:"):
                    return int(text.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def defaultFileMode() -> str:
    """
    @return: the mode a new file gets from the umask (C{"0644"} for 022).
    """
    return f"{0o666 & ~currentUmask():04o}"


def dirModeFor(mode: Any) -> str | None:
    """
    Salt's rule for the directories C{makedirs} creates when only a file
    mode is given: each non-zero digit gains the execute bit (C{644} gives
    C{755}).
    """
    if mode is None:
        return None
    digits = list(str(mode))[-3:]
    return "".join(str(int(d) | 1) if d != "0" else d for d in digits)


def backupMode(opts: Any, backup: Any) -> str:
    """
    @return: the backup mode of a state (its C{backup} argument, else the
        C{backup_mode} option): C{minion} keeps backups, others none.
    """
    return str(backup or opts.get("backup_mode") or "")


def writeTemp(dest: str, data: bytes | None = None, source: str | None = None) -> str:
    """
    Write C{data} (or copy the file C{source}) to a new temporary file in
    C{dest}'s directory, mode C{0600}.

    @return: its path.
    """
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(dest)}.", dir=os.path.dirname(dest))
    try:
        with os.fdopen(fd, "wb") as out:
            if source is not None:
                with open(source, "rb") as f:
                    shutil.copyfileobj(f, out)
            elif data:
                out.write(data)
    except BaseException:
        removeQuietly(temp)
        raise
    return temp


def commit(temp: str, dest: str, backup: str, cachedir: str) -> None:
    """
    Rename the temporary file C{temp} over C{dest}, after a minion backup of
    C{dest} when C{backup} is C{minion} or C{both}; an existing C{dest}'s
    owner and mode are kept, and a new file gets the mode the umask gives
    (as a file created in place would, and as Salt's do).
    """
    try:
        old = os.stat(dest)
    except OSError:
        old = None
    try:
        if old is not None and backup in ("minion", "both") and cachedir:
            _backupMinion(dest, os.path.join(cachedir, "file_backup"))
        if old is not None:
            os.chown(temp, old.st_uid, old.st_gid)
            os.chmod(temp, old.st_mode & 0o7777)
        else:
            os.chmod(temp, 0o666 & ~currentUmask())
        os.replace(temp, dest)
    except BaseException:
        removeQuietly(temp)
        raise


def removeQuietly(path: str) -> None:
    """
    Remove the file C{path} if it is there.
    """
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def makeParents(name: str, user: Any, group: Any, dirMode: Any) -> None:
    """
    Make the missing parent directories of C{name}, each owned by C{user}
    and C{group} and with C{dirMode} (Salt's C{file.makedirs}).

    @raise CommandExecutionError: naming the directory that cannot be made.
    """
    uid = user_to_uid(user) if user not in (None, "") else -1
    gid = group_to_gid(group) if group not in (None, "") else -1
    missing = []
    head = os.path.dirname(name)
    while head and not os.path.isdir(head):
        missing.append(head)
        head = os.path.dirname(head)
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
            if uid != "" and gid != "" and (uid != -1 or gid != -1):
                os.chown(directory, int(uid), int(gid))
            if dirMode is not None:
                os.chmod(directory, int(str(dirMode), 8))
        except OSError as e:
            raise CommandExecutionError(f"Unable to create directory {directory}: {e}") from e


def includeExclude(path: str, include: Any = None, exclude: Any = None) -> bool:
    """
    Salt's C{check_include_exclude}: whether C{path} passes the glob (or
    C{E@regex}) patterns, each a string or a list.
    """

    def matches(pattern: Any) -> bool:
        text = str(pattern)
        if text.startswith("E@"):
            return re.search(text[2:], path) is not None
        return fnmatch.fnmatch(path, text)

    def anyOf(patterns: Any) -> bool:
        return any(matches(p) for p in (patterns if isinstance(patterns, list) else [patterns]))

    if include and not anyOf(include):
        return False
    return not (exclude and anyOf(exclude))


def keepFiles(name: str, require: Any, lowstate: Any = None) -> set[str]:
    """
    Salt's C{_gen_keep_files}: the paths a directory's C{clean} keeps: the
    names of the C{file} states it requires (a directory with all below
    it). A requisite names a state by id or name: the run's low chunks
    (C{lowstate}, when known) give the id's name; without them an
    absolute path is taken as the name.
    """
    keep: set[str] = set()
    root = name.rstrip("/") or "/"
    for item in require or []:
        if not isinstance(item, dict) or "file" not in item:
            continue
        wanted = str(item["file"])
        names = [
            str(low["name"])
            for low in lowstate or []
            if isinstance(low, dict)
            and low.get("state") == "file"
            and wanted in (str(low.get("name")), str(low.get("__id__")))
        ]
        if not names and os.path.isabs(wanted):
            names = [wanted]
        for path in map(os.path.normpath, names):
            if not os.path.isdir(path):
                keep.add(path)
            elif path == root or path.startswith(root + "/"):
                keep.add(path)
                for top, dirs, files in os.walk(path):
                    keep.update(os.path.join(top, n) for n in dirs + files)
    return keep


def cleanDir(root: str, keep: Iterable[str], exclude: Any, test: bool) -> list[str]:
    """
    Salt's C{_clean_dir}: remove (unless C{test}) every file and directory
    under C{root} not in C{keep} (nor a parent of one there), except those
    whose path relative to C{root} matches C{exclude}.

    @return: the removed paths, sorted (in test mode, every path that
        would go, those inside a removed directory too, as Salt predicts).
    """
    kept = set()
    for path in keep:
        path = os.path.normpath(path)
        while path.startswith(root.rstrip("/") + "/"):
            kept.add(path)
            path = os.path.dirname(path)
    removed: list[str] = []
    for directory, dirs, files in os.walk(root):
        for entry in sorted(dirs) + sorted(files):
            path = os.path.join(directory, entry)
            if path in kept or not includeExclude(os.path.relpath(path, root), None, exclude):
                continue
            removed.append(path)
            if test:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        if not test:
            dirs[:] = [d for d in dirs if os.path.isdir(os.path.join(directory, d))]
    return sorted(removed)
