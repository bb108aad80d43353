# -*- test-case-name: tests.test_client_api -*-
"""
Clients of the master, and Salt's Python API.

Blocking code (scripts, other frameworks) uses the synchronous facades,
named as in Salt::

    from salttwist.client import Caller, LocalClient, RunnerClient

    LocalClient().cmd("*", "test.ping")
    Caller().cmd("test.echo", "hi")
    RunnerClient().cmd("manage.up")

They run the Twisted core on a reactor in a background thread (see
L{salttwist.client.sync} and L{salttwist.client._bridge}).

Twisted programs use the L{Deferred}-returning core directly:
L{salttwist.client.local.LocalClient} (C{run}, C{publish}, C{runner}; also
what the commands use), L{salttwist.client.localcall.LocalCaller} and
L{salttwist.client.batch.runBatches}.

The facades are imported on first use, so the commands, which import the
core through this package, do not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from salttwist.client.sync import (
        Caller,
        LocalClient,
        MasterUnavailable,
        ReactorThreadError,
        RequestError,
        RunnerClient,
    )

__all__ = [
    "Caller",
    "LocalClient",
    "MasterUnavailable",
    "ReactorThreadError",
    "RequestError",
    "RunnerClient",
]


def __getattr__(name: str) -> Any:
    """
    Import the facades of L{salttwist.client.sync} when first asked for.
    """
    if name in __all__:
        from salttwist.client import sync

        return getattr(sync, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
