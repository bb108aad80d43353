# -*- test-case-name: tests.test_modules_defaults -*-
"""
Tests for L{salttwist.modules.defaults}: Salt's deep merges in place (as
formulas use them with C{{% do %}}), copies, node defaults, and
C{defaults.get} reading a formula's C{defaults.yaml} from the file server.
"""

from __future__ import annotations

import os

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules import SaltInvocationError
from salttwist.modules import defaults as mod
from tests._statectx import makeLoaderContext


class MergeTests(SynchronousTestCase):
    def test_inPlace(self) -> None:
        dest = {"a": {"x": 1, "y": [1]}, "b": 1}
        result = mod.merge(dest, {"a": {"y": [2], "z": 3}, "c": 4})
        self.assertIs(result, dest)
        self.assertEqual(dest, {"a": {"x": 1, "y": [2], "z": 3}, "b": 1, "c": 4})

    def test_copy(self) -> None:
        dest = {"a": {"x": 1}}
        result = mod.merge(dest, {"a": {"z": 3}}, in_place=False)
        self.assertEqual(result, {"a": {"x": 1, "z": 3}})
        self.assertEqual(dest, {"a": {"x": 1}})

    def test_mergeLists(self) -> None:
        self.assertEqual(
            mod.merge({"l": [1, 2]}, {"l": [2, 3]}, merge_lists=True), {"l": [1, 2, 3]}
        )

    def test_none(self) -> None:
        self.assertEqual(mod.merge({"a": 1}, None), {"a": 1})
        self.assertEqual(mod.merge(None, {"a": 1}, in_place=False), {"a": 1})
        e = self.assertRaises(SaltInvocationError, mod.merge, None, {"a": 1})
        self.assertIn("in-place merge into NoneType", str(e))

    def test_notDicts(self) -> None:
        self.assertRaises(SaltInvocationError, mod.merge, {"a": 1}, [1])

    def test_deepcopy(self) -> None:
        source = {"a": [{"b": 1}]}
        copied = mod.deepcopy(source)
        copied["a"][0]["b"] = 2
        self.assertEqual(source, {"a": [{"b": 1}]})

    def test_update(self) -> None:
        """
        Each node gets the defaults it does not set; lists are joined.
        """
        nodes = {"h1": {"port": 81, "extra": ["x"]}, "h2": {}}
        result = mod.update(nodes, {"port": 80, "tls": True, "extra": ["base"]})
        self.assertIs(result, nodes)
        self.assertEqual(
            nodes,
            {
                "h1": {"port": 81, "tls": True, "extra": ["base", "x"]},
                "h2": {"port": 80, "tls": True, "extra": ["base"]},
            },
        )

    def test_updateCopy(self) -> None:
        nodes = {"h1": {}}
        self.assertEqual(mod.update(nodes, {"a": 1}, in_place=False), {"h1": {"a": 1}})
        self.assertEqual(nodes, {"h1": {}})


class GetTests(TestCase):
    """
    C{defaults.get} fetches C{salt://<formula>/defaults.yaml} through
    C{cp.cache_file} (a local file client over a real root).
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(root, "core"))
        os.makedirs(os.path.join(root, "web"))
        with open(os.path.join(root, "core", "defaults.yaml"), "w") as f:
            f.write("users:\n  root:\n    uid: 0\n")
        with open(os.path.join(root, "web", "defaults.json"), "w") as f:
            f.write('{"port": 80}')
        cachedir = os.path.abspath(self.mktemp())
        opts = {"file_roots": {"base": [root]}, "cachedir": cachedir, "file_client": "local"}
        self.context = makeLoaderContext(opts)
        self.context.fileClient = LocalFileClient(FileServer(opts), cachedir, deferToThread)

    def get(self, *args: object, **kw: object) -> Deferred[object]:
        return deferToThread(mod.get, self.context, *args, **kw)

    async def test_nested(self) -> None:
        self.assertEqual(await self.get("core:users:root:uid"), 0)

    async def test_whole(self) -> None:
        self.assertEqual(await self.get("web"), {"port": 80})

    async def test_missing(self) -> None:
        self.assertEqual(await self.get("core:users:bob", default="none"), "none")
        self.assertEqual(await self.get("nothere"), {})
