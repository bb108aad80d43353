# -*- test-case-name: tests.test_state_top -*-
"""
The state system (issue 20 gives its top files; the compiler and runner
come with the next issue).

  - L{gatherTops}, L{mergeTops}, L{topMatches}, L{showTop}: the top files
    of the saltenvs, merged as C{top_file_merging_strategy} says, matched
    for a minion (Salt's C{state.show_top}); see L{salttwist.state.top}.

Everything here blocks (file server, rendering): callers run it in a
thread or a worker process, never on the reactor.

Ground: imports no wing.
"""

from __future__ import annotations

from salttwist.state.top import (
    STRATEGIES,
    MergedTop,
    TopError,
    TopFile,
    gatherTops,
    listStates,
    mergeTops,
    showTop,
    topEnvs,
    topFileName,
    topMatches,
)

__all__ = [
    "STRATEGIES",
    "MergedTop",
    "TopError",
    "TopFile",
    "gatherTops",
    "listStates",
    "mergeTops",
    "showTop",
    "topEnvs",
    "topFileName",
    "topMatches",
]
