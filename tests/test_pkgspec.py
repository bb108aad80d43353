# -*- test-case-name: tests.test_pkgspec -*-
"""
Tests for L{salttwist.modules._pkgspec}: dpkg's version order (checked
against the real C{dpkg --compare-versions}) and Salt's version
specifications.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import pkg
from salttwist.modules._pkgspec import (
    anySatisfies,
    compareVersions,
    described,
    isExact,
    newestSatisfying,
    parseSpec,
    satisfies,
)

#: Versions exercising dpkg's rules: epochs, tildes, letters against
#: other characters, leading zeros, revisions, long numbers.
AWKWARD = [
    "1.0",
    "1.0-1",
    "1.0-0",
    "1.00",
    "1.0~rc1",
    "1.0~~",
    "1.0~",
    "1.0a",
    "1.0+b1",
    "1.0.1",
    "1.0-1ubuntu0.1",
    "1.0-1+deb12u1",
    "1:0.5",
    "2:0.1",
    "0:1.0",
    "1.10",
    "1.9",
    "10.0-1~bpo12+1",
    "20260101",
    "1.0-a",
    "1.0-+",
]


class CompareTests(SynchronousTestCase):
    """
    L{compareVersions} orders as dpkg does.
    """

    def test_agreesWithDpkg(self) -> None:
        """
        Every pair of L{AWKWARD} versions compares as C{dpkg
        --compare-versions} says.
        """
        if shutil.which("dpkg") is None:
            raise self.skipTest("dpkg is not installed")
        for a, b in itertools.combinations(AWKWARD, 2):
            less = subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False)
            greater = subprocess.run(["dpkg", "--compare-versions", a, "gt", b], check=False)
            expected = -1 if less.returncode == 0 else 1 if greater.returncode == 0 else 0
            self.assertEqual(compareVersions(a, b), expected, (a, b))
            self.assertEqual(compareVersions(b, a), -expected, (b, a))

    def test_versionCmp(self) -> None:
        """
        C{pkg.version_cmp} is L{compareVersions}, with C{ignore_epoch}.
        """
        self.assertEqual(pkg.version_cmp("1.0~rc1", "1.0"), -1)
        self.assertEqual(pkg.version_cmp("1:1.0", "2:1.0", ignore_epoch=True), 0)


class SpecTests(SynchronousTestCase):
    """
    Salt's version specifications.
    """

    def test_parse(self) -> None:
        """
        Conditions split on commas; C{=} and no operator are C{==}.
        """
        self.assertEqual(parseSpec("1.2-1"), [("==", "1.2-1")])
        self.assertEqual(parseSpec("=1.2"), [("==", "1.2")])
        self.assertEqual(parseSpec(">=1.0, <2.0"), [(">=", "1.0"), ("<", "2.0")])
        self.assertEqual(parseSpec("!=1:1.3"), [("!=", "1:1.3")])
        self.assertTrue(isExact("1.2*"))
        self.assertFalse(isExact(">=1.2"))
        self.assertFalse(isExact("1.0,!=1.1"))

    def test_badSpecs(self) -> None:
        """
        dpkg's C{>>}/C{<<}, an empty condition or an operator alone are
        refused, naming the problem.
        """
        for spec, words in [
            (">>1.0", "the operator '>>' is not one of"),
            ("<<2", "the operator '<<' is not one of"),
            (">=1.0,", "cannot read the condition ''"),
            (">=", "cannot read the condition '>='"),
            ("1.0 2.0,<3", "cannot read the condition"),
        ]:
            with self.assertRaises(ValueError) as caught:
                parseSpec(spec)
            self.assertIn(words, str(caught.exception), spec)

    def test_satisfies(self) -> None:
        """
        Every condition must hold; C{==} takes a glob; C{==} with a version
        without an epoch ignores the installed one's (Salt's
        C{_check_ignore_epoch}), a range does not.
        """
        self.assertTrue(satisfies("1.5", ">=1.0,<2.0"))
        self.assertFalse(satisfies("2.0", ">=1.0,<2.0"))
        self.assertFalse(satisfies("2.0~rc1", ">=2.0"))
        self.assertTrue(satisfies("1.2-3", "1.2*"))
        self.assertTrue(satisfies("1:1.2", "1.2"))
        self.assertFalse(satisfies("1:1.2", "1.2", ignoreEpoch=False))
        self.assertFalse(satisfies("1:0.1", "<2.0"))
        self.assertFalse(satisfies("1.3", "!=1.3"))
        self.assertTrue(anySatisfies(["0.9", "1.1"], ">1.0"))
        self.assertFalse(anySatisfies([], ">1.0"))

    def test_newest(self) -> None:
        """
        The newest offered version meeting the specification, or L{None}.
        """
        offered = ["1.0", "2.0", "1.5", "1.10"]
        self.assertEqual(newestSatisfying(offered, "<2.0"), "1.10")
        self.assertEqual(newestSatisfying(offered, ">=1.0,!=2.0"), "1.10")
        self.assertEqual(newestSatisfying(offered, ">2.0"), None)

    def test_described(self) -> None:
        """
        Salt's C{_get_desired_pkg}.
        """
        self.assertEqual(described("a", None), "a")
        self.assertEqual(described("a", "1.0"), "a=1.0")
        self.assertEqual(described("a", ">=1.0,<2"), "a>=1.0,<2")
