# -*- test-case-name: tests.test_states_saltutil -*-
"""
Salt's C{saltutil} state module: the C{saltutil.sync_*} execution
functions as states, whose changes are the custom modules synced.

    sync_everything:
      saltutil.sync_all:
        - refresh: True

    my_states:
      saltutil.sync_states: []

The states of the run that come after one of these that synced
something see the new custom modules, C{_states} included (the runner
reloads them: L{salttwist.state.runafter.refreshAfter}).
"""

from __future__ import annotations

import logging
from typing import Any

from salttwist.states import StateContext, stateReturn

log = logging.getLogger(__name__)


def _syncArguments(
    saltenv: Any, refresh: Any, extmod_whitelist: Any, extmod_blacklist: Any
) -> dict[str, Any]:
    arguments: dict[str, Any] = {"refresh": refresh}
    if saltenv is not None:
        arguments["saltenv"] = saltenv
    if extmod_whitelist is not None:
        arguments["extmod_whitelist"] = extmod_whitelist
    if extmod_blacklist is not None:
        arguments["extmod_blacklist"] = extmod_blacklist
    return arguments


def _syncSingle(ctx: StateContext, name: str, kind: str, arguments: dict[str, Any]) -> dict:
    """
    Salt's C{_sync_single}: run C{saltutil.sync_<kind>}; the modules it
    synced are the changes.
    """
    ret = stateReturn(name)
    if ctx.test:
        ret["result"] = None
        ret["comment"] = f"saltutil.sync_{kind} would have been run"
        return ret
    try:
        synced = ctx.salt[f"saltutil.sync_{kind}"](**arguments)
    except Exception as e:
        log.error("Failed to run saltutil.sync_%s: %s", kind, e)
        ret["result"] = False
        ret["comment"] = f"Failed to run sync_{kind}: {e}"
        return ret
    if synced:
        ret["changes"][kind] = synced
        ret["comment"] = f"Updated {kind}."
    else:
        ret["comment"] = "No updates to sync"
    return ret


def sync_all(
    ctx: StateContext,
    name: str,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> dict[str, Any]:
    """
    C{saltutil.sync_all}: sync every kind of custom module; the changes
    are the kinds that synced something, each with its modules.
    """
    ret = stateReturn(name)
    if ctx.test:
        ret["result"] = None
        ret["comment"] = "saltutil.sync_all would have been run"
        return ret
    arguments = _syncArguments(saltenv, refresh, extmod_whitelist, extmod_blacklist)
    try:
        synced = ctx.salt["saltutil.sync_all"](**arguments)
    except Exception as e:
        log.error("Failed to run saltutil.sync_all: %s", e)
        ret["result"] = False
        ret["comment"] = f"Failed to run sync_all: {e}"
        return ret
    for kind, modules in (synced or {}).items():
        if modules:
            ret["changes"][kind] = modules
    ret["comment"] = "Sync performed" if ret["changes"] else "No updates to sync"
    return ret


def _single(kind: str) -> Any:
    def sync(
        ctx: StateContext,
        name: str,
        saltenv: Any = None,
        refresh: Any = True,
        extmod_whitelist: Any = None,
        extmod_blacklist: Any = None,
    ) -> dict[str, Any]:
        arguments = _syncArguments(saltenv, refresh, extmod_whitelist, extmod_blacklist)
        return _syncSingle(ctx, name, kind, arguments)

    sync.__name__ = sync.__qualname__ = f"sync_{kind}"
    sync.__doc__ = (
        f"C{{saltutil.sync_{kind}}}: sync the custom {kind} of C{{_{kind}}}; the "
        f"changes are C{{{{'{kind}': [the modules synced]}}}}."
    )
    return sync


sync_modules = _single("modules")
sync_states = _single("states")
sync_grains = _single("grains")
sync_utils = _single("utils")
