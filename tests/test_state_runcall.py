# -*- test-case-name: tests.test_state_runcall -*-
"""
Tests for L{salttwist.state.runcall.stateArguments}: the keyword
arguments a state function is called with, read from its signature
(once per function).
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.state.runcall import stateArguments


def named(ctx: Any, name: str, mode: str, user: str = "root") -> dict[str, Any]:
    return {}


def takesAll(ctx: Any, name: str, **kwargs: Any) -> dict[str, Any]:
    return {}


class Unhashable:
    """
    A callable state function that cannot be a key (it defines C{__eq__}
    only).
    """

    def __eq__(self, other: object) -> bool:
        return other is self

    def __call__(self, ctx: Any, name: str, *args: Any, extra: int = 1) -> dict[str, Any]:
        return {}


LOW = {
    "state": "file",
    "fun": "managed",
    "name": "/a",
    "__id__": "a",
    "__sls__": "x",
    "user": "bob",
    "other": 1,
    "require": [{"file": "b"}],
}


class StateArgumentsTests(SynchronousTestCase):
    """
    L{stateArguments}.
    """

    def test_named(self) -> None:
        """
        Named parameters are taken from the chunk, missing required ones
        and the chunk's others are reported; the same twice (the
        signature read once).
        """
        for _ in range(2):
            self.assertEqual(
                stateArguments(named, LOW), ({"name": "/a", "user": "bob"}, ["mode"], ["other"])
            )

    def test_takesAll(self) -> None:
        """
        A function with C{**kwargs} gets every chunk argument but the
        runner's own, requisites and dunder keys.
        """
        self.assertEqual(
            stateArguments(takesAll, LOW),
            ({"name": "/a", "user": "bob", "other": 1}, [], []),
        )

    def test_unhashable(self) -> None:
        """
        A callable that cannot be a cache key has its signature read each time.
        """
        function = Unhashable()
        self.assertRaises(TypeError, hash, function)
        self.assertEqual(
            stateArguments(function, {**LOW, "extra": 2}),
            ({"name": "/a", "extra": 2}, [], ["user", "other"]),
        )
