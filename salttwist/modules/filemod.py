# -*- test-case-name: tests.test_modules_file -*-
"""
Salt's C{file} module: read, write and inspect files on the minion. Every
function runs in a thread. (The file is C{filemod}; it loads as C{file}.)
"""

from __future__ import annotations

import difflib
import fnmatch
import glob
import grp
import hashlib
import os
import pwd
import re
import shutil
import stat
import time
from typing import Any

from salttwist.modules import CommandExecutionError, SaltInvocationError

__virtualname__ = "file"

#: The hash types C{file.get_hash} accepts.
HASH_TYPES = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")

_TYPES = {
    "f": stat.S_ISREG,
    "d": stat.S_ISDIR,
    "l": stat.S_ISLNK,
    "p": stat.S_ISFIFO,
    "s": stat.S_ISSOCK,
    "b": stat.S_ISBLK,
    "c": stat.S_ISCHR,
}


def _expand(path: Any) -> str:
    return os.path.expanduser(str(path))


def read(path: str, binary: bool = False) -> str | bytes:
    """
    Return the contents of the file C{path} (text, or bytes with
    C{binary=True}).

    CLI Example:

        salttwist '*' file.read /path/to/file
    """
    path = _expand(path)
    try:
        if binary is True:
            with open(path, "rb") as f:
                return f.read()
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise CommandExecutionError(f"Unable to read {path}: {e.strerror}") from e


def write(path: str, *args: Any, **kwargs: Any) -> str:
    """
    Write each argument as a line of the file C{path}, replacing what was
    there (or the list C{args=[...]}); return Salt's C{Wrote N lines to
    "path"}.

    CLI Example:

        salttwist '*' file.write /etc/motd 'With all thine offerings thou shalt offer salt.'
    """
    path = _expand(path)
    unknown = set(kwargs) - {"args"}
    if unknown:
        raise SaltInvocationError(f"unknown argument(s): {', '.join(sorted(unknown))}")
    if "args" in kwargs:
        args = tuple(kwargs["args"]) if isinstance(kwargs["args"], list) else (kwargs["args"],)
    contents = [f"{line}\n" for line in args]
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(contents))
    except OSError as e:
        raise CommandExecutionError(f"Unable to write {path}: {e.strerror}") from e
    return f'Wrote {len(contents)} lines to "{path}"'


def touch(name: str, atime: int | None = None, mtime: int | None = None) -> bool:
    """
    Create the file C{name} if missing and set its access and modification
    times (now, or the epoch seconds C{atime} and C{mtime}); return C{True}
    when the file exists afterwards.

    CLI Example:

        salttwist '*' file.touch /var/log/emptyfile
        salttwist '*' file.touch /var/log/emptyfile mtime=1700000000
    """
    name = _expand(name)
    try:
        now = time.time()
        if atime is None and mtime is None:
            times = None
        else:
            times = (
                float(atime) if atime is not None else now,
                float(mtime) if mtime is not None else now,
            )
        if not os.path.exists(name):
            with open(name, "a"):
                pass
        os.utime(name, times)
    except (TypeError, ValueError):
        raise SaltInvocationError("atime and mtime must be integers") from None
    except OSError as e:
        raise CommandExecutionError(e.strerror) from e
    return os.path.exists(name)


def file_exists(path: str) -> bool:
    """
    Return C{True} if C{path} is an existing file (a symlink to one
    counts).

    CLI Example:

        salttwist '*' file.file_exists /etc/passwd
    """
    return os.path.isfile(_expand(path))


def directory_exists(path: str) -> bool:
    """
    Return C{True} if C{path} is an existing directory.

    CLI Example:

        salttwist '*' file.directory_exists /etc
    """
    return os.path.isdir(_expand(path))


def _userName(uid: int) -> str | int:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return uid


def _groupName(gid: int) -> str | int:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return gid


def _fileType(mode: int) -> str:
    for name, check in (
        ("dir", stat.S_ISDIR),
        ("char", stat.S_ISCHR),
        ("block", stat.S_ISBLK),
        ("file", stat.S_ISREG),
        ("link", stat.S_ISLNK),
        ("pipe", stat.S_ISFIFO),
        ("socket", stat.S_ISSOCK),
    ):
        if check(mode):
            return name
    return "file"


def stats(path: str, hash_type: str | None = None, follow_symlinks: bool = True) -> dict[str, Any]:
    """
    Return facts about C{path}: C{inode}, C{uid}, C{gid}, C{user}, C{group},
    C{atime}, C{mtime}, C{ctime}, C{size}, C{mode} (such as C{"0644"}),
    C{type} (C{file}, C{dir}, C{link}, C{char}, C{block}, C{pipe},
    C{socket}), C{target} (the real path), and C{sum} with C{hash_type}.

    CLI Example:

        salttwist '*' file.stats /etc/passwd
        salttwist '*' file.stats /etc/passwd hash_type=sha256
    """
    path = _expand(path)
    try:
        if os.path.exists(path) and follow_symlinks is not False:
            pstat = os.stat(path)
        else:
            # A broken symlink does not "exist" but still has an owner.
            pstat = os.lstat(path)
    except OSError:
        raise CommandExecutionError(f"Path not found: {path}") from None
    ret: dict[str, Any] = {
        "inode": pstat.st_ino,
        "uid": pstat.st_uid,
        "gid": pstat.st_gid,
        "group": _groupName(pstat.st_gid),
        "user": _userName(pstat.st_uid),
        "atime": pstat.st_atime,
        "mtime": pstat.st_mtime,
        "ctime": pstat.st_ctime,
        "size": pstat.st_size,
        "mode": f"{stat.S_IMODE(pstat.st_mode):04o}",
        "type": _fileType(pstat.st_mode),
        "target": os.path.realpath(path),
    }
    if hash_type:
        ret["sum"] = get_hash(path, hash_type)
    return ret


def remove(path: str) -> bool:
    """
    Remove the file, symlink or directory tree at the absolute C{path};
    return C{True}, or C{False} when there was nothing to remove.

    CLI Example:

        salttwist '*' file.remove /tmp/foo
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError(f"File path must be absolute: {path}")
    try:
        if os.path.isfile(path) or os.path.islink(path):
            os.remove(path)
            return True
        if os.path.isdir(path):
            shutil.rmtree(path)
            return True
    except OSError as e:
        raise CommandExecutionError(f"Could not remove '{path}': {e}") from e
    return False


def mkdir(
    dir_path: str, user: str | None = None, group: str | None = None, mode: str | None = None
) -> bool:
    """
    Create the directory C{dir_path} and its missing parents, owned by
    C{user} and C{group} and with C{mode} (such as C{755}) if given; return
    C{True}.

    CLI Example:

        salttwist '*' file.mkdir /opt/jetty/context
        salttwist '*' file.mkdir /opt/jetty/context user=jetty mode=750
    """
    dirPath = _expand(dir_path)
    if not os.path.isabs(dirPath):
        raise SaltInvocationError(f"Path must be absolute: {dirPath}")
    try:
        numericMode = int(str(mode), 8) if mode is not None else None
    except ValueError:
        raise SaltInvocationError(f"invalid mode {mode!r}") from None
    try:
        uid = pwd.getpwnam(str(user)).pw_uid if user is not None else -1
    except KeyError:
        raise CommandExecutionError(f"User '{user}' does not exist") from None
    try:
        gid = grp.getgrnam(str(group)).gr_gid if group is not None else -1
    except KeyError:
        raise CommandExecutionError(f"Group '{group}' does not exist") from None
    missing = []
    head = dirPath
    while head and not os.path.isdir(head):
        missing.append(head)
        head = os.path.dirname(head)
    try:
        for directory in reversed(missing):
            os.mkdir(directory)
            if uid != -1 or gid != -1:
                os.chown(directory, uid, gid)
            if numericMode is not None:
                os.chmod(directory, numericMode)
    except OSError as e:
        raise CommandExecutionError(f"Unable to create {dirPath}: {e}") from e
    return True


def get_hash(path: str, form: str = "sha256", chunk_size: int = 65536) -> str:
    """
    Return the hex digest of the file C{path}; C{form} is one of C{md5},
    C{sha1}, C{sha224}, C{sha256} (default), C{sha384}, C{sha512}.

    CLI Example:

        salttwist '*' file.get_hash /etc/shadow
        salttwist '*' file.get_hash /etc/shadow form=md5
    """
    path = _expand(path)
    if form not in HASH_TYPES:
        raise SaltInvocationError(f"Invalid hash type: {form}")
    digest = hashlib.new(form)
    try:
        with open(path, "rb") as f:
            while chunk := f.read(int(chunk_size)):
                digest.update(chunk)
    except OSError as e:
        raise CommandExecutionError(f"Unable to read {path}: {e.strerror}") from e
    return digest.hexdigest()


_FIND_OPTIONS = {"name", "iname", "regex", "iregex", "type", "maxdepth", "mindepth"}


def _findMatcher(options: dict[str, Any]) -> Any:
    unknown = set(options) - _FIND_OPTIONS
    if unknown:
        raise SaltInvocationError(
            f"unknown find option(s): {', '.join(sorted(unknown))}; "
            f"supported: {', '.join(sorted(_FIND_OPTIONS))}"
        )
    tests: list[Any] = []
    if "name" in options:
        pattern = re.compile(fnmatch.translate(str(options["name"])))
        tests.append(lambda name, full, mode: pattern.match(name))
    if "iname" in options:
        ipattern = re.compile(fnmatch.translate(str(options["iname"])), re.IGNORECASE)
        tests.append(lambda name, full, mode: ipattern.match(name))
    if "regex" in options:
        regex = re.compile(str(options["regex"]))
        tests.append(lambda name, full, mode: regex.match(full))
    if "iregex" in options:
        iregex = re.compile(str(options["iregex"]), re.IGNORECASE)
        tests.append(lambda name, full, mode: iregex.match(full))
    if "type" in options:
        letters = str(options["type"])
        if not letters or any(c not in _TYPES for c in letters):
            raise SaltInvocationError(f"unknown type {letters!r}: use letters of 'bcdflps'")
        checks = [_TYPES[c] for c in letters]
        tests.append(lambda name, full, mode: any(check(mode) for check in checks))

    def matches(name: str, full: str) -> bool:
        try:
            mode = os.lstat(full).st_mode
        except OSError:
            return False
        return all(test(name, full, mode) for test in tests)

    return matches


def find(path: str, **kwargs: Any) -> list[str]:
    """
    Find files below C{path} (a glob) like GNU C{find}, and return their
    paths sorted. Options: C{name} and C{iname} (a glob on the file name),
    C{regex} and C{iregex} (on the whole path), C{type} (letters of
    C{f}ile, C{d}irectory, C{l}ink, C{p}ipe, C{s}ocket, C{b}lock, C{c}har),
    C{maxdepth} and C{mindepth} (C{path} itself is depth 0).

    CLI Example:

        salttwist '*' file.find /etc name='*.conf' type=f maxdepth=2
    """
    options = dict(kwargs)
    matches = _findMatcher(options)
    try:
        maxdepth = int(options["maxdepth"]) if "maxdepth" in options else None
        mindepth = int(options.get("mindepth", 0))
    except ValueError:
        raise SaltInvocationError("maxdepth and mindepth must be numbers") from None
    found: list[str] = []
    for root in glob.glob(_expand(path)):
        root = root.rstrip("/") or "/"
        if mindepth <= 0 and matches(os.path.basename(root), root):
            found.append(root)
        if maxdepth is not None and maxdepth < 1:
            continue
        baseDepth = root.count(os.sep) if root != "/" else 0
        for dirpath, dirs, files in os.walk(root):
            depth = (dirpath.count(os.sep) if dirpath != "/" else 0) - baseDepth + 1
            if depth >= mindepth and (maxdepth is None or depth <= maxdepth):
                for name in dirs + files:
                    full = os.path.join(dirpath, name)
                    if matches(name, full):
                        found.append(full)
            if maxdepth is not None and depth >= maxdepth:
                dirs[:] = []
    return sorted(found)


def _flags(flags: Any) -> int:
    if isinstance(flags, int) and not isinstance(flags, bool):
        return flags
    names = flags if isinstance(flags, list) else [flags]
    value = 0
    for name in names:
        name = str(name).strip().upper()
        if not name:
            continue
        flag = getattr(re, name, None)
        if not isinstance(flag, int):
            raise SaltInvocationError(f"Invalid re flag given: {name}")
        value |= flag
    return value


def replace(
    path: str,
    pattern: str,
    repl: Any,
    count: int = 0,
    flags: Any = 8,
    append_if_not_found: bool = False,
    prepend_if_not_found: bool = False,
    not_found_content: str | None = None,
    backup: str | bool = ".bak",
    dry_run: bool = False,
    search_only: bool = False,
    show_changes: bool = True,
    ignore_if_missing: bool = False,
) -> str | bool:
    """
    Replace the regular expression C{pattern} with C{repl} in the file
    C{path} (at most C{count} times; 0 is all), with C{flags} a list of
    C{re} flag names (C{[IGNORECASE, MULTILINE]}) or a number (default 8,
    MULTILINE). As Salt: returns the unified diff of the change (empty when
    nothing changed), or with C{show_changes=False} whether the file
    changed; C{search_only=True} returns whether the pattern is found and
    changes nothing; C{dry_run=True} computes without writing. When the
    pattern is absent, C{append_if_not_found} or C{prepend_if_not_found}
    adds C{not_found_content} (default C{repl}) as a line. The original is
    kept as C{path + backup} (C{.bak}; C{False} for none). The file keeps
    its inode, owner and mode.

    CLI Example:

        salttwist '*' file.replace /etc/httpd.conf pattern='LogLevel warn' repl='LogLevel info'
        salttwist '*' file.replace /some/file before after flags='[MULTILINE, IGNORECASE]'
    """
    path = os.path.realpath(_expand(path))
    if not os.path.exists(path):
        if ignore_if_missing is True:
            return False
        raise SaltInvocationError(f"File not found: {path}")
    if search_only and (append_if_not_found or prepend_if_not_found):
        raise SaltInvocationError("search_only cannot be used with append/prepend_if_not_found")
    if append_if_not_found and prepend_if_not_found:
        raise SaltInvocationError("Only one of append and prepend_if_not_found is permitted")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise CommandExecutionError(f"Unable to open file '{path}'. Exception: {e}") from e
    if b"\0" in raw[:8192]:
        raise SaltInvocationError(f"Cannot perform string replacements on a binary file: {path}")
    original = raw.decode("utf-8", "surrogateescape")
    flagsValue = _flags(flags)
    try:
        compiled = re.compile(str(pattern), flagsValue)
    except re.error as e:
        raise SaltInvocationError(f"Invalid pattern {pattern!r}: {e}") from None
    if search_only is True:
        return compiled.search(original) is not None
    replacement = str(repl)
    try:
        new, found = compiled.subn(replacement, original, count=int(count))
    except re.error as e:
        raise SaltInvocationError(f"Invalid replacement {repl!r}: {e}") from None
    if (append_if_not_found or prepend_if_not_found) and not found:
        content = replacement if not_found_content is None else str(not_found_content)
        already = re.search(f"^{re.escape(content)}$", original, flags=flagsValue | re.MULTILINE)
        if not already:
            if prepend_if_not_found:
                new = content + "\n" + new
            else:
                if new and not new.endswith("\n"):
                    new += "\n"
                new += content + "\n"
    changed = new != original
    if changed and dry_run is not True:
        if backup:
            shutil.copy2(path, path + str(backup))
        try:
            # In place, as Salt's preserve_inode: hard links, owner and mode stay.
            with open(path, "r+b") as f:
                f.write(new.encode("utf-8", "surrogateescape"))
                f.truncate()
        except OSError as e:
            raise CommandExecutionError(f"Unable to write file '{path}'. Exception: {e}") from e
    if show_changes is not False:
        return "".join(difflib.unified_diff(original.splitlines(True), new.splitlines(True)))
    return changed
