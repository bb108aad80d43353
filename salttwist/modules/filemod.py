# -*- test-case-name: tests.test_modules_file -*-
"""
Salt's C{file} module: read, write and inspect files on the minion. Every
function runs in a thread. (The file is C{filemod}; it loads as C{file}.)
"""

from __future__ import annotations

import datetime
import difflib
import fnmatch
import glob
import grp
import os
import pwd
import re
import shlex
import shutil
import stat
import time
from typing import Any

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    _filesource,
    needsContext,
)

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


def remove(path: str, **kwargs: Any) -> bool:
    """
    Remove the file, symlink or directory tree at the absolute C{path};
    return C{True}, or C{False} when there was nothing to remove. (Salt's
    C{force} and other keyword arguments are accepted and ignored.)

    CLI Example:

        salttwist '*' file.remove /tmp/foo
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError(f"File path must be absolute: {path}")
    try:
        if os.path.islink(path) or (os.path.exists(path) and not os.path.isdir(path)):
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
    return _filesource.get_hash(path, form, chunk_size)


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
        # In place, as Salt's preserve_inode: hard links, owner and mode stay.
        _rewrite(path, new, backup)
    if show_changes is not False:
        return "".join(difflib.unified_diff(original.splitlines(True), new.splitlines(True)))
    return changed


# Owners and modes -------------------------------------------------------------


def _normalizeMode(mode: Any) -> str | None:
    """
    Salt's C{normalize_mode}: a mode as a string of at least four octal
    digits (C{644}, C{"0644"}, C{0o644} are all C{"0644"}), or L{None}.
    """
    if mode is None:
        return None
    text = str(mode).replace("0o", "0").strip('"').strip("'")
    return text.lstrip("0").zfill(4)


def uid_to_user(uid: Any) -> str | int:
    """
    Return the name of the user with the id C{uid} (the id itself if none
    has it).

    CLI Example:

        salttwist '*' file.uid_to_user 0
    """
    try:
        return pwd.getpwuid(int(uid)).pw_name
    except (KeyError, ValueError, TypeError, OverflowError):
        return uid


def user_to_uid(user: Any) -> int | str:
    """
    Return the id of the user C{user} (a name or an id), the current user's
    when empty, or C{''} if there is no such user (as Salt).

    CLI Example:

        salttwist '*' file.user_to_uid root
    """
    if user is None or user == "":
        return os.geteuid()
    if isinstance(user, int) and not isinstance(user, bool):
        return user
    try:
        return pwd.getpwnam(str(user)).pw_uid
    except KeyError:
        if str(user).isdigit():
            return int(str(user))
        return ""


def gid_to_group(gid: Any) -> str | int:
    """
    Return the name of the group with the id C{gid} (the id itself if none
    has it).

    CLI Example:

        salttwist '*' file.gid_to_group 0
    """
    try:
        return grp.getgrgid(int(gid)).gr_name
    except (KeyError, ValueError, TypeError, OverflowError):
        return gid


def group_to_gid(group: Any) -> int | str:
    """
    Return the id of the group C{group} (a name or an id), the current
    group's when empty, or C{''} if there is no such group (as Salt).

    CLI Example:

        salttwist '*' file.group_to_gid root
    """
    if group is None or group == "":
        return os.getegid()
    if isinstance(group, int) and not isinstance(group, bool):
        return group
    try:
        return grp.getgrnam(str(group)).gr_gid
    except KeyError:
        if str(group).isdigit():
            return int(str(group))
        return ""


def _stat(path: str, follow_symlinks: bool) -> os.stat_result | None:
    try:
        return os.stat(path) if follow_symlinks else os.lstat(path)
    except OSError:
        return None


def get_uid(path: str, follow_symlinks: bool = True) -> int:
    """
    Return the id of the user owning C{path}, or C{-1} if it does not exist.

    CLI Example:

        salttwist '*' file.get_uid /etc/passwd
    """
    st = _stat(_expand(path), follow_symlinks)
    return st.st_uid if st else -1


def get_gid(path: str, follow_symlinks: bool = True) -> int:
    """
    Return the id of the group owning C{path}, or C{-1} if it does not
    exist.

    CLI Example:

        salttwist '*' file.get_gid /etc/passwd
    """
    st = _stat(_expand(path), follow_symlinks)
    return st.st_gid if st else -1


def get_user(path: str, follow_symlinks: bool = True) -> str | int | bool:
    """
    Return the name of the user owning C{path} (its id when it has no
    name), or C{False} if it does not exist.

    CLI Example:

        salttwist '*' file.get_user /etc/passwd
    """
    st = _stat(_expand(path), follow_symlinks)
    return _userName(st.st_uid) if st else False


def get_group(path: str, follow_symlinks: bool = True) -> str | int | bool:
    """
    Return the name of the group owning C{path} (its id when it has no
    name), or C{False} if it does not exist.

    CLI Example:

        salttwist '*' file.get_group /etc/passwd
    """
    st = _stat(_expand(path), follow_symlinks)
    return _groupName(st.st_gid) if st else False


def get_mode(path: str, follow_symlinks: bool = True) -> str:
    """
    Return the mode of C{path} as Salt does (C{"0644"}), or C{''} if it
    does not exist.

    CLI Example:

        salttwist '*' file.get_mode /etc/passwd
    """
    st = _stat(_expand(path), follow_symlinks)
    return f"{stat.S_IMODE(st.st_mode):04o}" if st else ""


def set_mode(path: str, mode: Any) -> str:
    """
    Set the mode of C{path} (C{644}, C{"0755"}) and return the mode it has
    afterwards.

    CLI Example:

        salttwist '*' file.set_mode /etc/passwd 0644
    """
    path = _expand(path)
    normal = _normalizeMode(mode)
    try:
        value = int(str(normal), 8)
    except ValueError:
        raise CommandExecutionError(f"Invalid mode: {mode}") from None
    if not os.path.exists(path):
        raise CommandExecutionError(f"{path}: File not found")
    try:
        os.chmod(path, value)
    except OSError as e:
        raise CommandExecutionError(f"Permission denied: {path}: {e.strerror}") from e
    return get_mode(path)


def _ids(user: Any, group: Any) -> tuple[int, int, list[str]]:
    errors = []
    uid: Any = -1
    gid: Any = -1
    if user is not None and user != "":
        uid = user_to_uid(user)
        if uid == "":
            errors.append("User does not exist")
            uid = -1
    if group is not None and group != "":
        gid = group_to_gid(group)
        if gid == "":
            errors.append("Group does not exist")
            gid = -1
    return int(uid), int(gid), errors


def chown(path: str, user: Any, group: Any) -> Any:
    """
    Set the user and group owning C{path} (following a symlink). Returns
    L{None}, or Salt's words when the user, group or path do not exist.

    CLI Example:

        salttwist '*' file.chown /etc/passwd root root
    """
    path = _expand(path)
    uid, gid, errors = _ids(user, group)
    if not os.path.exists(path):
        errors.append(f"File not found: {path}")
    if errors:
        return "; ".join(errors)
    try:
        os.chown(path, uid, gid)
    except OSError as e:
        raise CommandExecutionError(f"Unable to chown {path}: {e.strerror}") from e
    return None


def lchown(path: str, user: Any, group: Any) -> Any:
    """
    Set the user and group owning C{path} itself (a symlink is not
    followed). Returns L{None}, or Salt's words when the user or group do
    not exist.

    CLI Example:

        salttwist '*' file.lchown /var/www/current root root
    """
    path = _expand(path)
    uid, gid, errors = _ids(user, group)
    if errors:
        return "; ".join(errors)
    try:
        os.lchown(path, uid, gid)
    except OSError as e:
        raise CommandExecutionError(f"Unable to lchown {path}: {e.strerror}") from e
    return None


def chgrp(path: str, group: Any) -> Any:
    """
    Set the group owning C{path}.

    CLI Example:

        salttwist '*' file.chgrp /etc/passwd root
    """
    return chown(path, None, group)


def _checkPerms(
    name: str,
    ret: dict[str, Any] | None,
    user: Any,
    group: Any,
    mode: Any,
    followSymlinks: bool = False,
    test: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """
    Salt's C{check_perms}: bring C{name}'s owner and mode to C{user},
    C{group} and C{mode} (each L{None} to leave alone), recording what
    changed in C{ret["changes"]} (C{user}, C{group}, C{mode}) and failures
    in C{ret["comment"]} and C{ret["result"]}. With C{test}, only record
    what would change (and set the result to L{None} if anything would).

    @return: C{(ret, perms)}, C{perms} holding the path's former C{luser},
        C{lgroup} and C{lmode}.
    """
    name = _expand(name)
    mode = _normalizeMode(mode)
    if not ret:
        ret = {"name": name, "changes": {}, "comment": "", "result": True}
    origComment = ret["comment"]
    comments: list[str] = []
    cur = stats(name, follow_symlinks=followSymlinks)
    perms: dict[str, Any] = {
        "luser": cur["uid"] if isinstance(user, int) else cur["user"],
        "lgroup": cur["gid"] if isinstance(group, int) else cur["group"],
        "lmode": cur["mode"],
    }
    isLink = os.path.islink(name)
    ignoreMode = isLink and not followSymlinks

    def differs(wanted: Any, name_: Any, id_: Any) -> bool:
        return wanted not in (name_, id_) and str(wanted) not in (str(name_), str(id_))

    if user and differs(user, cur["user"], cur["uid"]):
        perms["cuser"] = user
    if group and differs(group, cur["group"], cur["gid"]):
        perms["cgroup"] = group
    if ("cuser" in perms or "cgroup" in perms) and not test:
        chowner = lchown if ignoreMode else chown
        error = chowner(name, user if user else cur["user"], group if group else cur["group"])
        if error:
            ret["result"] = False
            comments.append(error)
        elif not isLink:
            # chown resets setuid and setgid bits: restore the mode first.
            set_mode(name, cur["mode"])
    if mode is not None and not test and not ignoreMode and mode != cur["mode"]:
        perms["cmode"] = mode
        try:
            set_mode(name, mode)
        except CommandExecutionError as e:
            comments.append(str(e))
    post = stats(name, follow_symlinks=followSymlinks)
    if user and differs(user, post["user"], post["uid"]):
        if test:
            ret["changes"]["user"] = user
        else:
            ret["result"] = False
            comments.append(f"Failed to change user to {user}")
    elif user and "cuser" in perms:
        ret["changes"]["user"] = user
    if group and differs(group, post["group"], post["gid"]):
        if test:
            ret["changes"]["group"] = group
        else:
            ret["result"] = False
            comments.append(f"Failed to change group to {group}")
    elif group and "cgroup" in perms:
        ret["changes"]["group"] = group
    if mode is not None and not ignoreMode:
        if mode != post["mode"]:
            if test:
                ret["changes"]["mode"] = mode
            else:
                ret["result"] = False
                comments.append(f"Failed to change mode to {mode}")
        elif "cmode" in perms:
            ret["changes"]["mode"] = mode
    if isinstance(origComment, str):
        if origComment:
            comments.insert(0, origComment)
        ret["comment"] = "; ".join(comments)
    else:
        ret["comment"] = list(origComment) + comments
    if test and ret["changes"]:
        ret["result"] = None
    return ret, perms


@needsContext
def check_perms(
    context: LoaderContext,
    name: str,
    ret: dict[str, Any] | None,
    user: Any,
    group: Any,
    mode: Any,
    attrs: Any = None,
    follow_symlinks: bool = False,
    **kwargs: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """
    Check and set the owner and mode of C{name} as Salt's C{check_perms}:
    returns C{(ret, perms)}, C{ret} a state return whose C{changes} name
    what changed (C{user}, C{group}, C{mode}), C{perms} the former owner
    and mode (C{luser}, C{lgroup}, C{lmode}). With the C{test} option,
    nothing is changed. (C{attrs} and SELinux are not supported.)

    CLI Example:

        salttwist '*' file.check_perms /etc/sudoers '{}' root root 400
    """
    if not os.path.lexists(_expand(name)):
        raise CommandExecutionError(f"Path not found: {name}")
    return _checkPerms(
        name, ret, user, group, mode, bool(follow_symlinks), bool(context.opts.get("test"))
    )


# Hashes, diffs, searching ----------------------------------------------------


def get_sum(path: str, form: str = "sha256") -> str:
    """
    Return the hex digest of the file C{path} (Salt's older name for
    L{get_hash}), or C{'File not found'}.

    CLI Example:

        salttwist '*' file.get_sum /etc/passwd sha512
    """
    if not os.path.isfile(_expand(path)):
        return "File not found"
    return get_hash(path, form)


def check_hash(path: str, file_hash: str) -> bool:
    """
    Return whether the file C{path} has the hash C{file_hash}: C{type:hex},
    C{type=hex}, or a bare hex digest whose length names the type.

    CLI Example:

        salttwist '*' file.check_hash /etc/fstab sha256=<hex>
    """
    text = str(file_hash).strip()
    hashType: str | None = None
    for separator in ("=", ":"):
        if separator in text:
            hashType, text = text.split(separator, 1)
            break
    text = text.strip().lower()
    if hashType is None:
        hashType = _HASH_BY_LENGTH.get(len(text))
        if hashType is None:
            raise SaltInvocationError(
                f"Hash {file_hash} (length: {len(text)}) could not be matched to a "
                "supported hash type. The supported hash types and lengths are: "
                + ", ".join(f"{t} ({n})" for n, t in sorted(_HASH_BY_LENGTH.items()))
            )
    return get_hash(path, hashType.strip().lower()) == text


#: Hash types by the length of their hex digest.
_HASH_BY_LENGTH = {32: "md5", 40: "sha1", 56: "sha224", 64: "sha256", 96: "sha384", 128: "sha512"}


def _isBinaryData(data: bytes) -> bool:
    """
    Salt's C{is_binary} heuristic on a block of bytes: NUL bytes, or data
    that does not decode as UTF-8 with more than 30% non-text bytes.
    """
    if not data:
        return False
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        pass
    text = bytes(range(32, 127)) + b"\n\r\t\f\b"
    nontext = data.translate(None, text)
    return len(nontext) / len(data) > 0.30


def _isBinaryFile(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return _isBinaryData(f.read(2048))
    except OSError:
        return False


def _diffBytes(old: bytes, new: bytes, names: tuple[str, str] | None = None) -> str:
    """
    The change from C{old} to C{new} as Salt writes it: C{''} when equal,
    Salt's words when either is binary, else a unified diff (with the file
    names in its header when C{names} is given).
    """
    if old == new:
        return ""
    oldBin = _isBinaryData(old[:2048])
    newBin = _isBinaryData(new[:2048])
    if oldBin and newBin:
        return "Replace binary file"
    if oldBin:
        return "Replace binary file with text file"
    if newBin:
        return "Replace text file with binary file"
    oldLines = old.decode("utf-8", "replace").splitlines(True)
    newLines = new.decode("utf-8", "replace").splitlines(True)
    return "".join(difflib.unified_diff(oldLines, newLines, *(names or ())))


def _readBytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise CommandExecutionError(f"Failed to read {path}: {e.strerror}") from e


def get_diff(
    file1: str,
    file2: str,
    saltenv: str = "base",
    show_filenames: bool = True,
    show_changes: bool = True,
    template: bool = False,
    **kwargs: Any,
) -> str:
    """
    Return the unified diff between two files on the minion (C{''} when
    they are equal; Salt's words when either is binary;
    C{<show_changes=False>} when asked not to show it). (C{salt://} files:
    cache them first with C{cp.cache_file}.)

    CLI Example:

        salttwist '*' file.get_diff /home/fred/.vimrc /home/fred/.vimrc.bak
    """
    paths = []
    errors = []
    for name in (file1, file2):
        local = str(name)
        if local.startswith("file://"):
            local = local[len("file://") :]
        if not os.path.isfile(_expand(local)):
            errors.append(f"File {name} not found")
        paths.append(_expand(local))
    if errors:
        raise CommandExecutionError(f"Failed to cache one or more files: {'; '.join(errors)}")
    old, new = _readBytes(paths[0]), _readBytes(paths[1])
    if old == new:
        return ""
    if not show_changes:
        return "<show_changes=False>"
    return _diffBytes(old, new, (paths[0], paths[1]) if show_filenames else None)


def search(
    path: str,
    pattern: str,
    flags: Any = 8,
    bufsize: int = 1,
    ignore_if_missing: bool = False,
    multiline: bool = False,
) -> bool:
    """
    Return whether the regular expression C{pattern} is found in the file
    C{path} (C{multiline=True} adds C{MULTILINE} and C{DOTALL}, as Salt).

    CLI Example:

        salttwist '*' file.search /etc/crontab 'mymaintenance.sh'
    """
    if multiline:
        flags = _flags(flags) | re.MULTILINE | re.DOTALL
    return bool(
        replace(
            path,
            pattern,
            "",
            flags=flags,
            search_only=True,
            ignore_if_missing=ignore_if_missing,
        )
    )


def contains(path: str, text: str) -> bool:
    """
    Return whether the file C{path} contains the string C{text}.

    CLI Example:

        salttwist '*' file.contains /etc/crontab 'mymaintenance.sh'
    """
    path = _expand(path)
    if not os.path.exists(path):
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return str(text).strip() in f.read()
    except OSError:
        return False


def contains_regex(path: str, regex: str, lchar: str = "") -> bool:
    """
    Return whether a line of the file C{path} (stripped of leading
    C{lchar} characters) matches the regular expression C{regex}.

    CLI Example:

        salttwist '*' file.contains_regex /etc/crontab '^maint'
    """
    path = _expand(path)
    if not os.path.exists(path):
        return False
    try:
        compiled = re.compile(regex)
    except re.error as e:
        raise SaltInvocationError(f"Invalid regex {regex!r}: {e}") from None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if lchar:
                line = line.lstrip(lchar)
            if compiled.search(line):
                return True
    return False


def contains_glob(path: str, glob_expr: str) -> bool:
    """
    Return whether a line of the file C{path} matches the glob C{glob_expr}.

    CLI Example:

        salttwist '*' file.contains_glob /etc/foobar '*cheese*'
    """
    path = _expand(path)
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        return any(fnmatch.fnmatch(line, glob_expr) for line in f)


# Links, copies, directories --------------------------------------------------


def is_link(path: str) -> bool:
    """
    Return whether C{path} is a symlink.

    CLI Example:

        salttwist '*' file.is_link /path/to/link
    """
    return os.path.islink(_expand(path))


def is_hardlink(path: str) -> bool:
    """
    Return whether C{path} is a regular file with more than one link.

    CLI Example:

        salttwist '*' file.is_hardlink /path/to/link
    """
    path = _expand(path)
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink > 1


def readlink(path: str, canonicalize: bool = False) -> str:
    """
    Return the target of the symlink C{path} (fully resolved with
    C{canonicalize=True}).

    CLI Example:

        salttwist '*' file.readlink /path/to/link
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError(f"Path to link must be absolute: {path}")
    if not os.path.islink(path):
        raise SaltInvocationError(f"A valid link was not specified: {path}")
    if canonicalize:
        return os.path.realpath(path)
    return os.readlink(path)


def symlink(
    src: str, path: str, force: bool = False, atomic: bool = False, follow_symlinks: bool = True
) -> bool:
    """
    Create the symlink C{path} pointing to C{src}; with C{force}, replace
    what is at C{path}; with C{atomic}, through a temporary link renamed
    into place.

    CLI Example:

        salttwist '*' file.symlink /path/to/file /path/to/link
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError(f"Link path must be absolute: {path}")
    exists = os.path.exists if follow_symlinks else os.path.lexists
    if os.path.islink(path):
        if os.path.normpath(os.readlink(path)) == os.path.normpath(src):
            return True
        if not (force or atomic):
            raise CommandExecutionError(f"Found existing symlink: {path}")
    elif exists(path) and not force and not atomic:
        raise CommandExecutionError(f"Existing path is not a symlink: {path}")
    if atomic or force:
        temp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
        try:
            if os.path.lexists(temp):
                os.remove(temp)
            os.symlink(src, temp)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            os.replace(temp, path)
        except OSError as e:
            if os.path.lexists(temp):
                os.remove(temp)
            raise CommandExecutionError(f"Could not create '{path}': {e}") from e
        return True
    try:
        os.symlink(src, path)
    except OSError as e:
        raise CommandExecutionError(f"Could not create '{path}': {e}") from e
    return True


def link(src: str, path: str) -> bool:
    """
    Create the hard link C{path} to C{src}.

    CLI Example:

        salttwist '*' file.link /path/to/file /path/to/link
    """
    src = _expand(src)
    if not os.path.isabs(src):
        raise SaltInvocationError("File path must be absolute.")
    try:
        os.link(src, _expand(path))
    except OSError as e:
        raise CommandExecutionError(f"Could not create '{path}': {e}") from e
    return True


def copy(src: str, dst: str, recurse: bool = False, remove_existing: bool = False) -> bool:
    """
    Copy the file C{src} to C{dst} (a directory tree with C{recurse=True},
    removing what C{dst} held first with C{remove_existing=True}).

    CLI Example:

        salttwist '*' file.copy /path/to/src /path/to/dst
        salttwist '*' file.copy /path/to/src_dir /path/to/dst_dir recurse=True
    """
    src, dst = _expand(src), _expand(dst)
    if not os.path.isabs(src):
        raise SaltInvocationError("File path must be absolute.")
    if not os.path.exists(src):
        raise CommandExecutionError(f"No such file or directory '{src}'")
    try:
        if os.path.isdir(src):
            if not recurse:
                raise SaltInvocationError(
                    "Cannot copy overwriting a directory without recurse flag set to true!"
                )
            if remove_existing and os.path.exists(dst):
                shutil.rmtree(dst)
            shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
    except OSError as e:
        raise CommandExecutionError(f"Could not copy '{src}' to '{dst}': {e}") from e
    return True


def rename(src: str, dst: str) -> bool:
    """
    Rename C{src} to C{dst}.

    CLI Example:

        salttwist '*' file.rename /path/to/src /path/to/dst
    """
    src, dst = _expand(src), _expand(dst)
    if not os.path.isabs(src):
        raise SaltInvocationError("File path must be absolute.")
    try:
        os.rename(src, dst)
    except OSError as e:
        raise CommandExecutionError(f"Could not rename '{src}' to '{dst}': {e}") from e
    return True


def move(src: str, dst: str, disallow_copy_and_unlink: bool = False) -> dict[str, Any]:
    """
    Move C{src} to C{dst} (copying then removing across file systems,
    unless C{disallow_copy_and_unlink}); returns Salt's
    C{{"result": True, "comment": "'src' moved to 'dst'"}}.

    CLI Example:

        salttwist '*' file.move /path/to/src /path/to/dst
    """
    src, dst = _expand(src), _expand(dst)
    if not os.path.isabs(src):
        raise SaltInvocationError("Source path must be absolute.")
    if not os.path.isabs(dst):
        raise SaltInvocationError("Destination path must be absolute.")
    try:
        if disallow_copy_and_unlink:
            os.rename(src, dst)
        else:
            shutil.move(src, dst)
    except OSError as e:
        raise CommandExecutionError(f"Unable to move '{src}' to '{dst}': {e}") from e
    return {"result": True, "comment": f"'{src}' moved to '{dst}'"}


def lstat(path: str) -> dict[str, Any]:
    """
    Return the C{lstat} of C{path} as a dictionary (C{st_mode}, C{st_uid},
    C{st_size}, C{st_mtime}...).

    CLI Example:

        salttwist '*' file.lstat /path/to/file
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError("Path to file must be absolute.")
    try:
        st = os.lstat(path)
    except OSError:
        raise CommandExecutionError(f"Path not found: {path}") from None
    keys = (
        "st_atime",
        "st_ctime",
        "st_gid",
        "st_mode",
        "st_mtime",
        "st_nlink",
        "st_size",
        "st_uid",
    )
    return {key: getattr(st, key) for key in keys}


def access(path: str, mode: str) -> bool:
    """
    Return whether C{path} exists (C{mode} C{f}) or is readable (C{r}),
    writable (C{w}) or executable (C{x}) by the minion.

    CLI Example:

        salttwist '*' file.access /path/to/file f
    """
    path = _expand(path)
    modes = {"f": os.F_OK, "r": os.R_OK, "w": os.W_OK, "x": os.X_OK}
    if mode not in modes:
        raise SaltInvocationError("Invalid mode specified.")
    return os.access(path, modes[mode])


def readdir(path: str) -> list[str]:
    """
    Return the entries of the directory C{path}, with C{.} and C{..} first.

    CLI Example:

        salttwist '*' file.readdir /path/to/dir/
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError("Dir path must be absolute.")
    if not os.path.isdir(path):
        raise SaltInvocationError("A valid directory was not specified.")
    return [".", "..", *os.listdir(path)]


def rmdir(
    path: str, recurse: bool = False, verbose: bool = False, older_than: Any = None
) -> bool | dict[str, Any]:
    """
    Remove the empty directory C{path}; with C{recurse=True}, remove the
    empty directories below it too (files stay). With C{verbose=True},
    returns C{{"deleted", "errors", "result"}}.

    CLI Example:

        salttwist '*' file.rmdir /tmp/foo/
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError("File path must be absolute.")
    if not os.path.isdir(path):
        raise SaltInvocationError("A valid directory was not specified.")
    deleted: list[str] = []
    errors: list[tuple[str, str]] = []
    if recurse:
        for root, _, _ in os.walk(path, topdown=False):
            try:
                os.rmdir(root)
                deleted.append(root)
            except OSError as e:
                errors.append((root, str(e)))
    else:
        try:
            os.rmdir(path)
            deleted.append(path)
        except OSError as e:
            errors.append((path, str(e)))
    if verbose:
        return {"deleted": deleted, "errors": errors, "result": not errors}
    if errors and not recurse:
        return errors[0][1]  # type: ignore[return-value]
    return not errors


def makedirs_(path: str, user: Any = None, group: Any = None, mode: Any = None) -> bool | str:
    """
    Create the missing parent directories of C{path} (a path ending in
    C{/} is itself a directory to create), owned by C{user}/C{group} with
    C{mode}. Returns Salt's words when the directory already exists.

    CLI Example:

        salttwist '*' file.makedirs /opt/code/
    """
    path = _expand(path)
    if not os.path.isabs(path):
        raise SaltInvocationError(f"Path must be absolute: {path}")
    directory = os.path.dirname(path)
    if os.path.isdir(directory):
        return f"Directory '{directory}' already exists"
    if os.path.exists(directory):
        return f"The path '{directory}' already exists and is not a directory"
    return mkdir(directory, user=user, group=group, mode=mode)


def makedirs_perms(name: str, user: Any = None, group: Any = None, mode: Any = "0755") -> bool:
    """
    Create the directory C{name} and its missing parents, each owned by
    C{user}/C{group} with C{mode}.

    CLI Example:

        salttwist '*' file.makedirs_perms /opt/code
    """
    return mkdir(name, user=user, group=group, mode=_normalizeMode(mode))


# Editing lines ---------------------------------------------------------------


def _readLines(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "surrogateescape").splitlines(True)
    except OSError as e:
        raise CommandExecutionError(f"Unable to open file '{path}'. Exception: {e}") from e


def _writeInPlace(path: str, text: str) -> None:
    """
    Write C{text} to C{path} keeping its inode, owner and mode.
    """
    try:
        with open(path, "r+b") as f:
            f.write(text.encode("utf-8", "surrogateescape"))
            f.truncate()
    except OSError as e:
        raise CommandExecutionError(f"Unable to write file '{path}'. Exception: {e}") from e


def _rewrite(path: str, text: str, backup: Any) -> None:
    """
    Write C{text} to C{path} in place (L{_writeInPlace}), the original kept
    first as C{path + backup} (C{backup} a suffix such as C{.bak}; none
    when it is false).
    """
    if backup:
        shutil.copy2(path, f"{path}{backup}")
    _writeInPlace(path, text)


def _lineEnd(lines: list[str]) -> str:
    """
    @return: the line end of a file's lines (the first one's that has
        one), a newline when none has.
    """
    return next((_eol(line) for line in lines if _eol(line)), "\n")


def _refuseBinary(path: str) -> None:
    """
    @raise SaltInvocationError: if C{path} is a binary file.
    """
    if _isBinaryFile(path):
        raise SaltInvocationError(f"Cannot perform string replacements on a binary file: {path}")


def _textFile(path: str) -> str:
    path = os.path.realpath(_expand(path))
    if not os.path.isfile(path):
        raise SaltInvocationError(f"File not found: {path}")
    _refuseBinary(path)
    return path


def comment_line(
    path: str, regex: str, char: str = "#", cmnt: bool = True, backup: str | bool = ".bak"
) -> str | bool:
    """
    Comment (C{cmnt=True}) or uncomment the lines of C{path} matching
    C{regex}, with the comment character C{char}. Returns the diff of the
    changed lines, or C{False} when no line matches. The original is kept
    as C{path + backup}.

    CLI Example:

        salttwist '*' file.comment_line '/etc/modules' '^pcspkr'
        salttwist '*' file.comment_line /etc/hosts '^10.0.0.1' cmnt=False
    """
    body = regex.lstrip("^").rstrip("$")
    end = "$" if regex.endswith("$") else ""
    if cmnt:
        pattern = f"{'^' if regex.startswith('^') else ''}({body}){end}"
    else:
        pattern = rf"^{re.escape(char)}\s*({body}){end}"
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise SaltInvocationError(f"Invalid regex {regex!r}: {e}") from None
    path = _textFile(path)
    lines = _readLines(path)
    before: list[str] = []
    after: list[str] = []
    newLines = []
    for line in lines:
        if compiled.match(line):
            changed = f"{char}{line}" if cmnt else line.lstrip(char)
            before.append(line)
            after.append(changed)
            newLines.append(changed)
        else:
            newLines.append(line)
    if not before:
        return False
    _rewrite(path, "".join(newLines), backup)
    return "".join(difflib.unified_diff(before, after))


def comment(path: str, regex: str, char: str = "#", backup: str | bool = ".bak") -> str | bool:
    """
    Comment the lines of C{path} matching C{regex} (see L{comment_line}).

    CLI Example:

        salttwist '*' file.comment /etc/modules pcspkr
    """
    return comment_line(path, regex, char, True, backup)


def uncomment(path: str, regex: str, char: str = "#", backup: str | bool = ".bak") -> str | bool:
    """
    Uncomment the lines of C{path} matching C{regex} (see L{comment_line}).

    CLI Example:

        salttwist '*' file.uncomment /etc/hosts.deny 'ALL: PARANOID'
    """
    return comment_line(path, regex, char, False, backup)


def _textArgs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    if "args" in kwargs:
        value = kwargs["args"]
        args = tuple(value) if isinstance(value, list) else (value,)
    return [str(a) for a in args]


def append(path: str, *args: Any, **kwargs: Any) -> str:
    """
    Append each argument as a line to the file C{path} (or the list
    C{args=[...]}), adding a newline first if the file lacks one at its
    end.

    CLI Example:

        salttwist '*' file.append /etc/motd "With all thine offerings thou shalt offer salt."
    """
    path = _expand(path)
    lines = _textArgs(args, kwargs)
    try:
        with open(path, "a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write("".join(f"{line}\n" for line in lines).encode("utf-8"))
    except OSError as e:
        raise CommandExecutionError(f"Unable to write {path}: {e.strerror}") from e
    return f'Wrote {len(lines)} lines to "{path}"'


def prepend(path: str, *args: Any, **kwargs: Any) -> str:
    """
    Insert each argument as a line at the start of the file C{path} (or the
    list C{args=[...]}).

    CLI Example:

        salttwist '*' file.prepend /etc/motd "With all thine offerings thou shalt offer salt."
    """
    path = _expand(path)
    lines = _textArgs(args, kwargs)
    try:
        with open(path, "rb") as f:
            old = f.read()
    except FileNotFoundError:
        old = b""
    except OSError as e:
        raise CommandExecutionError(f"Unable to read {path}: {e.strerror}") from e
    new = "".join(f"{line}\n" for line in lines).encode("utf-8") + old
    try:
        with open(path, "wb") as f:
            f.write(new)
    except OSError as e:
        raise CommandExecutionError(f"Unable to write {path}: {e.strerror}") from e
    return f'Prepended {len(lines)} lines to "{path}"'


def _eol(line: str) -> str:
    match = re.search("((?<!\r)\n|\r(?!\n)|\r\n)$", line)
    return match.group() if match else ""


def _indentLike(source: str, content: str, indent: bool) -> str:
    if not indent:
        return content
    prefix = source[: len(source) - len(source.lstrip(" \t"))]
    return prefix + content.lstrip()


def _matching(lines: list[str], regex: str | None) -> list[int]:
    if not regex:
        return []
    try:
        compiled = re.compile(regex, re.DOTALL)
    except re.error as e:
        raise CommandExecutionError(f"{e}: '{regex}'") from None
    return [i for i, line in enumerate(lines) if compiled.search(line) or regex in line]


def _one(found: list[int], what: str) -> int:
    if len(found) != 1:
        words = "more than" if len(found) > 1 else "less than"
        raise CommandExecutionError(f'Found {words} expected occurrences in "{what}" expression')
    return found[0]


def _setLine(
    lines: list[str],
    content: str | None,
    match: str | None,
    mode: str,
    location: str | None,
    before: str | None,
    after: str | None,
    indent: bool,
) -> list[str]:
    """
    Salt's C{_set_line} on lines without their ends: the new lines.
    """
    lines = list(lines)
    if not match and before is None and after is None:
        match = content
    content = "" if content is None else str(content)

    def same(index: int) -> bool:
        return 0 <= index < len(lines) and lines[index].strip() == content.strip()

    if mode == "delete":
        found = set(_matching(lines, match))
        return [line for i, line in enumerate(lines) if i not in found]
    if mode == "replace":
        found = _matching(lines, match)
        if found:
            index = found[0]
            lines[index] = _indentLike(lines[index], content, indent)
        return lines
    afterAt = _one(_matching(lines, after), "after") if after else None
    beforeAt = _one(_matching(lines, before), "before") if before else None
    if mode == "insert":
        if before is None and after is None and location is None:
            raise CommandExecutionError(
                'On insert either "location" or "before/after" conditions are required.'
            )
        if location == "end":
            # Salt 3008 adds a blank line and leaves the file without a last
            # newline here (a bug); the line is simply added, unindented.
            lines.append(content)
        elif location == "start":
            lines.insert(0, content)
        elif afterAt is not None and beforeAt is not None:
            lines.insert(beforeAt, _indentLike(lines[beforeAt], content, indent))
        elif afterAt is not None:
            if not same(afterAt + 1):
                lines.insert(afterAt + 1, _indentLike(lines[afterAt], content, indent))
        elif beforeAt is not None:
            if not same(beforeAt - 1):
                lines.insert(beforeAt, _indentLike(lines[beforeAt], content, indent))
        return lines
    # ensure
    if afterAt is not None and beforeAt is not None:
        if not any(line.strip() == content.strip() for line in lines):
            if afterAt + 1 == beforeAt:
                lines.insert(afterAt + 1, _indentLike(lines[afterAt], content, indent))
            elif afterAt + 2 == beforeAt:
                lines[afterAt + 1] = _indentLike(lines[afterAt], content, indent)
            else:
                raise CommandExecutionError(
                    'Found more than one line between boundaries "before" and "after".'
                )
    elif beforeAt is not None:
        if not same(beforeAt - 1):
            source = lines[beforeAt - 1] if beforeAt else lines[beforeAt]
            lines.insert(beforeAt, _indentLike(source, content, indent))
    elif afterAt is not None:
        if not same(afterAt + 1):
            lines.insert(afterAt + 1, _indentLike(lines[afterAt], content, indent))
    else:
        raise CommandExecutionError(
            "Wrong conditions? Unable to ensure line without knowing where to put it "
            "before and/or after."
        )
    return lines


def _lineEdit(
    path: str,
    content: Any,
    match: str | None,
    mode: str | None,
    location: str | None,
    before: str | None,
    after: str | None,
    showChanges: bool,
    backup: Any,
    quiet: bool,
    indent: bool,
    test: bool,
) -> str | bool:
    path = os.path.realpath(_expand(path))
    if not os.path.isfile(path):
        if not quiet:
            raise CommandExecutionError(f'File "{path}" does not exists or is not a file.')
        return False
    mode = mode.lower() if mode else mode
    if mode not in ("insert", "ensure", "delete", "replace"):
        if mode is None:
            raise CommandExecutionError("Mode was not defined. How to process the file?")
        raise CommandExecutionError(f'Unknown mode: "{mode}"')
    if mode != "delete" and content is None:
        raise CommandExecutionError('Content can only be empty if mode is "delete"')
    if location not in (None, "start", "end"):
        raise CommandExecutionError(f'Unknown location: "{location}": use "start" or "end"')
    original = _readLines(path)
    eol = _lineEnd(original)
    bare = [line[: len(line) - len(_eol(line))] for line in original]
    newBare = _setLine(bare, content, match, mode, location, before, after, indent)
    endsWithEol = not original or bool(_eol(original[-1]))
    newLines = [line + eol for line in newBare]
    if newLines and not endsWithEol and len(newBare) >= len(bare) and newBare[-1] == bare[-1]:
        newLines[-1] = newBare[-1]
    changed = newLines != original
    if not changed:
        return False
    if backup and not test:
        shutil.copy2(path, f"{path}.{time.strftime('%Y-%m-%d-%H-%M-%S', time.localtime())}")
    diff = "".join(difflib.unified_diff(original, newLines))
    if not test:
        _writeInPlace(path, "".join(newLines))
    return diff if showChanges else True


@needsContext
def line(
    context: LoaderContext,
    path: str,
    content: Any = None,
    match: str | None = None,
    mode: str | None = None,
    location: str | None = None,
    before: str | None = None,
    after: str | None = None,
    show_changes: bool = True,
    backup: Any = False,
    quiet: bool = False,
    indent: bool = True,
) -> str | bool:
    """
    Edit one line of the file C{path}, as Salt's C{file.line}: C{mode} is
    C{ensure} (the C{content} line is between C{after} and/or C{before}),
    C{replace} (the first line matching C{match} becomes C{content}),
    C{delete} (lines matching C{match} go) or C{insert} (at C{location}
    C{start}/C{end}, or just after C{after} / before C{before}). Regular
    expressions match anywhere in a line; C{match} defaults to C{content}.
    Returns the diff (or C{True} with C{show_changes=False}), or C{False}
    when nothing changed. With the C{test} option nothing is written.

    CLI Example:

        salttwist '*' file.line /etc/nsswitch.conf 'networks: files dns' after='hosts:' mode=ensure
    """
    return _lineEdit(
        path,
        content,
        match,
        mode,
        location,
        before,
        after,
        bool(show_changes),
        backup,
        bool(quiet),
        bool(indent),
        bool(context.opts.get("test")),
    )


def blockreplace(
    path: str,
    marker_start: str = "#-- start managed zone --",
    marker_end: str = "#-- end managed zone --",
    content: str = "",
    append_if_not_found: bool = False,
    prepend_if_not_found: bool = False,
    backup: str | bool = ".bak",
    dry_run: bool = False,
    show_changes: bool = True,
    append_newline: bool | None = False,
    insert_before_match: str | None = None,
    insert_after_match: str | None = None,
) -> str | bool:
    """
    Replace the lines between the line holding C{marker_start} and the one
    holding C{marker_end} in the file C{path} with C{content}, as Salt's
    C{file.blockreplace}. Without the markers, C{append_if_not_found} or
    C{prepend_if_not_found} add the whole block, C{insert_before_match} or
    C{insert_after_match} put it by the first line matching a regular
    expression; else it fails. C{append_newline} ends the content with a
    newline (L{None}: only if it lacks one). Returns the diff (or whether
    it changed, with C{show_changes=False}); C{dry_run} writes nothing.
    The original is kept as C{path + backup}.

    CLI Example:

        salttwist '*' file.blockreplace /etc/hosts '#-- start' '#-- end' $'10.0.1.1 foo\\n' True
    """
    chosen = [
        bool(append_if_not_found),
        bool(prepend_if_not_found),
        bool(insert_before_match),
        bool(insert_after_match),
    ]
    if sum(chosen) > 1:
        raise SaltInvocationError(
            "Only one of append_if_not_found, prepend_if_not_found,"
            " insert_before_match, and insert_after_match is permitted"
        )
    path = _expand(path)
    if not os.path.exists(path):
        raise SaltInvocationError(f"File not found: {path}")
    _refuseBinary(path)
    content = "" if content is None else str(content)
    if append_newline is None and not content.endswith("\n"):
        append_newline = True
    parts = content.replace("\r\n", "\n").split("\n")
    original = _readLines(path)
    linesep = _lineEnd(original)

    def block(startMarker: bool = True, endLine: str | None = None) -> list[str]:
        end = (endLine if endLine is not None else marker_end).rstrip("\r\n") + linesep
        out = [marker_start + linesep] if startMarker else []
        for index, part in enumerate(parts, 1):
            if index != len(parts):
                out.append(part + linesep)
            elif append_newline:
                out.extend([part + linesep, end])
            else:
                out.append(part + end)
        return out

    new: list[str] = []
    inBlock = False
    found = False
    for text in original:
        if marker_start in text and not inBlock:
            inBlock = True
            new.append(text)
            continue
        if inBlock:
            position = text.find(marker_end)
            if position != -1:
                inBlock = False
                found = True
                new.extend(block(False, text[position:]))
            continue
        new.append(text)
    if inBlock:
        raise CommandExecutionError(
            "Unterminated marked block. End of file reached before marker_end."
        )
    if not found:
        if prepend_if_not_found:
            new = block() + new
        elif append_if_not_found:
            if new and not new[-1].endswith(linesep):
                new[-1] += linesep
            new.extend(block())
        elif insert_before_match or insert_after_match:
            regex = str(insert_before_match or insert_after_match)
            matches = [i for i, text in enumerate(original) if re.search(regex, text)]
            if not matches:
                raise CommandExecutionError(
                    "Cannot edit marked block. Markers were not found in file."
                )
            at = matches[0] + (1 if insert_after_match else 0)
            new[at:at] = block()
        else:
            raise CommandExecutionError("Cannot edit marked block. Markers were not found in file.")
    diff = "".join(difflib.unified_diff(original, new))
    if diff and not dry_run:
        _rewrite(path, "".join(new), backup)
    if show_changes:
        return diff
    return bool(diff)


# Minion backups (file.managed's backup: minion) -------------------------------


def _backupRoot(context: LoaderContext) -> str:
    return os.path.join(str(context.opts.get("cachedir") or ""), "file_backup")


def _backupMinion(path: str, backupRoot: str) -> str:
    """
    Salt's C{backup_minion}: copy C{path} to
    C{backupRoot/<its directory>/<name>_<Day_Mon_DD_HH:MM:SS_usecs_YYYY>},
    keeping its owner and mode.

    @return: the backup's path.
    """
    directory, base = os.path.split(path)
    st = os.stat(path)
    usecs = str(int(time.time() * 1000000))[-6:]
    stamp = time.strftime("%a_%b_%d_%H:%M:%S_%Y")
    stamp = f"{stamp[:-4]}{usecs}_{stamp[-4:]}"
    target = os.path.join(backupRoot, directory.lstrip("/"), f"{base}_{stamp}")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(path, target)
    os.chown(target, st.st_uid, st.st_gid)
    os.chmod(target, st.st_mode & 0o7777)
    return target


def _listBackups(backupRoot: str, path: str, limit: Any = None) -> dict[int, dict[str, Any]]:
    path = _expand(path)
    try:
        limit = int(limit) if limit is not None else None
    except ValueError:
        limit = None
    directory, base = os.path.split(path)
    backupDir = os.path.join(backupRoot, directory.lstrip("/"))
    if not os.path.isdir(backupDir):
        return {}
    found: dict[Any, dict[str, Any]] = {}
    for entry in os.listdir(backupDir):
        location = os.path.join(backupDir, entry)
        if not os.path.isfile(location):
            continue
        try:
            stamp = datetime.datetime.strptime(entry, f"{base}_%a_%b_%d_%H:%M:%S_%f_%Y")
        except ValueError:
            continue
        found[stamp] = {
            "Backup Time": stamp.strftime("%a %b %d %Y %H:%M:%S.%f"),
            "Size": os.stat(location).st_size,
            "Location": location,
        }
    newest = sorted(found, reverse=True)[:limit]
    return {index: found[stamp] for index, stamp in enumerate(newest)}


@needsContext
def list_backups(context: LoaderContext, path: str, limit: Any = None) -> dict[int, Any]:
    """
    List the minion backups of the file C{path} (made by C{file.managed}
    with C{backup: minion}), newest first: C{{0: {"Backup Time", "Size",
    "Location"}, ...}}, at most C{limit}.

    CLI Example:

        salttwist '*' file.list_backups /etc/motd
    """
    return _listBackups(_backupRoot(context), path, limit)


def _backupById(context: LoaderContext, path: str, backupId: Any) -> tuple[Any, dict[str, Any]]:
    ret: dict[str, Any] = {"result": False, "comment": f"Invalid backup_id '{backupId}'"}
    try:
        if len(str(backupId)) != len(str(int(backupId))):
            return None, ret
        return _listBackups(_backupRoot(context), path)[int(backupId)], ret
    except ValueError:
        return None, ret
    except KeyError:
        ret["comment"] = f"backup_id '{backupId}' does not exist for {_expand(path)}"
        return None, ret


@needsContext
def restore_backup(context: LoaderContext, path: str, backup_id: Any) -> dict[str, Any]:
    """
    Restore the minion backup C{backup_id} (an index from
    L{list_backups}) of C{path}, backing up the current file first.

    CLI Example:

        salttwist '*' file.restore_backup /etc/motd 0
    """
    path = _expand(path)
    backup, ret = _backupById(context, path, backup_id)
    if backup is None:
        return ret
    try:
        if os.path.exists(path):
            _backupMinion(path, _backupRoot(context))
        shutil.copyfile(backup["Location"], path)
    except OSError as e:
        ret["comment"] = f"Unable to restore {backup['Location']} to {path}: {e}"
        return ret
    ret["result"] = True
    ret["comment"] = f"Successfully restored {backup['Location']} to {path}"
    return ret


@needsContext
def delete_backup(context: LoaderContext, path: str, backup_id: Any) -> dict[str, Any]:
    """
    Delete the minion backup C{backup_id} (an index from L{list_backups})
    of C{path}.

    CLI Example:

        salttwist '*' file.delete_backup /etc/motd 0
    """
    backup, ret = _backupById(context, path, backup_id)
    if backup is None:
        return ret
    try:
        os.remove(backup["Location"])
    except OSError as e:
        ret["comment"] = f"Unable to remove {backup['Location']}: {e}"
        return ret
    ret["result"] = True
    ret["comment"] = f"Successfully removed {backup['Location']}"
    return ret


@needsContext
def list_backup(context: LoaderContext, path: str, limit: Any = None) -> dict[int, Any]:
    """
    Salt's other name for L{list_backups}.

    CLI Example:

        salttwist '*' file.list_backup /etc/motd
    """
    return _listBackups(_backupRoot(context), path, limit)


@needsContext
def remove_backup(context: LoaderContext, path: str, backup_id: Any) -> dict[str, Any]:
    """
    Salt's other name for L{delete_backup}.

    CLI Example:

        salttwist '*' file.remove_backup /etc/motd 0
    """
    return delete_backup(context, path, backup_id)


# Sources and templates (what file.managed does, for callers) ------------------


def _stateContext(context: LoaderContext, saltenv: str | None = None) -> Any:
    """
    @return: a state context over the loader context, for the source
        helpers of the C{file} states.
    """
    from salttwist.modules.extmods import SaltFunctions
    from salttwist.states import StateContext

    return StateContext(
        salt=SaltFunctions(context),
        opts=context.opts,
        grains=context.grains,
        pillar=getattr(context, "pillar", {}) or {},
        saltenv=saltenv or str(context.opts.get("saltenv") or "base"),
        reactor=context.reactor,
    )


@needsContext
def source_list(context: LoaderContext, source: Any, source_hash: Any, saltenv: str) -> list[Any]:
    """
    Return C{[source, source_hash]} for the first existing source of a list
    (strings, or C{{source: source_hash}} mappings), as C{file.managed}
    chooses it.

    CLI Example:

        salttwist '*' file.source_list '[salt://a, salt://b]' '' base
    """

    try:
        chosen, hashed = _filesource.sourceList(
            _stateContext(context, saltenv), source, source_hash, saltenv
        )
    except _filesource.SourceError as e:
        raise CommandExecutionError(str(e)) from e
    return [chosen, hashed]


@needsContext
def get_source_sum(
    context: LoaderContext,
    file_name: str = "",
    source: str = "",
    source_hash: Any = None,
    source_hash_name: str | None = None,
    saltenv: str = "base",
    **kwargs: Any,
) -> dict[str, str]:
    """
    Return C{{"hash_type", "hsum"}} from a C{source_hash}: a digest,
    C{type=digest}, or a local file or URL of hashes (the line for
    C{source_hash_name}, else C{source}'s or C{file_name}'s file name).

    CLI Example:

        salttwist '*' file.get_source_sum /tmp/f.tgz source=http://x/f.tgz source_hash=<hex>
    """

    if not source_hash:
        raise SaltInvocationError("source_hash is required")
    return _filesource.sourceSum(
        _stateContext(context, saltenv), file_name, source, source_hash, source_hash_name, saltenv
    )


@needsContext
def apply_template_on_contents(
    context: LoaderContext, /, contents: str, template: str, *args: Any, **kwargs: Any
) -> str:
    """
    Render C{contents} with the C{template} engine (C{jinja}), Salt's
    variables and C{context} over C{defaults}. Salt's arguments:
    C{(contents, template, context, defaults, saltenv)}.

    CLI Example:

        salttwist '*' file.apply_template_on_contents contents='x={{ grains.id }}' template=jinja
    """

    names = ("context", "defaults", "saltenv")
    if len(args) > len(names):
        raise SaltInvocationError(f"too many arguments: {args!r}")
    given = dict(zip(names, args, strict=False))
    for key in names:
        if key in kwargs:
            if key in given:
                raise SaltInvocationError(f"{key} given twice")
            given[key] = kwargs.pop(key)
    saltenv = str(given.get("saltenv") or "base")
    variables = dict(given.get("defaults") or {})
    variables.update(given.get("context") or {})
    try:
        return _filesource.renderTemplate(
            _stateContext(context, saltenv), str(contents), template, variables, saltenv, None
        )
    except _filesource.SourceError as e:
        raise CommandExecutionError(str(e)) from e


# Patches ----------------------------------------------------------------------


def _patchCommand(originalfile: str, patchfile: str, options: Any, dryRun: bool) -> list[str]:
    """
    The C{patch} command line of C{file.patch}, as Salt builds it.

    @raise CommandExecutionError: when C{patch} is not installed.
    """
    binary = shutil.which("patch")
    if not binary:
        raise CommandExecutionError(
            "patch executable not found. Is the distribution's patch package installed?"
        )
    if options is None:
        options = []
    cmd = [binary, *(shlex.split(options) if isinstance(options, str) else map(str, options))]
    if dryRun:
        cmd.append("--dry-run")
    # Without it patch asks what to do with a patch that seems reversed.
    if "-N" not in cmd and "--forward" not in cmd:
        cmd.append("--forward")
    if not any(o == "-r" or o.startswith("-r ") or o.startswith("--reject-file") for o in cmd):
        # Else patch leaves rejected hunks in <file>.rej.
        cmd.append("--reject-file=-")
    cmd.extend(["-i", patchfile])
    if os.path.isdir(originalfile):
        cmd.extend(["-d", originalfile])
        if not any(o.startswith("-p") or o.startswith("--strip=") for o in cmd):
            cmd.append("--strip=0")
    else:
        cmd.append(originalfile)
    return cmd


@needsContext
def patch(
    context: LoaderContext,
    originalfile: str,
    patchfile: str,
    options: Any = "",
    dry_run: bool = False,
) -> dict[str, Any]:
    """
    Apply the patch file C{patchfile} to the file or directory
    C{originalfile} with the C{patch} program (C{patch <options> -i
    <patchfile> <originalfile>}, or C{-d <directory> --strip=0}); C{options}
    is a string or a list; C{dry_run} changes nothing. Returns
    C{cmd.run_all}'s result.

    CLI Example:

        salttwist '*' file.patch /opt/file.txt /tmp/file.txt.patch
    """
    from salttwist.modules.extmods import SaltFunctions

    cmd = _patchCommand(_expand(originalfile), _expand(patchfile), options, bool(dry_run))
    return SaltFunctions(context)["cmd.run_all"](cmd, python_shell=False)
