# -*- test-case-name: tests.test_modules_grains_filter_by -*-
"""
Tests for C{grains.filter_by}: Salt's lookup of a grain's value in a table
(globs, lists, default, base, merge), through the loaded functions as a
template calls it.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, LoaderContext, loadFunctions
from salttwist.modules.extmods import SaltFunctions


def saltFor(grains: dict[str, Any]) -> SaltFunctions:
    context = LoaderContext(opts={"id": "m1"}, grains=grains, reactor=Clock())
    context.functions = loadFunctions()
    return SaltFunctions(context)


class FilterByTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.filterBy = saltFor(
            {"os_family": "Debian", "os": "Ubuntu", "roles": ["db", "web"], "osrelease": "22.04"}
        )["grains.filter_by"]

    def test_osFamily(self) -> None:
        table = {"Debian": {"pkg": "apache2"}, "RedHat": {"pkg": "httpd"}}
        self.assertEqual(self.filterBy(table), {"pkg": "apache2"})

    def test_otherGrainAndGlob(self) -> None:
        self.assertEqual(self.filterBy({"Ubu*": 1, "*": 2}, grain="os"), 1)
        self.assertEqual(self.filterBy({"22.*": "jammy"}, grain="osrelease"), "jammy")

    def test_listGrain(self) -> None:
        """
        For a list grain, the first item with a matching key wins.
        """
        self.assertEqual(self.filterBy({"web": "w", "db": "d"}, grain="roles"), "d")

    def test_default(self) -> None:
        self.assertEqual(self.filterBy({"RedHat": 1, "default": 0}), 0)
        self.assertEqual(self.filterBy({"RedHat": 1, "Arch": 3}, default="Arch"), 3)
        self.assertIsNone(self.filterBy({"RedHat": 1}))

    def test_base(self) -> None:
        table = {
            "common": {"user": "www", "conf": {"a": 1, "b": 2}},
            "Debian": {"conf": {"b": 20}},
        }
        self.assertEqual(
            self.filterBy(table, base="common"),
            {"user": "www", "conf": {"a": 1, "b": 20}},
        )
        # The base entry itself is untouched.
        self.assertEqual(table["common"]["conf"], {"a": 1, "b": 2})

    def test_baseOnly(self) -> None:
        self.assertEqual(self.filterBy({"common": {"a": 1}}, base="common"), {"a": 1})

    def test_merge(self) -> None:
        table = {"Debian": {"pkg": "apache2", "conf": {"port": 80, "tls": False}}}
        self.assertEqual(
            self.filterBy(table, merge={"conf": {"port": 8080}}),
            {"pkg": "apache2", "conf": {"port": 8080, "tls": False}},
        )
        self.assertEqual(self.filterBy({"RedHat": 1}, merge={"a": 1}), {"a": 1})

    def test_mergeNotDict(self) -> None:
        e = self.assertRaises(CommandExecutionError, self.filterBy, {"Debian": {}}, merge=[1])
        self.assertEqual(str(e), "filter_by merge argument must be a dictionary.")

    def test_baseNotDict(self) -> None:
        e = self.assertRaises(
            CommandExecutionError, self.filterBy, {"c": {"a": 1}, "Debian": 5}, base="c"
        )
        self.assertIn("must both be dictionaries", str(e))
