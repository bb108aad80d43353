# -*- test-case-name: tests.test_startup -*-
"""
Start-up cost of the salttwist commands.

Every command starts a fresh interpreter, so import time is most of what
a short command such as C{salttwist '*' test.ping} costs. Imports that
Twisted makes on every start and that salttwist never uses are put off:

  - C{twisted.python.compat} imports C{http.cookiejar} (which pulls in
    C{urllib.request}, C{http.client}, C{email} and C{ssl}: about a
    tenth of a second) only to re-export it under a deprecated name.
    L{deferModule} registers it as a lazy module, executed on first use.
  - C{twisted.internet.defer} imports C{asyncio}, which imports C{ssl}:
    L{asyncioWithoutSSL} has C{asyncio} imported with C{ssl} hidden.
  - C{twisted.internet.posixbase} imports C{twisted.internet.ssl}, and
    with it pyOpenSSL and service_identity, to offer C{listenSSL}. A
    command that speaks plain TCP calls L{withoutTLS} before it imports
    the reactor, as the worker child already does.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import sys
from typing import Any

#: Modules imported by Twisted at start-up that salttwist's commands do not
#: use on their own paths.
DEFERRED_MODULES = ("http.cookiejar",)


def deferModule(name: str) -> None:
    """
    Register C{name} as a lazy module: it is found now (so a missing module
    still fails at once) and executed when one of its attributes is first
    used. Does nothing if it is already imported.
    """
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parentName, _, childName = name.rpartition(".")
    if parentName:
        setattr(importlib.import_module(parentName), childName, module)


def deferStartupImports() -> None:
    """
    Put off the imports in L{DEFERRED_MODULES}, and have C{asyncio}, when
    something first imports it, imported without C{ssl}
    (L{asyncioWithoutSSL}).
    """
    for name in DEFERRED_MODULES:
        deferModule(name)
    asyncioWithoutSSL()


def asyncioWithoutSSL() -> bool:
    """
    Have C{asyncio} imported with the C{ssl} module hidden, as if Python had
    no SSL support, when something first imports it.

    C{twisted.internet.defer} imports C{asyncio} (for C{Deferred.asFuture}),
    which imports C{ssl}, and OpenSSL's C{libssl} and C{libcrypto} with it,
    only to offer TLS to asyncio's own event loops: about 2.5 MB of every
    process and a few tens of milliseconds of its start. salttwist runs no
    asyncio loop, and its TLS goes through Twisted and pyOpenSSL. Only
    C{asyncio}'s own SSL support is lost: C{ssl} itself stays importable for
    whatever else wants it, before and after.

    Does nothing if C{asyncio} or C{ssl} is already imported, or this was
    already arranged.

    @return: whether it was arranged.
    """
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return False
    if any(isinstance(finder, _AsyncioWithoutSSL) for finder in sys.meta_path):
        return False
    sys.meta_path.insert(0, _AsyncioWithoutSSL())
    return True


class _AsyncioWithoutSSL:
    """
    A meta path finder for C{asyncio} alone, used once: it finds the real
    package and wraps its loader in L{_HidingSSL}.
    """

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "asyncio":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        if "ssl" in sys.modules:
            return None
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _HidingSSL(spec.loader)
        return spec


class _HidingSSL:
    """
    A loader running another's C{exec_module} with C{ssl} unimportable (so
    that C{asyncio} and the submodules it imports see C{ssl = None}), and
    otherwise that loader.
    """

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        hidden = "ssl" not in sys.modules
        if hidden:
            sys.modules["ssl"] = None  # type: ignore[assignment]
        try:
            self._loader.exec_module(module)
        finally:
            if hidden and "ssl" in sys.modules and sys.modules["ssl"] is None:
                del sys.modules["ssl"]


def withoutTLS() -> bool:
    """
    Keep pyOpenSSL out of this process so the reactor starts without TLS
    support (C{listenSSL}/C{connectSSL} are then unavailable). Only for
    processes that speak plain TCP; does nothing if the reactor or
    pyOpenSSL is already imported.

    @return: whether TLS was kept out.
    """
    if "twisted.internet.reactor" in sys.modules or "OpenSSL" in sys.modules:
        return False
    sys.modules["OpenSSL"] = None  # type: ignore[assignment]
    return True


def holdGarbageCollection() -> None:
    """
    Turn the cyclic garbage collector off while a command starts: importing
    a few hundred modules allocates enough objects to trigger collections
    that scan everything imported so far, again and again, and find next
    to nothing to free. L{releaseGarbageCollection} turns it back on. For
    command entry points only, never on import.
    """
    gc.disable()


def releaseGarbageCollection() -> None:
    """
    End L{holdGarbageCollection} once the start-up imports are done: what
    exists now (modules, classes, functions: kept for the process's life)
    is moved out of the collector's sight (C{gc.freeze}), so the
    collections of the running command only scan what it makes, and the
    collector is turned back on. Does nothing if it was not held.
    """
    if gc.isenabled():
        return
    gc.freeze()
    gc.enable()


def exitNow(code: int) -> None:
    """
    End the process after a command or daemon finished cleanly, without
    the interpreter's finalisation: all that is left then is tearing down
    every module and object one by one (a full garbage collection among
    them), which takes a tenth of a second or more of a process that
    imported Twisted. The C{atexit} functions still run and the standard
    streams are flushed; the caller has closed its files and stopped its
    threads (a daemon's twisted log observers flush every line).
    """
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
