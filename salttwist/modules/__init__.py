# -*- test-case-name: tests.test_modules_sys,tests.test_minion_parts -*-
"""
Execution modules: the functions a minion runs, named C{module.function}.

A function runs in a thread unless it is marked L{onReactor}, in which case
it runs on the reactor and must return quickly (usually a L{Deferred}).
Functions marked L{needsContext} receive a L{LoaderContext} first.

A module is named by its C{__virtualname__} when it has one (C{sysmod} is
C{sys}, C{filemod} is C{file}: file names that would shadow the standard
library). Its public functions are loaded; a trailing C{_} is dropped from
a name, so C{true_} is C{test.true}. Every function's docstring is what
C{sys.doc} shows and must hold a C{CLI Example:}.

Failures that are values return L{Retcode}; expected errors raise
L{CommandExecutionError} or L{SaltInvocationError}, which the job returns
in Salt's words (C{ERROR: ...}).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The modules loaded by L{loadFunctions}, by file name in this package.
MODULES = (
    "test",
    "cmd",
    "grains",
    "sysmod",
    "network",
    "filemod",
    "disk",
    "status",
    "pkg",
    "saltutil",
    "event",
)


class CommandExecutionError(Exception):
    """
    A module function failed in a way it expected (a missing file, a
    command that cannot start); the job returns C{ERROR: <message>} with
    retcode 1, as Salt does.
    """


class SaltInvocationError(Exception):
    """
    A module function was called with arguments it cannot use; the job
    returns C{ERROR executing '<fun>': <message>} with retcode 1, as Salt
    does.
    """


@dataclass
class LoaderContext:
    """
    What a module function may need: Salt's C{__opts__}, C{__grains__} and
    the reactor.
    """

    opts: dict[str, Any]
    grains: dict[str, Any]
    reactor: Any
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    #: Called on the reactor thread after a module changed C{grains}, so the
    #: minion can report them to its master.
    onGrainsChanged: Callable[[], None] | None = None
    #: The jobs this minion is running, by jid (Salt's proc dir), for the
    #: saltutil module: each has C{info()} and C{cancel()}.
    running: dict[str, Any] = field(default_factory=dict)
    #: Sends C{(tag, data)} to the master's event bus over the minion's own
    #: session (Salt's C{_minion_event}), on the reactor thread: returns a
    #: L{Deferred} that fails with
    #: L{salttwist.transport.reqclient.RequestError} when the master refuses
    #: the event. L{None} when there is no master (C{salttwist-call --local}).
    fireMaster: Callable[[str, Any], Any] | None = None
    #: Fires C{(tag, data)} on the minion daemon's own event bus, on the
    #: reactor thread (C{event.fire}). L{None} outside the daemon
    #: (C{salttwist-call}), where C{event.fire} writes to the running
    #: daemon's pull socket instead.
    fireLocal: Callable[[str, dict[str, Any]], None] | None = None


@dataclass(frozen=True)
class Retcode:
    """
    A function's value with an explicit retcode, for functions whose
    failure is a value rather than an exception (Salt's
    C{__context__["retcode"]}); C{success} follows from C{retcode == 0}.
    """

    value: Any
    retcode: int


def onReactor(f: Callable[..., Any]) -> Callable[..., Any]:
    """
    Mark C{f} as non-blocking: it runs on the reactor thread.
    """
    f.runsOnReactor = True  # type: ignore[attr-defined]
    return f


def needsContext(f: Callable[..., Any]) -> Callable[..., Any]:
    """
    Mark C{f} as taking the L{LoaderContext} as its first argument.
    """
    f.needsContext = True  # type: ignore[attr-defined]
    return f


def loadFunctions(modules: tuple[str, ...] = MODULES) -> dict[str, Callable[..., Any]]:
    """
    @return: every public function of the named modules, by C{module.function}.
    """
    return publicFunctions("salttwist.modules", modules)


def publicFunctions(package: str, modules: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    """
    The functions a module of C{package} offers: public functions defined in
    it (not imported), named C{virtualname.function} (C{__virtualname__} or
    the module's name; a trailing C{_} is dropped so C{list_} is C{list}).
    """
    functions: dict[str, Callable[..., Any]] = {}
    for name in modules:
        module = importlib.import_module(f"{package}.{name}")
        virtualName = getattr(module, "__virtualname__", name)
        for attr, value in vars(module).items():
            if attr.startswith("_") or not inspect.isfunction(value):
                continue
            if value.__module__ != module.__name__:
                continue
            functions[f"{virtualName}.{attr.rstrip('_')}"] = value
    return functions
