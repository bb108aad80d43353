# -*- test-case-name: tests.test_cli_salt -*-
"""
Run one command coroutine on the global reactor, as the CLIs do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from salttwist._startup import releaseGarbageCollection, withoutTLS


def runWithReactor(
    command: Callable[[Any], Awaitable[Any]], interrupted: int = 1, tls: bool = False
) -> tuple[Any, int | None]:
    """
    Run C{command(reactor)} to completion with L{twisted.internet.task.react}.

    @param interrupted: the exit code when the reactor stopped before the
        command finished (Ctrl-C, SIGTERM).
    @param tls: whether the command needs TLS; without it the reactor is
        imported without pyOpenSSL (L{salttwist._startup.withoutTLS}), a
        tenth of a second less start-up.
    @return: C{(value, None)} when the command finished, else
        C{(None, exitCode)}.
    """
    if not tls:
        withoutTLS()
    from twisted.internet import defer, task

    # The start-up imports are done (see holdGarbageCollection).
    releaseGarbageCollection()

    values: list[Any] = []

    async def run(reactor: Any) -> None:
        values.append(await command(reactor))

    try:
        task.react(lambda reactor: defer.Deferred.fromCoroutine(run(reactor)))
    except SystemExit as e:
        if e.code not in (0, None):
            return None, e.code if isinstance(e.code, int) else 1
    except KeyboardInterrupt:
        return None, interrupted
    if not values:
        return None, interrupted
    return values[0], None
