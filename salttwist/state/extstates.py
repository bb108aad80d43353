# -*- test-case-name: tests.test_state_extstates -*-
"""
Custom state modules: the C{_states} of the file server, synced into
C{extension_modules/states/} by C{saltutil.sync_states} (or
C{sync_all}), loaded beside the built-in state modules for each state run
(L{stateFunctions}).

They are written for Salt: plain functions (C{def present(name, ...)})
using Salt's dunders, which here read the state being run (a
L{StateContext}) at the time of the call:

  - C{__salt__}, C{__grains__}, C{__pillar__} (with a run's C{pillar=}
    override), C{__context__} (shared by the states of one run),
    C{__low__} (the chunk);
  - C{__opts__}: the options, whose C{test} is the run's (Salt's state
    modules check C{__opts__["test"]});
  - C{__states__}: every state function, called as Salt's are
    (C{__states__["file.managed"](name=..., source=...)});
  - C{__env__}: the chunk's saltenv (a string, set before each call: two
    C{parallel} states of different saltenvs in one custom module may see
    each other's);
  - C{__utils__}: the synced C{_utils} functions.

A custom module named as a built-in one replaces it whole, as in Salt;
C{__virtual__} and C{__virtualname__} decide its name, as for custom
execution modules (L{salttwist.modules.extmods}). The modules are
imported again only when a file of the directory changed.

Blocking (imports files): call L{stateFunctions} from the state run's
thread.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from types import ModuleType
from typing import Any

from salttwist.modules import LazyFunctions
from salttwist.modules.extmods import extensionModulesDir, loadExtensionModules, loadUtils
from salttwist.states import STATE_MODULES, StateContext

__all__ = ["refreshStates", "stateFunctions", "wrapStateFunction"]

#: The state being run in this thread, for the dunders.
_CURRENT: ContextVar[StateContext | None] = ContextVar("_CURRENT_STATE", default=None)


def _current() -> StateContext:
    ctx = _CURRENT.get()
    if ctx is None:
        raise RuntimeError("a custom state module's dunders are only usable while a state runs")
    return ctx


class _Live(Mapping[str, Any]):
    """
    A dunder mapping: one field of the current state's context.
    """

    def __init__(self, attribute: str) -> None:
        self._attribute = attribute

    def _target(self) -> Mapping[str, Any]:
        return getattr(_current(), self._attribute)

    def __getitem__(self, key: str) -> Any:
        return self._target()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._target())

    def __len__(self) -> int:
        return len(self._target())

    def __repr__(self) -> str:
        return repr(dict(self._target()))


class _LiveOpts(_Live):
    """
    C{__opts__}: the options, with C{test} the run's.
    """

    def __init__(self) -> None:
        super().__init__("opts")

    def __getitem__(self, key: str) -> Any:
        if key == "test":
            return _current().test
        return self._target()[key]

    def __iter__(self) -> Iterator[str]:
        return iter({**self._target(), "test": None})

    def __len__(self) -> int:
        return len({**self._target(), "test": None})


class _LiveContext(MutableMapping[str, Any]):
    """
    C{__context__}: the run's shared dictionary.
    """

    def __getitem__(self, key: str) -> Any:
        return _current().context[key]

    def __setitem__(self, key: str, value: Any) -> None:
        _current().context[key] = value

    def __delitem__(self, key: str) -> None:
        del _current().context[key]

    def __iter__(self) -> Iterator[str]:
        return iter(_current().context)

    def __len__(self) -> int:
        return len(_current().context)


class _LiveStates(Mapping[str, Callable[..., Any]]):
    """
    C{__states__}: the state functions, called as Salt's (without the
    context, which is the current state's).
    """

    def __getitem__(self, key: str) -> Callable[..., Any]:
        ctx = _current()
        function = ctx.states[key]

        def call(*args: Any, **kwargs: Any) -> Any:
            return function(ctx, *args, **kwargs)

        call.__name__ = key
        return call

    def __iter__(self) -> Iterator[str]:
        return iter(_current().states)

    def __len__(self) -> int:
        return len(_current().states)


def wrapStateFunction(function: Callable[..., Any], module: ModuleType) -> Callable[..., Any]:
    """
    A Salt-style state function as salttwist's take it: the
    L{StateContext} first (its signature says so, for the runner's
    argument matching), the dunders of C{module} reading it during the
    call.
    """

    def run(ctx: StateContext, *args: Any, **kwargs: Any) -> Any:
        token = _CURRENT.set(ctx)
        vars(module)["__env__"] = ctx.saltenv
        try:
            return function(*args, **kwargs)
        finally:
            _CURRENT.reset(token)

    signature = inspect.signature(function)
    ctxParameter = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_ONLY)
    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[ctxParameter, *signature.parameters.values()]
    )
    run.__name__ = function.__name__
    run.__qualname__ = function.__qualname__
    run.__doc__ = function.__doc__
    run.__module__ = function.__module__
    return run


def _dunders(opts: Mapping[str, Any], utils: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "__opts__": _LiveOpts(),
        "__salt__": _Live("salt"),
        "__grains__": _Live("grains"),
        "__pillar__": _Live("pillar"),
        "__low__": _Live("low"),
        "__context__": _LiveContext(),
        "__states__": _LiveStates(),
        "__utils__": utils,
        "__env__": "base",
    }


def _snapshot(directory: str) -> tuple[tuple[str, int, int], ...]:
    """
    @return: the C{.py} files of C{directory} with their mtime and size
        (C{()} when there is none).
    """
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return ()
    files = []
    for name in names:
        if not name.endswith(".py") or name.startswith("."):
            continue
        try:
            info = os.stat(os.path.join(directory, name))
        except OSError:
            continue
        files.append((name, info.st_mtime_ns, info.st_size))
    return tuple(files)


_lock = threading.Lock()
_cache: dict[str, tuple[tuple[tuple[str, int, int], ...], LazyFunctions]] = {}


def _builtin() -> LazyFunctions:
    return LazyFunctions("salttwist.states", STATE_MODULES)


def stateFunctions(opts: Mapping[str, Any]) -> Mapping[str, Callable[..., Any]]:
    """
    The state functions of a run: the built-in ones and the custom ones
    synced into C{extension_modules/states/} (which hide a built-in module
    of the same name). Imported again only when a file there changed.

    @return: state functions by C{module.function}, each taking a
        L{StateContext} first.
    """
    extDir = extensionModulesDir(opts)
    directory = os.path.join(extDir, "states")
    snapshot = _snapshot(directory)
    with _lock:
        cached = _cache.get(directory)
        if cached is not None and cached[0] == snapshot:
            return cached[1]
        functions = _builtin()
        if snapshot:
            utils = loadUtils(extDir, opts, {})
            custom: dict[str, Callable[..., Any]] = {}
            for loaded in loadExtensionModules(directory, "states", _dunders(opts, utils)):
                for name, function in loaded.functions.items():
                    custom[name] = wrapStateFunction(function, loaded.module)
            functions.setExtensions(custom)
        _cache[directory] = (snapshot, functions)
        return functions


def refreshStates(states: Any, opts: Mapping[str, Any]) -> bool:
    """
    Bring a run's state functions up to date with
    C{extension_modules/states/} in place (a sync or a module reload in
    the middle of the run: Salt's C{module_refresh} loads the state
    modules again too), so that every holder of C{states} (the runner,
    C{__states__}) sees the new custom states from the next one on.

    @param states: the run's mapping, as L{stateFunctions} gave it (or
        the built-in ones alone, L{salttwist.states.loadStates}).
    @return: whether the custom state functions were replaced.
    """
    if not isinstance(states, LazyFunctions):
        return False
    fresh = stateFunctions(opts)
    if fresh is states or not isinstance(fresh, LazyFunctions):
        return False
    states.setExtensions(fresh.extensions())
    return True
