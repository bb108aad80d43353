# -*- test-case-name: tests.test_states_module -*-
"""
The keywords of a low chunk that belong to the state system (requisites,
the runner's own options, internal keys), never to a state function's
C{**kwargs}: Salt's C{STATE_INTERNAL_KEYWORDS}. State functions that pass
their extra arguments on (C{cmd.run} to C{cmd.run_all}, C{module.run} to
the function it calls) leave these out.
"""

from __future__ import annotations

from typing import Any

_REQUISITES = ("require", "watch", "onchanges", "onfail", "prereq", "listen", "use")

#: Every state-system keyword.
STATE_KEYWORDS = frozenset(
    [
        *_REQUISITES,
        *(f"{kind}_in" for kind in _REQUISITES),
        *(f"{kind}_any" for kind in ("require", "watch", "onchanges", "onfail")),
        "onfail_all",
        "onfail_stop",
        "fun",
        "state",
        "sfun",
        "check_cmd",
        "cmd_opts_exclude",
        "failhard",
        "onlyif",
        "unless",
        "creates",
        "retry",
        "order",
        "parallel",
        "reload_modules",
        "reload_grains",
        "reload_pillar",
        "runas_password",
        "no_log",
        "fire_event",
        "names",
    ]
)


def stateArguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """
    @return: C{kwargs} without the state system's keywords and the
        internal C{__x__} keys.
    """
    return {k: v for k, v in kwargs.items() if k not in STATE_KEYWORDS and not k.startswith("__")}
