# -*- test-case-name: tests.test_states_test -*-
"""
Salt's C{test} state module: states that succeed, fail or change on
demand, for trying out requisites, outputters and state runs.

    always-passes:
      test.succeed_without_changes:
        - name: foo

    my-custom-combo:
      test.configurable_test_state:
        - name: foo
        - changes: True
        - result: False
        - comment: bar.baz
        - warnings: A warning
"""

from __future__ import annotations

import random
from typing import Any

from salttwist.states import StateContext

_CHANGES = {"testing": {"old": "Unchanged", "new": "Something pretended to change"}}


def _changes() -> dict[str, Any]:
    return {"testing": dict(_CHANGES["testing"])}


def nop(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Do nothing and succeed (useful with C{use}, or in a template that
    could render empty).
    """
    return succeed_without_changes(ctx, name)


def succeed_without_changes(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Succeed without changes (C{comment} defaults to C{"Success!"}).
    """
    return {
        "name": name,
        "changes": {},
        "result": True,
        "comment": kwargs.get("comment", "Success!"),
    }


def fail_without_changes(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Fail without changes (C{comment} defaults to C{"Failure!"}); in test
    mode too, with Salt's test-mode comment.
    """
    ret = {
        "name": name,
        "changes": {},
        "result": False,
        "comment": kwargs.get("comment", "Failure!"),
    }
    if ctx.test:
        ret["comment"] = "If we weren't testing, this would be a failure!"
    return ret


def succeed_with_changes(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Succeed with changes (in test mode: C{result: None}).
    """
    ret = {
        "name": name,
        "changes": _changes(),
        "result": True,
        "comment": kwargs.get("comment", "Success!"),
    }
    if ctx.test:
        ret["result"] = None
        ret["comment"] = "If we weren't testing, this would be successful with changes"
    return ret


def fail_with_changes(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Fail with changes (in test mode: C{result: None}).
    """
    ret = {
        "name": name,
        "changes": _changes(),
        "result": False,
        "comment": kwargs.get("comment", "Failure!"),
    }
    if ctx.test:
        ret["result"] = None
        ret["comment"] = "If we weren't testing, this would be failed with changes"
    return ret


def configurable_test_state(
    ctx: StateContext,
    name: str,
    changes: Any = True,
    result: Any = True,
    comment: str = "",
    warnings: Any = None,
    allow_test_mode_failure: bool = False,
) -> dict[str, Any]:
    """
    A state whose return is chosen by its arguments.

    @param changes: C{True} (report changes), C{False}, or C{"Random"}.
    @param result: C{True}, C{False}, or C{"Random"}. In test mode the
        result is C{None} when there are changes, C{True} when C{changes}
        is false, and C{False} only with C{allow_test_mode_failure} and
        C{result: False}.
    @param comment: the comment (in test mode, C{"This is a test"} when
        empty).
    @param warnings: a string or a list of strings for C{warnings}.
    @raise ValueError: an argument is not one of those values (Salt's
        C{SaltInvocationError} words).
    """
    ret: dict[str, Any] = {"name": name, "changes": {}, "result": False, "comment": comment}
    if changes is True:
        ret["changes"] = _changes()
    elif changes is not False:
        if str(changes).lower() != "random":
            raise ValueError(
                "You have specified the state option 'changes' with invalid arguments. "
                "It must be either True, False, or 'Random'"
            )
        if random.choice((True, False)):
            ret["changes"] = _changes()
    if isinstance(result, bool):
        ret["result"] = result
    elif str(result).lower() == "random":
        ret["result"] = random.choice((True, False))
    else:
        raise ValueError(
            "You have specified the state option 'result' with invalid arguments. "
            "It must be either True, False, or 'Random'"
        )
    if warnings is None:
        pass
    elif isinstance(warnings, str):
        ret["warnings"] = [warnings]
    elif isinstance(warnings, list):
        ret["warnings"] = warnings
    else:
        raise ValueError(
            "You have specified the state option 'warnings' with invalid arguments. "
            "It must be a string or a list of strings"
        )
    if ctx.test:
        if allow_test_mode_failure and result is False:
            ret["result"] = False
        else:
            ret["result"] = True if changes is False else None
        ret["comment"] = comment or "This is a test"
    return ret


def show_notification(
    ctx: StateContext, name: str, text: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """
    Succeed with C{text} as the comment.

    @raise ValueError: no C{text}.
    """
    if not text:
        raise ValueError("Missing required argument text.")
    return {"name": name, "changes": {}, "result": True, "comment": text}


def mod_watch(
    ctx: StateContext, name: str, sfun: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """
    What a C{watch} on a changed state runs: succeed, listing the watched
    states that changed (C{result}, C{comment} and C{changes} may be set
    as arguments).
    """
    changed = []
    low = ctx.low or {}
    running = low.get("__running__") or {}
    for req in (low.get("__reqs__") or {}).get("watch", []):
        tag = f"{req['state']}_|-{req['__id__']}_|-{req['name']}_|-{req['fun']}"
        if (running.get(tag) or {}).get("changes"):
            changed.append(f"{req['state']}: {req['__id__']}")
    return {
        "name": name,
        "result": kwargs.get("result", True),
        "comment": kwargs.get("comment", "Watch statement fired."),
        "changes": kwargs.get("changes", {"Requisites with changes": changed}),
    }


def _pillarType(ctx: StateContext, key: str, kind: Any) -> bool | None:
    value = ctx.salt["pillar.get"](key, None)
    if value is None:
        return None
    if kind is not None and not isinstance(value, kind):
        return False
    return True


def _asList(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise TypeError(f"Expected a string or a list of pillar keys, not {value!r}")
    return [str(v) for v in value]


def check_pillar(
    ctx: StateContext,
    name: str,
    present: Any = None,
    boolean: Any = None,
    integer: Any = None,
    string: Any = None,
    listing: Any = None,
    dictionary: Any = None,
    verbose: bool = False,
) -> dict[str, Any]:
    """
    Check that pillar keys are present and, optionally, of a type
    (C{boolean}, C{integer}, C{string}, C{listing}, C{dictionary}).

    @raise ValueError: no key to check.
    """
    if not (present or boolean or integer or string or listing or dictionary):
        raise ValueError("Missing required argument text.")
    ret: dict[str, Any] = {"name": name, "changes": {}, "result": True, "comment": ""}
    checks = [
        (None, "None", present),
        (bool, "<class 'bool'>", boolean),
        (int, "<class 'int'>", integer),
        ((str,), "(<class 'str'>,)", string),
        (list, "<class 'list'>", listing),
        (dict, "<class 'dict'>", dictionary),
    ]
    failed: dict[str, str | None] = {}
    fine: dict[str, str] = {}
    for kind, label, keys in checks:
        for key in _asList(keys or []):
            found = _pillarType(ctx, key, kind)
            if found is None:
                failed[key] = None
                ret["result"] = False
            elif not found:
                failed[key] = label
                ret["result"] = False
            elif verbose:
                fine[key] = label
    for key, label in failed.items():
        ret["comment"] += f'Pillar key "{key}" ' + (
            "is missing.\n" if label is None else f"is not {label}.\n"
        )
    if verbose and fine:
        ret["comment"] += "Those keys passed the check:\n" + "".join(
            f"- {key} ({label})\n" for key, label in fine.items()
        )
    return ret
