# -*- test-case-name: tests.test_states_module -*-
"""
Salt's C{module} states: call execution functions from a state run.

Both of Salt's forms work, told apart as Salt does (any argument without a
dot means the legacy form):

    - the current form, a function per argument with its arguments as a
      list (positional values and one-key maps for keywords)::

        restart:
          module.run:
            - test.ping: []
            - file.write:
              - path: /tmp/x
              - args: [one, two]

    - the legacy form (Salt's C{use_superseded} off): C{name} is the
      function, its own arguments are the state's (C{m_name} for its
      C{name}, C{args} for C{*args}, C{kwargs} for C{**kwargs})::

        restart:
          module.run:
            - name: service.restart
            - m_name: nginx

A C{False} return, a return map holding C{result: False} or a non-zero
C{retcode}, or an exception fails the state. C{module.wait} does nothing
unless a watched state changed (L{mod_watch} is L{run}).
"""

from __future__ import annotations

from typing import Any

from salttwist.states import StateContext, stateReturn
from salttwist.states._keywords import stateArguments

#: Salt's renaming of the legacy form's arguments that clash with the
#: state's own.
_RENAMED = {
    "name": "m_name",
    "fun": "m_fun",
    "names": "m_names",
    "state": "m_state",
    "saltenv": "m_saltenv",
}

#: The state's arguments that are not functions in the current form.
_NOT_FUNCTIONS = ("name", "sfun", "saltenv", "returner")


def _dictResult(node: dict[str, Any]) -> bool:
    for key, value in node.items():
        if (key == "result" and value is False) or (key == "retcode" and value != 0):
            return False
        if isinstance(value, dict) and not _dictResult(value):
            return False
    return True


def _result(value: Any) -> bool:
    """
    Salt's reading of a function's return as success: a boolean is
    itself; a map fails when it (or a map in it) has C{result: False} or a
    non-zero C{retcode}; anything else succeeds.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, dict):
        return _dictResult(value)
    return True


def _argspec(ctx: StateContext, function: str) -> dict[str, Any]:
    spec = ctx.salt["sys.argspec"](function)
    return spec.get(function) or {}


def _call(ctx: StateContext, function: str, arguments: Any) -> Any:
    """
    Call C{function} with a current-form argument list: plain values are
    positional, one-key maps are keywords, except those naming a required
    positional parameter, which go in its place (Salt's C{call_function}).

    @raise TypeError: arguments missing or not a list.
    """
    if arguments is None:
        arguments = []
    if isinstance(arguments, dict):
        arguments = [{k: v} for k, v in arguments.items()]
    if not isinstance(arguments, list):
        arguments = [arguments]
    spec = _argspec(ctx, function)
    names = spec.get("args") or []
    required = names[: len(names) - len(spec.get("defaults") or [])]
    positional: list[Any] = []
    named: dict[str, Any] = {}
    keywords: dict[str, Any] = {}
    for item in arguments:
        if isinstance(item, dict):
            for key, value in item.items():
                if key in required:
                    named[key] = value
                else:
                    keywords[key] = value
        else:
            positional.append(item)
    for name in required[len(positional) :]:
        if name not in named:
            break
        positional.append(named.pop(name))
    missing = [name for name in required[len(positional) :]]
    if missing:
        raise TypeError(
            f"{function} is missing {len(missing)} required argument(s): {', '.join(missing)}"
        )
    return ctx.salt[function](*positional, **keywords)


def _currentForm(ctx: StateContext, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    functions = [key for key in kwargs if "." in key]
    ret = stateReturn(name, None)
    ret["name"] = functions
    if not functions:
        ret.update(result=False, comment="No function provided.")
        return ret
    missing = [f.split(":")[0] for f in functions if f.split(":")[0] not in ctx.salt]
    tests = [f.split(":")[0] for f in functions if f.split(":")[0] in ctx.salt] if ctx.test else []
    if missing or tests:
        words = []
        if missing:
            plural = "s" if len(missing) > 1 else ""
            words.append(f"Unavailable function{plural}: {', '.join(missing)}.")
        if tests:
            plural = "s" if len(tests) > 1 else ""
            words.append(f"Function{plural} {', '.join(tests)} to be executed.")
        ret["comment"] = " ".join(words)
        if missing:
            ret["result"] = False
        return ret
    failures: list[str] = []
    successes: list[str] = []
    for key in functions:
        function = key.split(":")[0]
        try:
            value = _call(ctx, function, kwargs[key])
        except Exception as e:
            failures.append(f"'{key}' failed: {e}")
            continue
        if not _result(value):
            if isinstance(value, dict):
                failures.append(f"'{key}' failed: {value.get('comment', '(error message N/A)')}")
            else:
                failures.append(f"'{key}': {value}")
            continue
        comment = value.get("comment", "Success") if isinstance(value, dict) else value
        successes.append(f"{key}: {comment}")
        ret["changes"][key] = value
    ret["comment"] = ", ".join(failures + successes)
    ret["result"] = not failures
    return ret


def _legacyForm(ctx: StateContext, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    ret = stateReturn(name, None)
    if name not in ctx.salt:
        ret.update(result=False, comment=f"Module function {name} is not available")
        return ret
    if ctx.test:
        ret["comment"] = f"Module function {name} is set to execute"
        return ret
    spec = _argspec(ctx, name)
    names = spec.get("args") or []
    defaults = list(spec.get("defaults") or [])
    firstDefault = len(names) - len(defaults)
    args: list[Any] = []
    missing: list[str] = []
    for index, argument in enumerate(names):
        key = _RENAMED.get(argument, argument)
        if key in kwargs:
            args.append(kwargs.pop(key))
        elif argument in kwargs and argument not in _RENAMED:
            args.append(kwargs.pop(argument))
        elif index >= firstDefault:
            args.append(defaults[index - firstDefault])
        else:
            missing.append(key)
    if missing:
        ret.update(
            result=False, comment="The following arguments are missing: " + " ".join(missing)
        )
        return ret
    if spec.get("varargs"):
        for key in ("args", "m_names"):
            if key in kwargs:
                extra = kwargs.pop(key)
                if not isinstance(extra, list):
                    ret.update(result=False, comment=f"'{key}' must be a list.")
                    return ret
                args.extend(extra)
                break
    keywords: dict[str, Any] = {}
    if spec.get("kwargs") and "kwargs" in kwargs:
        keywords = kwargs.pop("kwargs")
        if not isinstance(keywords, dict):
            ret.update(result=False, comment="'kwargs' must be a dict.")
            return ret
    for kwonly in spec.get("kwonlyargs") or []:
        if kwonly in kwargs:
            keywords[kwonly] = kwargs.pop(kwonly)
    try:
        value = ctx.salt[name](*args, **keywords)
    except Exception as e:
        ret.update(
            result=False,
            comment=f"Module function {name} threw an exception. Exception: {e}",
        )
        return ret
    if value is not None:
        ret["changes"]["ret"] = value
    ret["comment"] = f"Module function {name} executed"
    ret["result"] = _result(value)
    return ret


def run(ctx: StateContext, name: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """
    Call execution functions, in either of Salt's forms (see the module's
    docstring). Changes: the current form's returns by function, or
    C{{"ret": <return>}} in the legacy form. In test mode nothing is
    called: C{result: None}, with the functions that would be.

    @param name: the state's name; in the legacy form, the function.
    """
    kwargs = stateArguments(kwargs)
    kwargs.pop("sfun", None)
    keys = [key for key in kwargs if key not in _NOT_FUNCTIONS]
    legacy = not keys or any("." not in key for key in keys)
    if legacy:
        return _legacyForm(ctx, str(name), kwargs)
    kwargs.pop("returner", None)
    return _currentForm(ctx, str(name), kwargs)


def wait(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Do nothing: the functions are called (as L{run}) only when a state
    this one watches changed, through L{mod_watch}.
    """
    return stateReturn(name, True, "")


#: Salt's alias.
watch = wait

#: A watched state changed: call the functions as L{run} does.
mod_watch = run
