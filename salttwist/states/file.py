# -*- test-case-name: tests.test_states_file -*-
"""
Salt's C{file} states: files with managed contents, owners and modes
(C{file.managed}, C{file.serialize}), directories (C{file.directory},
C{file.recurse}), links (C{file.symlink}, C{file.hardlink}), removal
(C{file.absent}), edits in place (C{file.line}, C{file.replace},
C{file.blockreplace}, C{file.keyvalue}, C{file.append}, C{file.prepend},
C{file.comment}, C{file.uncomment}, with C{file.accumulated} feeding
templates and blocks), C{file.touch}, C{file.copy}, C{file.rename},
patches (C{file.patch}), clean-up (C{file.tidied},
C{file.retention_schedule}), the minion's cache (C{file.cached},
C{file.not_cached}) and the checks C{file.exists} and C{file.missing}:
each with Salt's arguments, comments and changes.

Sources (C{salt://}, C{http(s)://}, a local path or C{file://}) and their
hashes are in L{salttwist.modules._filesource}; atomic writes, minion
backups and cleaning in L{salttwist.states._filewrite}. Contents are
written to a temporary file in the target's directory, renamed into place.
In test mode nothing is changed and the changes that would be made are
reported.

Differences from Salt, on purpose: C{attrs}, SELinux and Windows options
are accepted and ignored; templates are Jinja only; C{mode: keep} works for
local sources only (the file server does not report modes); C{file.line}
inserting at the end adds the line plainly (Salt 3008 adds a blank line
and drops the last newline).
"""

from __future__ import annotations

import difflib
import json
import os
import pwd
import re
import shutil
import tempfile
from typing import Any
from urllib.parse import urlparse

import yaml

from salttwist.modules import CommandExecutionError, SaltInvocationError
from salttwist.modules import _filesource as src
from salttwist.modules import filemod as fm
from salttwist.render.jinja import traverse
from salttwist.states import StateContext, stateReturn
from salttwist.states import _filepatch as patching
from salttwist.states import _fileretention as retention
from salttwist.states import _filetidy as tidy
from salttwist.states import _filewrite as fw

_NOT_FOUND = object()

#: The note Salt adds to test-mode comments of C{file.managed}.
_TEST_NOTE = "\nNote: No changes made, actual changes may\nbe different due to other states."


def _error(ret: dict[str, Any], comment: str) -> dict[str, Any]:
    ret["result"] = False
    ret["comment"] = comment
    return ret


def _expand(name: Any) -> str:
    return os.path.expanduser(str(name)) if name is not None else ""


def _checkUser(ctx: StateContext, user: Any, group: Any) -> str:
    """
    Salt's C{_check_user}: words naming a missing user or group (none in
    test mode, where they may be created by an earlier state).
    """
    err = ""
    if user and fm.user_to_uid(user) == "":
        err += f"User {user} is not available "
    if group and fm.group_to_gid(group) == "":
        err += f"Group {group} is not available"
    return "" if ctx.test else err


def _owner(user: Any, kwargs: dict[str, Any]) -> Any:
    return user if user is not None else kwargs.get("owner")


def _defaultOwner(ctx: StateContext, user: Any, group: Any) -> tuple[Any, Any]:
    """
    The owner of a new link or copy when none is given, as Salt: the
    minion's C{user} (else the process's), and that user's primary group
    (else a group named as the user).
    """
    if user is None:
        user = ctx.opts.get("user") or fm.uid_to_user(os.geteuid())
    if group is None:
        try:
            group = fm.gid_to_group(pwd.getpwnam(str(user)).pw_gid)
        except KeyError:
            group = user
    return user, group


def _ownerErrors(user: Any, group: Any) -> list[str]:
    """
    @return: Salt's words for a C{user} or C{group} that does not exist.
    """
    errors = []
    if fm.user_to_uid(user) == "":
        errors.append(f"User {user} does not exist")
    if fm.group_to_gid(group) == "":
        errors.append(f"Group {group} does not exist")
    return errors


def _lowstate(ctx: StateContext) -> Any:
    """
    @return: the run's low chunks, if the runner shares them (Salt's
        C{__lowstate__}) in C{ctx.context["__lowstate__"]}.
    """
    return ctx.context.get("__lowstate__")


def _checkFile(name: str) -> tuple[bool, str]:
    if not os.path.isabs(name):
        return False, f"Specified file {name} is not an absolute path"
    if not os.path.exists(name):
        return False, f"{name}: file not found"
    return True, ""


def _contentsText(value: Any) -> list[str] | bytes:
    """
    Salt's C{_validate_str_list}: contents as a list of strings, or the
    bytes of binary contents.
    """
    if isinstance(value, bytes):
        try:
            return [value.decode("utf-8")]
        except UnicodeDecodeError:
            return value
    if isinstance(value, list):
        return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value]
    return [str(value)]


def _predictPerms(name: str, user: Any, group: Any, mode: Any, follow: bool) -> dict[str, Any]:
    """
    Salt's C{check_file_meta} for owners and mode: what would change.
    """
    try:
        st = fm.stats(name, follow_symlinks=follow)
    except CommandExecutionError:
        return {}
    changes: dict[str, Any] = {}
    if user is not None and str(user) not in (str(st["user"]), str(st["uid"])):
        changes["user"] = user
    if group is not None and str(group) not in (str(st["group"]), str(st["gid"])):
        changes["group"] = group
    mode = fm._normalizeMode(mode)
    if mode is not None and mode != fm._normalizeMode(st["mode"]):
        changes["mode"] = mode
    return changes


def _readOrNone(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def mod_run_check_cmd(
    ctx: StateContext, cmd: str, filename: str, **check_cmd_opts: Any
) -> bool | dict[str, Any]:
    """
    Salt's C{file.mod_run_check_cmd}: run C{cmd filename} (the new file
    C{file.managed} would put in place); return C{True} if it succeeds,
    else the failed result (its output in the comment).
    """
    opts = {k: v for k, v in check_cmd_opts.items() if not k.startswith("__")}
    result = ctx.salt["cmd.run_all"](f"{cmd} {filename}", python_shell=True, **opts)
    if result.get("retcode") == 0:
        return True
    comment = "check_cmd execution failed"
    if result.get("stdout"):
        comment += "\n" + result["stdout"]
    if result.get("stderr"):
        comment += "\n" + result["stderr"]
    return {"comment": comment, "result": False, "skip_watch": True}


def managed(
    ctx: StateContext,
    name: str,
    source: Any = None,
    source_hash: Any = "",
    source_hash_name: str | None = None,
    keep_source: bool = True,
    user: Any = None,
    group: Any = None,
    mode: Any = None,
    attrs: Any = None,
    template: str | None = None,
    makedirs: bool = False,
    dir_mode: Any = None,
    context: Any = None,
    replace: bool = True,
    defaults: Any = None,
    backup: str = "",
    show_changes: bool = True,
    create: bool = True,
    contents: Any = None,
    tmp_dir: str = "",
    tmp_ext: str = "",
    contents_pillar: Any = None,
    contents_grains: Any = None,
    contents_newline: bool = True,
    contents_delimiter: str = ":",
    encoding: str | None = None,
    encoding_errors: str = "strict",
    allow_empty: bool = True,
    follow_symlinks: bool = True,
    check_cmd: str | None = None,
    skip_verify: bool = False,
    new_file_diff: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Manage a file: its contents from C{source} (C{salt://}, C{http(s)://}
    with C{source_hash} or C{skip_verify}, a local path or C{file://}; a
    list gives the first that exists) optionally rendered as a C{template}
    (C{jinja}, with C{context} over C{defaults}), or from C{contents} (a
    string or list of lines), C{contents_pillar} or C{contents_grains};
    its C{user}, C{group} and C{mode} (C{keep}: the source's).

    C{replace=False} leaves an existing file's contents alone;
    C{create=False} does nothing when the file is absent; C{makedirs}
    creates missing parents (with C{dir_mode}); C{backup: minion} keeps
    the old file under C{cachedir/file_backup}; C{check_cmd} must accept
    the new file (given as its last argument) before it is put in place.
    Changes: C{diff} (a unified diff, C{New file}, or Salt's words for
    binary files), C{user}, C{group}, C{mode}.
    """
    kwargs.pop("env", None)
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    saltenv = kwargs.get("saltenv") or ctx.saltenv
    if not name:
        return _error(ret, "Destination file name is required")
    keepMode = isinstance(mode, str) and mode.lower() == "keep"
    mode = None if keepMode else fm._normalizeMode(mode)
    given = [x for x in (contents, contents_pillar, contents_grains) if x is not None]
    if source and given:
        return _error(
            ret,
            "'source' cannot be used in combination with 'contents', "
            "'contents_pillar', or 'contents_grains'",
        )
    if keepMode and given:
        return _error(
            ret,
            "Mode preservation cannot be used in combination with 'contents', "
            "'contents_pillar', or 'contents_grains'",
        )
    if len(given) > 1:
        return _error(
            ret, "Only one of 'contents', 'contents_pillar', and 'contents_grains' is permitted"
        )
    if not source and not given and replace:
        replace = False
    if "file_mode" in kwargs:
        ret.setdefault("warnings", []).append(
            "The 'file_mode' argument will be ignored.  "
            "Please use 'mode' instead to set file permissions."
        )
    user = _owner(user, kwargs)
    if context is not None and not isinstance(context, dict):
        return _error(ret, "Context must be formed as a dict")
    if defaults and not isinstance(defaults, dict):
        return _error(ret, "Defaults must be formed as a dict")

    useContents: Any = None
    for what, data, label in (
        (contents_pillar, ctx.pillar, "Pillar"),
        (contents_grains, ctx.grains, "Grain"),
    ):
        if what is None:
            continue
        keys = what if isinstance(what, list) else [what]
        values = []
        for key in keys:
            value = traverse(data, str(key), _NOT_FOUND, contents_delimiter)
            if value is _NOT_FOUND:
                return _error(ret, f"{label} {key} does not exist")
            values.append(value if isinstance(value, (str, bytes)) else str(value))
        useContents = values[0] if len(values) == 1 else "\n".join(map(str, values))
    if contents is not None:
        useContents = contents

    newData: bytes | None = None
    if useContents is not None:
        if not allow_empty and not useContents:
            if contents_pillar:
                what = f"contents_pillar {contents_pillar}"
            elif contents_grains:
                what = f"contents_grains {contents_grains}"
            else:
                what = "'contents'"
            return _error(
                ret,
                f"{what} value would result in empty contents. Set allow_empty "
                "to True to allow the managed file to be empty.",
            )
        parts = _contentsText(useContents)
        if isinstance(parts, bytes):
            if template:
                return _error(
                    ret,
                    "Contents specified by contents/contents_pillar/contents_grains appears "
                    "to be binary data, and as will not be able to be treated as a Jinja "
                    "template.",
                )
            newData = parts
        else:
            text = "".join(
                part.rstrip("\n").rstrip("\r") + "\n"
                for chunk in parts
                for part in chunk.splitlines()
            )
            if not contents_newline:
                text = text.rstrip("\n").rstrip("\r")
            if template:
                try:
                    text = src.renderTemplate(
                        ctx,
                        text,
                        template,
                        _templateVars(context, defaults, ctx, name),
                        saltenv,
                        None,
                    )
                except src.SourceError as e:
                    return _error(ret, f"Unable to manage file: {e}")
            newData = text.encode(encoding or "utf-8", encoding_errors)

    if not create and not os.path.isfile(name):
        ret["comment"] = f"File {name} is not present and is not set for creation"
        return ret
    problem = _checkUser(ctx, user, group)
    if problem:
        return _error(ret, problem)
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    if os.path.isdir(name):
        return _error(ret, f"Specified target {name} is a directory")

    if (
        useContents is None
        and not template
        and source
        and not skip_verify
        and replace
        and os.path.exists(name)
    ):
        # A web source whose hash the existing file has: nothing to fetch.
        try:
            chosen, chosenHash = src.sourceList(ctx, source, source_hash, saltenv)
            if chosenHash and src.scheme(chosen) in src.REMOTE:
                expected = src.sourceSum(ctx, name, chosen, chosenHash, source_hash_name, saltenv)
                if fm.get_hash(name, expected["hash_type"]) == expected["hsum"]:
                    replace = False
        except (CommandExecutionError, src.SourceError, OSError):
            pass

    if not replace and os.path.exists(name):
        return _keepContents(ctx, ret, name, user, group, mode, follow_symlinks)

    sfn: str | None = None
    if useContents is None and source:
        try:
            chosen, chosenHash = src.sourceList(ctx, source, source_hash, saltenv)
            sfn, _ = src.fetchSource(
                ctx, name, chosen, chosenHash, source_hash_name, saltenv, bool(skip_verify)
            )
        except src.HashMismatch as e:
            return _error(ret, str(e))
        except (src.SourceError, CommandExecutionError) as e:
            return _error(ret, f"Unable to manage file: {e}")
        if os.path.abspath(sfn) == name:
            return _error(
                ret, "Unable to manage file: Source file cannot be the same as destination"
            )
        if keepMode:
            if src.localPath(chosen) is not None:
                mode = fm.get_mode(sfn)
            else:
                ret.setdefault("warnings", []).append(
                    f"mode: keep is not supported for {src.redact(chosen)}: the file server "
                    "does not report modes (use a mode)"
                )
        if template:
            try:
                with open(sfn, encoding="utf-8") as f:
                    text = f.read()
                variables = _templateVars(context, defaults, ctx, name)
                variables.update(
                    {
                        "name": name,
                        "source": chosen,
                        "user": user,
                        "group": group,
                        "mode": mode,
                        "attrs": attrs,
                    }
                )
                variables.update({k: v for k, v in kwargs.items() if not k.startswith("__")})
                rendered = src.renderTemplate(ctx, text, template, variables, saltenv, chosen)
            except (OSError, UnicodeDecodeError) as e:
                return _error(ret, f"Unable to manage file: cannot read {chosen}: {e}")
            except src.SourceError as e:
                return _error(ret, f"Unable to manage file: {e}")
            newData = rendered.encode(encoding or "utf-8", encoding_errors)
            sfn = None
    return _manageFile(
        ctx,
        ret,
        name,
        sfn,
        newData,
        user,
        group,
        mode,
        backup,
        bool(makedirs),
        dir_mode,
        bool(show_changes),
        bool(follow_symlinks),
        check_cmd,
        bool(new_file_diff),
        hasSource=bool(source) or useContents is not None,
    )


def _templateVars(
    context: Any, defaults: Any, ctx: StateContext | None = None, name: str | None = None
) -> dict[str, Any]:
    variables = dict(defaults or {})
    variables.update(context or {})
    if ctx is not None and name is not None:
        accumulated = _accumulators(ctx)[0].get(name)
        if accumulated:
            variables["accumulator"] = accumulated
    return variables


def _keepContents(
    ctx: StateContext,
    ret: dict[str, Any],
    name: str,
    user: Any,
    group: Any,
    mode: Any,
    follow: bool,
) -> dict[str, Any]:
    """
    C{file.managed} with C{replace: False} on an existing file: its owner
    and mode only.
    """
    ret, perms = fm._checkPerms(name, ret, user, group, mode, follow, ctx.test)
    if ctx.test:
        if mode and perms.get("lmode") and mode != perms["lmode"]:
            ret["comment"] = (
                f"File {name} will be updated with permissions {mode} from its current "
                f"state of {perms['lmode']}"
            )
        else:
            ret["comment"] = f"File {name} not updated"
    elif not ret["changes"] and ret["result"]:
        ret["comment"] = f"File {name} exists with proper permissions. No changes made."
    return ret


def _manageFile(
    ctx: StateContext,
    ret: dict[str, Any],
    name: str,
    sfn: str | None,
    newData: bytes | None,
    user: Any,
    group: Any,
    mode: Any,
    backup: str,
    makedirs: bool,
    dirMode: Any,
    showChanges: bool,
    follow: bool,
    checkCmd: str | None,
    newFileDiff: bool,
    hasSource: bool,
) -> dict[str, Any]:
    """
    Salt's C{file.manage_file}: put the new contents (the file C{sfn}, or
    C{newData}) in place if they differ, then the owner and mode.
    """
    backupMode = fw.backupMode(ctx.opts, backup)
    cachedir = str(ctx.opts.get("cachedir") or "")
    exists = os.path.isfile(name) or os.path.islink(name)
    isLink = os.path.islink(name)
    target = os.path.realpath(name) if isLink and follow else name
    wanted = newData if newData is not None else (_readOrNone(sfn) if sfn else None)
    if sfn and wanted is None:
        return _error(ret, f"Unable to manage file: cannot read the source {sfn}")
    changes: dict[str, Any] = ret["changes"]

    if exists and not (isLink and not follow) and os.path.exists(target):
        current = _readOrNone(target) if wanted is not None else None
        if wanted is not None and current is None:
            return _error(ret, f"Unable to manage file: cannot read {target}")
        differs = wanted is not None and current != wanted
        if differs:
            if not showChanges:
                changes["diff"] = "<show_changes=False>"
            else:
                diff = fm._diffBytes(current or b"", wanted or b"")
                if diff:
                    changes["diff"] = diff
        if ctx.test:
            changes.update(_predictPerms(name, user, group, mode, follow))
            return _testResult(ret, name)
        if differs:
            failed = _writeContents(ctx, ret, target, wanted or b"", backupMode, cachedir, checkCmd)
            if failed:
                return failed
        if user or group or mode is not None:
            # Without an owner or a mode asked for, checking them changes
            # and records nothing: two stats of the file (the names of
            # its owner and group, its real path) saved.
            ret, _ = fm._checkPerms(name, ret, user, group, mode, follow, False)
        if ret["changes"]:
            ret["comment"] = f"File {name} updated"
        elif ret["result"]:
            ret["comment"] = f"File {name} is in the correct state"
        return ret

    if exists and isLink and not follow:
        # The symlink becomes a regular file.
        if ctx.test:
            changes["diff"] = "Replace symbolic link with regular file"
            return _testResult(ret, name)
        failed = _writeContents(ctx, ret, name, wanted or b"", backupMode, cachedir, checkCmd)
        if failed:
            return failed
        changes["diff"] = "Replace symbolic link with regular file"
        ret, _ = fm._checkPerms(name, ret, user, group, mode, False, False)
        ret["comment"] = f"File {name} updated"
        return ret

    # A new file (or, through a dangling symlink that is followed, its target).
    dest = target
    parent = os.path.dirname(dest)
    if ctx.test:
        if newFileDiff and wanted is not None:
            changes["diff"] = fm._diffBytes(b"", wanted) or "New file"
        else:
            changes["newfile"] = name
        return _testResult(ret, name)
    if not os.path.isdir(parent):
        if not makedirs:
            return _error(ret, "Parent directory not present")
        try:
            fw.makeParents(dest, user, group, dirMode or fw.dirModeFor(mode))
        except CommandExecutionError as e:
            return _error(ret, str(e))
    if mode is None:
        mode = fw.defaultFileMode()
    if wanted is None and not hasSource:
        try:
            fw.commit(fw.writeTemp(dest, b""), dest, "", "")
        except OSError as e:
            return _error(ret, f"Empty file {name} not created: {e}")
        changes["new"] = f"file {name} created"
        ret["comment"] = "Empty file"
    else:
        failed = _writeContents(ctx, ret, dest, wanted or b"", backupMode, cachedir, checkCmd)
        if failed:
            return failed
        if newFileDiff:
            changes["diff"] = fm._diffBytes(b"", wanted or b"") or "New file"
        else:
            changes["diff"] = "New file"
    ret, _ = fm._checkPerms(dest, ret, user, group, mode, False, False)
    ret["name"] = name
    if not ret["comment"]:
        ret["comment"] = f"File {name} updated"
    return ret


def _testResult(ret: dict[str, Any], name: str) -> dict[str, Any]:
    if ret["changes"]:
        ret["result"] = None
        ret["comment"] = f"The file {name} is set to be changed{_TEST_NOTE}"
    else:
        ret["result"] = True
        ret["comment"] = f"The file {name} is in the correct state"
    return ret


def _writeContents(
    ctx: StateContext,
    ret: dict[str, Any],
    dest: str,
    data: bytes,
    backupMode: str,
    cachedir: str,
    checkCmd: str | None,
) -> dict[str, Any] | None:
    """
    Write C{data} to C{dest} atomically (after C{checkCmd} accepts it).

    @return: L{None}, or the failed state return.
    """
    try:
        temp = fw.writeTemp(dest, data)
    except OSError as e:
        ret["changes"] = {}
        return _error(
            ret, f"Failed to commit change: cannot write in {os.path.dirname(dest)}: {e.strerror}"
        )
    if checkCmd:
        failure = mod_run_check_cmd(ctx, checkCmd, temp)
        if isinstance(failure, dict):
            fw.removeQuietly(temp)
            ret["changes"] = {}
            ret.update(failure)
            return ret
    try:
        fw.commit(temp, dest, backupMode, cachedir)
    except OSError as e:
        ret["changes"] = {}
        return _error(ret, f"Failed to commit change: {e}")
    return None


# Directories -----------------------------------------------------------------


_RECURSE_TYPES = ("user", "group", "mode", "ignore_files", "ignore_dirs", "silent")


def _recurseSet(recurse: Any) -> set[str]:
    if not recurse:
        return set()
    if not isinstance(recurse, list):
        raise TypeError('"recurse" must be formed as a list of strings')
    wanted = set(map(str, recurse))
    unknown = wanted - set(_RECURSE_TYPES)
    if unknown:
        raise ValueError(f'Types for "recurse" limited to {", ".join(map(repr, _RECURSE_TYPES))}.')
    if "ignore_files" in wanted and "ignore_dirs" in wanted:
        raise ValueError(
            'Must not specify "recurse" options "ignore_files" and "ignore_dirs" at the same time.'
        )
    return wanted


def _walk(top: str, maxDepth: Any = None) -> list[tuple[str, list[str], list[str]]]:
    out = []
    for root, dirs, files in os.walk(top):
        dirs.sort()
        depth = root[len(top) :].count(os.sep) if root != top else 0
        if maxDepth is not None and depth >= int(maxDepth):
            out.append((root, list(dirs), sorted(files)))
            dirs[:] = []
            continue
        out.append((root, list(dirs), sorted(files)))
    return out


def _dirMeta(path: str, user: Any, group: Any, mode: Any, follow: bool) -> dict[str, Any]:
    try:
        st = fm.stats(path, None, follow)
    except CommandExecutionError:
        return {"directory": "new"}
    changes: dict[str, Any] = {}
    if user is not None and str(user) not in (str(st["user"]), str(st["uid"])):
        changes["user"] = user
    if group is not None and str(group) not in (str(st["group"]), str(st["gid"])):
        changes["group"] = group
    mode = fm._normalizeMode(mode)
    if mode is not None and mode != fm._normalizeMode(st["mode"]) and st["type"] != "link":
        changes["mode"] = mode
    return changes


def directory(
    ctx: StateContext,
    name: str,
    user: Any = None,
    group: Any = None,
    recurse: Any = None,
    max_depth: Any = None,
    dir_mode: Any = None,
    file_mode: Any = None,
    makedirs: bool = False,
    clean: bool = False,
    require: Any = None,
    exclude_pat: Any = None,
    follow_symlinks: bool = False,
    force: bool = False,
    backupname: str | None = None,
    allow_symlink: bool = True,
    children_only: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure a directory exists with C{user}, C{group} and C{dir_mode}
    (C{mode} too); C{recurse: [user, group, mode]} applies them below it
    (C{file_mode} for files; C{ignore_files}, C{ignore_dirs}, C{silent});
    C{clean} removes what no required C{file} state names (except
    C{exclude_pat}); C{makedirs} creates missing parents; C{force} replaces
    a file or symlink in the way (kept as C{backupname} if given).
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.directory")
    if name != "/" and name.endswith("/"):
        name = name.rstrip("/") or "/"
        ret["name"] = name
    if max_depth is not None and clean:
        return _error(ret, "Cannot specify both max_depth and clean")
    user = _owner(user, kwargs)
    if "mode" in kwargs and not dir_mode:
        dir_mode = kwargs["mode"]
    if not file_mode:
        file_mode = dir_mode
    dir_mode = fm._normalizeMode(dir_mode)
    file_mode = fm._normalizeMode(file_mode)
    if require is None:
        require = ctx.low.get("require")
    problem = _checkUser(ctx, user, group)
    if problem:
        return _error(ret, problem)
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    changes = ret["changes"]
    if (
        os.path.isfile(name)
        or (not allow_symlink and os.path.islink(name))
        or (force and os.path.islink(name))
    ):
        if backupname is not None:
            if os.path.lexists(backupname):
                if not force:
                    return _error(
                        ret, f"File exists where the backup target {backupname} should go"
                    )
                if ctx.test:
                    changes["forced"] = (
                        f"Existing file at backup path {backupname} would be removed"
                    )
                else:
                    fm.remove(backupname)
            if ctx.test:
                changes["backup"] = f"{name} would be renamed to {backupname}"
                changes[name] = {"directory": "new"}
                ret["comment"] = f"{name} would be backed up and replaced with a new directory"
                ret["result"] = None
                return ret
            os.rename(name, backupname)
        elif force:
            kind = "File" if os.path.isfile(name) and not os.path.islink(name) else "Symlink"
            if ctx.test:
                changes["forced"] = f"{kind} would be forcibly replaced"
            else:
                os.remove(name)
                changes["forced"] = f"{kind} was forcibly replaced"
        elif os.path.islink(name):
            return _error(ret, f"Specified location {name} exists and is a symlink")
        else:
            return _error(ret, f"Specified location {name} exists and is a file")

    try:
        recurseSet = _recurseSet(recurse)
    except (TypeError, ValueError) as e:
        return _error(ret, str(e))

    predicted = _predictDirectory(
        name,
        user,
        group,
        recurseSet,
        dir_mode,
        file_mode,
        clean,
        fw.keepFiles(name, require, _lowstate(ctx)),
        exclude_pat,
        max_depth,
        follow_symlinks,
        children_only,
    )
    # As Salt, the predicted changes (by path) stay in the changes of a real run.
    changes.update(predicted)
    if ctx.test:
        if changes:
            lines = ["The following files will be changed:\n"]
            for path, change in predicted.items():
                for key, value in change.items():
                    lines.append(f"{path}: {key} - {value}\n")
            ret["comment"] = "".join(lines)
            ret["result"] = None
        else:
            ret["comment"] = f"The directory {name} is in the correct state"
        return ret

    if not os.path.isdir(name):
        if not os.path.isdir(os.path.dirname(name)):
            if not makedirs:
                return _error(ret, f"No directory to create {name} in")
            try:
                fw.makeParents(name, user, group, dir_mode)
            except CommandExecutionError as e:
                return _error(ret, str(e))
        try:
            fm.mkdir(name, user=user, group=group, mode=dir_mode)
        except (CommandExecutionError, SaltInvocationError) as e:
            ret["changes"] = {}
            return _error(ret, f"Failed to create directory {name}: {e}")
        if not os.path.isdir(name):
            return _error(ret, f"Failed to create directory {name}")
        changes[name] = {"directory": "new"}
        return ret

    if not children_only:
        ret, _ = fm._checkPerms(name, ret, user, group, dir_mode, follow_symlinks, False)
    errors: list[str] = []
    if recurseSet:
        rUser = user if "user" in recurseSet else None
        rGroup = group if "group" in recurseSet else None
        if "user" in recurseSet and not user and not isinstance(user, int):
            ret["result"] = False
            ret["comment"] = (
                "user not specified, but configured as a target for recursive ownership management"
            )
        if "group" in recurseSet and not group and not isinstance(group, int):
            ret["result"] = False
            ret["comment"] = (
                "group not specified, but configured as a target for recursive ownership management"
            )
        fMode = file_mode if "mode" in recurseSet else None
        dMode = dir_mode if "mode" in recurseSet else None
        if "silent" in recurseSet:
            ret["changes"] = changes = {"recursion": "Changes silenced"}
        for root, dirs, files in _walk(name, max_depth):
            entries = []
            if "ignore_files" not in recurseSet:
                entries += [(os.path.join(root, f), fMode) for f in files]
            if "ignore_dirs" not in recurseSet:
                entries += [(os.path.join(root, d), dMode) for d in dirs]
            for path, wantedMode in entries:
                try:
                    ret, _ = fm._checkPerms(
                        path, ret, rUser, rGroup, wantedMode, follow_symlinks, False
                    )
                except CommandExecutionError as e:
                    if not str(e).startswith("Path not found"):
                        errors.append(str(e))
    if clean:
        removed = fw.cleanDir(name, fw.keepFiles(name, require, _lowstate(ctx)), exclude_pat, False)
        if removed:
            ret["changes"]["removed"] = removed
            ret["comment"] = f"Files cleaned from directory {name}"
    if not ret["comment"]:
        if children_only:
            ret["comment"] = f"Directory {name}/* updated"
        elif ret["changes"]:
            ret["comment"] = f"Directory {name} updated"
    if not ret["changes"] and ret["result"]:
        previous = ret["comment"]
        ret["comment"] = f"Directory {name} is in the correct state"
        if previous:
            ret["comment"] += "\n" + previous
    if errors:
        ret["result"] = False
        ret["comment"] += "\n\nThe following errors were encountered:\n"
        ret["comment"] += "".join(f"\n- {e}" for e in errors)
    return ret


def _predictDirectory(
    name: str,
    user: Any,
    group: Any,
    recurseSet: set[str],
    dirMode: Any,
    fileMode: Any,
    clean: bool,
    keep: set[str],
    excludePat: Any,
    maxDepth: Any,
    follow: bool,
    childrenOnly: bool,
) -> dict[str, Any]:
    """
    Salt's C{_check_directory}: the changes C{file.directory} would make.
    """
    changes: dict[str, Any] = {}
    exists = os.path.isdir(name)
    if recurseSet and exists:
        rUser = user if "user" in recurseSet else None
        rGroup = group if "group" in recurseSet else None
        fMode = fileMode if "mode" in recurseSet else None
        dMode = dirMode if "mode" in recurseSet else None
        for root, dirs, files in _walk(name, maxDepth):
            if "ignore_files" not in recurseSet:
                for f in files:
                    path = os.path.join(root, f)
                    change = _dirMeta(path, rUser, rGroup, fMode, follow)
                    if change:
                        changes[path] = change
            if "ignore_dirs" not in recurseSet:
                for d in dirs:
                    path = os.path.join(root, d)
                    change = _dirMeta(path, rUser, rGroup, dMode, follow)
                    if change:
                        changes[path] = change
    if not childrenOnly:
        change = _dirMeta(name, user, group, dirMode, follow)
        if change:
            changes[name] = change
    if clean and exists:
        for path in fw.cleanDir(name, keep, excludePat, True):
            changes[path] = {"removed": "Removed due to clean"}
    if not exists:
        changes[name] = {"directory": "new"}
    return changes


# Removal, existence, touch ---------------------------------------------------


def absent(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Ensure a file, symlink or directory tree is absent.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.absent")
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    if name == "/":
        return _error(ret, 'Refusing to make "/" absent')
    if os.path.isfile(name) or os.path.islink(name):
        kind = "File"
    elif os.path.isdir(name):
        kind = "Directory"
    else:
        ret["comment"] = f"File {name} is not present"
        return ret
    if ctx.test:
        ret["result"] = None
        ret["changes"]["removed"] = name
        ret["comment"] = f"{kind} {name} is set for removal"
        return ret
    try:
        fm.remove(name)
    except CommandExecutionError as e:
        if kind == "Directory":
            return _error(ret, f"Failed to remove directory {name}")
        return _error(ret, str(e))
    ret["comment"] = f"Removed {kind.lower()} {name}"
    ret["changes"]["removed"] = name
    return ret


def exists(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Verify that a path exists (fail if not); changes nothing.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.exists")
    if not os.path.lexists(name):
        return _error(ret, f"Specified path {name} does not exist")
    ret["comment"] = f"Path {name} exists"
    return ret


def missing(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Verify that a path does not exist (fail if it does); changes nothing.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.missing")
    if os.path.lexists(name):
        return _error(ret, f"Specified path {name} exists")
    ret["comment"] = f"Path {name} is missing"
    return ret


def touch(
    ctx: StateContext,
    name: str,
    atime: Any = None,
    mtime: Any = None,
    makedirs: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Create an empty file or update its access and modification times (now,
    or C{atime}/C{mtime} in epoch seconds).
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.touch")
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    if ctx.test:
        ret["result"] = None
        ret["changes"] = {"new": name}
        if not os.path.exists(name):
            ret["comment"] = f"File {name} is set to be created"
        else:
            st = fm.stats(name, follow_symlinks=False)
            if (atime is not None and str(atime) != str(st["atime"])) or (
                mtime is not None and str(mtime) != str(st["mtime"])
            ):
                ret["comment"] = f"Times set to be updated on file {name}"
                ret["changes"] = {"touched": name}
            else:
                ret["result"] = True
                ret["changes"] = {"new": name}
                ret["comment"] = f"File {name} exists and has the correct times"
        return ret
    if makedirs:
        try:
            fw.makeParents(name, None, None, None)
        except CommandExecutionError as e:
            return _error(ret, str(e))
    if not os.path.isdir(os.path.dirname(name)):
        return _error(ret, f"Directory not present to touch file {name}")
    extant = os.path.exists(name)
    try:
        ret["result"] = fm.touch(name, atime, mtime)
    except (CommandExecutionError, SaltInvocationError) as e:
        return _error(ret, f"Unable to touch {name}: {e}")
    if not extant and ret["result"]:
        ret["comment"] = f"Created empty file {name}"
        ret["changes"]["new"] = name
    elif extant and ret["result"]:
        kind = "directory" if os.path.isdir(name) else "file"
        ret["comment"] = f"Updated times on {kind} {name}"
        ret["changes"]["touched"] = name
    return ret


# Symlinks and copies ---------------------------------------------------------


def _linkOwner(path: str) -> tuple[Any, Any]:
    st = os.lstat(path)
    return fm.uid_to_user(st.st_uid), fm.gid_to_group(st.st_gid)


def symlink(
    ctx: StateContext,
    name: str,
    target: str,
    force: bool = False,
    backupname: str | None = None,
    makedirs: bool = False,
    user: Any = None,
    group: Any = None,
    mode: Any = None,
    atomic: bool = False,
    disallow_copy_and_unlink: bool = False,
    inherit_user_and_group: bool = False,
    follow_symlinks: bool = True,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure C{name} is a symlink to C{target}, owned by C{user}/C{group}
    (the minion's user and its group by default). Something else in the
    way is replaced with C{force}, or moved to C{backupname}.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.symlink")
    target = str(target)
    user = _owner(user, kwargs)
    if inherit_user_and_group and (user is None or group is None) and os.path.islink(name):
        curUser, curGroup = _linkOwner(name)
        user = curUser if user is None else user
        group = curGroup if group is None else group
    user, group = _defaultOwner(ctx, user, group)
    errors = _ownerErrors(user, group)
    if not os.path.isabs(name):
        errors.append(f"Specified file {name} is not an absolute path")
    if errors:
        message = ". ".join(errors)
        return _error(ret, message + ("." if len(errors) > 1 else ""))
    present = os.path.exists if follow_symlinks else os.path.lexists
    parent = os.path.dirname(name)

    def owned() -> bool:
        curUser, curGroup = _linkOwner(name)
        return str(curUser) == str(user) and str(curGroup) == str(group)

    if ctx.test:
        changes: dict[str, Any] = {}
        if os.path.islink(name):
            if os.path.normpath(os.readlink(name)) != os.path.normpath(target):
                result, comment = None, f"Link {name} target is set to be changed to {target}"
                changes["change"] = name
            else:
                result, comment = True, f"The symlink {name} is present"
                if not owned():
                    result = None
                    curUser, curGroup = _linkOwner(name)
                    changes["ownership"] = f"{curUser}:{curGroup}"
                    comment += (
                        ", but the ownership of the symlink would be changed from "
                        f"{curUser}:{curGroup} to {user}:{group}"
                    )
        elif not present(name):
            result, comment = None, f"Symlink {name} to {target} is set for creation"
            changes["new"] = name
        elif force or backupname is not None:
            result = None
            comment = (
                f"The file or directory {name} is set for removal to make way for a new "
                f"symlink targeting {target}"
            )
        else:
            result = False
            comment = (
                f"File or directory exists where the symlink {name} should be. Did you mean "
                "to use force?"
            )
        if not os.path.isdir(parent):
            comment += (
                f"\n{parent} will be created"
                if makedirs
                else f"\nDirectory {parent} for symlink is not present"
            )
        ret.update(result=result, comment=comment, changes=changes)
        return ret

    if not os.path.isdir(parent):
        if not makedirs:
            return _error(ret, f"Directory {parent} for symlink is not present")
        try:
            fw.makeParents(name, user, group, fw.dirModeFor(mode) if mode else None)
        except CommandExecutionError as e:
            return _error(ret, str(e))
    if os.path.islink(name):
        if os.path.normpath(os.readlink(name)) != os.path.normpath(target):
            os.remove(name)
        else:
            if owned():
                ret["comment"] = f"Symlink {name} is present and owned by {user}:{group}"
                return ret
            error = fm.lchown(name, user, group)
            if error is None and owned():
                ret["comment"] = f"Set ownership of symlink {name} to {user}:{group}"
                ret["changes"]["ownership"] = f"{user}:{group}"
            else:
                ret["result"] = False
                ret["comment"] = f"Failed to set ownership of symlink {name} to {user}:{group}"
            return ret
    elif present(name) or os.path.lexists(name):
        if backupname is not None:
            if not os.path.isabs(backupname):
                if backupname == os.path.basename(backupname):
                    backupname = os.path.join(os.path.dirname(os.path.normpath(name)), backupname)
                else:
                    return _error(
                        ret, f"Backupname must be an absolute path or a file name: {backupname}"
                    )
            if os.path.lexists(backupname):
                if not force:
                    return _error(
                        ret,
                        "Symlink & backup dest exists and Force not set. "
                        f"{name} -> {target} - backup: {backupname}",
                    )
                fm.remove(backupname)
            try:
                fm.move(name, backupname, disallow_copy_and_unlink=disallow_copy_and_unlink)
            except CommandExecutionError as e:
                return _error(ret, f"Unable to rename {name} to backup {backupname} -> : {e}")
        elif not force and not atomic:
            kind = (
                "File"
                if os.path.isfile(name)
                else "Directory"
                if os.path.isdir(name)
                else "File system entry"
            )
            return _error(ret, f"{kind} exists where the symlink {name} should be")
        elif os.path.isdir(name) and not os.path.islink(name):
            shutil.rmtree(name)
        else:
            os.remove(name)
    try:
        fm.symlink(target, name, force=force, atomic=atomic, follow_symlinks=follow_symlinks)
    except (CommandExecutionError, SaltInvocationError, OSError) as e:
        return _error(ret, f"Unable to create new symlink {name} -> {target}: {e}")
    ret["comment"] = f"Created new symlink {name} -> {target}"
    ret["changes"]["new"] = name
    if not owned():
        fm.lchown(name, user, group)
        if not owned():
            ret["result"] = False
            ret["comment"] += f", but was unable to set ownership to {user}:{group}"
    return ret


def copy_(
    ctx: StateContext,
    name: str,
    source: str,
    force: bool = False,
    makedirs: bool = False,
    preserve: bool = False,
    user: Any = None,
    group: Any = None,
    mode: Any = None,
    dir_mode: Any = None,
    subdir: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Copy the local file (or directory tree) C{source} to C{name}, if
    C{name} is absent (or always, with C{force}); C{preserve} keeps the
    source's owner and mode, else C{user}, C{group} and C{mode} (the
    source's mode by default) are set.
    """
    name = _expand(name)
    source = _expand(source)
    ret = stateReturn(name, True, f'Copied "{source}" to "{name}"', {})
    if not name:
        return _error(ret, "Must provide name to file.copy")
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    if not os.path.exists(source):
        return _error(ret, f'Source file "{source}" is not present')
    if preserve:
        user, group, mode = fm.get_user(source), fm.get_group(source), fm.get_mode(source)
    else:
        user, group = _defaultOwner(ctx, _owner(user, kwargs), group)
        problem = _checkUser(ctx, user, group)
        if problem:
            return _error(ret, problem)
        if mode is None:
            mode = fm.get_mode(source)
    if os.path.isdir(name) and subdir:
        name = os.path.join(name, os.path.basename(source))
    changed = True
    if os.path.lexists(name):
        if force and os.path.isfile(name) and os.path.isfile(source):
            if fm.get_hash(name) == fm.get_hash(source):
                ret["comment"] += " - files are identical but force flag is set"
        if not force:
            changed = False
        elif not ctx.test:
            try:
                fm.remove(name)
            except CommandExecutionError:
                return _error(ret, f'Failed to delete "{name}" in preparation for forced move')
    if ctx.test:
        if changed:
            ret["comment"] = f'File "{source}" is set to be copied to "{name}"'
            ret["result"] = None
        else:
            ret["comment"] = f'The target file "{name}" exists and will not be overwritten'
        return ret
    if not changed:
        ret["comment"] = f'The target file "{name}" exists and will not be overwritten'
        return ret
    parent = os.path.dirname(name)
    if not os.path.isdir(parent):
        if not makedirs:
            return _error(ret, f"The target directory {parent} is not present")
        try:
            fw.makeParents(name, user, group, dir_mode or fw.dirModeFor(mode))
        except CommandExecutionError as e:
            return _error(ret, str(e))
    try:
        if os.path.isdir(source):
            shutil.copytree(source, name, symlinks=True)
            if not preserve:
                for root, dirs, files in os.walk(name):
                    for entry in dirs + files:
                        fm.lchown(os.path.join(root, entry), user, group)
        elif preserve:
            shutil.copy2(source, name)
            st = os.stat(source)
            os.chown(name, st.st_uid, st.st_gid)
        else:
            shutil.copy(source, name)
    except OSError:
        return _error(ret, f'Failed to copy "{source}" to "{name}"')
    ret["changes"] = {name: source}
    if not preserve:
        checked, _ = fm._checkPerms(
            name, {"name": name, "changes": {}, "comment": "", "result": True}, user, group, mode
        )
        if not checked["result"]:
            ret["result"] = False
            ret["comment"] = checked["comment"]
    return ret


# Editing in place ------------------------------------------------------------


def _diffLines(old: list[str], new: list[str], joiner: str = "") -> str:
    return joiner.join(difflib.unified_diff(old, new))


def _editOutcome(
    ctx: StateContext, ret: dict[str, Any], diff: Any, would: str = "Changes would be made"
) -> dict[str, Any]:
    """
    The end of an edit in place (C{file.line}, C{file.replace},
    C{file.blockreplace}): the edit's C{diff} as the change, and Salt's
    result and comment for a change made, one that would be made (test
    mode; C{would}, the words of that state) or none.
    """
    if not diff:
        ret["result"] = True
        ret["comment"] = "No changes needed to be made"
        return ret
    ret["changes"]["diff"] = diff
    if ctx.test:
        ret["result"] = None
        ret["comment"] = would
    else:
        ret["result"] = True
        ret["comment"] = "Changes were made"
    return ret


def line(
    ctx: StateContext,
    name: str,
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
    create: bool = False,
    user: Any = None,
    group: Any = None,
    file_mode: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Edit one line of a file (see C{file.line}): C{mode} C{ensure},
    C{replace}, C{delete} or C{insert}, placed by C{before}, C{after} or
    C{location}. C{create} makes the file first if it is missing.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.line")
    if create and not os.path.exists(name) and not ctx.test:
        made = managed(
            ctx, name, create=True, user=user, group=group, mode=file_mode, replace=False
        )
        if made["result"] is False:
            return _error(ret, made["comment"])
    ok, message = _checkFile(name)
    if not ok:
        if ctx.test and create and "file not found" in message:
            ret["result"] = None
            ret["comment"] = f"File {name} is set to be created"
            ret["changes"]["newfile"] = name
            return ret
        return _error(ret, message)
    mode = mode.lower() if mode else mode
    if mode is None:
        return _error(ret, "Mode was not defined. How to process the file?")
    if mode != "delete" and content is None:
        return _error(ret, "Content can only be empty if mode is ['delete']")
    try:
        changes = fm._lineEdit(
            name,
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
            ctx.test,
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        return _error(ret, str(e))
    return _editOutcome(ctx, ret, changes)


def replace(
    ctx: StateContext,
    name: str,
    pattern: str,
    repl: Any,
    count: int = 0,
    flags: Any = 8,
    bufsize: Any = 1,
    append_if_not_found: bool = False,
    prepend_if_not_found: bool = False,
    not_found_content: str | None = None,
    backup: str | bool = ".bak",
    show_changes: bool = True,
    ignore_if_missing: bool = False,
    backslash_literal: bool = False,
    encoding: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Replace the regular expression C{pattern} with C{repl} in a file (see
    C{file.replace}); C{append_if_not_found}/C{prepend_if_not_found} add
    C{not_found_content} (or C{repl}) when the pattern is absent.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.replace")
    ok, message = _checkFile(name)
    if not ok:
        if ignore_if_missing and "file not found" in message:
            ret["comment"] = "No changes needed to be made"
            return ret
        return _error(ret, message)
    if backslash_literal:
        repl = str(repl).replace("\\", "\\\\")
    try:
        changes = fm.replace(
            name,
            pattern,
            repl,
            count=count,
            flags=flags,
            append_if_not_found=append_if_not_found,
            prepend_if_not_found=prepend_if_not_found,
            not_found_content=not_found_content,
            backup=backup,
            dry_run=ctx.test,
            show_changes=show_changes,
            ignore_if_missing=ignore_if_missing,
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        return _error(ret, str(e))
    return _editOutcome(ctx, ret, changes, "Changes would have been made")


def _sourceTexts(
    ctx: StateContext,
    source: Any,
    sourceHash: Any,
    sources: Any,
    sourceHashes: Any,
    template: str | None,
    defaults: Any,
    context: Any,
) -> list[str]:
    """
    Salt's C{_unify_sources_and_hashes} and C{_get_template_texts}: the
    (rendered) texts of C{source} or C{sources}.

    @raise src.SourceError: naming the problem.
    """
    if source and sources:
        raise src.SourceError("source and sources are mutually exclusive")
    if sourceHash and sourceHashes:
        raise src.SourceError("source_hash and source_hashes are mutually exclusive")
    pairs: list[tuple[str, Any]] = []
    if source:
        pairs = [(str(source), sourceHash)]
    elif sources:
        hashes = list(sourceHashes or [])
        pairs = [(str(s), hashes[i] if i < len(hashes) else "") for i, s in enumerate(sources)]
    texts = []
    saltenv = ctx.saltenv
    for one, oneHash in pairs:
        path, _ = src.fetchSource(ctx, "", one, oneHash, None, saltenv, not oneHash)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if template:
            text = src.renderTemplate(
                ctx, text, template, _templateVars(context, defaults), saltenv, one
            )
        texts.append(text)
    return texts


def blockreplace(
    ctx: StateContext,
    name: str,
    marker_start: str = "#-- start managed zone --",
    marker_end: str = "#-- end managed zone --",
    source: Any = None,
    source_hash: Any = None,
    template: str = "jinja",
    sources: Any = None,
    source_hashes: Any = None,
    defaults: Any = None,
    context: Any = None,
    content: str = "",
    append_if_not_found: bool = False,
    prepend_if_not_found: bool = False,
    backup: str | bool = ".bak",
    show_changes: bool = True,
    append_newline: bool | None = None,
    insert_before_match: str | None = None,
    insert_after_match: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Manage a block of a file between two marker lines (see
    C{file.blockreplace}); its content from C{content} or rendered
    C{source}/C{sources}.
    """
    name = _expand(name)
    ret = stateReturn(name, False, "", {})
    if not name:
        return _error(ret, "Must provide name to file.blockreplace")
    ok, message = _checkFile(name)
    if not ok:
        return _error(ret, message)
    content = "" if content is None else str(content)
    data, deps = _accumulators(ctx)
    if name in data:
        byName = data[name]
        mine = [a for a in deps.get(name, {}) if ctx.low.get("__id__") in deps[name][a]]
        for accumulator in [a for a in mine if a in byName] or list(byName):
            for one in byName[accumulator]:
                content = str(one) if content == "" else content + "\n" + str(one)
    try:
        for text in _sourceTexts(
            ctx, source, source_hash, sources, source_hashes, template, defaults, context
        ):
            content += text
    except (src.SourceError, CommandExecutionError, OSError) as e:
        return _error(ret, str(e))
    try:
        changes = fm.blockreplace(
            name,
            marker_start,
            marker_end,
            content=content,
            append_if_not_found=append_if_not_found,
            prepend_if_not_found=prepend_if_not_found,
            insert_before_match=insert_before_match,
            insert_after_match=insert_after_match,
            backup=backup,
            dry_run=ctx.test,
            show_changes=show_changes,
            append_newline=append_newline,
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        ret["comment"] = f"Encountered error managing block: {e}. See the log for details."
        return ret
    return _editOutcome(ctx, ret, changes)


def _wsRegex(text: str) -> str:
    """
    Salt's C{build_whitespace_split_regex}: C{text} as a regular
    expression matching it with any whitespace between its words.
    """
    lines = []
    for one in text.splitlines():
        words = [re.escape(w) for w in one.split()]
        lines.append(r"[\s]+".join(words))
    return r"(?m)^\s*" + r"[\s]*\n[\s]*".join(lines) if lines else ""


def _textList(text: Any) -> list[str]:
    if text is None:
        return []
    if isinstance(text, list):
        return [str(t) for t in text]
    return [str(text)]


def _addLines(
    ctx: StateContext,
    how: str,
    name: str,
    text: Any,
    makedirs: bool,
    source: Any,
    source_hash: Any,
    template: str | None,
    sources: Any,
    source_hashes: Any,
    defaults: Any,
    context: Any,
    ignore_whitespace: bool,
    show_changes: bool,
    header: bool = False,
) -> dict[str, Any]:
    """
    C{file.append} and C{file.prepend}: add each text not already found in
    the file (for C{prepend} with C{header}, unless the file starts with
    all of them).
    """
    name = _expand(name)
    ret = stateReturn(name, False, "", {})
    if not name:
        return _error(ret, f"Must provide name to file.{how}")
    try:
        texts = _sourceTexts(
            ctx, source, source_hash, sources, source_hashes, template, defaults, context
        )
    except (src.SourceError, CommandExecutionError, OSError) as e:
        return _error(ret, str(e))
    chunks = texts if texts else _textList(text)
    if not chunks:
        return _error(ret, f"No text found to {how}. Nothing {how}ed")
    if not os.path.exists(name):
        if ctx.test:
            ret["result"] = None
            ret["comment"] = f"File {name} is set to be created"
            ret["changes"]["new"] = name
            return ret
        if not os.path.isdir(os.path.dirname(name)):
            if not makedirs:
                return _error(ret, f"Directory not present to touch file {name}")
            try:
                fw.makeParents(name, None, None, None)
            except CommandExecutionError as e:
                return _error(ret, str(e))
        fm.touch(name)
    ok, message = _checkFile(name)
    if not ok:
        return _error(ret, message)
    with open(name, "rb") as f:
        raw = f.read()
    original = raw.decode("utf-8", "surrogateescape")
    oldLines = original.splitlines()
    toAdd: list[str] = []
    for chunk in chunks:
        if header:
            found = False
        elif ignore_whitespace:
            pattern = _wsRegex(chunk)
            found = bool(pattern) and re.search(pattern, original) is not None
        else:
            found = re.search(chunk, original, re.MULTILINE | re.DOTALL) is not None
        if not found:
            toAdd.extend(chunk.splitlines())
    if header and oldLines[: len(toAdd)] == toAdd:
        toAdd = []
    if how == "append":
        # Salt diffs lines without their ends, joined by newlines.
        before, after, joiner = oldLines, oldLines + toAdd, "\n"
    else:
        before = original.splitlines(True)
        after, joiner = [f"{one}\n" for one in toAdd] + before, ""
    diff = ""
    if after != before:
        if fm._isBinaryData(raw[:2048]):
            diff = "Replace binary file"
        elif not show_changes:
            diff = "<show_changes=False>"
        else:
            diff = _diffLines(before, after, joiner)
    if ctx.test:
        if diff:
            ret["result"] = None
            ret["comment"] = f"File {name} is set to be updated"
            ret["changes"]["diff"] = diff
        else:
            ret["result"] = True
            ret["comment"] = f"File {name} is in correct state"
        return ret
    if toAdd:
        if how == "append":
            fm.append(name, args=toAdd)
            ret["comment"] = f"Appended {len(toAdd)} lines"
        else:
            fm.prepend(name, args=toAdd)
            ret["comment"] = f"Prepended {len(toAdd)} lines"
        ret["changes"]["diff"] = diff
    else:
        ret["comment"] = f"File {name} is in correct state"
    ret["result"] = True
    return ret


def append(
    ctx: StateContext,
    name: str,
    text: Any = None,
    makedirs: bool = False,
    source: Any = None,
    source_hash: Any = None,
    template: str = "jinja",
    sources: Any = None,
    source_hashes: Any = None,
    defaults: Any = None,
    context: Any = None,
    ignore_whitespace: bool = True,
    show_changes: bool = True,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure each text (a string or a list) is in the file, appending those
    that are not (whitespace-insensitively unless C{ignore_whitespace} is
    false); the file is created if missing.
    """
    return _addLines(
        ctx,
        "append",
        name,
        text,
        makedirs,
        source,
        source_hash,
        template,
        sources,
        source_hashes,
        defaults,
        context,
        ignore_whitespace,
        show_changes,
    )


def prepend(
    ctx: StateContext,
    name: str,
    text: Any = None,
    makedirs: bool = False,
    source: Any = None,
    source_hash: Any = None,
    template: str = "jinja",
    sources: Any = None,
    source_hashes: Any = None,
    defaults: Any = None,
    context: Any = None,
    header: Any = None,
    ignore_whitespace: bool = True,
    show_changes: bool = True,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure each text (a string or a list) is in the file, adding those that
    are not at its start; the file is created if missing. With C{header},
    the texts must be the file's first lines.
    """
    return _addLines(
        ctx,
        "prepend",
        name,
        text,
        makedirs,
        source,
        source_hash,
        template,
        sources,
        source_hashes,
        defaults,
        context,
        ignore_whitespace,
        show_changes,
        bool(header),
    )


def _commentEdit(
    ctx: StateContext,
    name: str,
    regex: str,
    char: str,
    backup: Any,
    cmnt: bool,
    ignoreMissing: bool = False,
) -> dict[str, Any]:
    name = _expand(name)
    ret = stateReturn(name, False, "", {})
    what = "comment" if cmnt else "uncomment"
    if not name:
        return _error(ret, f"Must provide name to file.{what}")
    ok, message = _checkFile(name)
    if not ok:
        return _error(ret, message)
    try:
        if cmnt:
            bare = re.sub(r"^(\(\?[iLmsux]\))?\^?(.*?)\$?$", r"\2", regex)
            todo = fm.search(name, rf"^(?!\s*{re.escape(char)})\s*" + bare, multiline=True)
            done = fm.search(name, re.escape(char) + bare, multiline=True)
            doneWords, missingWords = "Pattern already commented", f"{bare}: Pattern not found"
        else:
            todo = fm.search(name, f"{re.escape(char)}[ \t]*{regex.lstrip('^')}", multiline=True)
            done = fm.search(name, f"^[ \t]*{regex.lstrip('^')}", multiline=True)
            doneWords, missingWords = "Pattern already uncommented", f"{regex}: Pattern not found"
    except (CommandExecutionError, SaltInvocationError) as e:
        return _error(ret, str(e))
    if not todo:
        if done:
            ret["result"] = True
            ret["comment"] = doneWords
            return ret
        if ignoreMissing:
            ret["result"] = True
            ret["comment"] = "Pattern not found and ignore_missing set to True"
            return ret
        return _error(ret, missingWords)
    if ctx.test:
        ret["changes"][name] = "updated"
        ret["comment"] = f"File {name} is set to be updated"
        ret["result"] = None
        return ret
    with open(name, "rb") as f:
        before = f.read().decode("utf-8", "surrogateescape").splitlines(True)
    try:
        fm.comment_line(name, regex, char, cmnt, backup)
    except (CommandExecutionError, SaltInvocationError) as e:
        return _error(ret, str(e))
    with open(name, "rb") as f:
        after = f.read().decode("utf-8", "surrogateescape").splitlines(True)
    if cmnt:
        ret["result"] = fm.search(name, re.escape(char) + bare, multiline=True)
    else:
        ret["result"] = fm.search(name, f"^[ \t]*{regex.lstrip('^')}", multiline=True)
    if before != after:
        ret["changes"]["diff"] = _diffLines(before, after)
    word = "Commented" if cmnt else "Uncommented"
    if ret["result"]:
        ret["comment"] = f"{word} lines successfully"
    else:
        ret["comment"] = f"Expected {word.lower()} lines not found"
    return ret


def comment(
    ctx: StateContext,
    name: str,
    regex: str,
    char: str = "#",
    backup: Any = ".bak",
    ignore_missing: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Comment out the lines of a file matching C{regex} with C{char}.
    """
    return _commentEdit(ctx, name, regex, char, backup, True, bool(ignore_missing))


def uncomment(
    ctx: StateContext,
    name: str,
    regex: str,
    char: str = "#",
    backup: Any = ".bak",
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Uncomment the lines of a file matching C{regex} commented with C{char}.
    """
    return _commentEdit(ctx, name, regex, char, backup, False)


# Trees from the file server --------------------------------------------------


def recurse(
    ctx: StateContext,
    name: str,
    source: Any,
    keep_source: bool = True,
    clean: bool = False,
    require: Any = None,
    user: Any = None,
    group: Any = None,
    dir_mode: Any = None,
    file_mode: Any = None,
    sym_mode: Any = None,
    template: str | None = None,
    context: Any = None,
    replace: bool = True,
    defaults: Any = None,
    include_empty: bool = False,
    backup: str = "",
    include_pat: Any = None,
    exclude_pat: Any = None,
    maxdepth: Any = None,
    keep_symlinks: bool = False,
    force_symlinks: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Mirror a directory of the file server (C{salt://dir}; a list gives the
    first that exists) into C{name}: each file as C{file.managed} would
    (C{template}, C{file_mode}, C{user}, C{group}), each directory with
    C{dir_mode}; C{include_empty} makes empty directories too; C{clean}
    removes what the source does not have; C{include_pat}/C{exclude_pat}
    (globs or C{E@regex}) and C{maxdepth} narrow the files.
    """
    kwargs.pop("env", None)
    name = _expand(name)
    user = _owner(user, kwargs)
    ret: dict[str, Any] = {"name": name, "changes": {}, "result": True, "comment": {}}
    if "mode" in kwargs:
        ret["result"] = False
        ret["comment"] = (
            "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'."
        )
        return ret
    dir_mode = fm._normalizeMode(dir_mode)
    keepMode = isinstance(file_mode, str) and file_mode.lower() == "keep"
    file_mode = None if keepMode else fm._normalizeMode(file_mode)
    if require is None:
        require = ctx.low.get("require")
    problem = _checkUser(ctx, user, group)
    if problem:
        return _error(ret, problem)
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    saltenv = kwargs.get("saltenv") or ctx.saltenv
    candidates = source if isinstance(source, list) else [source]
    chosen: tuple[str, str, list[str], list[str]] | None = None
    for one in candidates:
        one = str(one)
        if src.scheme(one) != "salt":
            ret["result"] = False
            ret["comment"] = f"Recurse failed: Invalid source '{one}' (must be a salt:// URI)"
            return ret
        path, env = src.saltUrl(one, saltenv)
        prefix = path.strip("/")
        under = f"{prefix}/" if prefix else ""
        try:
            files = [f for f in ctx.salt["cp.list_master"](saltenv=env) if f.startswith(under)]
            dirs = [d for d in ctx.salt["cp.list_master_dirs"](saltenv=env) if d.startswith(under)]
        except CommandExecutionError as e:
            return _error(ret, f"Recurse failed: {e}")
        if files or dirs:
            chosen = (env, under, files, dirs)
            break
    if chosen is None:
        ret["result"] = False
        ret["comment"] = (
            f"Recurse failed: none of the specified sources were found: {candidates}"
            if len(candidates) > 1
            else f"The directory '{candidates[0]}' does not exist on the salt fileserver "
            f"in saltenv '{saltenv}'"
        )
        return ret
    env, under, files, dirs = chosen
    if not os.path.isdir(name):
        if os.path.exists(name):
            return _error(ret, f"The path {name} exists and is not a directory")
        if not ctx.test:
            try:
                fm.mkdir(name, user=user, group=group, mode=dir_mode)
            except (CommandExecutionError, SaltInvocationError) as e:
                return _error(ret, str(e))

    def addComment(path: str, text: Any) -> None:
        bucket = ret["comment"].setdefault(path, [])
        bucket.extend([text] if isinstance(text, str) else list(text))

    def merge(path: str, one: dict[str, Any]) -> None:
        if one["result"] is False or ret["result"] is True:
            ret["result"] = one["result"]
        if one["result"] is not True and one["comment"]:
            addComment(path, one["comment"])
        if one["changes"]:
            ret["changes"][path] = one["changes"]

    def wanted(relative: str) -> bool:
        if maxdepth is not None and relative.count("/") > int(maxdepth):
            return False
        return fw.includeExclude(relative, include_pat, exclude_pat)

    keep: set[str] = set()
    managedDirs: set[str] = {name}
    for f in sorted(files):
        relative = f[len(under) :]
        if not relative or not wanted(relative):
            continue
        dest = os.path.join(name, relative)
        keep.add(dest)
        managedDirs.update(_parentsBelow(name, dest))
    if include_empty:
        for d in sorted(dirs):
            relative = d[len(under) :].strip("/")
            if not relative or not wanted(relative):
                continue
            dest = os.path.join(name, relative)
            managedDirs.add(dest)
            managedDirs.update(_parentsBelow(name, dest))
    keep.update(managedDirs)
    for dest in sorted(managedDirs):
        if clean and os.path.lexists(dest) and not os.path.isdir(dest):
            if ctx.test:
                merge(dest, stateReturn(name, None, f"Replacing {dest} with a directory", {}))
                continue
            fm.remove(dest)
            merge(dest, stateReturn(name, True, "", {"diff": "Replaced file with a directory"}))
        merge(
            dest,
            directory(ctx, dest, user=user, group=group, dir_mode=dir_mode, makedirs=True),
        )
    for f in sorted(files):
        relative = f[len(under) :]
        if not relative or not wanted(relative):
            continue
        dest = os.path.join(name, relative)
        if clean and os.path.isdir(dest) and not os.path.islink(dest) and replace:
            if ctx.test:
                merge(dest, stateReturn(name, None, f"Replacing directory {dest} with a file", {}))
                continue
            shutil.rmtree(dest)
            merge(dest, stateReturn(name, True, "", {"diff": "Replaced directory with a new file"}))
        passed = {k: v for k, v in kwargs.items() if k not in ("mode", "makedirs", "saltenv")}
        one = managed(
            ctx,
            dest,
            source=f"salt://{f}?saltenv={env}",
            keep_source=keep_source,
            user=user,
            group=group,
            mode="keep" if keepMode else file_mode,
            template=template,
            makedirs=True,
            replace=replace,
            context=context,
            defaults=defaults,
            backup=backup,
            **passed,
        )
        merge(dest, one)
    if clean:
        keep.update(fw.keepFiles(name, require, _lowstate(ctx)))
        removed = fw.cleanDir(name, keep, exclude_pat, ctx.test) if os.path.isdir(name) else []
        if removed:
            if ctx.test:
                if ret["result"]:
                    ret["result"] = None
                addComment("removed", removed)
            else:
                ret["changes"]["removed"] = removed
    comments = ret["comment"]
    ret["comment"] = "\n".join(
        f"\n#### {path} ####\n" + "\n".join(map(str, texts)) for path, texts in comments.items()
    ).strip()
    if not ret["comment"]:
        ret["comment"] = f"Recursively updated {name}"
    if not ret["changes"] and ret["result"]:
        ret["comment"] = f"The directory {name} is in the correct state"
    return ret


def _parentsBelow(root: str, path: str) -> set[str]:
    parents = set()
    head = os.path.dirname(path)
    while head.startswith(root.rstrip("/") + "/"):
        parents.add(head)
        head = os.path.dirname(head)
    return parents


# Moving and serializing ------------------------------------------------------


def rename(
    ctx: StateContext,
    name: str,
    source: str,
    force: bool = False,
    makedirs: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Move C{source} to C{name} if C{source} is still there (C{force}
    replaces an existing C{name}).
    """
    name = os.path.expandvars(_expand(name))
    source = os.path.expandvars(_expand(source))
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.rename")
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    if not os.path.lexists(source):
        ret["comment"] = f'Source file "{source}" has already been moved out of place'
        return ret
    if os.path.lexists(name):
        if not force:
            ret["comment"] = f'The target file "{name}" exists and will not be overwritten'
            return ret
        if not ctx.test:
            try:
                fm.remove(name)
            except CommandExecutionError:
                return _error(ret, f'Failed to delete "{name}" in preparation for forced move')
    if ctx.test:
        ret["comment"] = f'File "{source}" is set to be moved to "{name}"'
        ret["result"] = None
        return ret
    parent = os.path.dirname(name)
    if not os.path.isdir(parent):
        if not makedirs:
            return _error(ret, f"The target directory {parent} is not present")
        try:
            fw.makeParents(name, None, None, None)
        except CommandExecutionError as e:
            return _error(ret, str(e))
    try:
        if os.path.islink(source):
            os.symlink(os.readlink(source), name)
            os.unlink(source)
        else:
            shutil.move(source, name)
    except OSError:
        return _error(ret, f'Failed to move "{source}" to "{name}"')
    ret["comment"] = f'Moved "{source}" to "{name}"'
    ret["changes"] = {name: source}
    return ret


def _serializeData(kind: str, data: Any, options: dict[str, Any]) -> str:
    if kind == "json":
        opts = {"indent": 2, "separators": (",", ": "), "sort_keys": True, **options}
        return json.dumps(data, **opts)
    opts = {"default_flow_style": False, **options}
    return yaml.safe_dump(data, **opts)


def _deserializeData(kind: str, text: str) -> Any:
    if kind == "json":
        return json.loads(text)
    return yaml.safe_load(text)


def _mergeRecurse(base: Any, update: Any) -> Any:
    if isinstance(base, dict) and isinstance(update, dict):
        merged = dict(base)
        for key, value in update.items():
            merged[key] = _mergeRecurse(base[key], value) if key in base else value
        return merged
    return update


def serialize(
    ctx: StateContext,
    name: str,
    dataset: Any = None,
    dataset_pillar: Any = None,
    user: Any = None,
    group: Any = None,
    mode: Any = None,
    backup: str = "",
    makedirs: bool = False,
    show_changes: bool = True,
    create: bool = True,
    merge_if_exists: bool = False,
    encoding: str | None = None,
    encoding_errors: str = "strict",
    serializer: str | None = None,
    serializer_opts: Any = None,
    deserializer_opts: Any = None,
    check_cmd: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Write C{dataset} (or the pillar value C{dataset_pillar}) to a file as
    C{json} or C{yaml} (C{serializer}, or C{formatter}), managed as
    C{file.managed} does; C{merge_if_exists} merges it into the data
    already in the file.
    """
    kwargs.pop("env", None)
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.serialize")
    if not create and not os.path.isfile(name):
        ret["comment"] = f"File {name} is not present and is not set for creation"
        return ret
    formatter = kwargs.pop("formatter", None)
    if serializer and formatter:
        return _error(ret, "Only one of serializer and formatter are allowed")
    kind = str(serializer or formatter or "yaml").lower()
    if dataset and dataset_pillar:
        return _error(ret, "Only one of 'dataset' and 'dataset_pillar' is permitted")
    if dataset_pillar:
        dataset = traverse(ctx.pillar, str(dataset_pillar), None, ":")
    if dataset is None:
        return _error(ret, "Neither 'dataset' nor 'dataset_pillar' was defined")
    if kind not in ("json", "yaml"):
        return _error(
            ret,
            f"The {kind} serializer could not be found. It either does not exist or its "
            "prerequisites are not installed.",
        )
    options: dict[str, Any] = {}
    for item in serializer_opts or []:
        if isinstance(item, dict):
            options.update(item)
    if merge_if_exists and os.path.isfile(name):
        try:
            with open(name, encoding=encoding or "utf-8") as f:
                existing = _deserializeData(kind, f.read())
        except (ValueError, OSError, yaml.YAMLError) as e:
            return _error(ret, f"Failed to deserialize existing data: {e}")
        if existing is not None:
            merged = _mergeRecurse(existing, dataset)
            if merged == existing:
                ret["comment"] = f"The file {name} is in the correct state"
                return ret
            dataset = merged
    try:
        text = _serializeData(kind, dataset, options)
    except (TypeError, ValueError) as e:
        return _error(ret, f"Unable to serialize the dataset as {kind}: {e}")
    if not text.endswith("\n"):
        text += "\n"
    ret = _manageFile(
        ctx,
        ret,
        name,
        None,
        text.encode(encoding or "utf-8", encoding_errors),
        user,
        group,
        fm._normalizeMode(mode),
        backup,
        bool(makedirs),
        None,
        bool(show_changes),
        True,
        check_cmd,
        False,
        hasSource=True,
    )
    if ctx.test:
        if ret["changes"]:
            ret["comment"] = f"Dataset will be serialized and stored into {name}"
        else:
            ret["comment"] = f"The file {name} is in the correct state"
    return ret


def _sameInode(a: str, b: str) -> bool:
    try:
        return os.lstat(a).st_ino == os.lstat(b).st_ino and os.lstat(a).st_dev == os.lstat(b).st_dev
    except OSError:
        return False


def hardlink(
    ctx: StateContext,
    name: str,
    target: str,
    force: bool = False,
    makedirs: bool = False,
    user: Any = None,
    group: Any = None,
    dir_mode: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure C{name} is a hard link to the file C{target} (a file in the way
    is replaced with C{force}).
    """
    name = _expand(name)
    target = _expand(target)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.hardlink")
    dir_mode = fm._normalizeMode(dir_mode)
    user = _owner(user, kwargs)
    user, group = _defaultOwner(ctx, user, group)
    errors = _ownerErrors(user, group)
    if not os.path.isabs(name):
        errors.append(f"Specified file {name} is not an absolute path")
    if not os.path.isabs(target):
        errors.append(f"Specified target {target} is not an absolute path")
    if errors:
        return _error(ret, ". ".join(errors) + ("." if len(errors) > 1 else ""))
    if ctx.test:
        changes: dict[str, Any] = {}
        if not os.path.exists(target):
            result, comment = False, f"Target {target} for hard link does not exist"
        elif os.path.isdir(target):
            result, comment = False, f"Unable to hard link from directory {target}"
        elif os.path.isdir(name):
            result, comment = False, f"Unable to hard link to directory {name}"
        elif not os.path.exists(name):
            result, comment = None, f"Hard link {name} to {target} is set for creation"
            changes["new"] = name
        elif fm.is_hardlink(name) and _sameInode(name, target):
            result, comment = True, f"The hard link {name} is presently targetting {target}"
        elif fm.is_hardlink(name):
            result, comment = None, f"Link {name} target is set to be changed to {target}"
            changes["change"] = name
        elif force:
            result = None
            comment = (
                f"The file or directory {name} is set for removal to make way for a new hard "
                f"link targeting {target}"
            )
        else:
            result = False
            comment = (
                f"File or directory exists where the hard link {name} should be. Did you mean "
                "to use force?"
            )
        ret.update(result=result, comment=comment, changes=changes)
        return ret
    for direction, item in (("to", name), ("from", target)):
        if os.path.isdir(item):
            return _error(ret, f"Unable to hard link {direction} directory {item}")
    if not os.path.exists(target):
        return _error(ret, f"Target {target} for hard link does not exist")
    if not os.path.isdir(os.path.dirname(name)):
        if not makedirs:
            return _error(ret, f"Directory {os.path.dirname(name)} for hard link is not present")
        try:
            fw.makeParents(name, user, group, dir_mode)
        except CommandExecutionError as e:
            return _error(ret, str(e))
    if os.path.exists(name) and _sameInode(name, target):
        ret["comment"] = f"Target of hard link {name} is already pointing to {target}"
        return ret
    if os.path.isfile(name) and not fm.is_hardlink(name):
        if not force:
            return _error(ret, f"File exists where the hard link {name} should be")
        os.remove(name)
        ret["changes"]["forced"] = "File for hard link was forcibly replaced"
    verb = "Created new"
    if os.path.exists(name):
        os.remove(name)
        verb = "Set target of"
    try:
        fm.link(target, name)
    except (CommandExecutionError, SaltInvocationError) as e:
        what = "create new" if verb == "Created new" else "set target of"
        return _error(ret, f"Unable to {what} hard link {name} -> {target}: {e}")
    ret["comment"] = f"{verb} hard link {name} -> {target}"
    ret["changes"]["new"] = name
    return ret


# Accumulators ----------------------------------------------------------------


def _accumulators(ctx: StateContext) -> tuple[dict[str, Any], dict[str, Any]]:
    """
    The run's accumulators (Salt keeps them in a file per run): text by
    file and accumulator name, and the states each accumulator is for.
    """
    data = ctx.context.setdefault("file.accumulators", {})
    deps = ctx.context.setdefault("file.accumulator_deps", {})
    return data, deps


def accumulated(
    ctx: StateContext, name: str, filename: str, text: Any, **kwargs: Any
) -> dict[str, Any]:
    """
    Collect C{text} for the file C{filename}: a C{file.managed} template
    of that file sees the texts as C{accumulator[name]}, a
    C{file.blockreplace} of it appends them to its content. The state must
    be C{require_in} or C{watch_in} the state using it.
    """
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.accumulated")
    if text is None:
        return _error(ret, "No text supplied for accumulator")
    deps: list[Any] = []
    for key in ("require_in", "watch_in"):
        value = ctx.low.get(key) or kwargs.get(key) or []
        deps.extend(value if isinstance(value, list) else [value])
    if not any(isinstance(d, dict) and "file" in d for d in deps):
        return _error(
            ret,
            f"Orphaned accumulator {name} in {ctx.low.get('__sls__')}:{ctx.low.get('__id__')}",
        )
    texts = list(text) if isinstance(text, list) else [text]
    data, depsByFile = _accumulators(ctx)
    fileDeps = depsByFile.setdefault(filename, {}).setdefault(name, [])
    for dep in deps:
        fileDeps.extend(dep.values() if isinstance(dep, dict) else [dep])
    bucket = data.setdefault(filename, {}).setdefault(name, [])
    for chunk in texts:
        if chunk not in bucket:
            bucket.append(chunk)
            ret["comment"] = f"Accumulator {name} for file {filename} was charged by text"
    return ret


# Key/value files ---------------------------------------------------------------


def keyvalue(
    ctx: StateContext,
    name: str,
    key: Any = None,
    value: Any = None,
    key_values: Any = None,
    separator: str = "=",
    append_if_not_found: bool = False,
    prepend_if_not_found: bool = False,
    search_only: bool = False,
    show_changes: bool = True,
    ignore_if_missing: bool = False,
    count: int = 1,
    uncomment: str | None = None,
    key_ignore_case: bool = False,
    value_ignore_case: bool = False,
    create_if_missing: bool = False,
    prune: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Set C{key} to C{value} (or each of C{key_values}) in a file of
    C{key<separator>value} lines, as Salt's C{file.keyvalue}: the first
    C{count} occurrences are set (C{count: -1} for all; others removed),
    C{uncomment} characters in front of a matching key are dropped,
    missing keys are appended or prepended when asked, C{prune} removes
    lines of other keys. Salt's own diff format (C{- old}, C{+ new} lines).
    """
    name = _expand(name)
    ret = stateReturn(name, None, "", {})
    if not name:
        return _error(ret, "Must provide name to file.keyvalue")
    if key is not None and value is not None:
        if isinstance(key_values, dict):
            return _error(ret, "file.keyvalue can not combine key_values with key and value")
        key_values = {str(key): value}
    elif not isinstance(key_values, dict) or not key_values:
        why = "is empty" if not key_values else "is not a dictionary"
        return _error(ret, f"file.keyvalue key and value not supplied and key_values {why}")
    try:
        with open(name, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        if not create_if_missing:
            ret["comment"] = f"unable to open {name}"
            ret["result"] = bool(ignore_if_missing)
            return ret
        append_if_not_found = True
        lines = []
    except OSError:
        ret["comment"] = f"unable to open {name}"
        ret["result"] = bool(ignore_if_missing)
        return ret
    diff: list[str] = []
    content: list[str] = []
    pruned: list[str] = []
    changed = 0
    left = {k: int(count) for k in key_values}
    keys = [k.lower() if key_ignore_case else k for k in key_values]

    def render(k: str, sep: str, v: Any) -> str:
        return f"{k}{sep}{v}\n"

    for text in lines:
        test = text.lstrip(uncomment)
        uncommented = len(text) > len(test)
        if key_ignore_case:
            test = test.lower()
        working = text.lstrip(uncomment) if uncommented else text
        lineKey, lineSep, lineValue = working.partition(separator)
        if prune and not test.startswith(tuple(keys)):
            pruned.append(text)
            continue
        for wanted, wantedValue in key_values.items():
            testKey = wanted.lower() if key_ignore_case else wanted
            if not (test.startswith(testKey) and lineSep == separator):
                continue
            if (lineKey.lower() if key_ignore_case else lineKey) != testKey:
                continue
            have, want = lineValue.strip(), str(wantedValue).strip()
            if value_ignore_case:
                have, want = have.lower(), want.lower()
            same = have == want
            change = False
            if uncommented:
                if left[wanted] > 0:
                    change = True
                elif not same:
                    same = True
            elif left[wanted] == 0:
                change = True
            if not same or change:
                diff.append(f"- {text}")
                text = ""
                if left[wanted] != 0:
                    text = render(lineKey, lineSep, wantedValue)
                    if isinstance(wantedValue, str):
                        diff.append(f"+ {text}")
                    else:
                        diff.append(f"+ {text.rstrip()} (from {type(wantedValue).__name__} type)\n")
                changed += 1
            if left[wanted] > 0:
                left[wanted] -= 1
        content.append(text)
    if append_if_not_found:
        added = []
        for wanted, wantedValue in key_values.items():
            if left[wanted] > 0:
                text = render(wanted, separator, wantedValue)
                added.append(f"+ {text}")
                content.append(text)
                changed += 1
        if added:
            diff.extend(["- <EOF>\n", *added, "+ <EOF>\n"])
    elif prepend_if_not_found:
        started = False
        for wanted, wantedValue in key_values.items():
            if left[wanted] > 0:
                text = render(wanted, separator, wantedValue)
                if not started:
                    diff.insert(0, "  <SOF>\n")
                    started = True
                diff.insert(1, f"+ {text}")
                content.insert(0, text)
                changed += 1
    for text in pruned:
        diff.insert(1, f"- {text}")
    if not changed and not pruned:
        ret["result"] = True
        return ret
    if ctx.test:
        ret["comment"] = (
            f"File {name} is set to be changed ({changed} lines modified, {len(pruned)} deleted)"
        )
        if show_changes:
            ret["changes"]["diff"] = "".join(diff)
            ret["comment"] += "\nPredicted diff:\n\r\t\t" + "\r\t\t".join(diff)
        return ret
    ret["comment"] = f"Changed {changed}, deleted {len(pruned)} lines"
    if show_changes:
        ret["changes"]["diff"] = "".join(diff)
    existed = os.path.exists(name)
    try:
        fw.commit(fw.writeTemp(name, "".join(content).encode("utf-8")), name, "", "")
        if not existed:
            os.chmod(name, int(fw.defaultFileMode(), 8))
    except OSError:
        ret["comment"] = f"{name} not writable"
        ret["result"] = False
        return ret
    ret["result"] = True
    return ret


# Tidying and retention ---------------------------------------------------------


def tidied(
    ctx: StateContext,
    name: str,
    age: Any = 0,
    matches: Any = None,
    rmdirs: bool = False,
    size: Any = 0,
    exclude: Any = None,
    full_path_match: bool = False,
    followlinks: bool = False,
    time_comparison: str = "atime",
    age_size_logical_operator: str = "OR",
    age_size_only: str | None = None,
    rmlinks: bool = True,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Remove what is old or big under the directory C{name}: entries at
    least C{age} days old (by C{time_comparison}: C{atime}, C{mtime} or
    C{ctime}) or at least C{size} big (C{"10M"}, C{"1GB"}), combined by
    C{age_size_logical_operator} (C{OR}, C{AND}) or C{age_size_only}
    (C{age}, C{size}); only names (full paths with C{full_path_match})
    matching one of C{matches} and none of C{exclude} (regular expressions
    matched from the start); directories only with C{rmdirs}, symlinks
    unless C{rmlinks} is false. With neither C{age} nor C{size}, every
    matching file goes.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not os.path.isabs(name):
        return _error(ret, f"Specified file {name} is not an absolute path")
    if not os.path.isdir(name):
        return _error(ret, f"{name} does not exist or is not a directory.")
    try:
        rules = tidy.TidyRules.fromArguments(
            age,
            matches,
            rmdirs,
            size,
            exclude,
            full_path_match,
            time_comparison,
            age_size_logical_operator,
            age_size_only,
            rmlinks,
        )
    except tidy.TidyError as e:
        return _error(ret, str(e))
    doomed = tidy.toTidy(name, rules, bool(followlinks))
    if not doomed:
        ret["comment"] = f"Nothing to remove from directory {name}"
        return ret
    if ctx.test:
        ret["result"] = None
        ret["comment"] = f"{name} is set for tidy"
        ret["changes"] = {"removed": doomed}
        return ret
    removed: list[str] = []
    ret["changes"]["removed"] = removed
    for path in doomed:
        try:
            fm.remove(path)
        except (CommandExecutionError, SaltInvocationError) as e:
            return _error(ret, str(e))
        removed.append(path)
    ret["comment"] = f"Removed {len(doomed)} files or directories from directory {name}"
    return ret


def retention_schedule(
    ctx: StateContext,
    name: str,
    retain: Any,
    strptime_format: str | None = None,
    timezone: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Delete the backups in the directory C{name} that no C{retain} rule
    keeps: C{most_recent: N} the latest N, C{first_of_hour},
    C{first_of_day}, C{first_of_week}, C{first_of_month} and
    C{first_of_year} the earliest backup of each of the latest N such
    periods (C{all}: every period). A backup's time is parsed from its name
    with C{strptime_format} (names that do not parse are ignored), else its
    modification time, in C{timezone} (an IANA name; local time by
    default). Changes list the C{retained}, C{deleted} and C{ignored}
    names.
    """
    name = _expand(name)
    ret = stateReturn(name, True, "", {})
    if not name:
        return _error(ret, "Must provide name to file.retention_schedule")
    if not os.path.isdir(name):
        return _error(ret, "Name provided to file.retention must be a directory")
    try:
        counts = retention.checkRetain(retain)
        tz = retention.timezoneNamed(timezone)
    except retention.RetentionError as e:
        return _error(ret, str(e))
    names = fm.readdir(name)
    times = retention.fileTimes(name, names, strptime_format, tz)
    kept = retention.retained(times, counts)
    doomed = sorted(set(times) - kept, reverse=True)
    if doomed:
        ret["changes"] = {
            "retained": sorted(kept, reverse=True),
            "deleted": doomed,
            "ignored": sorted(set(names) - set(times), reverse=True),
        }
    if ctx.test:
        ret["comment"] = f"{len(doomed)} backups would have been removed from {name}.\n"
        if doomed:
            ret["result"] = None
        return ret
    for one in doomed:
        try:
            fm.remove(os.path.join(name, one))
        except (CommandExecutionError, SaltInvocationError) as e:
            return _error(ret, str(e))
    ret["comment"] = f"{len(doomed)} backups were removed from {name}.\n"
    return ret


# The minion's cache --------------------------------------------------------------


#: URL schemes of files on the minion itself (Salt's C{LOCAL_PROTOS}).
_LOCAL_SCHEMES = ("", "file")


def cached(
    ctx: StateContext,
    name: str,
    source_hash: Any = "",
    source_hash_name: str | None = None,
    skip_verify: bool = False,
    saltenv: str | None = None,
    use_etag: bool = False,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure the file at the URL C{name} (C{salt://}, C{http(s)://}) is in
    the minion's cache (C{cp.cache_file}), with C{source_hash} if given
    (required for web sources unless C{skip_verify}). A local path or
    C{file://} URL is only checked: present, with the hash. Changes: the
    cached copy's C{hash}, C{old} and C{new}, when it changed.

    Not supported: C{use_etag} (the file is fetched as with
    C{skip_verify}, with a warning) and the signature options.
    """
    ret = stateReturn(name, False, "", {})
    saltenv = saltenv or ctx.saltenv
    if not isinstance(name, str) or not name:
        ret["comment"] = "Only URLs or local file paths are valid input"
        return ret
    parsed = urlparse(name)
    kind = parsed.scheme.lower()
    if kind not in (*_LOCAL_SCHEMES, "salt", *src.REMOTE):
        ret["comment"] = (
            f"Unsupported URL scheme '{kind}' in {src.redact(name)}: salt, http, https, file "
            "or a local path"
        )
        return ret
    if use_etag:
        ret.setdefault("warnings", []).append(
            "use_etag is not supported: the file is fetched as with skip_verify"
        )
    if kind in src.REMOTE and not skip_verify and not source_hash and not use_etag:
        ret["comment"] = (
            f"Unable to verify upstream hash of source file {src.redact(name)}, please set "
            "source_hash or set skip_verify or use_etag to True"
        )
        return ret
    expected: dict[str, str] = {}
    if source_hash:
        try:
            expected = src.sourceSum(ctx, "", name, source_hash, source_hash_name, saltenv)
        except CommandExecutionError as e:
            ret["comment"] = str(e)
            return ret
    hashType = expected.get("hash_type") or str(ctx.opts.get("hash_type") or "sha256")

    if kind in _LOCAL_SCHEMES:
        path = os.path.realpath(os.path.expanduser(parsed.path))
        if ctx.test:
            ret["result"] = None
            ret["comment"] = f"File will be cached: {name}"
            return ret
        if not os.path.exists(path):
            ret["comment"] = f"File {path} is not present on the minion"
            return ret
        if skip_verify or not expected:
            ret["result"] = True
            ret["comment"] = f"File {path} is present on the minion"
            return ret
        have = fm.get_hash(path, hashType)
        if have == expected["hsum"]:
            ret["result"] = True
            ret["comment"] = f"File {path} is present on the minion and has hash {have}"
        else:
            ret["comment"] = (
                f"File {path} is present on the minion, but the hash ({have}) does not match "
                f"the specified hash ({expected['hsum']})"
            )
        return ret

    try:
        copy = ctx.salt["cp.is_cached"](name, saltenv=saltenv)
    except (CommandExecutionError, SaltInvocationError) as e:
        ret["comment"] = src.redact(str(e))
        return ret
    if ctx.test:
        ret["result"] = None
        if not copy:
            ret["comment"] = f"File will be cached: {name}"
        elif not expected:
            ret["comment"] = f"No hash found. File will be cached: {name}"
        elif fm.get_hash(copy, hashType) == expected["hsum"]:
            ret["comment"] = f"File already cached: {name}"
        else:
            ret["comment"] = f"Hashes don't match.\nFile will be cached: {name}"
        return ret
    before = fm.get_hash(copy, hashType) if copy else None
    wanted = f"{expected['hash_type']}={expected['hsum']}" if expected else None
    try:
        copy = ctx.salt["cp.cache_file"](name, saltenv, source_hash=wanted)
    except (CommandExecutionError, SaltInvocationError) as e:
        ret["comment"] = src.redact(str(e))
        return ret
    if not copy:
        ret["comment"] = (
            f"Failed to cache {src.redact(name)}, check minion log for more information"
        )
        return ret
    after = fm.get_hash(copy, hashType)
    if before != after:
        ret["changes"]["hash"] = {"old": before, "new": after}
    if skip_verify or not expected:
        ret["result"] = True
        ret["comment"] = f"File is cached to {copy}"
    elif after == expected["hsum"]:
        ret["result"] = True
        ret["comment"] = f"File is already cached to {copy} with hash {after}"
    else:
        ret["comment"] = (
            f"File is cached to {copy}, but the hash ({after}) does not match the specified "
            f"hash ({expected['hsum']})"
        )
    return ret


def not_cached(
    ctx: StateContext, name: str, saltenv: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Ensure the file at the URL C{name} (C{salt://}, C{http(s)://}) is not
    in the minion's cache, deleting the cached copy; a local path is left
    alone. In test mode nothing is deleted (Salt's deletes even then).
    """
    ret = stateReturn(name, False, "", {})
    saltenv = saltenv or ctx.saltenv
    if not isinstance(name, str) or not name:
        ret["comment"] = "Only URLs or local file paths are valid input"
        return ret
    parsed = urlparse(name)
    if parsed.scheme.lower() in _LOCAL_SCHEMES:
        path = os.path.realpath(os.path.expanduser(parsed.path))
        ret["result"] = True
        ret["comment"] = f"File {path} is a local path, no action taken"
        return ret
    try:
        copy = ctx.salt["cp.is_cached"](name, saltenv=saltenv)
    except (CommandExecutionError, SaltInvocationError) as e:
        ret["comment"] = src.redact(str(e))
        return ret
    if not copy:
        ret["result"] = True
        ret["comment"] = f"{src.redact(name)} is not cached"
        return ret
    if ctx.test:
        ret["result"] = None
        ret["comment"] = f"{copy} would be deleted"
        ret["changes"]["deleted"] = True
        return ret
    try:
        os.remove(copy)
    except OSError as e:
        ret["comment"] = f"Failed to delete {copy}: {e}"
        return ret
    ret["result"] = True
    ret["changes"]["deleted"] = True
    ret["comment"] = f"{copy} was deleted"
    return ret


# Patches -----------------------------------------------------------------------


def _tempPath(suffix: str) -> str:
    """
    @return: a new empty file for C{file.patch}'s work, private to the
        minion's user (in the system's temporary directory, as Salt's).
    """
    fd, path = tempfile.mkstemp(prefix="__salttwist.tmp.", suffix=suffix)
    os.close(fd)
    return path


def _fetchPatch(
    ctx: StateContext,
    source: Any,
    sourceHash: Any,
    sourceHashName: str | None,
    skipVerify: bool,
    template: str | None,
    context: Any,
    defaults: Any,
    saltenv: str,
    dest: str,
) -> None:
    """
    Put the patch file C{source} (any source C{file.managed} takes,
    rendered with C{template}) in C{dest}.

    @raise src.SourceError: naming the problem, after C{Unable to manage
        file: }.
    """
    try:
        chosen, chosenHash = src.sourceList(ctx, source, sourceHash, saltenv)
        path, _ = src.fetchSource(
            ctx, dest, chosen, chosenHash, sourceHashName, saltenv, bool(skipVerify)
        )
        with open(path, "rb") as f:
            data = f.read()
        if template:
            variables = _templateVars(context, defaults)
            text = src.renderTemplate(
                ctx, data.decode("utf-8"), template, variables, saltenv, chosen
            )
            data = text.encode("utf-8")
    except src.HashMismatch:
        raise
    except (CommandExecutionError, OSError, UnicodeDecodeError) as e:
        raise src.SourceError(str(e)) from e
    with open(dest, "wb") as f:
        f.write(data)


def patch(
    ctx: StateContext,
    name: str,
    source: Any = None,
    source_hash: Any = None,
    source_hash_name: str | None = None,
    skip_verify: bool = False,
    template: str | None = None,
    context: Any = None,
    defaults: Any = None,
    options: Any = "",
    reject_file: str | None = None,
    strip: Any = None,
    saltenv: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Ensure the patch C{source} (C{salt://}, C{http(s)://} with
    C{source_hash}, a local path; optionally a C{template}) is applied to
    the file or directory C{name}, with the C{patch} program: a patch
    already applied is recognised (its reverse applies), one that would not
    apply cleanly fails with the dry run's output (rejected hunks in
    C{reject_file} if given). C{strip} is C{patch}'s C{-p} for a directory;
    C{options} are passed on (not C{-N}, C{-r}, C{-o}). In test mode the
    changes are the dry run's result.
    """
    ret = stateReturn(name, False, "", {})
    if not shutil.which("patch"):
        ret["comment"] = "patch executable not found on minion"
        return ret
    if not name:
        ret["comment"] = "A file/directory to be patched is required"
        return ret
    name = _expand(name)
    ret["name"] = name
    if not os.path.isabs(name):
        ret["comment"] = f"{name} is not an absolute path"
        return ret
    if not os.path.exists(name):
        ret["comment"] = f"{name} does not exist"
        return ret
    isDir = os.path.isdir(name)
    for ignored in ("hash", "dry_run_first"):
        if ignored in kwargs:
            ret.setdefault("warnings", []).append(
                f"The '{ignored}' argument is no longer used and has been ignored."
            )
    if reject_file is not None:
        parent = os.path.dirname(str(reject_file))
        if not os.path.isabs(parent):
            ret["comment"] = f"'{reject_file}' is not an absolute path"
            return ret
        if not os.path.isdir(parent):
            ret["comment"] = (
                f"Parent directory for reject_file '{reject_file}' either does not exist, or "
                "is not a directory"
            )
            return ret
    try:
        passed, strip = patching.splitOptions(options, strip)
    except patching.PatchOptionsError as e:
        ret["comment"] = str(e)
        return ret
    if not source:
        ret["comment"] = "A patch source is required"
        return ret
    env = ctx.saltenv
    if saltenv is not None:
        if isinstance(source, str) and src.scheme(source) == "salt" and "saltenv=" in source:
            ret.setdefault("warnings", []).append(
                "Ignoring 'saltenv' option in favor of saltenv included in the source URL."
            )
        else:
            env = str(saltenv)
    stripOption = [f"-p{strip}"] if isDir and strip is not None else []
    cleanup: list[str] = []
    try:
        patchFile = _tempPath(".patch")
        cleanup.append(patchFile)
        try:
            _fetchPatch(
                ctx,
                source,
                source_hash,
                source_hash_name,
                bool(skip_verify),
                template,
                context,
                defaults,
                env,
                patchFile,
            )
        except src.HashMismatch as e:
            ret["comment"] = str(e)
            return ret
        except src.SourceError as e:
            ret["comment"] = f"Unable to manage file: {e}"
            return ret
        if reject_file is not None:
            rejects = str(reject_file)
        else:
            rejects = _tempPath(".rej")
            cleanup.append(rejects)
        output = _tempPath(".out")
        cleanup.append(output)

        def run(patchPath: str, extra: list[str], dryRun: bool = False) -> dict[str, Any]:
            return ctx.salt["file.patch"](
                name, patchPath, options=[*passed, *extra], dry_run=dryRun
            )

        try:
            # Applied to a copy (-o): whether it applies, changing nothing.
            check = run(patchFile, ["-N", "-r", rejects, "-o", output, *stripOption])
            if check["retcode"] != 0:
                if not os.path.exists(rejects) or os.path.getsize(rejects) == 0:
                    ret["comment"] = check["stderr"]
                    return ret
                # The rejected hunks name files from the patched directory's
                # top, so no strip here.
                reverse = run(rejects, ["-R", "-f"], dryRun=True)
                if check["retcode"] == 2 and check["stderr"]:
                    ret["comment"] = check["stderr"]
                    return ret
                if reverse["retcode"] == 0:
                    ret["result"] = True
                    ret["comment"] = "Patch was already applied"
                    return ret
                ret["comment"] = (
                    "Patch would not apply cleanly, no changes made. Results of dry-run are below."
                )
                if reject_file is None:
                    ret["comment"] += (
                        " Run state again using the reject_file option to save rejects to a "
                        "persistent file."
                    )
                ret["comment"] += "\n\n" + patching.nestedResult(check)
                return ret
            if ctx.test:
                ret["result"] = None
                ret["comment"] = "The patch would be applied"
                ret["changes"] = check
                return ret
            applied = run(patchFile, stripOption)
        except (CommandExecutionError, SaltInvocationError) as e:
            ret["comment"] = str(e)
            return ret
        ret["changes"] = applied
        if applied["retcode"] == 0:
            ret["result"] = True
            ret["comment"] = "Patch successfully applied"
        else:
            ret["comment"] = "Failed to apply patch"
        return ret
    finally:
        for path in cleanup:
            fw.removeQuietly(path)
