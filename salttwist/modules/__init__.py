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
import threading
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from salttwist.modules._jobprocesses import JobProcesses

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
    "key",
    "pillar",
    "cp",
    "state",
    "config",
    "defaults",
    "slsutil",
    "service",
    "user",
    "group",
    "cron",
    "git",
    "archive",
    "shadow",
    "log",
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
    #: The jids of the jobs killed lately (C{saltutil.kill_job}, or the
    #: minion stopping), oldest first, with the signal's name: a killed job
    #: leaves L{running} at once, while its thread may not yet have looked.
    killed: dict[str, str] = field(default_factory=dict)
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
    #: The L{salttwist.fileserver.interfaces.IFileClient} that fetches
    #: C{salt://} files (over the session, or from local roots with
    #: C{file_client: local}); L{None} where there is none.
    fileClient: Any = None
    #: The minion's pillar as last compiled by its master (or locally):
    #: replaced whole, never mutated, by a refresh.
    pillar: dict[str, Any] = field(default_factory=dict)
    #: Asks for the minion's pillar again, on the reactor thread: returns a
    #: L{Deferred} firing with the new pillar once C{pillar} holds it.
    #: L{None} where the pillar cannot be refreshed.
    refreshPillar: Callable[[], Any] | None = None
    #: Asks for the minion's pillar with other inputs, without keeping it:
    #: C{fetchPillar(saltenv=None, pillarenv=None, override=None)} returns a
    #: L{Deferred} firing with it (C{pillar.items(pillarenv=...)}), on the
    #: reactor thread. L{None} where there is none.
    fetchPillar: Callable[..., Any] | None = None
    #: The id of the job a function marked L{needsJid} runs for (in its own
    #: copy of the context); L{None} otherwise.
    jid: str | None = None
    #: The process groups of the commands each job runs (one registry per
    #: minion, shared by every copy of the context): killing a job kills
    #: them, whether the reactor or a state run's thread started them.
    processes: JobProcesses = field(default_factory=JobProcesses)


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


def needsJid(f: Callable[..., Any]) -> Callable[..., Any]:
    """
    Mark C{f} (which takes the L{LoaderContext}) as needing the id of the
    job it runs for: it gets its own copy of the context, whose C{jid} is
    set.
    """
    f.needsContext = True  # type: ignore[attr-defined]
    f.needsJid = True  # type: ignore[attr-defined]
    return f


def loadFunctions(modules: tuple[str, ...] = MODULES) -> LazyFunctions:
    """
    @return: every public function of the named modules, by C{module.function},
        each module imported when first needed (see L{LazyFunctions}).
    """
    return LazyFunctions("salttwist.modules", modules)


def publicFunctions(package: str, modules: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    """
    The functions a module of C{package} offers: public functions defined in
    it (not imported), named C{virtualname.function} (C{__virtualname__} or
    the module's name; a trailing C{_} is dropped so C{list_} is C{list}).
    """
    functions: dict[str, Callable[..., Any]] = {}
    for name in modules:
        functions.update(_moduleFunctions(package, name))
    return functions


def _moduleFunctions(package: str, name: str) -> dict[str, Callable[..., Any]]:
    """
    @return: the public functions of module C{package.name}, as
        L{publicFunctions} names them.
    """
    module = importlib.import_module(f"{package}.{name}")
    virtualName = getattr(module, "__virtualname__", name)
    functions: dict[str, Callable[..., Any]] = {}
    for attr, value in vars(module).items():
        if attr.startswith("_") or not inspect.isfunction(value):
            continue
        if value.__module__ != module.__name__:
            continue
        functions[f"{virtualName}.{attr.rstrip('_')}"] = value
    return functions


class LazyFunctions(MutableMapping[str, Callable[..., Any]]):
    """
    The functions of L{publicFunctions}, with each module imported only when
    one of its functions is first looked up, so that a minion starts without
    importing every execution module (and what they import) for a
    C{test.ping}.

    Looking up C{mod.fun} imports the module whose file is named C{mod}
    (most are); a name still missing then (C{sys.*} lives in C{sysmod}, a
    function that does not exist) imports all the others, as does listing
    or counting the functions. A name set here is kept even if a module
    loaded later defines it too. A module that fails to import raises its
    error from the lookup, and is tried again at the next.

    Custom modules synced from the file server (L{salttwist.modules.extmods})
    are set with L{setExtensions}: their functions are found first, and a
    custom module named as a built-in one hides all of the built-in one's
    functions (Salt lets a custom module replace a built-in one).
    """

    def __init__(self, package: str, modules: tuple[str, ...]) -> None:
        self._package = package
        self._modules = tuple(modules)
        self._pending = list(modules)
        self._functions: dict[str, Callable[..., Any]] = {}
        # The custom modules' functions, and the names of their modules;
        # replaced whole (never mutated) by setExtensions.
        self._extensions: dict[str, Callable[..., Any]] = {}
        self._extensionModules: frozenset[str] = frozenset()
        # Functions run in threads and may list the others (sys.*).
        self._lock = threading.RLock()

    def setExtensions(self, functions: dict[str, Callable[..., Any]]) -> None:
        """
        Make C{functions} (by C{module.function}) the custom modules'
        functions, replacing those set before.
        """
        modules = frozenset(name.partition(".")[0] for name in functions)
        with self._lock:
            self._extensions, self._extensionModules = dict(functions), modules

    def extensions(self) -> dict[str, Callable[..., Any]]:
        """
        @return: the custom modules' functions, by C{module.function}.
        """
        return dict(self._extensions)

    def builtinModules(self) -> set[str]:
        """
        @return: the names of the built-in modules (imports them all).
        """
        self._loadAll()
        return {name.partition(".")[0] for name in self._functions}

    def _load(self, name: str) -> None:
        with self._lock:
            if name not in self._pending:
                return
            functions = _moduleFunctions(self._package, name)
            self._pending.remove(name)
            for key, value in functions.items():
                self._functions.setdefault(key, value)

    def _loadAll(self) -> None:
        with self._lock:
            while self._pending:
                self._load(self._pending[0])

    def __getitem__(self, key: str) -> Callable[..., Any]:
        if self._extensionModules:
            extension = self._extensions.get(key)
            if extension is not None:
                return extension
            if key.partition(".")[0] in self._extensionModules:
                raise KeyError(key)
        if key not in self._functions and self._pending:
            module = key.partition(".")[0]
            self._load(module)
            if key not in self._functions:
                self._loadAll()
        return self._functions[key]

    def __setitem__(self, key: str, value: Callable[..., Any]) -> None:
        self._functions[key] = value

    def __delitem__(self, key: str) -> None:
        self._loadAll()
        del self._functions[key]

    def _visible(self) -> dict[str, Callable[..., Any]]:
        """
        @return: every function as looked up: the built-in ones not hidden
            by a custom module, and the custom ones.
        """
        self._loadAll()
        hidden = self._extensionModules
        functions = {
            name: function
            for name, function in self._functions.items()
            if name.partition(".")[0] not in hidden
        }
        functions.update(self._extensions)
        return functions

    def __iter__(self) -> Iterator[str]:
        if not self._extensionModules:
            self._loadAll()
            return iter(dict(self._functions))
        return iter(self._visible())

    def __len__(self) -> int:
        if not self._extensionModules:
            self._loadAll()
            return len(self._functions)
        return len(self._visible())

    def loaded(self) -> list[str]:
        """
        @return: the names of the modules imported so far.
        """
        return [name for name in self._modules if name not in self._pending]
