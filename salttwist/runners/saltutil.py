# -*- test-case-name: tests.test_extmods -*-
"""
The master's C{saltutil} runners (Salt's C{salt/runners/saltutil.py}):
sync custom code from the master's own file server into the master's
C{extension_modules} (C{cachedir/extmods} unless set) and load it.

The master syncs C{_runners} (loaded as runners at once and at each
start) and C{_utils} (the custom runners' C{__utils__}). Salt's master
syncs more kinds (wheel, auth, fileserver, ...), which salttwist has no
loader for.

The file server's listing, the copies and the imports run in a thread
(C{runBlocking}); the runner map is replaced on the reactor thread, in
place, so the runner dispatch and the reactor see the new runners at once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from salttwist.modules import CommandExecutionError, extmods
from salttwist.runners import loadRunners

if TYPE_CHECKING:
    from salttwist.runners import RunnerContext


def _fileServer(master: Any) -> Any:
    """
    @return: the master's file server, or one built from its config
        (blocking: call it in a thread).
    """
    fileServer = getattr(master, "fileServer", None)
    if fileServer is not None:
        return fileServer
    from salttwist.fileserver.server import FileServer

    return FileServer.fromConfig(master.config)


def _syncBlocking(
    master: Any,
    kinds: tuple[str, ...],
    saltenv: Any,
    whitelist: Any,
    blacklist: Any,
) -> tuple[dict[str, list[str]], bool]:
    """
    Sync C{kinds} (blocking).

    @return: the names copied by kind, and whether anything changed.
    """
    config = master.config
    try:
        envs = extmods.saltenvList(saltenv, config)
        lists = {
            kind: (
                extmods.nameList(whitelist, kind, "extmod_whitelist"),
                extmods.nameList(blacklist, kind, "extmod_blacklist"),
            )
            for kind in kinds
        }
        fileServer = _fileServer(master)
        extDir = extmods.extensionModulesDir(config)
        clean = config.get("clean_dynamic_modules", True) is not False
        results: dict[str, list[str]] = {}
        touched = False
        for kind in kinds:
            result = extmods.syncFromFileServer(
                fileServer, kind, envs, os.path.join(extDir, kind), *lists[kind], clean=clean
            )
            results[kind] = result.changed
            touched = touched or result.touched
    except CommandExecutionError as e:
        raise ValueError(str(e)) from e
    return results, touched


async def _sync(
    context: RunnerContext,
    kinds: tuple[str, ...],
    saltenv: Any,
    refresh: Any,
    whitelist: Any,
    blacklist: Any,
) -> dict[str, list[str]]:
    master = context.master
    results, touched = await master.runBlocking(
        _syncBlocking, master, kinds, saltenv, whitelist, blacklist
    )
    if _truth(refresh) and touched:
        await refreshRunners(context)
    return results


def _truth(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no", "off", "")
    return bool(value)


async def refreshRunners(context: RunnerContext) -> bool:
    """
    Load the runners again (built-in and synced, imported in a thread) and
    replace the master's runner map in place.
    """
    master = context.master
    runners = await master.runBlocking(loadRunners, None, master.config)
    live = getattr(master, "runners", None)
    if isinstance(live, dict):
        live.clear()
        live.update(runners)
    return True


async def sync_runners(
    context: RunnerContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> list[str]:
    """
    Sync the custom runners of the file server's C{_runners} folder (of
    C{saltenv}: a name or a comma-separated list; C{base} by default) into
    the master's C{extension_modules/runners}, and with C{refresh} load
    them at once. Returns the runner modules copied because they were new
    or changed (C{["runners.myrunner"]}).

    CLI Example:

    .. code-block:: bash

        salttwist-run saltutil.sync_runners
    """
    results = await _sync(
        context, ("runners",), saltenv, refresh, extmod_whitelist, extmod_blacklist
    )
    return results["runners"]


async def sync_utils(
    context: RunnerContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> list[str]:
    """
    Sync the custom utility modules of C{_utils} into the master's
    C{extension_modules/utils} (the custom runners' C{__utils__}). Returns
    the modules copied.

    CLI Example:

    .. code-block:: bash

        salttwist-run saltutil.sync_utils
    """
    results = await _sync(context, ("utils",), saltenv, refresh, extmod_whitelist, extmod_blacklist)
    return results["utils"]


async def sync_all(
    context: RunnerContext,
    saltenv: Any = None,
    refresh: Any = True,
    extmod_whitelist: Any = None,
    extmod_blacklist: Any = None,
) -> dict[str, list[str]]:
    """
    Sync every kind of custom code the master loads (C{_runners},
    C{_utils}) and with C{refresh} load them. Returns the modules copied by
    kind: C{{"runners": [...], "utils": [...]}}.

    CLI Example:

    .. code-block:: bash

        salttwist-run saltutil.sync_all
    """
    return await _sync(
        context, extmods.MASTER_KINDS, saltenv, refresh, extmod_whitelist, extmod_blacklist
    )
