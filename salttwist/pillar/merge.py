# -*- test-case-name: tests.test_pillar_merge -*-
"""
Salt's pillar merging (C{salt.utils.dictupdate.merge}), by
C{pillar_source_merging_strategy} and C{pillar_merge_lists}:

  - C{smart} (the default): C{recurse} (Salt chooses C{aggregate} only for
    its C{yamlex} renderer, which salttwist does not have);
  - C{recurse}: mappings merge key by key at every depth; any other value
    from the later source replaces the earlier one; with
    C{pillar_merge_lists}, two lists are joined (the later list's items not
    already present are appended);
  - C{overwrite}: a top-level key of the later source replaces the earlier
    one's whole value;
  - C{aggregate}: as Salt's with a plain YAML renderer (values not marked
    C{!aggregate}, a C{yamlex} feature): top-level keys combine and a key in
    both takes the later value, as C{overwrite};
  - C{none}: C{recurse}, and the compiler reads the top file of the
    requested saltenv only.

Merging never changes its arguments: a merged mapping is a new one, and
values it does not change are shared with the sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The values of C{pillar_source_merging_strategy}.
STRATEGIES = ("smart", "recurse", "overwrite", "aggregate", "none")

_ABSENT = object()


def mergeRecurse(a: Mapping[Any, Any], b: Mapping[Any, Any], mergeLists: bool = False) -> dict:
    """
    C{b} merged into C{a} key by key at every depth.

    @param mergeLists: join lists instead of replacing them.
    @return: a new mapping.
    """
    result = dict(a)
    for key, value in b.items():
        old = result.get(key, _ABSENT)
        if old is _ABSENT:
            # A new key (every key of the first source): nothing to merge.
            result[key] = value
        elif isinstance(old, Mapping) and isinstance(value, Mapping):
            result[key] = mergeRecurse(old, value, mergeLists)
        elif mergeLists and isinstance(old, list) and isinstance(value, list):
            result[key] = old + [item for item in value if item not in old]
        else:
            result[key] = value
    return result


def mergeOverwrite(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> dict:
    """
    C{b}'s top-level keys replace C{a}'s.

    @return: a new mapping.
    """
    result = dict(a)
    result.update(b)
    return result


def merge(
    a: Mapping[Any, Any],
    b: Mapping[Any, Any],
    strategy: str = "smart",
    renderer: str = "yaml",
    mergeLists: bool = False,
) -> dict:
    """
    Merge C{b} into C{a} as Salt's C{salt.utils.dictupdate.merge}.

    @param strategy: one of L{STRATEGIES}; an unknown one falls back to
        C{recurse}, as in Salt.
    @param renderer: the default render pipeline (Salt's C{smart} looks at
        it for C{yamlex}; accepted for the same signature).
    @param mergeLists: C{pillar_merge_lists}.
    @return: a new mapping.
    """
    if strategy in ("overwrite", "aggregate"):
        return mergeOverwrite(a, b)
    return mergeRecurse(a, b, mergeLists)
