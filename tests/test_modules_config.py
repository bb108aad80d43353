# -*- test-case-name: tests.test_modules_config -*-
"""
Tests for L{salttwist.modules.config}: Salt's lookup order (options,
grains, pillar, the master's options, defaults), nesting, the merged
lookup, C{config.option} with wildcards and C{config.merge}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import LoaderContext, loadFunctions
from salttwist.modules.extmods import SaltFunctions


class ConfigTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.context = LoaderContext(
            opts={"id": "m1", "both": "opts", "nested": {"a": {"o": 1}}, "sched": {"x": 1}},
            grains={"both": "grains", "onlyGrain": "g", "nested": {"a": {"g": 2}}},
            reactor=Clock(),
            pillar={
                "both": "pillar",
                "onlyPillar": {"deep": [10, 20]},
                "nested": {"a": {"p": 3}, "b": 4},
                "sched": {"y": 2},
                "master": {"masterOnly": "m", "nested": {"c": 5}},
            },
        )
        self.context.functions = loadFunctions()
        self.salt = SaltFunctions(self.context)

    def get(self, *args: Any, **kw: Any) -> Any:
        return self.salt["config.get"](*args, **kw)

    def test_order(self) -> None:
        self.assertEqual(self.get("both"), "opts")
        self.assertEqual(self.get("both", omit_opts=True), "grains")
        self.assertEqual(self.get("both", omit_opts=True, omit_grains=True), "pillar")
        self.assertEqual(self.get("onlyGrain"), "g")
        self.assertEqual(self.get("masterOnly"), "m")
        self.assertEqual(self.get("masterOnly", omit_master=True), "")
        self.assertEqual(self.get("redis.port"), 6379)

    def test_nestedAndDefault(self) -> None:
        self.assertEqual(self.get("onlyPillar:deep:1"), 20)
        self.assertEqual(self.get("onlyPillar|deep", delimiter="|"), [10, 20])
        self.assertEqual(self.get("nope:x", default={"d": 1}), {"d": 1})
        self.assertEqual(self.get("nope"), "")

    def test_firstSourceWinsWhole(self) -> None:
        """
        Without C{merge}, the first source holding the key gives all of it.
        """
        self.assertEqual(self.get("nested:a"), {"o": 1})

    def test_mergeRecurse(self) -> None:
        self.assertEqual(self.get("nested:a", merge="recurse"), {"o": 1, "g": 2, "p": 3})
        self.assertEqual(
            self.get("nested", merge="recurse"), {"a": {"o": 1, "g": 2, "p": 3}, "b": 4, "c": 5}
        )

    def test_mergeOverwrite(self) -> None:
        self.assertEqual(self.get("nested", merge="overwrite"), {"a": {"o": 1}})

    def test_option(self) -> None:
        option = self.salt["config.option"]
        self.assertEqual(option("both"), "opts")
        self.assertEqual(option("both", omit_opts=True), "grains")
        self.assertEqual(option("redis.host"), "salt")
        self.assertEqual(option("both", omit_all=True), "")
        self.assertEqual(option("onlyPillar:deep"), "")
        self.assertEqual(
            option("mongo.p*", wildcard=True), {"mongo.password": "", "mongo.port": 27017}
        )
        self.assertEqual(option("nothing*", wildcard=True), {})

    def test_merge(self) -> None:
        self.assertEqual(self.salt["config.merge"]("sched"), {"x": 1, "y": 2})
        self.assertEqual(self.salt["config.merge"]("both"), "opts")
        self.assertEqual(self.salt["config.merge"]("none", default=1), 1)

    def test_smallHelpers(self) -> None:
        self.assertEqual(self.salt["config.backup_mode"]("minion"), "minion")
        self.assertEqual(self.salt["config.backup_mode"](), "")
        manage = self.salt["config.manage_mode"]
        self.assertEqual(
            [manage(644), manage("0o755"), manage("'00600'")], ["0644", "0755", "0600"]
        )
        self.assertIsNone(manage(None))
        self.assertTrue(self.salt["config.valid_fileproto"]("salt://a/b"))
        self.assertFalse(self.salt["config.valid_fileproto"]("/etc/x"))
        self.context.opts["mongo.host"] = "db1"
        self.context.pillar["master"]["mongo.port"] = 1
        self.assertEqual(
            self.salt["config.dot_vals"]("mongo"), {"mongo.port": 1, "mongo.host": "db1"}
        )
