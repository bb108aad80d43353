# -*- test-case-name: tests.test_render_py -*-
"""
Tests for the C{#!py} renderer (L{salttwist.render.pyrender}) and its place
in the pipeline: Salt's dunders, the data C{run()} returns, and errors
naming the file, the line and the cause.
"""

from __future__ import annotations

import os
import textwrap

from twisted.trial.unittest import SynchronousTestCase

from salttwist.render import RenderError, parsePipeline, renderText
from salttwist.render.pyrender import renderPy

CONTEXT = {
    "salt": {"test.echo": lambda text: text},
    "grains": {"os": "Debian"},
    "pillar": {"users": ["alice"]},
    "opts": {"id": "m1"},
}


def source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


class PyRendererTests(SynchronousTestCase):
    def test_dunders(self) -> None:
        """
        C{run()} sees C{__salt__}, C{__grains__}, C{__pillar__}, C{__opts__},
        C{__sls__}, C{__env__} and their plain names, and the other render
        variables.
        """
        text = source(
            """
            #!py
            def run():
                return {
                    "echo": __salt__["test.echo"]("hi"),
                    "os": __grains__["os"],
                    "users": __pillar__["users"],
                    "id": __opts__["id"],
                    "sls": __sls__,
                    "env": __env__,
                    "plain": [sls, saltenv, grains["os"], pillar["users"][0], opts["id"]],
                    "slspath": slspath,
                }
            """
        )
        data = renderText(
            text, dict(CONTEXT), path="/srv/web/users.sls", sls="web.users", saltenv="dev"
        )
        self.assertEqual(
            data,
            {
                "echo": "hi",
                "os": "Debian",
                "users": ["alice"],
                "id": "m1",
                "sls": "web.users",
                "env": "dev",
                "plain": ["web.users", "dev", "Debian", "alice", "m1"],
                "slspath": "web",
            },
        )

    def test_moduleLevelCode(self) -> None:
        """
        Top-level code runs (with the dunders already set) and helpers
        defined there are usable by C{run()}.
        """
        text = source(
            """
            #!py
            import os.path
            BASE = "/etc/" + __grains__["os"].lower()

            def _path(name):
                return os.path.join(BASE, name)

            def run():
                return {"conf": {"file.managed": [{"name": _path("x.conf")}]}}
            """
        )
        self.assertEqual(
            renderText(text, dict(CONTEXT)),
            {"conf": {"file.managed": [{"name": "/etc/debian/x.conf"}]}},
        )

    def test_noRun(self) -> None:
        e = self.assertRaises(RenderError, renderText, "#!py\nx = 1\n", {}, path="/srv/a.sls")
        self.assertEqual(e.path, "/srv/a.sls")
        self.assertIn("run()", e.cause)

    def test_raises(self) -> None:
        """
        An exception in C{run()} names the file's line where it was raised,
        the exception and the SLS.
        """
        text = source(
            """
            #!py
            def run():
                data = {}
                return data["missing"]
            """
        )
        e = self.assertRaises(
            RenderError, renderText, text, {}, path="/srv/web.sls", sls="web", saltenv="base"
        )
        self.assertEqual((e.path, e.line), ("/srv/web.sls", 4))
        self.assertEqual(e.cause, "KeyError: 'missing'")
        self.assertTrue(str(e).startswith("Rendering SLS 'base:web' failed: /srv/web.sls, line 4"))

    def test_syntaxError(self) -> None:
        e = self.assertRaises(RenderError, renderPy, "\ndef run(:\n", {}, path="/srv/x.sls")
        self.assertEqual(e.line, 2)
        self.assertIn("SyntaxError", e.cause)

    def test_onlyAlone(self) -> None:
        """
        C{py} reads the file itself: it cannot be piped with other
        renderers.
        """
        self.assertEqual(parsePipeline("py"), ["py"])
        e = self.assertRaises(RenderError, parsePipeline, "jinja|py")
        self.assertIn("cannot be piped", str(e))

    def test_realFile(self) -> None:
        """
        A C{#!py} SLS in a real root compiles to high data.
        """
        from salttwist.fileserver.server import FileServer
        from salttwist.state.compiler import compileHigh

        root = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(root, "web"))
        with open(os.path.join(root, "web", "init.sls"), "w") as f:
            f.write(
                source(
                    """
                    #!py
                    def run():
                        return {"nginx": {"pkg.installed": [{"name": __grains__["os"] + "-nginx"}]}}
                    """
                )
            )
        files = FileServer({"file_roots": {"base": [root]}})
        high, errors = compileHigh(files, {"base": ["web"]}, CONTEXT, {})
        self.assertEqual(errors, [])
        self.assertEqual(
            high,
            {
                "nginx": {
                    "pkg": [{"name": "Debian-nginx"}, "installed", {"order": 10000}],
                    "__sls__": "web",
                    "__env__": "base",
                }
            },
        )
