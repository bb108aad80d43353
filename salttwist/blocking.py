# -*- test-case-name: tests.test_master_service -*-
"""
How blocking work leaves the reactor thread: C{runBlocking(f, *args)}
returns a L{Deferred} of C{f(*args)}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.threads import deferToThreadPool

RunBlocking = Callable[..., Deferred]


def threadRunner(reactor: Any) -> RunBlocking:
    """
    @return: a C{runBlocking} that runs work in C{reactor}'s thread pool.
    """

    def run(f: Any, *args: Any, **kwargs: Any) -> Deferred:
        return deferToThreadPool(reactor, reactor.getThreadPool(), f, *args, **kwargs)

    return run


def runSynchronously(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Deferred:
    """
    A C{runBlocking} for tests: run C{f} now, on the calling thread.
    """
    return maybeDeferred(f, *args, **kwargs)
