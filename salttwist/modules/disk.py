# -*- test-case-name: tests.test_modules_disk -*-
"""
Salt's C{disk} module: disk usage of the mounted filesystems, from C{df}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    needsContext,
    onReactor,
)
from salttwist.modules._process import runCommand

#: The C{df} flags C{disk.usage} passes on, as Salt allows.
ALLOWED_FLAGS = "aBhHiklPtTxv"


def _cleanFlags(args: Any, caller: str) -> str:
    """
    Salt's C{_clean_flags}: the letters of C{args}, each one C{df} allows.
    """
    flags = ""
    if args is None:
        return flags
    for flag in str(args).replace("-", ""):
        if flag in ALLOWED_FLAGS:
            flags += flag
        elif not flag.isspace():
            raise CommandExecutionError(f"Invalid flag passed to {caller}")
    return flags


def _parseDf(output: str) -> dict[str, dict[str, str]]:
    """
    Parse C{df -P} output as Salt does: C{{mountpoint: {"filesystem",
    "1K-blocks", "used", "available", "capacity"}}}, values as text.
    """
    ret: dict[str, dict[str, str]] = {}
    oldline = None
    for line in output.splitlines():
        if not line or line.startswith("Filesystem"):
            continue
        if oldline:
            line = oldline + " " + line
        comps = line.split()
        if len(comps) == 1:
            # A long device name wraps onto its own line.
            oldline = line
            continue
        oldline = None
        while len(comps) >= 2 and not comps[1].isdigit():
            comps[0] = f"{comps[0]} {comps[1]}"
            comps.pop(1)
        if len(comps) < 6:
            continue
        ret[" ".join(comps[5:])] = {
            "filesystem": comps[0],
            "1K-blocks": comps[1],
            "used": comps[2],
            "available": comps[3],
            "capacity": comps[4],
        }
    return ret


@onReactor
@needsContext
def usage(context: LoaderContext, args: str | None = None) -> Deferred:
    """
    Return the usage of every mounted filesystem, from C{df -P}, as Salt
    does: C{{mountpoint: {"filesystem", "1K-blocks", "used", "available",
    "capacity"}}}. C{args} passes more C{df} flags (letters of
    C{aBhHiklPtTxv}, such as C{a} for all filesystems).

    CLI Example:

        salttwist '*' disk.usage
        salttwist '*' disk.usage args=a
    """
    flags = _cleanFlags(args, "disk.usage")
    argv = ["df", "-P", "-k"] + ([f"-{flags}"] if flags else [])

    def shape(result: dict[str, Any]) -> Any:
        parsed = _parseDf(result["stdout"])
        if result["retcode"] != 0 and not parsed:
            return Retcode(result["output"], result["retcode"])
        return parsed

    return runCommand(context, argv, python_shell=False, output_loglevel="quiet").addCallback(shape)
