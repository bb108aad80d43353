# -*- test-case-name: tests.test_autosign -*-
"""
The grains policy, C{autosign_grains_dir}: a file per grain listing the
values it may have.
"""

from __future__ import annotations

import math
import os
from typing import Any

from twisted.logger import Logger
from zope.interface import implementer

from salttwist.blocking import RunBlocking
from salttwist.interfaces import IAutosignPolicy
from salttwist.pki.autosign.base import (
    ACCEPT,
    AutosignDecision,
    _contextGrains,
    _GuardedPolicy,
    _pending,
)
from salttwist.pki.autosign.hygiene import UntrustedPathError, checkGrainsDir


def _grainText(value: Any) -> str | None:
    """
    A grain value as the text it must equal in a grain file: strings as they
    are, booleans as C{true}/C{false}, finite numbers with L{str}. Other
    values (lists, maps, null) never match.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(value)
    return None


def _readGrainsDir(directory: str) -> dict[str, frozenset[str]] | None:
    """
    Read every grain file of C{autosign_grains_dir}, in a thread.

    Files whose names start with C{.} and entries that are not regular files
    are skipped. Each file lists allowed values, one per line, with
    surrounding whitespace stripped; blank lines and C{#} lines are ignored.

    The directory and each grain file must pass L{checkGrainsDir} (only root
    and the master's user can change them).

    @return: the allowed values by grain name, or L{None} if the directory
        does not exist.
    @raise OSError: the directory or a file cannot be read.
    @raise UnicodeDecodeError: a file is not UTF-8.
    @raise UntrustedPathError: the directory or a grain file is untrusted.
    """
    try:
        names = checkGrainsDir(directory)
    except FileNotFoundError:
        return None
    allowed: dict[str, frozenset[str]] = {}
    for name in names:
        path = os.path.join(directory, name)
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        values = (line.strip() for line in text.splitlines())
        allowed[name] = frozenset(v for v in values if v and not v.startswith("#"))
    return allowed


@implementer(IAutosignPolicy)
class GrainsPolicy(_GuardedPolicy):
    """
    C{autosign_grains_dir}: accept when, for EVERY grain file in the
    directory, the minion's value of that grain is listed in the file.

    Paths are only ever built from the directory's own listing: a grain name
    sent by the minion that is not a file there (C{../../etc/passwd}) is
    simply never looked at.
    """

    name = "autosign_grains"
    log = Logger()

    def __init__(self, directory: str, runBlocking: RunBlocking) -> None:
        """
        @param directory: the grains directory; re-read at every decision.
        @param runBlocking: runs a blocking callable, returning a L{Deferred}.
        """
        self.directory = directory
        self._runBlocking = runBlocking

    async def _decide(self, minionId: str, pem: bytes, context: dict[str, Any]) -> AutosignDecision:
        try:
            allowed = await self._runBlocking(_readGrainsDir, self.directory)
        except UntrustedPathError as e:
            self.log.error("autosign: {problem}", problem=str(e))
            return _pending(self.name, str(e), True)
        except (OSError, UnicodeDecodeError) as e:
            return _pending(self.name, f"autosign_grains_dir {self.directory}: {e}", True)
        if allowed is None:
            return _pending(self.name, f"autosign_grains_dir {self.directory} does not exist")
        if not allowed:
            return _pending(self.name, f"autosign_grains_dir {self.directory} has no grain files")
        grains = _contextGrains(context)
        for name, values in allowed.items():
            if name not in grains:
                return _pending(self.name, f"{minionId!r} did not send the grain {name!r}")
            text = _grainText(grains[name])
            if text is None or text not in values:
                return _pending(
                    self.name, f"the grain {name!r} of {minionId!r} is not listed in its file"
                )
        names = ", ".join(sorted(allowed))
        return AutosignDecision(
            ACCEPT, self.name, f"{minionId!r} matches every grain file ({names})"
        )
