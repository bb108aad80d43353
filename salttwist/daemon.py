# -*- test-case-name: tests.test_daemon -*-
"""
What the master and the minion share when they start: their private
directories, the runtime file that tells local tools the ports a daemon
actually listens on (so a config with port 0 works), the switch to the
C{user} option's user once the sockets are bound, and a clean stop on
SIGTERM or SIGINT with exit status 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import signal
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from twisted.internet.error import ReactorNotRunning
from twisted.logger import Logger
from twisted.python import util

from salttwist.files import MASTER_PUB_FILE, atomicWrite
from salttwist.files import PORTS_FILE as PORTS_FILE
from salttwist.files import readRuntimeFile as readRuntimeFile
from salttwist.logs import FILE_ENV

_log = Logger()


class StartupError(Exception):
    """
    The daemon cannot start; the message says why and what to do.
    """


def ensurePrivateDir(path: str, searchableParents: bool = False) -> None:
    """
    Create C{path} (and parents) with mode 0700 if missing, and refuse one
    that other users could write to (they could plant keys or sockets).

    @param searchableParents: create the missing parents 0711 instead, so
        that the C{user} option's user can reach C{path} (see
        L{dropPrivileges}).

    @raise StartupError: if it cannot be created or is writable by others.
    """
    try:
        _makePrivateDirs(path, parentMode=0o711 if searchableParents else 0o700)
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


def _symbolic(bits: int) -> str:
    """
    @return: C{bits} of the group and others as C{chmod}'s symbolic removal
        (C{0o077} is C{go-rwx}, C{0o022} is C{go-w}).
    """
    letters = "".join(
        letter for letter, bit in (("r", 0o044), ("w", 0o022), ("x", 0o011)) if bits & bit
    )
    return f"go-{letters}"


def _userName(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _allowedOwners(runAs: str | None) -> set[int]:
    owners = {0, os.geteuid()}
    if runAs:
        try:
            owners.add(pwd.getpwnam(runAs).pw_uid)
        except KeyError:
            pass  # resolveUser says that the user does not exist
    return owners


def checkPrivatePath(
    path: str,
    forbidden: int,
    directory: bool = False,
    runAs: str | None = None,
) -> None:
    """
    Refuse a key file or key directory that other users could read or
    change: a symlink, a file of the wrong type, one owned by another user
    than root, this process's user or C{runAs}, or one with any of the
    C{forbidden} permission bits. A missing C{path} passes (the daemon
    creates it with the right mode).

    Blocking (a few C{lstat}s): call it while the daemon starts.

    @param forbidden: the mode bits C{path} must not have: C{0o077} for a
        private key or a C{pki_dir} (0600 and 0700), C{0o022} for a pinned
        public key (not writable by group or others).
    @param directory: C{path} must be a directory, else a regular file.
    @param runAs: the C{user} option: its user may own C{path} (the daemon
        gave it its files when it last dropped privileges).
    @raise StartupError: naming C{path}, what is wrong and the command that
        fixes it.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise StartupError(f"refusing to start: cannot check {path}: {e.strerror}") from e
    kind = "directory" if directory else "regular file"
    isKind = stat.S_ISDIR if directory else stat.S_ISREG
    if stat.S_ISLNK(info.st_mode) or not isKind(info.st_mode):
        raise StartupError(
            f"refusing to start: {path} must be a {kind}, not a symlink or another kind of "
            f"file; remove it (the daemon makes a new one) or put the real {kind} there"
        )
    if info.st_uid not in _allowedOwners(runAs):
        raise StartupError(
            f"refusing to start: {path} belongs to uid {info.st_uid}, not to root or the "
            f"daemon's user; run chown {runAs or _userName(os.geteuid())} {path}"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & forbidden:
        raise StartupError(
            f"refusing to start: {path} has mode {mode:o}, which lets group or others "
            f"{'read or change' if forbidden & 0o044 else 'change'} it; "
            f"run chmod {_symbolic(forbidden)} {path}"
        )


def checkMinionPki(pkiDir: str, runAs: str | None = None) -> None:
    """
    What a minion checks in its C{pki_dir} before it loads its key, as
    Salt's C{verify_env} sets them: the directory 0700, C{minion.pem} 0600,
    and C{minion_master.pub} (the pinned master key: whoever changes it
    can impersonate the master) not writable by group or others. Nothing is
    changed: a minion that finds them otherwise refuses to start, as the
    master refuses loose private directories (L{ensurePrivateDir}); the
    error names the file and the C{chmod} that fixes it.

    @param runAs: the C{user} option (see L{checkPrivatePath}).
    @raise StartupError: see L{checkPrivatePath}.
    """
    checkPrivatePath(pkiDir, 0o077, directory=True, runAs=runAs)
    checkPrivatePath(os.path.join(pkiDir, "minion.pem"), 0o077, runAs=runAs)
    checkPrivatePath(os.path.join(pkiDir, MASTER_PUB_FILE), 0o022, runAs=runAs)


def _makePrivateDirs(path: str, mode: int = 0o700, parentMode: int = 0o700) -> None:
    # Not os.makedirs: it gives its mode to the last directory only, and
    # creates the parents 0777 & ~umask, which a loose umask (002) leaves
    # writable by others, who could then swap the private directory itself.
    parent = os.path.dirname(path.rstrip(os.sep))
    if parent and not os.path.isdir(parent):
        _makePrivateDirs(parent, parentMode, parentMode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass


@contextlib.contextmanager
def ownerOnlyUmask() -> Iterator[None]:
    """
    Run the block under umask 077, then restore the umask.

    Twisted binds a UNIX socket (mode 0777 & ~umask) and only then chmods
    it to the mode asked for: under a loose umask (0, 002) other users could
    connect in between. Bound inside this block, an event-bus socket is
    owner-only from the moment it exists until it gets its final mode.
    """
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def writeRuntimeFile(path: str, data: dict[str, Any]) -> None:
    """
    Atomically write C{data} as JSON to C{path} (mode 0644).
    """
    atomicWrite(path, json.dumps(data).encode("utf-8"), 0o644, durable=False)


@dataclass(frozen=True)
class RunAs:
    """
    The user a daemon runs as after binding (Salt's C{user} option).
    """

    name: str
    uid: int
    gid: int


def resolveUser(
    name: str | None,
    getpwnam: Callable[[str], Any] = pwd.getpwnam,
    geteuid: Callable[[], int] = os.geteuid,
) -> RunAs | None:
    """
    Check the C{user} option (or C{-u/--user}) before anything starts.

    @return: the user to switch to, or L{None} when there is nothing to do
        (no user set, or the daemon already runs as that user).
    @raise StartupError: if the user does not exist, or another user than
        root asks to run as someone else (only root can switch).
    """
    if not name:
        return None
    try:
        entry = getpwnam(name)
    except KeyError:
        raise StartupError(f"user {name!r} (option user) does not exist on this system") from None
    euid = geteuid()
    if euid == entry.pw_uid:
        return None
    if euid != 0:
        raise StartupError(
            f"cannot run as user {name!r}: only root can switch users (running as uid "
            f"{euid}); start the daemon as root or as {name}, or unset the user option"
        )
    return RunAs(name, entry.pw_uid, entry.pw_gid)


def daemonPaths(config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """
    The paths a daemon writes after it dropped privileges, as Salt's
    C{verify_env}, C{verify_log} and C{set_pidfile} give them to its user.

    @return: the directories to hand over with their content (C{pki_dir},
        C{cachedir}, C{sock_dir}), and the single files (the log file and
        the pidfile; their directories stay as they are).
    """
    directories = [config[name] for name in ("pki_dir", "cachedir", "sock_dir") if config.get(name)]
    files = [config["pidfile"]] if config.get("pidfile") else []
    logFiles = [config.get("log_file"), os.environ.get(FILE_ENV)]
    files += [path for path in logFiles if path and path != "-" and "://" not in path]
    return directories, files


#: The key files of publisher_acl users (L{salttwist.master.acl}), which
#: L{chownForUser} leaves to their owners.
_CLIENT_KEY = re.compile(r"\A\..+_key\Z")


def chownForUser(
    runAs: RunAs,
    directories: Iterable[str],
    files: Iterable[str],
    lchown: Callable[[str, int, int], None] = os.lchown,
) -> None:
    """
    Give C{runAs} the directories (and everything in them) and the files
    that exist. Links are never followed, and a file with several hard
    links is left alone: the user owned these directories before and could
    have planted a link to a file of root's.
    """
    for top in directories:
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        lchown(top, runAs.uid, runAs.gid)
        for root, dirs, names in os.walk(top):
            for name in [*dirs, *names]:
                if _CLIENT_KEY.match(name) and name != ".root_key":
                    # A publisher_acl user's key (cachedir/.<user>_key)
                    # belongs to that user, not to the master's.
                    continue
                _chownOne(os.path.join(root, name), runAs, lchown)
    for path in files:
        _chownOne(path, runAs, lchown)


def _chownOne(path: str, runAs: RunAs, lchown: Callable[[str, int, int], None]) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        return
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        _log.warn(
            "not giving {path} to {user}: it has several hard links", path=path, user=runAs.name
        )
        return
    if (info.st_uid, info.st_gid) != (runAs.uid, runAs.gid):
        lchown(path, runAs.uid, runAs.gid)


def unsearchableParent(path: str, runAs: RunAs) -> str | None:
    """
    @return: the first directory above C{path} that C{runAs} cannot search
        (so it cannot reach C{path}), or L{None}.
    """
    groups = set(os.getgrouplist(runAs.name, runAs.gid))
    parent = os.path.dirname(os.path.abspath(path))
    parents = []
    while True:
        parents.append(parent)
        if parent == os.path.dirname(parent):
            break
        parent = os.path.dirname(parent)
    for directory in reversed(parents):
        try:
            info = os.stat(directory)
        except OSError:
            return None
        if info.st_uid == runAs.uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid in groups:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return directory
    return None


def dropPrivileges(
    runAs: RunAs | None,
    config: Mapping[str, Any],
    chown: Callable[[RunAs, list[str], list[str]], None] = chownForUser,
    switchUID: Callable[[int, int], None] = util.switchUID,
) -> None:
    """
    What a daemon does at the end of C{privilegedStartService}, once it has
    bound its sockets: give C{runAs} the paths it writes (L{daemonPaths}),
    then switch to its uid, gid and supplementary groups for good. twistd
    starts the services (and so the worker processes) only after this.
    Nothing happens when C{runAs} is L{None}.
    """
    if runAs is None:
        return
    directories, files = daemonPaths(config)
    for directory in directories:
        blocked = unsearchableParent(directory, runAs)
        if blocked is not None:
            raise StartupError(
                f"user {runAs.name!r} cannot reach {directory}: {blocked} is not searchable "
                f"by it; run chmod o+x {blocked} (or chgrp it to a group of {runAs.name} "
                f"and chmod g+x)"
            )
    chown(runAs, directories, files)
    switchUID(runAs.uid, runAs.gid)
    _log.info("running as user {user} (uid {uid})", user=runAs.name, uid=runAs.uid)


def exitCleanlyOnSignals(reactor: Any) -> None:
    """
    From now on, SIGTERM and SIGINT stop C{reactor} (the services stop
    cleanly, as with twistd's own handlers) without leaving the signal
    behind as the reason to exit: twistd's handlers make it kill its own
    process with that signal again once stopped (exit status 143 for
    SIGTERM), where Salt's daemons exit with 0 after a clean stop.

    Call it once the reactor runs (it replaces the handlers the reactor
    installed when it started): C{reactor.callWhenRunning(exitCleanlyOnSignals,
    reactor)}.
    """

    def stop() -> None:
        try:
            reactor.stop()
        except ReactorNotRunning:
            pass  # a second signal while stopping

    def handler(number: int, frame: object) -> None:
        _log.info("Received {signal}, shutting down.", signal=signal.Signals(number).name)
        reactor.callFromThread(stop)

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, handler)
