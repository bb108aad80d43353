# -*- test-case-name: tests.test_pillar_merge -*-
"""
Tests for L{salttwist.pillar.merge}: each of Salt's
C{pillar_source_merging_strategy} values on the examples of Salt's master
configuration documentation, and C{pillar_merge_lists}.
"""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from salttwist.pillar.merge import STRATEGIES, merge, mergeOverwrite, mergeRecurse


class RecurseTests(SynchronousTestCase):
    """
    C{recurse} (and C{smart}, C{none}) merge mappings at every depth.
    """

    def test_saltDocumentedExample(self) -> None:
        """
        Salt's example: C{bar} gains C{element2}, C{baz} is added.
        """
        a = {"foo": 42, "bar": {"element1": True}}
        b = {"bar": {"element2": True}, "baz": "quux"}
        expected = {"foo": 42, "bar": {"element1": True, "element2": True}, "baz": "quux"}
        for strategy in ("recurse", "smart", "none"):
            self.assertEqual(merge(a, b, strategy), expected, strategy)

    def test_deep(self) -> None:
        """
        Nested mappings merge at any depth; scalars and lists are replaced.
        """
        a = {"a": {"b": {"c": 1, "d": [1, 2]}, "e": 1}}
        b = {"a": {"b": {"c": 2, "d": [3]}}}
        self.assertEqual(merge(a, b), {"a": {"b": {"c": 2, "d": [3]}, "e": 1}})

    def test_typeChange(self) -> None:
        """
        A mapping replaced by a scalar (or the reverse) takes the later value.
        """
        self.assertEqual(merge({"a": {"b": 1}}, {"a": 2}), {"a": 2})
        self.assertEqual(merge({"a": 2}, {"a": {"b": 1}}), {"a": {"b": 1}})

    def test_mergeLists(self) -> None:
        """
        With C{pillar_merge_lists}, lists are joined without repeating
        items already present.
        """
        a = {"users": ["alice", "bob"], "n": {"l": [1]}}
        b = {"users": ["bob", "carol"], "n": {"l": [2]}}
        self.assertEqual(
            merge(a, b, "recurse", mergeLists=True),
            {"users": ["alice", "bob", "carol"], "n": {"l": [1, 2]}},
        )
        self.assertEqual(merge(a, b, "recurse")["users"], ["bob", "carol"])

    def test_unknownStrategyRecurses(self) -> None:
        """
        An unknown strategy falls back to C{recurse}, as in Salt.
        """
        self.assertEqual(merge({"a": {"x": 1}}, {"a": {"y": 2}}, "bogus"), {"a": {"x": 1, "y": 2}})

    def test_argumentsUnchanged(self) -> None:
        """
        Neither argument is modified.
        """
        a = {"a": {"b": [1]}, "c": 1}
        b = {"a": {"b": [2], "d": 1}}
        before = (copy.deepcopy(a), copy.deepcopy(b))
        for strategy in STRATEGIES:
            merge(a, b, strategy, mergeLists=True)
        self.assertEqual((a, b), before)
        self.assertEqual(mergeRecurse(a, b, True)["a"]["b"], [1, 2])


class OverwriteTests(SynchronousTestCase):
    """
    C{overwrite} and C{aggregate} (without yamlex marks) replace whole
    top-level values.
    """

    def test_saltDocumentedExample(self) -> None:
        """
        Salt's example: C{C} is overwritten, C{D} added, C{A} and C{B} kept.
        """
        a = {"A": "first key", "B": "second key", "C": "third key"}
        b = {"A": "first key", "C": "overwritten", "D": "fourth key"}
        expected = {"A": "first key", "B": "second key", "C": "overwritten", "D": "fourth key"}
        self.assertEqual(merge(a, b, "overwrite"), expected)
        self.assertEqual(merge(a, b, "aggregate"), expected)

    def test_nestedReplaced(self) -> None:
        """
        A nested mapping is replaced, not merged.
        """
        a = {"bar": {"element1": True}, "x": 1}
        b = {"bar": {"element2": True}}
        for strategy in ("overwrite", "aggregate"):
            self.assertEqual(merge(a, b, strategy), {"bar": {"element2": True}, "x": 1})
        self.assertEqual(mergeOverwrite(a, b), {"bar": {"element2": True}, "x": 1})

    def test_mergeListsIgnored(self) -> None:
        """
        With C{overwrite}, the later list replaces the earlier one even with
        C{pillar_merge_lists} (Salt's C{merge_overwrite} sets the key
        before merging).
        """
        self.assertEqual(merge({"l": [1]}, {"l": [2]}, "overwrite", mergeLists=True), {"l": [2]})


_keys = st.sampled_from(["a", "b", "c", "d"])
_leaves = st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=3), st.none())
_pillars = st.recursive(
    st.dictionaries(_keys, _leaves, max_size=4),
    lambda children: st.dictionaries(_keys, st.one_of(_leaves, children), max_size=4),
    max_leaves=12,
)


def _leafPaths(data: dict, prefix: tuple = ()) -> dict[tuple, object]:
    """
    The non-mapping values of C{data} by their key path (an empty mapping
    merges into the earlier one, adding nothing).
    """
    paths: dict[tuple, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            paths.update(_leafPaths(value, (*prefix, key)))
        else:
            paths[(*prefix, key)] = value
    return paths


def _lookup(data: dict, path: tuple) -> object:
    for key in path:
        data = data[key]
    return data


class MergeProperties(SynchronousTestCase):
    """
    Properties of C{recurse} on generated pillars.
    """

    @given(_pillars, _pillars)
    def test_laterLeavesWin(self, a: dict, b: dict) -> None:
        """
        Every leaf of the later source is in the result, unchanged (lists
        joined with C{mergeLists} keep its items).
        """
        merged = merge(a, b, "recurse")
        for path, value in _leafPaths(b).items():
            self.assertEqual(_lookup(merged, path), value)
        joined = merge(a, b, "recurse", mergeLists=True)
        for path, value in _leafPaths(b).items():
            found = _lookup(joined, path)
            if isinstance(value, list) and isinstance(found, list):
                self.assertTrue(all(item in found for item in value))
            else:
                self.assertEqual(found, value)

    @given(_pillars, _pillars)
    def test_earlierKeysKept(self, a: dict, b: dict) -> None:
        """
        A top-level key only in the earlier source keeps its value; the
        arguments are not changed.
        """
        before = (copy.deepcopy(a), copy.deepcopy(b))
        for strategy in STRATEGIES:
            merged = merge(a, b, strategy)
            for key in a.keys() - b.keys():
                self.assertEqual(merged[key], a[key])
            self.assertEqual(set(merged), set(a) | set(b))
        self.assertEqual((a, b), before)
