# -*- test-case-name: tests.test_states_pkg_refresh -*-
"""
Salt's package refresh tag (C{rtag}, C{salt.utils.pkg}): a file in the
C{cachedir} that, while it exists, makes a C{pkg} state whose C{refresh}
is not given refresh the package database before installing.
C{pkg.mod_init} writes it before the first C{pkg.installed} or
C{pkg.latest} of a state run, and C{pkg.refresh_db} removes it: the
package database is refreshed once per run that installs packages.

Blocking (a few file system calls): call from a state run's thread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from twisted.logger import Logger

_log = Logger()

#: The refresh tag's file name in the C{cachedir} (Salt's C{rtag}).
REFRESH_TAG = "pkg_refresh"


def refreshTag(opts: Mapping[str, Any]) -> str:
    """
    @return: the path of Salt's C{rtag}: while it exists, a C{pkg} state
        whose C{refresh} is not given refreshes the package database
        first; C{pkg.mod_init} writes it once per state run, and
        C{pkg.refresh_db} removes it.
    """
    return os.path.join(str(opts.get("cachedir") or "."), REFRESH_TAG)


def writeRefreshTag(opts: Mapping[str, Any]) -> None:
    """
    Write the refresh tag (L{refreshTag}); a failure is logged.
    """
    path = refreshTag(opts)
    if os.path.exists(path):
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as e:
        _log.warn("Writing the package refresh tag {path} failed: {error}", path=path, error=e)


def clearRefreshTag(opts: Mapping[str, Any]) -> None:
    """
    Remove the refresh tag (L{refreshTag}), if there is one.
    """
    path = refreshTag(opts)
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        _log.warn("Removing the package refresh tag {path} failed: {error}", path=path, error=e)


def checkRefresh(opts: Mapping[str, Any], refresh: Any) -> bool:
    """
    Salt's C{check_refresh}: whether a C{pkg} state refreshes the package
    database before it installs.

    @param refresh: the state's C{refresh}: true refreshes, C{False} not,
        L{None} (not given) if the refresh tag is there (the first such
        state of a run: L{refreshTag}).
    """
    if refresh is None:
        return os.path.isfile(refreshTag(opts))
    if isinstance(refresh, str):
        return refresh.strip().lower() in ("true", "1", "yes", "on")
    return bool(refresh)
