# -*- test-case-name: tests.test_state_runner_after -*-
"""
What a state run does after a state returned, besides recording it
(Salt's C{State.check_refresh} and C{State.event} for C{fire_event}):

  - C{reload_grains: True}, C{reload_pillar: True}: gather the grains or
    fetch the pillar again (C{saltutil.refresh_grains},
    C{saltutil.refresh_pillar}) and show the new values to the rest of
    the run, then reload the custom modules;
  - C{reload_modules: True} on a state that changed something (or
    C{force_reload_modules: True} on one that did not): reload the custom
    modules (C{saltutil.refresh_modules});
  - without being asked, as Salt, after a state that changed something
    that may hold new modules (L{changesNeedReload}: C{pkg}, C{pip},
    C{ports} states, C{file.managed} of a C{.py}/C{.so} ...,
    C{file.recurse}, C{file.symlink} into a C{bin}): reload them too.
    Every reload first makes newly installed Python packages importable
    (L{refreshImports}; Salt reloads C{site}: here the import caches are
    cleared and new site directories added, without running
    C{sitecustomize} again), and ends by loading the run's state
    functions again (L{salttwist.state.extstates.refreshStates}): the
    custom C{_states} synced since the run began are used by the next
    states, as after Salt's C{module_refresh};
  - after a state that synced custom modules (L{syncsModules}: a
    C{saltutil.sync_*} state, a C{module.run} of a C{saltutil.sync_*}
    function) the run's state functions are loaded again too, whether
    it reloaded the other modules or not (Salt's loader finds a state
    module synced meanwhile when it is first asked for);
  - C{fire_event: True} (or a string): fire
    C{salt/state_result/<jid>/<minion>/<name or string>} with
    C{{"ret": <the state's return>}} to the master.

Failures here are logged; they never change the state's return.
"""

from __future__ import annotations

import importlib
import logging
import os
import site
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

log = logging.getLogger(__name__)

#: The state modules whose changes make Salt reload the modules.
_PACKAGE_STATES = ("pkg", "ports", "pip")

#: A file managed with one of these names may be a module.
_MODULE_SUFFIXES = (".py", ".pyx", ".pyo", ".pyc", ".so")


def changesNeedReload(low: Mapping[str, Any]) -> bool:
    """
    Salt's C{check_refresh} rules: whether changes made by the chunk
    C{low} may have brought new modules.
    """
    state, fun, name = low.get("state"), low.get("fun"), str(low.get("name"))
    if state == "file":
        if fun == "managed":
            return name.endswith(_MODULE_SUFFIXES)
        if fun == "recurse":
            return True
        if fun == "symlink":
            return "bin" in name
        return False
    return state in _PACKAGE_STATES


def syncsModules(low: Mapping[str, Any]) -> bool:
    """
    @return: whether the chunk C{low} syncs custom modules: a
        C{saltutil.sync_*} state, or a C{module} state calling a
        C{saltutil.sync_*} function (by its C{name}, or as a key in the
        newer C{module.run} syntax).
    """
    state, fun = low.get("state"), str(low.get("fun"))
    if state == "saltutil":
        return fun.startswith("sync_")
    if state != "module":
        return False
    if str(low.get("name")).startswith("saltutil.sync_"):
        return True
    return any(isinstance(key, str) and key.startswith("saltutil.sync_") for key in low)


def refreshImports() -> None:
    """
    Make Python packages installed since the process started importable:
    clear the import system's directory caches and add site directories
    that appeared (a first package can create one).
    """
    importlib.invalidate_caches()
    try:
        for directory in site.getsitepackages():
            if directory not in sys.path and os.path.isdir(directory):
                site.addsitedir(directory)
    except Exception:
        log.warning("Refreshing the site directories failed", exc_info=True)


def _call(ctx: Any, function: str, *args: Any) -> Any:
    try:
        return ctx.salt[function](*args)
    except Exception:
        log.warning("%s after a state failed", function, exc_info=True)
        return None


def _replace(target: Any, value: Any) -> None:
    if isinstance(target, MutableMapping) and isinstance(value, Mapping):
        fresh = dict(value)
        target.clear()
        target.update(fresh)


def refreshAfter(ctx: Any, low: Mapping[str, Any], ret: Mapping[str, Any]) -> list[str]:
    """
    Salt's C{check_refresh} for the chunk C{low} whose state returned
    C{ret}, through C{ctx.salt}.

    @return: the execution functions called, in order.
    """
    called: list[str] = []
    reload = False
    if low.get("reload_grains"):
        called.append("saltutil.refresh_grains")
        _call(ctx, "saltutil.refresh_grains")
        _replace(ctx.grains, _call(ctx, "grains.items"))
        reload = True
    if low.get("reload_pillar"):
        called.append("saltutil.refresh_pillar")
        _call(ctx, "saltutil.refresh_pillar")
        _replace(ctx.pillar, _call(ctx, "pillar.items"))
        reload = True
    if ret.get("changes"):
        reload = reload or bool(low.get("reload_modules")) or changesNeedReload(low)
    else:
        reload = bool(low.get("force_reload_modules"))
    if reload:
        refreshImports()
        called.append("saltutil.refresh_modules")
        _call(ctx, "saltutil.refresh_modules")
    if reload or (ret.get("changes") and syncsModules(low)):
        _refreshStates(ctx)
    return called


def _refreshStates(ctx: Any) -> None:
    """
    Load the run's state functions again (L{refreshStates}).
    """
    from salttwist.state.extstates import refreshStates

    try:
        if refreshStates(getattr(ctx, "states", None), ctx.opts):
            log.info("Custom state modules loaded again for the rest of the run")
    except Exception:
        log.warning("Loading the custom state modules again failed", exc_info=True)


def stateResultTag(ctx: Any, low: Mapping[str, Any], ret: Mapping[str, Any]) -> str | None:
    """
    @return: the tag of a chunk's C{fire_event} event
        (C{salt/state_result/<jid>/<minion>/<name>}, the string given
        instead of the name), or L{None} when it fires none (no
        C{fire_event}, a C{--local} run, no job).
    """
    fire = low.get("fire_event")
    if not fire or ctx.opts.get("local") or ctx.jid is None:
        return None
    last = fire if isinstance(fire, str) else ret.get("name")
    return f"salt/state_result/{ctx.jid}/{ctx.opts.get('id')}/{last}"


def fireStateResult(ctx: Any, low: Mapping[str, Any], ret: Mapping[str, Any]) -> str | None:
    """
    Fire a chunk's C{fire_event} event through C{event.fire_master}.

    @return: the tag fired, or L{None}.
    """
    tag = stateResultTag(ctx, low, ret)
    if tag is None:
        return None
    try:
        ctx.salt["event.fire_master"]({"ret": dict(ret)}, tag, preload={"jid": ctx.jid})
    except Exception:
        log.warning("Firing %s failed", tag, exc_info=True)
    return tag
