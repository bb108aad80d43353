# -*- test-case-name: tests.test_modules_sys -*-
"""
Salt's C{sys} module: what the minion can run, and the documentation of
each function. (The file is C{sysmod}, not C{sys}, so it does not shadow
the standard library; it loads as C{sys}.)
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Callable
from typing import Any

from salttwist.modules import LoaderContext, needsContext, onReactor

__virtualname__ = "sys"


def _plainDoc(doc: str | None) -> str:
    """
    A docstring as users read it: dedented, with epytext inline markup
    (C{C{...}}, C{L{...}}, C{I{...}}, C{B{...}}, C{U{...}}) reduced to its
    text; braces inside the markup (C{C{{"a": 1}}}) are kept.
    """
    return _stripMarkup(inspect.cleandoc(doc or ""))


def _stripMarkup(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        isMarkup = (
            text[i] in "CLIBUM" and text[i + 1 : i + 2] == "{" and not text[i - 1 : i].isalnum()
        )
        if isMarkup:
            depth, j = 1, i + 2
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            if depth == 0:
                out.append(_stripMarkup(text[i + 2 : j - 1]))
                i = j
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _functions(context: LoaderContext) -> dict[str, Callable[..., Any]]:
    return context.functions


def _select(functions: dict[str, Any], pattern: str) -> list[str]:
    """
    Salt's selection: a glob (C{*} or C{.} present) matches function
    names; a bare module name matches that module's functions only
    (C{sys}, not C{sysctl}).
    """
    pattern = str(pattern)
    if "*" in pattern or "." in pattern:
        return fnmatch.filter(functions, pattern)
    prefix = pattern if pattern.endswith(".") else pattern + "."
    return [name for name in functions if name.startswith(prefix)]


@onReactor
@needsContext
def list_modules(context: LoaderContext, *args: str) -> list[str]:
    """
    List the modules loaded on the minion; arguments are globs that filter
    them.

    CLI Example:

        salttwist '*' sys.list_modules
        salttwist '*' sys.list_modules 's*'
    """
    modules = {name.split(".")[0] for name in _functions(context)}
    if not args:
        return sorted(modules)
    return sorted(m for m in modules if any(fnmatch.fnmatchcase(m, str(a)) for a in args))


@onReactor
@needsContext
def list_functions(context: LoaderContext, *args: str, **kwargs: Any) -> list[str]:
    """
    List the functions of every module, or of the modules named (a module
    name, or a glob of function names such as C{sys.list_*}).

    CLI Example:

        salttwist '*' sys.list_functions
        salttwist '*' sys.list_functions sys
        salttwist '*' sys.list_functions 'sys.list_*'
    """
    functions = _functions(context)
    if not args:
        return sorted(functions)
    names: set[str] = set()
    for module in args:
        names.update(_select(functions, module))
    return sorted(names)


@onReactor
@needsContext
def doc(context: LoaderContext, *args: str) -> dict[str, str]:
    """
    Return the documentation of every function, or of the modules and
    functions named (globs allowed), as C{{function: text}}.

    CLI Example:

        salttwist '*' sys.doc
        salttwist '*' sys.doc sys
        salttwist '*' sys.doc sys.doc
        salttwist '*' sys.doc 'cmd.run*' test.ping
    """
    functions = _functions(context)
    names = set(functions) if not args else set()
    for module in args:
        names.update(_select(functions, module))
    return {name: _plainDoc(functions[name].__doc__) for name in sorted(names)}


def _argspec(function: Callable[..., Any]) -> dict[str, Any]:
    parameters = list(inspect.signature(function).parameters.values())
    if getattr(function, "needsContext", False) and parameters:
        # The loader passes the context; callers never do.
        parameters = parameters[1:]
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    defaults = [p.default for p in positional if p.default is not inspect.Parameter.empty]
    keywordOnly = [p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return {
        "args": [p.name for p in positional] or None,
        "defaults": defaults or None,
        "varargs": True
        if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
        else None,
        "kwargs": True
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        else None,
        "kwonlyargs": [p.name for p in keywordOnly] or None,
        "kwonlydefaults": {
            p.name: p.default for p in keywordOnly if p.default is not inspect.Parameter.empty
        }
        or None,
    }


@onReactor
@needsContext
def argspec(context: LoaderContext, module: str = "") -> dict[str, dict[str, Any]]:
    """
    Return the argument specification of every function, or of a module's
    functions, or of the functions matching a glob: C{{function: {"args",
    "defaults", "varargs", "kwargs", "kwonlyargs", "kwonlydefaults"}}}.

    CLI Example:

        salttwist '*' sys.argspec cmd.run
        salttwist '*' sys.argspec sys
        salttwist '*' sys.argspec 'test.*'
    """
    functions = _functions(context)
    names = _select(functions, module) if module else list(functions)
    return {name: _argspec(functions[name]) for name in sorted(names)}
