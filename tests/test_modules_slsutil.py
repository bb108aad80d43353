# -*- test-case-name: tests.test_modules_slsutil -*-
"""
Tests for L{salttwist.modules.slsutil}: merges with the pillar's
strategies, in-place update, C{boolstr}, and the file-server lookups
(through C{cp.list_master} of a real local root).
"""

from __future__ import annotations

import os

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules import SaltInvocationError
from salttwist.modules import slsutil as mod
from tests._statectx import makeLoaderContext


class MergeTests(SynchronousTestCase):
    def test_smart(self) -> None:
        a = {"x": {"a": 1, "l": [1]}, "y": 1}
        self.assertEqual(
            mod.merge(a, {"x": {"b": 2, "l": [2]}}), {"x": {"a": 1, "b": 2, "l": [2]}, "y": 1}
        )
        self.assertEqual(a, {"x": {"a": 1, "l": [1]}, "y": 1})

    def test_mergeLists(self) -> None:
        self.assertEqual(mod.merge({"l": [1]}, {"l": [1, 2]}, merge_lists=True), {"l": [1, 2]})

    def test_overwrite(self) -> None:
        self.assertEqual(
            mod.merge({"x": {"a": 1}, "y": 1}, {"x": {"b": 2}}, strategy="overwrite"),
            {"x": {"b": 2}, "y": 1},
        )

    def test_mergeAll(self) -> None:
        self.assertEqual(
            mod.merge_all([{"a": {"x": 1}}, {"a": {"y": 2}}, {"b": 3}]),
            {"a": {"x": 1, "y": 2}, "b": 3},
        )
        self.assertEqual(mod.merge_all([]), {})
        self.assertRaises(SaltInvocationError, mod.merge_all, "x")

    def test_notDicts(self) -> None:
        e = self.assertRaises(SaltInvocationError, mod.merge, {"a": 1}, [1])
        self.assertIn("dict and list", str(e))

    def test_update(self) -> None:
        dest = {"a": {"x": 1}}
        self.assertIs(mod.update(dest, {"a": {"y": 2}}), dest)
        self.assertEqual(dest, {"a": {"x": 1, "y": 2}})
        mod.update(dest, {"a": {"z": 3}}, recursive_update=False)
        self.assertEqual(dest, {"a": {"z": 3}})

    def test_boolstr(self) -> None:
        self.assertEqual(mod.boolstr(True), "true")
        self.assertEqual(mod.boolstr(0, true="yes", false="no"), "no")


class FileServerTests(TestCase):
    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(root, "formulas", "nginx", "files"))
        for name in ("map.jinja", "formulas/nginx/init.sls", "formulas/nginx/files/a.conf"):
            with open(os.path.join(root, name), "w") as f:
                f.write("x\n")
        cachedir = os.path.abspath(self.mktemp())
        opts = {"file_roots": {"base": [root]}, "cachedir": cachedir}
        self.context = makeLoaderContext(opts)
        self.context.fileClient = LocalFileClient(FileServer(opts), cachedir, deferToThread)

    async def test_exists(self) -> None:
        c = self.context
        self.assertTrue(await deferToThread(mod.file_exists, c, "formulas/nginx/init.sls"))
        self.assertFalse(await deferToThread(mod.file_exists, c, "formulas/nginx"))
        self.assertTrue(await deferToThread(mod.dir_exists, c, "formulas/nginx/"))
        self.assertTrue(await deferToThread(mod.path_exists, c, "formulas/nginx"))
        self.assertFalse(await deferToThread(mod.path_exists, c, "nothere"))

    async def test_findup(self) -> None:
        found = await deferToThread(mod.findup, self.context, "formulas/nginx/files", "map.jinja")
        self.assertEqual(found, "map.jinja")
        found = await deferToThread(
            mod.findup, self.context, "formulas/nginx/files/a.conf", ["init.sls"]
        )
        self.assertEqual(found, "formulas/nginx/init.sls")


class TextTests(SynchronousTestCase):
    def test_bannerAsSalt(self) -> None:
        """
        The default banner, line for line as Salt 3008.5's C{slsutil.banner(width=40)}.
        """
        self.assertEqual(
            mod.banner(width=40).split("\n"),
            [
                "########################################",
                "#                                      #",
                "#  THIS FILE IS MANAGED BY SALT - DO   #",
                "#               NOT EDIT               #",
                "#                                      #",
                "# The contents of this file are        #",
                "# managed by Salt. Any changes to this #",
                "# file may be overwritten              #",
                "# automatically and without warning.   #",
                "########################################",
            ],
        )

    def test_bannerBlock(self) -> None:
        text = mod.banner(
            width=20,
            commentchar=" * ",
            borderchar="*",
            blockstart="/*",
            blockend="*/",
            newline=True,
        )
        lines = text.split("\n")
        self.assertEqual(lines[0], "/*")
        self.assertEqual(lines[-2], "*/")
        self.assertEqual(lines[-1], "")

    def test_bannerTooNarrow(self) -> None:
        self.assertRaises(SaltInvocationError, mod.banner, width=4)

    def test_serialize(self) -> None:
        self.assertEqual(mod.serialize("json", {"a": [1]}), '{"a": [1]}')
        # As Salt 3008.5's slsutil.serialize yaml '{a: [1]}'.
        self.assertEqual(mod.serialize("yaml", {"a": [1]}), "a: [1]")
        self.assertEqual(mod.serialize("yaml", "x"), "x")
        self.assertEqual(mod.serialize("yaml", {"b": {"c": 1}, "a": 2}), "a: 2\nb: {c: 1}")
        self.assertEqual(mod.deserialize("yaml", "a: [1]"), {"a": [1]})
        self.assertEqual(mod.deserialize("json", '{"a": 1}'), {"a": 1})
        self.assertRaises(SaltInvocationError, mod.serialize, "toml", {})
        self.assertRaises(SaltInvocationError, mod.deserialize, "json", "{")


class RendererTests(SynchronousTestCase):
    def test_string(self) -> None:
        context = makeLoaderContext({}, {"id": "m1", "os": "Debian"}, {"role": "web"})
        self.assertEqual(
            mod.renderer(context, string="a: {{ grains.os }}\nb: {{ pillar.role }} {{ x }}", x=1),
            {"a": "Debian", "b": "web 1"},
        )
        self.assertEqual(
            mod.renderer(context, string="hi {{ grains.id }}", default_renderer="jinja"), "hi m1"
        )
        self.assertRaises(SaltInvocationError, mod.renderer, context)
        e = self.assertRaises(SaltInvocationError, mod.renderer, context, string="{{ x.y }}")
        self.assertIn("'x' is undefined", str(e))

    def test_localPath(self) -> None:
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write('#!json\n{"a": 1}\n')
        context = makeLoaderContext()
        self.assertEqual(mod.renderer(context, path=path), {"a": 1})
