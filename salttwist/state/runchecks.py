# -*- test-case-name: tests.test_state_runner_checks -*-
"""
The conditions a chunk may put on its own run (Salt's C{State._run_check}
and friends): C{onlyif}, C{unless}, C{creates}, C{check_cmd}, and the
C{retry} settings.

A command condition is a shell string run through C{cmd.retcode}
(C{python_shell=True}, exit code 0 meaning "true"), or Salt's dict form
C{{"fun": "file.file_exists", "args": [...], "get_return": "a:b", **kwargs}}
calling an execution function (a true return meaning "true"). A list
holds several.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

#: The chunk keys passed on to C{cmd.retcode} for C{onlyif}/C{unless}
#: commands (Salt's C{POSSIBLE_CMD_ARGS} that our C{cmd} functions take).
CMD_OPTIONS = ("cwd", "runas", "env", "prepend_path", "timeout", "success_retcodes", "shell")

#: Salt's retry defaults.
RETRY_DEFAULTS = {"until": True, "attempts": 2, "splay": 0, "interval": 30}


def _cmdOptions(low: Mapping[str, Any]) -> dict[str, Any]:
    exclude = low.get("cmd_opts_exclude") or []
    if not isinstance(exclude, list):
        exclude = [exclude]
    return {k: low[k] for k in CMD_OPTIONS if k in low and k not in exclude and low[k] is not None}


def _retcode(salt: Mapping[str, Callable[..., Any]], cmd: str, options: dict[str, Any]) -> Any:
    return salt["cmd.retcode"](cmd, ignore_retcode=True, python_shell=True, **options)


def traverse(data: Any, path: str, delimiter: str = ":") -> Any:
    """
    @return: the value at C{"a:b:0"} in nested dicts and lists, or
        L{None} (Salt's C{traverse_dict_and_list}).
    """
    for part in str(path).split(delimiter):
        if isinstance(data, Mapping):
            if part not in data:
                return None
            data = data[part]
        elif isinstance(data, list):
            try:
                data = data[int(part)]
            except (ValueError, IndexError):
                return None
        else:
            return None
    return data


def _callFunction(salt: Mapping[str, Callable[..., Any]], entry: Mapping[str, Any]) -> Any:
    entry = dict(entry)
    fun = entry.pop("fun")
    getReturn = entry.pop("get_return", None)
    args = entry.pop("args", [])
    if not isinstance(args, list):
        args = [args]
    result = salt[fun](*args, **entry)
    if getReturn:
        result = traverse(result, getReturn)
    return result


def checkOnlyif(salt: Mapping[str, Callable[..., Any]], low: Mapping[str, Any]) -> dict[str, Any]:
    """
    Salt's C{onlyif}: every condition must be true for the state to run.

    @return: C{{"result": True, "comment": "onlyif condition is false",
        "skip_watch": True}} when the state is skipped, else
        C{{"result": False, "comment": ...}}.
    """
    entries = low["onlyif"] if isinstance(low["onlyif"], list) else [low["onlyif"]]
    options = _cmdOptions(low)
    ret: dict[str, Any] = {"result": False, "comment": "onlyif condition is true"}
    skipped = {"comment": "onlyif condition is false", "skip_watch": True, "result": True}
    for entry in entries:
        if isinstance(entry, str):
            try:
                code = _retcode(salt, entry, options)
            except Exception as e:
                log.debug("onlyif command %r could not run: %s", entry, e)
                code = 100
            if code != 0:
                return skipped
        elif isinstance(entry, Mapping):
            if "fun" not in entry:
                return {"result": False, "comment": f"no `fun` argument in onlyif: {entry}"}
            if not _callFunction(salt, entry):
                return skipped
        else:
            return {"result": False, "comment": "onlyif execution failed, bad type passed"}
    return ret


def checkUnless(salt: Mapping[str, Callable[..., Any]], low: Mapping[str, Any]) -> dict[str, Any]:
    """
    Salt's C{unless}: the state runs unless every condition is true.

    @return: C{{"result": True, "comment": "unless condition is true",
        "skip_watch": True}} when the state is skipped, else
        C{{"result": False, "comment": ...}}.
    """
    entries = low["unless"] if isinstance(low["unless"], list) else [low["unless"]]
    options = _cmdOptions(low)
    ret: dict[str, Any] = {"result": False, "comment": "unless condition is false"}
    for entry in entries:
        if isinstance(entry, str):
            try:
                code = _retcode(salt, entry, options)
            except Exception as e:
                log.debug("unless command %r could not run: %s", entry, e)
                code = 0
            if code != 0:
                return {"result": False, "comment": "unless condition is false"}
            ret = {"comment": "unless condition is true", "skip_watch": True, "result": True}
        elif isinstance(entry, Mapping):
            if "fun" not in entry:
                return {"result": False, "comment": f"no `fun` argument in unless: {entry}"}
            if not _callFunction(salt, entry):
                return {"result": False, "comment": "unless condition is false"}
            ret = {"comment": "unless condition is true", "skip_watch": True, "result": True}
        else:
            ret = {"result": False, "comment": "unless condition is false, bad type passed"}
    return ret


def checkCreates(low: Mapping[str, Any]) -> dict[str, Any]:
    """
    Salt's C{creates}: skip the state when the file (or every file of a
    list) exists.
    """
    creates = low["creates"]
    if isinstance(creates, str) and os.path.exists(creates):
        return {"result": True, "comment": f"{creates} exists", "skip_watch": True}
    if isinstance(creates, list) and all(os.path.exists(str(p)) for p in creates):
        return {"result": True, "comment": "All files in creates exist", "skip_watch": True}
    return {"result": False, "comment": "Creates files not found"}


def runChecks(salt: Mapping[str, Callable[..., Any]], low: Mapping[str, Any]) -> dict[str, Any]:
    """
    Evaluate a chunk's C{onlyif}, C{unless} and C{creates} (those it has).

    @return: C{{"result", "comment", ...}}: C{result} true means the
        state is skipped (C{comment} says why, one line per condition);
        false means it runs.
    """
    result = False
    skipWatch = False
    comments = []
    for key, check in (
        ("onlyif", lambda: checkOnlyif(salt, low)),
        ("unless", lambda: checkUnless(salt, low)),
        ("creates", lambda: checkCreates(low)),
    ):
        if key not in low:
            continue
        one = check()
        if key == "onlyif":
            result = one["result"]
        else:
            result = one["result"] or result
        skipWatch = skipWatch or one.get("skip_watch", False)
        comments.append(one["comment"])
    ret: dict[str, Any] = {"result": result, "comment": "\n".join(comments)}
    if skipWatch:
        ret["skip_watch"] = True
    return ret


def checkCmd(salt: Mapping[str, Callable[..., Any]], low: Mapping[str, Any]) -> dict[str, Any]:
    """
    Salt's C{check_cmd}: after the state ran, its commands decide its
    result (all exit 0: success).
    """
    entries = low["check_cmd"] if isinstance(low["check_cmd"], list) else [low["check_cmd"]]
    options = {"shell": low["shell"]} if low.get("shell") else {}
    ret: dict[str, Any] = {}
    for entry in entries:
        code = _retcode(salt, entry, options)
        if code != 0:
            return {"comment": "check_cmd determined the state failed", "result": False}
        ret = {"comment": "check_cmd determined the state succeeded", "result": True}
    return ret


def retrySettings(data: Any) -> dict[str, Any]:
    """
    @return: a chunk's C{retry} as Salt's C{verify_retry_data} reads it:
        C{True} gives the defaults (2 attempts, 30 s apart, until
        C{True}); C{False} no attempts; a dict overrides the defaults
        (values of the wrong type fall back to them).
    """
    types = {"until": bool, "attempts": int, "interval": int, "splay": int}
    if isinstance(data, Mapping):
        settings = {}
        for key, kind in types.items():
            value = data.get(key, RETRY_DEFAULTS[key])
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                log.warning(
                    "An invalid value was passed for the retry %s, using default value '%s'",
                    key,
                    RETRY_DEFAULTS[key],
                )
                value = RETRY_DEFAULTS[key]
            settings[key] = value
        return settings
    if data is False:
        return dict(RETRY_DEFAULTS, attempts=0)
    if data is not True:
        log.warning(
            "State is set to retry, but retry: True or a valid dict for "
            "retry configuration was not found.  Using retry defaults"
        )
    return dict(RETRY_DEFAULTS)
