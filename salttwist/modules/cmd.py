# -*- test-case-name: tests.test_modules -*-
"""
Salt's C{cmd} module: run shell commands. Processes are spawned by the
reactor, so a long command never blocks the minion.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.utils import getProcessOutputAndValue

from salttwist.modules import LoaderContext, Retcode, needsContext, onReactor


def _spawn(
    context: LoaderContext, cmd: str, cwd: str | None, env: dict[str, str] | None, shell: str
) -> Deferred:
    if not isinstance(cmd, str) or not cmd:
        raise ValueError("cmd must be a non-empty string")
    environ = dict(os.environ)
    if env:
        environ.update({str(k): str(v) for k, v in env.items()})
    return getProcessOutputAndValue(
        shell, ["-c", cmd], env=environ, path=cwd, reactor=context.reactor
    )


@onReactor
@needsContext
def run_all(
    context: LoaderContext,
    cmd: str,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    shell: str = "/bin/sh",
) -> Deferred:
    """
    Run C{cmd} in C{shell}; return C{{"retcode", "stdout", "stderr"}}.

    CLI Example: C{salttwist '*' cmd.run_all 'ls -l /tmp'}
    """

    def shape(result: tuple[bytes, bytes, int]) -> dict[str, Any]:
        out, err, code = result
        return {
            "retcode": code,
            "stdout": out.decode("utf-8", "replace").rstrip("\n"),
            "stderr": err.decode("utf-8", "replace").rstrip("\n"),
        }

    return _spawn(context, cmd, cwd, env, shell).addCallback(shape)


@onReactor
@needsContext
def run(
    context: LoaderContext,
    cmd: str,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    shell: str = "/bin/sh",
) -> Deferred:
    """
    Run C{cmd} in C{shell}; return its standard output and error together,
    as Salt's C{cmd.run} does, with the command's exit code as the job's
    retcode.

    CLI Example: C{salttwist '*' cmd.run 'uname -a'}
    """

    def combine(result: dict[str, Any]) -> Retcode:
        parts = [p for p in (result["stdout"], result["stderr"]) if p]
        return Retcode("\n".join(parts), result["retcode"])

    return run_all(context, cmd, cwd, env, shell).addCallback(combine)
