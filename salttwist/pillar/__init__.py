# -*- test-case-name: tests.test_pillar_compile -*-
"""
The pillar (issue 20): private per-minion data compiled on the master.

  - L{compilePillar}, L{compilePillarWithErrors}: one minion's pillar, from
    the top files and SLS of C{pillar_roots} and the C{ext_pillar} entries,
    errors in C{_errors};
  - L{showTop}: the SLS files a minion's top gives it;
  - L{salttwist.pillar.merge}: Salt's merging strategies;
  - L{salttwist.pillar.interfaces}: L{IExtPillar};
    L{salttwist.pillar.ext}: C{file_tree}, C{cmd_json}, C{cmd_yaml}.

Everything here blocks: the master runs it in a worker process (a render
can be slow), C{salttwist-call --local} in a thread.

Ground: imports no wing.
"""

from __future__ import annotations

from salttwist.pillar.compiler import (
    compilePillar,
    compilePillarWithErrors,
    showTop,
    showTopWithErrors,
)
from salttwist.pillar.interfaces import ExtPillarError, IExtPillar
from salttwist.pillar.merge import STRATEGIES, merge

__all__ = [
    "STRATEGIES",
    "ExtPillarError",
    "IExtPillar",
    "compilePillar",
    "compilePillarWithErrors",
    "merge",
    "showTop",
    "showTopWithErrors",
]
