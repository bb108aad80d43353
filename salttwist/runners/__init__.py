# -*- test-case-name: tests.test_runners -*-
"""
Runners: functions that execute in the master (Salt's C{salt-run}), named
C{module.function}, called by the local client through the req channel.

Every runner function takes a L{RunnerContext} first. It runs on the
reactor thread and must not block: it returns a value or a L{Deferred}, and
hands blocking work to C{context.master.runBlocking} (the job cache already
works off the reactor).

The modules, by Salt's names: C{jobs} (the job cache and running jobs),
C{manage} (which minions are up) and C{salt} (C{salt.cmd}: an execution module
function run in the master). C{state.event} is not a runner here: like Salt's,
it runs in the C{salttwist-run} command (L{salttwist.cli.run}).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from salttwist.master.core import Master

RUNNERS: tuple[str, ...] = ("jobs", "manage", "salt")


@dataclass
class RunnerContext:
    """
    What a runner may use: the running L{Master} (its job cache, key store,
    sessions, subscribers, grains cache, event bus, config and clock).
    """

    master: Master


def loadRunners(modules: tuple[str, ...] | None = None) -> dict[str, Callable[..., Any]]:
    """
    @return: every public function of the runner modules, by
        C{module.function}.
    """
    from salttwist.modules import publicFunctions

    return publicFunctions("salttwist.runners", RUNNERS if modules is None else modules)
