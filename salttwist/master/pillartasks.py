# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Pillar compiled in the master's worker processes (a render can be slow:
Jinja loops, ext_pillar commands), so the master's reactor never waits for
one. (SKELETON: the pillar-delivery slice of issue 20 fills it.)
"""

from __future__ import annotations
