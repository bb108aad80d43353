# -*- test-case-name: tests.test_minion_parts -*-
"""
The executor moved beside the execution modules it runs,
L{salttwist.modules.executor} (C{salttwist-call} runs them too); these names
stay importable from here.
"""

from __future__ import annotations

from salttwist.modules.executor import EX_UNAVAILABLE, Executor

__all__ = ["EX_UNAVAILABLE", "Executor"]
