# -*- test-case-name: tests.test_startup -*-
"""
Start-up cost of the salttwist commands.

Every command starts a fresh interpreter, so import time is most of what
a short command such as C{salttwist '*' test.ping} costs. Two imports that
Twisted makes on every start and that salttwist never uses are put off:

  - C{twisted.python.compat} imports C{http.cookiejar} (which pulls in
    C{urllib.request}, C{http.client}, C{email} and C{ssl}: about a
    tenth of a second) only to re-export it under a deprecated name.
    L{deferModule} registers it as a lazy module, executed on first use.
  - C{twisted.internet.posixbase} imports C{twisted.internet.ssl}, and
    with it pyOpenSSL and service_identity, to offer C{listenSSL}. A
    command that speaks plain TCP calls L{withoutTLS} before it imports
    the reactor, as the worker child already does.
"""

from __future__ import annotations

import importlib.util
import sys

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
    Put off the imports in L{DEFERRED_MODULES}.
    """
    for name in DEFERRED_MODULES:
        deferModule(name)


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
