# -*- test-case-name: tests.test_master_memory -*-
"""
How the worker child imports AMP without what it would pull in for nothing
(see L{importLean}); kept apart from L{salttwist.workers.child}, which
imports AMP at the top, so it can be used and tested in a fresh process.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

# The same stand-in the daemons import Twisted's defer with.
from salttwist._startup import asyncioStandIn

__all__ = ["asyncioStandIn", "importLean"]


def importLean(name: str) -> ModuleType:
    """
    Import C{name} (the child imports C{twisted.protocols.amp}) without two
    modules it would pull in for nothing in a worker:

      - C{twisted.internet.ssl} (hence pyOpenSSL), for AMP's StartTLS: about
        a third of a worker's start-up time. AMP takes an L{ImportError} as
        "no TLS", so the module is hidden meanwhile.
      - C{asyncio}, which C{twisted.internet.defer} imports: replaced by
        L{asyncioStandIn} meanwhile, unless C{asyncio} or C{defer} is
        already imported. If the import fails with the stand-in (a Twisted
        that wants more of C{asyncio}), it is done again with the real one.

    Both are unhidden afterwards: a later import of either loads the real
    module. Modules imported meanwhile keep what they took from the
    stand-in.

    @return: the module.
    """
    hidden: dict[str, ModuleType | None] = {"twisted.internet.ssl": None}
    if "asyncio" not in sys.modules and "twisted.internet.defer" not in sys.modules:
        hidden["asyncio"] = asyncioStandIn()
    sys.modules.update(hidden)  # type: ignore[arg-type]
    try:
        try:
            return importlib.import_module(name)
        except (ImportError, AttributeError):
            # A Twisted that wants more of asyncio than the stand-in has.
            if "asyncio" not in hidden:
                raise
            del sys.modules["asyncio"], hidden["asyncio"]
            return importlib.import_module(name)
    finally:
        for hiddenName, module in hidden.items():
            if hiddenName in sys.modules and sys.modules[hiddenName] is module:
                del sys.modules[hiddenName]
