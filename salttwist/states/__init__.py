# -*- test-case-name: tests.test_state_runner -*-
"""
State modules: the functions a state run calls to bring one thing to the
state an SLS declares (Salt's C{salt/states/}), named C{module.function}
(C{file.managed}, C{pkg.installed}).

A state function takes a L{StateContext} first, then Salt's arguments, and
returns Salt's state return: C{{"name", "result", "changes", "comment"}},
where C{result} is C{True} (in the state, or brought to it), C{False}
(failed) or, when C{ctx.test} is true, C{None} (it would change; nothing
was changed). It makes real changes through the execution modules
(C{ctx.salt["file.write"](...)}) or directly, and never raises for an
expected failure: it returns C{result: False} with a comment that names the
problem. A module may define C{mod_watch(ctx, name, **kwargs)} (what a
C{watch} requisite runs when a watched state changed, e.g. a service
restart).

State functions run in a thread (a state run is one blocking job), never on
the reactor: C{ctx.salt} calls execution functions from there, waiting for
those that run on the reactor.

A module is named by its C{__virtualname__} when it has one (C{saltmod} is
C{salt}, for orchestration). Its public functions are loaded; a trailing
C{_} is dropped from a name.

Ground: imports no wing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The state modules loaded by L{loadStates}, by file name in this package.
STATE_MODULES = (
    "test",
    "cmd",
    "file",
    "pkg",
    "service",
    "user",
    "group",
    "cron",
    "git",
    "archive",
    "module",
    "saltmod",
    "saltutil",
)


@dataclass
class StateContext:
    """
    What a state function may use (Salt's dunders).

    @ivar salt: every execution function by name (Salt's C{__salt__}),
        callable from the state run's thread.
    @ivar opts: the minion's options (C{__opts__}); on the master, the
        master's (orchestration).
    @ivar grains: C{__grains__}.
    @ivar pillar: C{__pillar__} (with a job's C{pillar=} override).
    @ivar test: a dry run: report what would change, change nothing, and
        return C{result: None} where something would change.
    @ivar saltenv: the saltenv of the SLS the state came from (C{__env__}).
    @ivar low: the low chunk being run (C{__low__}).
    @ivar states: the other state functions by name (C{__states__}).
    @ivar context: a dictionary shared by every state of one run
        (C{__context__}).
    @ivar reactor: the reactor (for C{blockingCallFromThread}).
    @ivar jid: the job's id, when the run is a job.
    @ivar master: on the master (orchestration), the running master as an
        L{salttwist.interfaces.IRunnerMaster}; L{None} on a minion.
    @ivar user: on the master, who runs the orchestration.
    @ivar sources: on a minion, the run's
        L{RunFileClient <salttwist.state.runfiles.RunFileClient>}, whose
        C{cachedKnown} answers for a C{salt://} source fetched before the
        run without C{cp.cache_file}'s trip to the reactor; L{None}
        elsewhere.
    """

    salt: Mapping[str, Callable[..., Any]]
    opts: Mapping[str, Any]
    grains: Mapping[str, Any] = field(default_factory=dict)
    pillar: Mapping[str, Any] = field(default_factory=dict)
    test: bool = False
    saltenv: str = "base"
    low: Mapping[str, Any] = field(default_factory=dict)
    states: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    reactor: Any = None
    jid: str | None = None
    master: Any = None
    user: str = "root"
    sources: Any = None


def stateReturn(
    name: str,
    result: bool | None = True,
    comment: str = "",
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """
    @return: a state return in Salt's shape.
    """
    return {"name": name, "result": result, "changes": changes or {}, "comment": comment}


def loadStates(modules: tuple[str, ...] = STATE_MODULES) -> Mapping[str, Callable[..., Any]]:
    """
    @return: every public function of the named state modules, by
        C{module.function}, each module imported when first needed.
    """
    from salttwist.modules import LazyFunctions

    return LazyFunctions("salttwist.states", modules)
