# -*- test-case-name: tests.test_modules_grains -*-
"""
Tests for L{salttwist.modules.grains}: reading grains, and setting grains
persisted in the minion's grains file.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import yaml
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.grains import coreGrains, grainsFilePath
from salttwist.master.core import runSynchronously
from salttwist.master.service import threadRunner
from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    SaltInvocationError,
    loadFunctions,
)
from salttwist.modules import grains as grainsmod
from salttwist.modules.executor import Executor


def makeContext(testCase: SynchronousTestCase, grains: dict[str, Any]) -> LoaderContext:
    """
    @return: a context whose config file is in a new temporary directory.
    """
    configDir = os.path.abspath(testCase.mktemp())
    os.makedirs(configDir)
    opts = {"id": "m1", "conf_file": os.path.join(configDir, "minion")}
    return LoaderContext(opts=opts, grains=grains, reactor=Clock())


class ReadTests(SynchronousTestCase):
    """
    C{grains.get}, C{item}, C{items}, C{ls} and C{has_value} read the
    running grains.
    """

    def setUp(self) -> None:
        """
        Grains with nesting and lists.
        """
        self.context = makeContext(
            self,
            {
                "os": "Debian",
                "pkg": {"apache": "apache2", "list": [{"a": 1}, {"b": 2}]},
                "ipv4": ["127.0.0.1", "10.0.0.5"],
                "fqdn": "web1.example.com",
                "host": "web1",
            },
        )

    def test_get(self) -> None:
        """
        C{grains.get} reads a grain, C{a:b} nested maps, C{ipv4:1} a list
        item, C{pkg:list:b} a map in a list; missing gives the default.
        """
        c = self.context
        self.assertEqual(grainsmod.get(c, "os"), "Debian")
        self.assertEqual(grainsmod.get(c, "pkg:apache"), "apache2")
        self.assertEqual(grainsmod.get(c, "ipv4:1"), "10.0.0.5")
        self.assertEqual(grainsmod.get(c, "pkg:list:b"), 2)
        self.assertEqual(grainsmod.get(c, "pkg:nginx"), "")
        self.assertEqual(grainsmod.get(c, "pkg:nginx", "none"), "none")
        self.assertEqual(grainsmod.get(c, "ipv4:7", None), None)
        self.assertEqual(grainsmod.get(c, "os:x", "dflt"), "dflt")

    def test_getDelimiter(self) -> None:
        """
        C{delimiter} replaces C{:} to reach keys holding colons.
        """
        self.context.grains["a:b"] = {"c": 1}
        self.assertEqual(grainsmod.get(self.context, "a:b|c", delimiter="|"), 1)

    def test_item(self) -> None:
        """
        C{grains.item} maps each name (nested allowed) to its value, missing
        ones to C{default}.
        """
        self.assertEqual(
            grainsmod.item(self.context, "os", "pkg:apache", "nope"),
            {"os": "Debian", "pkg:apache": "apache2", "nope": ""},
        )
        self.assertEqual(grainsmod.item(self.context, "nope", default=None), {"nope": None})

    def test_sanitize(self) -> None:
        """
        C{sanitize=True} masks the host names, as Salt does.
        """
        items = grainsmod.items(self.context, sanitize=True)
        self.assertEqual((items["fqdn"], items["host"]), ("MINION.DOMAINNAME", "MINION"))
        self.assertEqual(items["os"], "Debian")
        self.assertEqual(grainsmod.item(self.context, "host", sanitize=True), {"host": "MINION"})
        self.assertEqual(grainsmod.items(self.context)["host"], "web1")

    def test_serialSanitized(self) -> None:
        """
        A sanitized serial number keeps its first three quarters.
        """
        self.context.grains["serialnumber"] = "ABCDEFGH"
        self.assertEqual(grainsmod.items(self.context, sanitize=True)["serialnumber"], "ABCDEFXX")

    def test_itemsCopy(self) -> None:
        """
        C{grains.items} returns a copy: changing it does not change the
        grains.
        """
        items = grainsmod.items(self.context)
        items["os"] = "Other"
        self.assertEqual(self.context.grains["os"], "Debian")

    def test_ls(self) -> None:
        """
        C{grains.ls} lists the grain names, sorted.
        """
        self.assertEqual(grainsmod.ls(self.context), ["fqdn", "host", "ipv4", "os", "pkg"])

    def test_hasValue(self) -> None:
        """
        C{grains.has_value} says whether a (nested) grain exists.
        """
        self.assertTrue(grainsmod.has_value(self.context, "pkg:apache"))
        self.assertFalse(grainsmod.has_value(self.context, "pkg:nginx"))

    def test_readersOnReactor(self) -> None:
        """
        The readers run on the reactor; the writers, which touch the grains
        file, do not.
        """
        for f in (grainsmod.get, grainsmod.item, grainsmod.items, grainsmod.ls):
            self.assertTrue(f.runsOnReactor)
        for f in (grainsmod.setval, grainsmod.delval, grainsmod.append, grainsmod.setvals):
            self.assertFalse(getattr(f, "runsOnReactor", False))


class WriteTests(SynchronousTestCase):
    """
    C{grains.setval}, C{setvals}, C{append}, C{remove}, C{delval} and
    C{delkey} change the running grains and the grains file.
    """

    def setUp(self) -> None:
        """
        A context with a config directory of its own.
        """
        self.context = makeContext(self, {"id": "m1", "os": "Debian"})
        self.path = grainsFilePath(self.context.opts)

    def stored(self) -> Any:
        """
        @return: the grains file, parsed.
        """
        with open(self.path) as f:
            return yaml.safe_load(f)

    def test_path(self) -> None:
        """
        The grains file is C{grains} next to the minion's config file.
        """
        self.assertEqual(
            self.path, os.path.join(os.path.dirname(self.context.opts["conf_file"]), "grains")
        )

    def test_setval(self) -> None:
        """
        C{grains.setval} returns C{{key: val}}, writes the YAML file and
        changes the running grains.
        """
        self.assertEqual(grainsmod.setval(self.context, "role", "web"), {"role": "web"})
        self.assertEqual(self.stored(), {"role": "web"})
        self.assertEqual(self.context.grains["role"], "web")
        grainsmod.setval(self.context, "deep", {"a": [1, 2]})
        self.assertEqual(self.stored(), {"role": "web", "deep": {"a": [1, 2]}})

    def test_setvalKeepsOtherEntries(self) -> None:
        """
        Entries already in the file stay.
        """
        with open(self.path, "w") as f:
            f.write("cabinet: 13\n")
        grainsmod.setval(self.context, "role", "db")
        self.assertEqual(self.stored(), {"cabinet": 13, "role": "db"})

    def test_atomicAndMode(self) -> None:
        """
        The file is replaced atomically (no temporary file left behind) and
        keeps its permissions.
        """
        grainsmod.setval(self.context, "a", 1)
        os.chmod(self.path, 0o600)
        grainsmod.setval(self.context, "b", 2)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
        self.assertEqual(os.listdir(os.path.dirname(self.path)), ["grains"])

    def test_setvals(self) -> None:
        """
        C{grains.setvals} sets several grains; a non-map is refused.
        """
        self.assertEqual(grainsmod.setvals(self.context, {"a": 1, "b": 2}), {"a": 1, "b": 2})
        self.assertEqual(self.stored(), {"a": 1, "b": 2})
        self.assertRaises(SaltInvocationError, grainsmod.setvals, self.context, ["a"])

    def test_corruptFile(self) -> None:
        """
        A grains file that is not YAML is an error, and is left alone.
        """
        with open(self.path, "w") as f:
            f.write("a: [unclosed\n")
        error = self.assertRaises(CommandExecutionError, grainsmod.setval, self.context, "x", 1)
        self.assertIn("Unable to read existing grains file", str(error))
        with open(self.path) as f:
            self.assertEqual(f.read(), "a: [unclosed\n")

    def test_noConfFile(self) -> None:
        """
        Without a known config file there is nowhere to persist grains.
        """
        context = LoaderContext(opts={"id": "m1"}, grains={}, reactor=Clock())
        self.assertRaises(CommandExecutionError, grainsmod.setval, context, "x", 1)

    def test_append(self) -> None:
        """
        C{grains.append} creates the list, appends, refuses duplicates and
        non-lists with Salt's messages, and appends each item of a list.
        """
        self.assertEqual(grainsmod.append(self.context, "roles", "web"), {"roles": ["web"]})
        self.assertEqual(grainsmod.append(self.context, "roles", "db"), {"roles": ["web", "db"]})
        self.assertEqual(
            grainsmod.append(self.context, "roles", "db"),
            "The val db was already in the list roles",
        )
        self.assertEqual(
            grainsmod.append(self.context, "roles", ["a", "b"]), {"roles": ["web", "db", "a", "b"]}
        )
        self.assertEqual(self.stored(), {"roles": ["web", "db", "a", "b"]})
        self.assertEqual(
            grainsmod.append(self.context, "os", "x"), "The key os is not a valid list"
        )

    def test_appendConvert(self) -> None:
        """
        C{convert=True} turns a non-list grain into a list first.
        """
        self.assertEqual(
            grainsmod.append(self.context, "os", "Linux", convert=True), {"os": ["Debian", "Linux"]}
        )

    def test_appendNested(self) -> None:
        """
        C{grains.append a:b val} appends inside a map, keeping its other
        keys.
        """
        grainsmod.setval(self.context, "app", {"port": 80})
        self.assertEqual(
            grainsmod.append(self.context, "app:hosts", "h1"),
            {"app": {"port": 80, "hosts": ["h1"]}},
        )
        self.assertEqual(self.context.grains["app"], {"port": 80, "hosts": ["h1"]})

    def test_appendDoesNotMutateUntilWritten(self) -> None:
        """
        C{grains.append} does not change the running list in place: a
        failed write leaves the grains as they were.
        """
        grainsmod.setval(self.context, "roles", ["web"])
        running = self.context.grains["roles"]

        def failingWrite(path: str, data: bytes) -> None:
            raise PermissionError(13, "Permission denied")

        self.patch(grainsmod, "_atomicWrite", failingWrite)
        error = self.assertRaises(
            CommandExecutionError, grainsmod.append, self.context, "roles", "db"
        )
        self.assertIn("Unable to write to grains file", str(error))
        self.assertEqual(running, ["web"])
        self.assertEqual(self.context.grains["roles"], ["web"])

    def test_remove(self) -> None:
        """
        C{grains.remove} takes a value out of a list grain, with Salt's
        messages for a missing value or a non-list.
        """
        grainsmod.setval(self.context, "roles", ["web", "db"])
        self.assertEqual(grainsmod.remove(self.context, "roles", "web"), {"roles": ["db"]})
        self.assertEqual(
            grainsmod.remove(self.context, "roles", "x"), "The val x was not in the list roles"
        )
        self.assertEqual(
            grainsmod.remove(self.context, "os", "x"), "The key os is not a valid list"
        )

    def test_delval(self) -> None:
        """
        C{grains.delval} sets the grain to C{None} (Salt's result shape);
        a second call says it is already set.
        """
        grainsmod.setval(self.context, "role", "web")
        self.assertEqual(
            grainsmod.delval(self.context, "role"),
            {"comment": "", "changes": {"role": None}, "result": True},
        )
        self.assertEqual(self.stored(), {"role": None})
        self.assertIsNone(self.context.grains["role"])
        self.assertEqual(
            grainsmod.delval(self.context, "role"),
            {"comment": "Grain is already set", "changes": {}, "result": True},
        )

    def test_delvalDestructive(self) -> None:
        """
        C{destructive=True} removes the grain from the file and the running
        minion; C{grains.delkey} does the same.
        """
        grainsmod.setvals(self.context, {"a": 1, "b": 2})
        grainsmod.delval(self.context, "a", destructive=True)
        self.assertEqual(self.stored(), {"b": 2})
        self.assertNotIn("a", self.context.grains)
        grainsmod.delkey(self.context, "b")
        self.assertEqual(self.stored(), {})
        self.assertNotIn("b", self.context.grains)

    def test_delvalComplex(self) -> None:
        """
        A map or list grain is only deleted with C{force=True}.
        """
        grainsmod.setval(self.context, "roles", ["web"])
        result = grainsmod.delval(self.context, "roles")
        self.assertEqual(result["result"], False)
        self.assertIn("Use 'force=True' to overwrite", result["comment"])
        self.assertEqual(self.context.grains["roles"], ["web"])
        grainsmod.delkey(self.context, "roles", force=True)
        self.assertNotIn("roles", self.context.grains)

    def test_delvalNested(self) -> None:
        """
        A nested key is removed from its map, which is rewritten.
        """
        grainsmod.setval(self.context, "app", {"port": 80, "host": "h"})
        grainsmod.delkey(self.context, "app:port")
        self.assertEqual(self.context.grains["app"], {"host": "h"})
        self.assertEqual(self.stored(), {"app": {"host": "h"}})

    def test_roundTrip(self) -> None:
        """
        Grains set through the module are there when the minion starts
        again (L{coreGrains} reads the file), under the config's grains.
        """
        grainsmod.setval(self.context, "role", "web")
        grainsmod.setval(self.context, "rack", "r1")
        grains = coreGrains("m1", {"rack": "from-config"}, self.path)
        self.assertEqual(grains["role"], "web")
        self.assertEqual(grains["rack"], "from-config")


class ThreadedWriteTests(TestCase):
    """
    Run for real (a worker thread, the real reactor), a grains write changes
    the running grains on the reactor thread, before the job's result.
    """

    async def test_updatedBeforeResult(self) -> None:
        """
        When the job's result arrives, the running grains already hold the
        new value.
        """
        from twisted.internet import reactor

        context = makeContext(self, {"id": "m1"})
        context.reactor = reactor
        executor = Executor(loadFunctions(), context, threadRunner(reactor))
        result = await executor.run("grains.setval", ["role", "web"])
        self.assertEqual(result["return"], {"role": "web"})
        self.assertEqual(context.grains["role"], "web")
        result = await executor.run("grains.append", ["roles", "a"])
        self.assertEqual(context.grains["roles"], ["a"])
        result = await executor.run("grains.get", ["roles"])
        self.assertEqual(result["return"], ["a"])

    def test_synchronousRunner(self) -> None:
        """
        With a synchronous runner (no threads), the change applies at once.
        """
        context = makeContext(self, {})
        executor = Executor(loadFunctions(), context, runSynchronously)
        self.successResultOf(executor.run("grains.setval", ["k", "v"]))
        self.assertEqual(context.grains["k"], "v")
