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
  - Modules imported on start-up paths and used only on rare ones (C{pdb}
    for twistd's C{--debug}, the compression modules for archives, ...)
    are deferred (L{DEFERRED_MODULES}): a daemon keeps what it imports for
    its whole life.
  - The daemons import Twisted's C{defer} with a stand-in for C{asyncio}
    (L{importDeferWithoutAsyncio}).
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

#: Modules imported at start-up (by Twisted or the standard library) that
#: salttwist's commands do not use on their own paths, each with the
#: modules it needs to work: it is deferred only if they can be found, so
#: that an C{import} guarded by C{except ImportError} still fails at once
#: where it would have. RSS of an idle minion, measured: C{pdb} (imported
#: by C{twisted.application.app} for C{--debug}; C{getpass} too, for
#: C{--encrypted}) about 480 KB; C{bz2} and C{lzma} (which C{shutil} and
#: C{zipfile} import to see whether they can compress, with their shared
#: libraries) about 390 KB; C{stringprep} (imported by the C{idna} codec,
#: which C{socket.getaddrinfo} loads for any host name, and used only for a
#: name that is not ASCII) about 150 KB.
DEFERRED_MODULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("http.cookiejar", ()),
    ("pdb", ()),
    ("getpass", ()),
    ("bz2", ("_bz2",)),
    ("lzma", ("_lzma",)),
    ("stringprep", ()),
)


def deferModule(name: str, needs: tuple[str, ...] = ()) -> None:
    """
    Register C{name} as a deferred module (L{_DeferredModule}): it is found
    now (so a missing module still fails at once) and executed when one of
    its attributes is first used. Does nothing if it is already imported,
    or if one of C{needs} (modules it imports) cannot be found.
    """
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    if any(importlib.util.find_spec(need) is None for need in needs):
        return
    module = importlib.util.module_from_spec(spec)
    _DEFERRED_LOCKS[name] = _thread.RLock()
    module.__class__ = _DeferredModule
    sys.modules[name] = module
    parentName, _, childName = name.rpartition(".")
    if parentName:
        setattr(importlib.import_module(parentName), childName, module)


#: The lock of each deferred module, held while its code runs.
_DEFERRED_LOCKS: dict[str, Any] = {}


class _DeferredModule(ModuleType):
    """
    A module registered by L{deferModule}: its code runs, under its lock
    (for threads reading it at once), when an attribute is first read.

    Reading its C{__spec__} does not run it: an C{import} statement of a
    module already in C{sys.modules} reads it (to see whether the module is
    still being imported), which would otherwise run every deferred module
    whose name a module merely imports. (C{importlib.util.LazyLoader}'s
    modules run then.)
    """

    def __getattribute__(self, name: str) -> Any:
        if name == "__spec__":
            return super().__getattribute__(name)
        _runDeferred(self)
        return getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        _runDeferred(self)
        setattr(self, name, value)

    def __delattr__(self, name: str) -> None:
        _runDeferred(self)
        delattr(self, name)


def _runDeferred(module: ModuleType) -> None:
    """
    Run the code of C{module}, a L{_DeferredModule}, unless another thread
    just did; it is an ordinary module afterwards. If its code raises, it
    is taken out of C{sys.modules}, as a failed import is.
    """
    spec = ModuleType.__getattribute__(module, "__spec__")
    with _DEFERRED_LOCKS[spec.name]:
        if type(module) is not _DeferredModule:
            return
        object.__setattr__(module, "__class__", ModuleType)
        try:
            spec.loader.exec_module(module)
        except BaseException:
            if sys.modules.get(spec.name) is module:
                del sys.modules[spec.name]
            raise


def deferStartupImports() -> None:
    """
    Put off the imports in L{DEFERRED_MODULES}, and have C{asyncio}, when
    something first imports it, imported without C{ssl}
    (L{asyncioWithoutSSL}).
    """
    for name, needs in DEFERRED_MODULES:
        deferModule(name, needs)
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


def asyncioStandIn() -> ModuleType:
    """
    @return: a module with the three names C{twisted.internet.defer} imports
        from C{asyncio}, for L{importDeferWithoutAsyncio}.

    C{AbstractEventLoop} and C{Future} appear in C{defer} only in
    annotations (it has C{from __future__ import annotations});
    C{iscoroutine} is C{asyncio}'s test as of Python 3.12, which on 3.11
    also accepts generators: C{defer} tests for those itself wherever it
    calls C{iscoroutine}.
    """
    import collections.abc
    import types

    standIn = ModuleType("asyncio", "Stand-in for asyncio while Twisted's defer is imported.")

    class AbstractEventLoop:
        """
        Stand-in for C{asyncio.AbstractEventLoop}, named in annotations only.
        """

    class Future:
        """
        Stand-in for C{asyncio.Future}, named in annotations only.
        """

    def iscoroutine(obj: object) -> bool:
        """
        @return: whether C{obj} is a coroutine, as C{asyncio.iscoroutine}.
        """
        return isinstance(obj, (types.CoroutineType, collections.abc.Coroutine))

    standIn.AbstractEventLoop = AbstractEventLoop  # type: ignore[attr-defined]
    standIn.Future = Future  # type: ignore[attr-defined]
    standIn.iscoroutine = iscoroutine  # type: ignore[attr-defined]
    return standIn


def importDeferWithoutAsyncio() -> bool:
    """
    Import C{twisted.internet.defer} with L{asyncioStandIn} as C{asyncio},
    then take the stand-in out of C{sys.modules}: a later C{import asyncio}
    loads the real package (as L{asyncioWithoutSSL} says).

    C{defer} imports C{asyncio} only for C{Deferred.asFuture} and
    C{fromFuture}, which take their event loop or future from the caller:
    they work the same. The real package is about 1.8 MB of an idle
    minion's RSS (30 modules, C{subprocess} and C{concurrent.futures} with
    them), kept for the daemon's life. A Twisted that wants more of
    C{asyncio} than the stand-in has gets the real one.

    Does nothing if C{defer} or C{asyncio} is already imported.

    @return: whether C{defer} was imported with the stand-in.
    """
    if "twisted.internet.defer" in sys.modules or "asyncio" in sys.modules:
        return False
    standIn = asyncioStandIn()
    sys.modules["asyncio"] = standIn
    try:
        import twisted.internet.defer  # noqa: F401
    except (ImportError, AttributeError):
        # A Twisted that wants more of asyncio than the stand-in has.
        if sys.modules.get("asyncio") is not standIn:
            raise
        del sys.modules["asyncio"]
        import twisted.internet.defer  # noqa: F401

        return False
    finally:
        if sys.modules.get("asyncio") is standIn:
            del sys.modules["asyncio"]
    return True


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


#: The collector's thresholds for the master daemon (C{gc.set_threshold}):
#: a master holding thousands of connections keeps hundreds of thousands of
#: objects, which Python's defaults (700, 10, 10) scan in full every few
#: seconds of an auth storm (a tenth to a quarter of a second each time,
#: about a sixth of its CPU). With a younger generation of 50,000 objects
#: and fewer promotions, the same storm spends a fifth of that; the garbage
#: that waits longer for collection is a few MB at most.
MASTER_GC_THRESHOLDS = (50_000, 20, 10)


def releaseGarbageCollection(thresholds: tuple[int, int, int] | None = None) -> None:
    """
    End L{holdGarbageCollection} once the start-up imports are done: what
    exists now (modules, classes, functions: kept for the process's life)
    is moved out of the collector's sight (C{gc.freeze}), so the
    collections of the running command only scan what it makes, and the
    collector is turned back on. Does nothing if it was not held.

    @param thresholds: the collector's thresholds from now on, if not
        Python's defaults (see L{MASTER_GC_THRESHOLDS}).
    """
    if gc.isenabled():
        return
    gc.freeze()
    if thresholds is not None:
        gc.set_threshold(*thresholds)
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
