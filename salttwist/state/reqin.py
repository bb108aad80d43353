# -*- test-case-name: tests.test_state_compile_cases,tests.test_state_compile_low -*-
"""
Salt's C{requisite_in}: the C{_in} requisites of a state become plain
requisites of the states they name, and C{use}/C{use_in} copy arguments.

  - C{require_in}, C{watch_in}, C{onchanges_in}, C{onfail_in},
    C{prereq_in}, C{listen_in} on state C{S} naming C{{pkg: nginx}} add
    C{{<S's module>: <S's id>}} to C{nginx}'s C{require} (C{watch} ...).
    A bare name (C{- nginx}) names the id, or the state whose C{name} it
    is; C{- sls: web} names every state of that SLS. (Salt 3008 leaves
    C{listen_in} for its runner; here it becomes C{listen} on the target
    as the other kinds, which runs the same way.)
  - C{use: [{file: base_conf}]} copies C{base_conf}'s arguments (not its
    C{name}, C{names} or requisites, nor those the state sets itself) to
    the state; C{use_in} copies the state's arguments to the states it
    names.

The additions go through L{reconcileExtend} (strict: the id must have that
state module), so a target that does not exist is Salt's C{Cannot extend
ID} error. The C{_in} arguments stay on their state, as in Salt.

Ground: imports no wing.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from salttwist.state.high import findName, reconcileExtend

#: The keywords handled here.
REQUISITE_IN = frozenset(
    (
        "require_in",
        "watch_in",
        "onfail_in",
        "onchanges_in",
        "prereq_in",
        "listen_in",
        "use",
        "use_in",
    )
)

#: The arguments C{use}/C{use_in} never copy.
_NOT_USED = REQUISITE_IN | frozenset(
    ("require", "watch", "prereq", "onfail", "onfail_stop", "onchanges", "listen")
)


def _stateArgs(id_: Any, state: str, high: Mapping) -> set[Any]:
    """
    Salt's C{state_args}: the argument names of C{high[id_][state]}.
    """
    body = high.get(id_)
    if not isinstance(body, dict) or not isinstance(body.get(state), list):
        return set()
    return {next(iter(arg)) for arg in body[state] if isinstance(arg, dict) and len(arg) == 1}


def _slsIds(sls: Any, high: Mapping) -> list[tuple[Any, str]]:
    """
    Salt's C{find_sls_ids}: C{(id, state)} of every state of SLS C{sls}.
    """
    found = []
    for nid, body in high.items():
        if not isinstance(body, dict) or body.get("__sls__") != sls:
            continue
        found.extend((nid, state) for state in body if not str(state).startswith("__"))
    return found


class _Extensions:
    """
    The C{__extend__} being built: C{{id: {state: [arg, ...], "__env__",
    "__sls__"}}}.
    """

    def __init__(self) -> None:
        self.data: dict[Any, dict[str, Any]] = {}

    def addRequisite(self, target: Any, targetState: str, kind: str, ref: dict, body: dict) -> None:
        """
        Add C{ref} to C{target}'s C{kind} requisites (C{targetState}).
        """
        ext = self.data.setdefault(target, {})
        run = ext.setdefault(targetState, [])
        ext["__env__"] = body.get("__env__")
        ext["__sls__"] = body.get("__sls__")
        found = False
        for arg in run:
            if next(iter(arg)) == kind:
                arg[kind].append(dict(ref))
                found = True
        if not found:
            run.append({kind: [dict(ref)]})

    def addArgs(self, target: Any, targetState: str, args: list) -> None:
        ext = self.data.setdefault(target, {})
        ext.setdefault(targetState, []).extend(args)


def _copyable(run: Any, ignore: set[Any]) -> list:
    """
    @return: the arguments of C{run} that C{use} copies.
    """
    if not isinstance(run, list):
        return []
    copied = []
    for arg in run:
        if not isinstance(arg, dict) or len(arg) != 1:
            continue
        key = next(iter(arg))
        if key in ignore or key in ("name", "names"):
            continue
        copied.append(arg)
    return copied


def _bareTarget(ref: Any, high: Mapping) -> dict | None:
    """
    A bare C{- foo} item: C{{first state of id foo: foo}}, or the first
    state whose C{name} argument is C{foo}, as Salt resolves it.
    """
    if isinstance(ref, Hashable) and isinstance(high.get(ref), dict):
        states = [k for k in high[ref] if not str(k).startswith("__")]
        if states:
            return {states[0]: ref}
    for nid, body in high.items():
        if not isinstance(body, dict):
            continue
        for state, run in body.items():
            if str(state).startswith("__") or not isinstance(run, list):
                continue
            for arg in run:
                if isinstance(arg, dict) and "name" in arg and arg["name"] == ref:
                    return {state: nid}
    return None


def requisiteIn(high: dict, disabled: list[str] | tuple[str, ...] = ()) -> tuple[dict, list[str]]:
    """
    Apply the C{_in} requisites and C{use}/C{use_in} of C{high} (Salt's
    C{requisite_in}).

    @param disabled: C{disabled_requisites}: those keywords are ignored.
    @return: C{(high, errors)}; C{high} is changed in place.
    """
    ext = _Extensions()
    errors: list[str] = []
    for id_, body in list(high.items()):
        if not isinstance(body, dict):
            continue
        for state, run in body.items():
            if str(state).startswith("__") or not isinstance(run, list):
                continue
            for arg in run:
                if not isinstance(arg, dict) or not arg:
                    continue
                key = next(iter(arg))
                if key not in REQUISITE_IN or key in disabled:
                    continue
                kind = key.split("_")[0]
                items = arg[key]
                if isinstance(items, dict):
                    _inFromDict(ext, errors, id_, state, body, kind, items)
                elif isinstance(items, list):
                    _inFromList(ext, errors, high, id_, state, body, key, kind, items)
    high["__extend__"] = [{key: value} for key, value in ext.data.items()]
    high, extendErrors = reconcileExtend(high, strict=True)
    errors.extend(extendErrors)
    return high, errors


def _inFromDict(
    ext: _Extensions,
    errors: list[str],
    id_: Any,
    state: str,
    body: dict,
    kind: str,
    items: dict,
) -> None:
    """
    C{require_in: {pkg: nginx}}: one mapping instead of a list.
    """
    for targetState, name in items.items():
        if not isinstance(name, Hashable):
            errors.append(f"Illegal requisite in {kind}: {name!r} in SLS '{body.get('__sls__')}'")
            continue
        targetState = str(targetState)
        if "." in targetState:
            errors.append(
                f"Invalid requisite in {kind}: {targetState} for {name} in SLS "
                f"'{body.get('__sls__')}'. Requisites must not contain dots, did you "
                f"mean '{targetState[: targetState.find('.')]}'?"
            )
            targetState = targetState.split(".")[0]
        ext.addRequisite(name, targetState, kind, {state: id_}, body)


def _inFromList(
    ext: _Extensions,
    errors: list[str],
    high: dict,
    id_: Any,
    state: str,
    body: dict,
    key: str,
    kind: str,
    items: list,
) -> None:
    # As in Salt, the targets gathered from the list's earlier items are
    # visited again for each later item (an C{sls} item starts afresh), so
    # a target named early can get the requisite more than once; it changes
    # nothing to the order or the run.
    hinges: list[tuple[Any, str]] = []
    for ref in items:
        if not isinstance(ref, dict):
            resolved = _bareTarget(ref, high)
            if resolved is None:
                continue
            ref = resolved
        if len(ref) < 1:
            continue
        pstate, pname = next(iter(ref.items()))
        if not isinstance(pname, Hashable):
            errors.append(f"Illegal requisite in {kind}: {pname!r} in SLS '{body.get('__sls__')}'")
            continue
        pstate = str(pstate)
        if pstate == "sls":
            hinges = _slsIds(pname, high)
        else:
            hinges.append((pname, pstate))
        if "." in pstate:
            errors.append(
                f"Invalid requisite in {kind}: {pstate} for {pname}, in SLS "
                f"'{body.get('__sls__')}'. Requisites must not contain dots, did you "
                f"mean '{pstate[: pstate.find('.')]}'?"
            )
        for name, targetState in hinges:
            if "." in targetState:
                targetState = targetState.split(".")[0]
            if key == "use_in":
                for extId, reqState in findName(name, targetState, high, strict=True):
                    ignore = set(_NOT_USED) | _stateArgs(extId, reqState, high)
                    ext.addArgs(extId, reqState, _copyable(high[id_][state], ignore))
                continue
            if key == "use":
                for extId, reqState in findName(name, targetState, high, strict=True):
                    ignore = set(_NOT_USED) | _stateArgs(id_, state, high)
                    ext.addArgs(id_, state, _copyable(high[extId][reqState], ignore))
                continue
            ext.addRequisite(name, targetState, kind, {state: id_}, body)
