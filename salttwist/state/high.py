# -*- test-case-name: tests.test_state_compile,tests.test_state_compile_cases -*-
"""
High data, as Salt's state compiler shapes and checks it: one rendered
SLS file's declarations normalised (L{normaliseDecls}, L{takeExtend},
L{takeExclude}, L{autoOrder}), the files of a run merged
(L{mergeIncluded}, L{cleanDuplicateExtends}), C{extend:} applied
(L{reconcileExtend}), C{exclude:} applied (L{applyExclude}) and the whole
checked (L{verifyHigh}).

High data is C{{id: {"__sls__": sls, "__env__": saltenv, state: [arg,
...]}}} where each state's list holds its function (one bare string) and
its arguments (single-key mappings), in definition order. While files are
being merged it may also hold the keys C{__extend__} (a list of
C{{id: body}}) and C{__exclude__} (a list of SLS names and C{{"sls": x}}
or C{{"id": y}}).

Error messages are Salt's words (C{verify_high}, C{reconcile_extend},
C{_handle_state_decls} ...); the caller adds the file where it knows it.

Ground: imports no wing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Hashable, Mapping
from typing import Any

#: The requisite keywords of a state (Salt's C{STATE_REQUISITE_KEYWORDS}):
#: extending one of them appends to it instead of replacing it.
REQUISITE_KEYWORDS = frozenset(
    (
        "onfail",
        "onfail_any",
        "onfail_all",
        "require",
        "require_any",
        "onchanges",
        "onchanges_any",
        "watch",
        "watch_any",
        "prereq",
        "prerequired",
        "listen",
        "onfail_stop",
    )
)

#: The C{_in} requisite keywords (Salt's C{STATE_REQUISITE_IN_KEYWORDS}).
REQUISITE_IN_KEYWORDS = frozenset(
    ("onchanges_in", "onfail_in", "prereq_in", "watch_in", "require_in", "listen_in")
)

#: Where an error names its file: C{where(sls, saltenv)} returns a suffix
#: such as C{" (file /srv/salt/web.sls)"}, or C{""}.
Where = Callable[[Any, Any], str]


def _nowhere(sls: Any, saltenv: Any) -> str:
    return ""


def _splitDotted(key: str) -> tuple[str, str]:
    comps = key.split(".")
    return comps[0], comps[1]


def normaliseDecls(state: dict, sls: str, saltenv: str, errors: list[str]) -> None:
    """
    Salt's C{_handle_state_decls}: C{id: pkg.installed} becomes C{id: {pkg:
    [installed]}}, C{file.managed: [args]} becomes C{file: [args...,
    "managed"]} (moved to the end of the id's keys, the function appended,
    as Salt does), and every id gets C{__sls__} and C{__env__}.
    """
    for name in list(state):
        body = state[name]
        if not isinstance(body, dict):
            if name in ("__extend__", "__exclude__"):
                continue
            if isinstance(body, str) and "." in body:
                module, fun = body.split(".")[:2]
                state[name] = {"__sls__": sls, "__env__": saltenv, module: [fun]}
                continue
            errors.append(f"ID {name} in SLS {sls} is not a dictionary")
            continue
        seen: set[str] = set()
        for key in list(body):
            if not isinstance(key, str) or key.startswith("_"):
                continue
            if not isinstance(body[key], list):
                continue
            if "." in key:
                module, fun = _splitDotted(key)
                if module in seen:
                    errors.append(
                        f"ID '{name}' in SLS '{sls}' contains multiple state "
                        "declarations of the same type"
                    )
                    continue
                body[module] = body.pop(key)
                body[module].append(fun)
                seen.add(module)
                continue
            seen.add(key)
        body.setdefault("__sls__", sls)
        body.setdefault("__env__", saltenv)


def takeExtend(state: dict, sls: str, saltenv: str, errors: list[str]) -> None:
    """
    Salt's C{_handle_extend}: move the file's C{extend:} to C{__extend__},
    each extended id marked with this file's C{__sls__} and C{__env__} and
    its C{module.fun:} keys normalised.
    """
    if "extend" not in state:
        return
    ext = state.pop("extend")
    if not isinstance(ext, dict):
        errors.append(f"Extension value in SLS '{sls}' is not a dictionary")
        return
    for name in ext:
        body = ext[name]
        if not isinstance(body, dict):
            errors.append(f"Extension name '{name}' in SLS '{sls}' is not a dictionary")
            continue
        body.setdefault("__sls__", sls)
        body.setdefault("__env__", saltenv)
        for key in list(body):
            if not isinstance(key, str) or key.startswith("_"):
                continue
            if not isinstance(body[key], list):
                continue
            if "." in key:
                module, fun = _splitDotted(key)
                body[module] = body.pop(key)
                body[module].append(fun)
    state.setdefault("__extend__", []).append(ext)


def takeExclude(state: dict, sls: str, errors: list[str]) -> None:
    """
    Salt's C{_handle_exclude}: move the file's C{exclude:} to
    C{__exclude__}.
    """
    if "exclude" not in state:
        return
    exc = state.pop("exclude")
    if not isinstance(exc, list):
        errors.append(f"Exclude Declaration in SLS {sls} is not formed as a list")
        return
    state.setdefault("__exclude__", []).extend(exc)


class AutoOrder:
    """
    Salt's C{_handle_iorder}: with C{state_auto_order}, each state without
    an C{order} argument gets C{{"order": n}} appended, C{n} counting from
    10000 across every file of one compile, in the order the files finish
    rendering (an included file before the file that includes it).
    """

    def __init__(self, enabled: bool = True, start: int = 10000) -> None:
        self.enabled = enabled
        self.next = start

    def apply(self, state: dict) -> None:
        if not self.enabled:
            return
        for body in state.values():
            if body is None or isinstance(body, (int, float)):
                # Salt's numbering stops at an id it cannot iterate (that
                # id is an error anyway): the ids after it get no order.
                return
            if not isinstance(body, dict):
                continue
            for key, run in body.items():
                if not isinstance(key, str) or key.startswith("_"):
                    continue
                if not isinstance(run, list):
                    continue
                if any(isinstance(arg, dict) and arg and next(iter(arg)) == "order" for arg in run):
                    continue
                run.append({"order": self.next})
                self.next += 1


def mergeIncluded(highstate: dict, state: dict, errors: list[str], where: Where = _nowhere) -> None:
    """
    Salt's C{merge_included_states}: C{state}'s ids into C{highstate}, its
    C{__extend__} and C{__exclude__} appended to C{highstate}'s; an id both
    hold with different bodies is an error ("Detected conflicting IDs").
    """
    if "__extend__" in state:
        highstate.setdefault("__extend__", []).extend(state.pop("__extend__"))
    if "__exclude__" in state:
        highstate.setdefault("__exclude__", []).extend(state.pop("__exclude__"))
    for id_, body in state.items():
        old = highstate.get(id_, _ABSENT)
        if old is _ABSENT or old == body:
            continue
        if isinstance(old, dict) and isinstance(body, dict):
            oldEnv, oldSls = old.get("__env__"), old.get("__sls__")
            newEnv, newSls = body.get("__env__"), body.get("__sls__")
            files = ""
            oldWhere, newWhere = where(oldSls, oldEnv), where(newSls, newEnv)
            if oldWhere or newWhere:
                files = f" ({oldWhere.strip(' ()') or '?'} and {newWhere.strip(' ()') or '?'})"
            errors.append(
                "Detected conflicting IDs, SLS IDs need to be globally unique.\n"
                f"    The conflicting ID is '{id_}' and is found in SLS"
                f" '{oldEnv}:{oldSls}' and SLS '{newEnv}:{newSls}'{files}"
            )
        else:
            errors.append(f"Detected conflicting IDs, SLS IDs need to be globally unique: '{id_}'")
    highstate.update(state)


_ABSENT = object()


def cleanDuplicateExtends(highstate: dict) -> None:
    """
    Salt's C{clean_duplicate_extends}: each C{(id, body)} of C{__extend__}
    once.
    """
    if "__extend__" not in highstate:
        return
    kept: list[tuple[Any, Any]] = []
    for ext in highstate["__extend__"]:
        for item in ext.items():
            if item not in kept:
                kept.append(item)
    highstate["__extend__"] = [{key: value} for key, value in kept]


def _firstKey(arg: Mapping) -> Any:
    return next(iter(arg))


def findName(name: Any, state: str, high: Mapping, strict: bool = False) -> list[tuple[Any, str]]:
    """
    Salt's C{find_name}: the C{(id, state)} pairs C{name} refers to: the id
    C{name} (with module C{state} when C{strict}), else every C{sls} id of
    SLS C{name} when C{state} is C{sls}, else the ids whose C{state} has a
    C{name} argument (or any single argument) equal to C{name}.
    """
    found: list[tuple[Any, str]] = []
    body = high.get(name) if isinstance(name, Hashable) else None
    check = True if not strict else isinstance(body, dict) and state in body
    if body is not None and check:
        found.append((name, state))
    elif state == "sls":
        for nid, item in high.items():
            if isinstance(item, dict) and item.get("__sls__") == name:
                keys = [k for k in item if not str(k).startswith("__")]
                if keys:
                    found.append((nid, keys[0]))
    else:
        for nid, item in high.items():
            if not isinstance(item, dict) or state not in item:
                continue
            run = item[state]
            if not isinstance(run, list):
                continue
            for arg in run:
                if isinstance(arg, dict) and len(arg) == 1 and arg[_firstKey(arg)] == name:
                    found.append((nid, state))
    return found


def _excludedSls(high: Mapping) -> list[Any]:
    names = []
    for exclude in high.get("__exclude__", []):
        if isinstance(exclude, str):
            names.append(exclude)
        elif isinstance(exclude, dict) and exclude.get("sls"):
            names.append(exclude["sls"])
    return names


def reconcileExtend(high: dict, strict: bool = False) -> tuple[dict, list[str]]:
    """
    Salt's C{reconcile_extend}: apply C{__extend__} to the ids it names
    (or, when no id has that name, to the one state whose C{name} it is).
    A function replaces the function; an argument replaces the argument of
    the same key, except requisites, which are appended to; other
    arguments are appended. Extensions from an excluded SLS are skipped.

    @return: C{(high, errors)}: C{high} changed in place.
    """
    errors: list[str] = []
    if "__extend__" not in high:
        return high, errors
    extensions = high.pop("__extend__")
    excluded = _excludedSls(high)
    for ext in extensions:
        if not isinstance(ext, dict):
            continue
        for name, body in ext.items():
            stateTypes = [k for k in body if not str(k).startswith("__")]
            if not stateTypes:
                continue
            stateType = stateTypes[0]
            target = high.get(name) if isinstance(name, Hashable) else None
            if not isinstance(target, dict) or stateType not in target:
                ids = findName(name, stateType, high, strict=strict)
                if len(ids) != 1:
                    env = body.get("__env__", "base")
                    sls = body.get("__sls__", "base")
                    errors.append(
                        f"Cannot extend ID '{name}' in '{env}:{sls}'. It is not "
                        "part of the high state.\n"
                        "This is likely due to a missing include statement "
                        "or an incorrectly typed ID.\nEnsure that a "
                        f"state with an ID of '{name}' is available\nin "
                        f"environment '{env}' and to SLS '{sls}'"
                    )
                    continue
                name = ids[0][0]
            if body.get("__sls__") in excluded:
                continue
            _extendOne(high[name], body)
    return high, errors


def _extendOne(target: dict, body: Mapping) -> None:
    for state, run in body.items():
        if str(state).startswith("__"):
            continue
        if state not in target or not isinstance(target[state], list):
            target[state] = run
            continue
        current = target[state]
        for arg in run:
            update = False
            for index, value in enumerate(current):
                if isinstance(arg, str) and isinstance(value, str):
                    current[index] = arg
                    update = True
                    continue
                if isinstance(arg, dict) and isinstance(value, dict) and arg and value:
                    key = _firstKey(arg)
                    if key == _firstKey(value):
                        if key in REQUISITE_KEYWORDS and isinstance(value[key], list):
                            value[key].extend(
                                arg[key] if isinstance(arg[key], list) else [arg[key]]
                            )
                        else:
                            current[index] = arg
                        update = True
                    if key == "name" and _firstKey(current[index]) == "names":
                        current[index] = arg
            if not update:
                current.append(arg)


def applyExclude(high: dict) -> dict:
    """
    Salt's C{apply_exclude}: drop the ids C{__exclude__} names (C{- id:
    x}), and those of the SLS it names (a plain name or C{- sls: x}; globs
    allowed).
    """
    if "__exclude__" not in high:
        return high
    exSls: set[str] = set()
    exId: set[Any] = set()
    for exc in high.pop("__exclude__"):
        if isinstance(exc, str):
            exSls.add(exc)
        elif isinstance(exc, dict) and len(exc) == 1:
            key = _firstKey(exc)
            if key == "sls":
                exSls.add(str(exc["sls"]))
            elif key == "id" and isinstance(exc["id"], Hashable):
                exId.add(exc["id"])
    if exSls:
        for name, body in high.items():
            if str(name).startswith("__") or not isinstance(body, dict):
                continue
            sls = body.get("__sls__", "")
            if sls and any(fnmatch.fnmatch(sls, pattern) for pattern in exSls):
                exId.add(name)
    for id_ in exId:
        high.pop(id_, None)
    return high


def verifyHigh(high: Any, where: Where = _nowhere) -> list[str]:
    """
    Salt's C{verify_high}: the structure of the high data, in Salt's words
    (ids as strings, bodies as mappings, each state a list holding one
    function, requisites as lists of single-key mappings ...), each error
    followed by C{where(sls, saltenv)}.
    """
    if not isinstance(high, dict):
        return ["High data is not a dictionary and is invalid"]
    errors: list[str] = []
    for id_, body in high.items():
        sls = body.get("__sls__") if isinstance(body, dict) else None
        env = body.get("__env__") if isinstance(body, dict) else None
        at = where(sls, env)
        if not isinstance(id_, str):
            errors.append(
                f"ID '{id_}' in SLS '{sls}' is not formed as a string, "
                f"but is type {type(id_).__name__}. It may need to be quoted.{at}"
            )
        elif id_.startswith("__"):
            continue
        if not isinstance(body, dict):
            errors.append(f"The type {id_} in {body} is not formatted as a dictionary")
            continue
        for state, run in body.items():
            if not isinstance(state, str):
                errors.append(
                    f"State '{state}' in ID '{id_}' in SLS '{sls}' is not formed as a string{at}"
                )
                continue
            if state.startswith("__"):
                continue
            if run is None:
                errors.append(
                    f"ID '{id_}' in SLS '{sls}' contains a short declaration "
                    f"({state}) with a trailing colon. When not passing any "
                    f"arguments to a state, the colon must be omitted.{at}"
                )
                continue
            if not isinstance(run, list):
                errors.append(f"State '{id_}' in SLS '{sls}' is not formed as a list{at}")
                continue
            errors.extend(_verifyRun(id_, state, run, sls, at))
    return errors


def _verifyRun(id_: str, state: str, run: list, sls: Any, at: str) -> list[str]:
    errors: list[str] = []
    funs: list[str] = []
    if "." in state:
        funs.append(state.split(".", 1)[1])
    for arg in run:
        if isinstance(arg, str):
            funs.append(arg)
            if " " in arg.strip():
                errors.append(
                    f'The function "{arg}" in state "{id_}" in SLS "{sls}" has '
                    "whitespace, a function with whitespace is not supported, "
                    f'perhaps this is an argument that is missing a ":"{at}'
                )
        elif isinstance(arg, dict):
            if not arg:
                continue
            first = _firstKey(arg)
            if first == "names" and not isinstance(arg[first], list):
                errors.append(
                    f"The 'names' argument in state '{id_}' in SLS '{sls}' needs to be "
                    f"formed as a list{at}"
                )
            if first in REQUISITE_KEYWORDS:
                if not isinstance(arg[first], list):
                    errors.append(
                        f"The {first} statement in state '{id_}' in "
                        f"SLS '{sls}' needs to be formed as a list{at}"
                    )
                else:
                    errors.extend(_verifyRequisites(id_, arg[first], sls, at))
                if len(arg) != 1:
                    errors.append(
                        f"Multiple dictionaries defined in argument of state '{id_}' "
                        f"in SLS '{sls}'{at}"
                    )
    if not funs:
        errors.append(f"No function declared in state '{id_}' in SLS '{sls}'{at}")
    elif len(funs) > 1:
        errors.append(
            f"Too many functions declared in state '{id_}' in SLS '{sls}'. "
            f"Please choose one of the following: {', '.join(map(str, funs))}{at}"
        )
    return errors


def _verifyRequisites(id_: str, reqs: list, sls: Any, at: str) -> list[str]:
    errors: list[str] = []
    for req in reqs:
        if isinstance(req, str):
            req = {"id": req}
        if not isinstance(req, dict) or len(req) != 1:
            errors.append(
                f"Requisite declaration {req} in state {id_} in SLS {sls} "
                f"is not formed as a single key dictionary{at}"
            )
            continue
        key, value = next(iter(req.items()))
        if isinstance(key, str) and "." in key:
            errors.append(
                f"Invalid requisite type '{key}' in state '{id_}', in SLS "
                f"'{sls}'. Requisite types must not contain dots, did you "
                f"mean '{key[: key.find('.')]}'?{at}"
            )
        if not isinstance(value, Hashable):
            errors.append(
                f'Illegal requisite "{value}" in SLS "{sls}", please check your syntax.{at}'
            )
    return errors
