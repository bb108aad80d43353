# -*- test-case-name: tests.test_targeting -*-
"""
Tests for L{salttwist.targeting}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from salttwist.targeting import (
    TARGET_TYPES,
    TargetError,
    checkMinions,
    matchMinion,
    validateTarget,
)

MINIONS = ["web2", "db1", "web1", "web10", "cache"]


class GlobTests(SynchronousTestCase):
    """
    Glob targets match minion ids with shell wildcards.
    """

    def test_star(self) -> None:
        """
        C{*} matches every minion.
        """
        self.assertEqual(checkMinions(MINIONS, "*"), sorted(MINIONS))

    def test_patterns(self) -> None:
        """
        C{*}, C{?} and C{[...]} work as in the shell.
        """
        self.assertTrue(matchMinion("web1", "web*"))
        self.assertFalse(matchMinion("db1", "web*"))
        self.assertEqual(checkMinions(MINIONS, "web?"), ["web1", "web2"])
        self.assertEqual(checkMinions(MINIONS, "web[12]"), ["web1", "web2"])

    def test_exact(self) -> None:
        """
        A glob without wildcards matches only that id.
        """
        self.assertEqual(checkMinions(MINIONS, "web1"), ["web1"])

    def test_caseSensitive(self) -> None:
        """
        Matching is case-sensitive.
        """
        self.assertFalse(matchMinion("web1", "WEB1"))

    def test_globIsDefault(self) -> None:
        """
        The default target type is C{glob}.
        """
        self.assertTrue(matchMinion("web1", "w*"))
        self.assertEqual(checkMinions(MINIONS, "d*"), ["db1"])

    def test_emptyGlob(self) -> None:
        """
        An empty glob, or one that is not a string, raises L{TargetError}.
        """
        self.assertRaises(TargetError, checkMinions, MINIONS, "")
        self.assertRaises(TargetError, matchMinion, "web1", "", "glob")
        self.assertRaises(TargetError, matchMinion, "web1", ["web1"], "glob")


class ListTests(SynchronousTestCase):
    """
    List targets name minions exactly, as a comma-separated string or a list.
    """

    def test_string(self) -> None:
        """
        A comma-separated string names minions; spaces around names are
        ignored.
        """
        self.assertEqual(checkMinions(MINIONS, "web1, db1,nope", "list"), ["db1", "web1"])
        self.assertTrue(matchMinion("web1", "db1,web1", "list"))
        self.assertFalse(matchMinion("web10", "web1", "list"))

    def test_list(self) -> None:
        """
        A list of strings names minions.
        """
        self.assertEqual(checkMinions(MINIONS, ["web2", "cache"], "list"), ["cache", "web2"])

    def test_noWildcards(self) -> None:
        """
        Names in a list target are not globs.
        """
        self.assertEqual(checkMinions(MINIONS, "web*", "list"), [])

    def test_empty(self) -> None:
        """
        A list target naming nobody raises L{TargetError}.
        """
        for tgt in ["", " , ", []]:
            self.assertRaises(TargetError, checkMinions, MINIONS, tgt, "list")

    def test_badItems(self) -> None:
        """
        A list holding non-strings, or a target of another type, raises
        L{TargetError}.
        """
        self.assertRaises(TargetError, checkMinions, MINIONS, ["web1", 2], "list")
        self.assertRaises(TargetError, checkMinions, MINIONS, 7, "list")


class TargetTypeTests(SynchronousTestCase):
    """
    Unknown target types are refused by name.
    """

    def test_unknownType(self) -> None:
        """
        An unknown type raises L{TargetError} naming the type and every
        supported type.
        """
        e = self.assertRaises(TargetError, checkMinions, MINIONS, "os:Debian", "grain")
        message = str(e)
        self.assertIn("'grain'", message)
        for supported in TARGET_TYPES:
            self.assertIn(supported, message)
        self.assertRaises(TargetError, matchMinion, "web1", "*", "pcre")
        self.assertRaises(TargetError, validateTarget, "*", "compound")

    def test_validTargets(self) -> None:
        """
        L{validateTarget} accepts valid glob and list targets.
        """
        self.assertIsNone(validateTarget("*", "glob"))
        self.assertIsNone(validateTarget("a,b", "list"))
        self.assertIsNone(validateTarget(["a"], "list"))

    def test_targetErrorIsValueError(self) -> None:
        """
        L{TargetError} is a L{ValueError}.
        """
        self.assertTrue(issubclass(TargetError, ValueError))


class CheckMinionsTests(SynchronousTestCase):
    """
    L{checkMinions} returns the targeted ids, sorted.
    """

    def test_sorted(self) -> None:
        """
        The result is sorted whatever the input order.
        """
        self.assertEqual(checkMinions(["c", "a", "b"], "*"), ["a", "b", "c"])
        self.assertEqual(checkMinions(iter(["web2", "web1"]), "web*"), ["web1", "web2"])

    def test_noMatch(self) -> None:
        """
        A valid target that matches nobody gives an empty list.
        """
        self.assertEqual(checkMinions(MINIONS, "nope*"), [])
        self.assertEqual(checkMinions([], "*"), [])
