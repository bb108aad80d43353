# -*- test-case-name: tests.test_state_compile -*-
"""
Tests for L{salttwist.state.compiler.compileHigh}: SLS files of real
temporary C{file_roots}, read through a real L{FileServer}, rendered and
merged into Salt's high data: forms, includes (plain, relative, other
saltenvs, globs), C{extend}, C{exclude}, auto order, and the errors.
"""

from __future__ import annotations

import os
import textwrap
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.fileserver.server import FileServer
from salttwist.state.compiler import compileHigh, compileLow

GRAINS: dict[str, Any] = {"id": "web1", "os": "Debian", "os_family": "Debian"}


class TreeTestCase(SynchronousTestCase):
    """
    Helpers: saltenvs on disk, a file server over them, a compile.
    """

    def setUp(self) -> None:
        self.base = os.path.abspath(self.mktemp())
        os.makedirs(self.base)
        self.roots: dict[str, list[str]] = {}
        self.opts: dict[str, Any] = {"file_roots": self.roots, "renderer": "jinja|yaml"}
        self.variables: dict[str, Any] = {
            "grains": dict(GRAINS),
            "pillar": {},
            "opts": self.opts,
            "salt": {},
        }
        self.env("base")

    def env(self, name: str) -> str:
        path = os.path.join(self.base, name)
        os.makedirs(path, exist_ok=True)
        self.roots[name] = [path]
        return path

    def write(self, relPath: str, text: str, env: str = "base") -> str:
        if env not in self.roots:
            self.env(env)
        path = os.path.join(self.roots[env][0], relPath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
        return path

    def server(self) -> FileServer:
        return FileServer(self.opts)

    def compile(self, *mods: str, saltenv: str = "base", **opts: Any) -> tuple[dict, list[str]]:
        allOpts = dict(self.opts)
        allOpts.update(opts)
        return compileHigh(self.server(), {saltenv: list(mods)}, self.variables, allOpts)

    def high(self, *mods: str, **kw: Any) -> dict:
        high, errors = self.compile(*mods, **kw)
        self.assertEqual(errors, [])
        return high

    def chunks(self, *mods: str, **kw: Any) -> list[dict]:
        high = self.high(*mods, **kw)
        chunks, errors = compileLow(high, self.opts)
        self.assertEqual(errors, [])
        return chunks


class FormTests(TreeTestCase):
    """
    The ways to write a state become Salt's one shape.
    """

    def test_dottedForm(self) -> None:
        """
        C{file.managed: [args]} becomes C{file: [args, "managed", {order}]},
        with C{__sls__} and C{__env__} after the states, as Salt's
        C{state.show_sls}.
        """
        self.write(
            "web.sls",
            """
            /etc/motd:
              file.managed:
                - source: salt://motd
                - mode: '0644'
            """,
        )
        self.assertEqual(
            self.high("web"),
            {
                "/etc/motd": {
                    "file": [
                        {"source": "salt://motd"},
                        {"mode": "0644"},
                        "managed",
                        {"order": 10000},
                    ],
                    "__sls__": "web",
                    "__env__": "base",
                }
            },
        )

    def test_listForm(self) -> None:
        """
        C{file: [managed, args]} keeps its order; C{id: pkg.installed} (a
        string) becomes C{{pkg: [installed]}}.
        """
        self.write(
            "web.sls",
            """
            motd:
              file:
                - managed
                - name: /etc/motd
            git: pkg.installed
            """,
        )
        high = self.high("web")
        self.assertEqual(
            high["motd"],
            {
                "file": ["managed", {"name": "/etc/motd"}, {"order": 10000}],
                "__sls__": "web",
                "__env__": "base",
            },
        )
        self.assertEqual(
            high["git"],
            {"__sls__": "web", "__env__": "base", "pkg": ["installed", {"order": 10001}]},
        )

    def test_autoOrderOff(self) -> None:
        """
        Without C{state_auto_order}, no C{order} is added.
        """
        self.write("web.sls", "git: pkg.installed\n")
        self.assertEqual(self.high("web", state_auto_order=False)["git"]["pkg"], ["installed"])

    def test_explicitOrderKept(self) -> None:
        self.write(
            "web.sls",
            """
            a:
              cmd.run:
                - order: 1
            b:
              cmd.run
            """,
        )
        high = self.high("web")
        self.assertEqual(high["a"]["cmd"], [{"order": 1}, "run"])
        self.assertEqual(high["b"]["cmd"], ["run", {"order": 10000}])

    def test_jinjaContext(self) -> None:
        """
        An SLS is rendered with the caller's variables and Salt's per-file
        ones.
        """
        self.write(
            "web/init.sls",
            """
            vars:
              test.nop:
                - sls: {{ sls }}
                - slspath: {{ slspath }}
                - tpldir: {{ tpldir }}
                - tplroot: {{ tplroot }}
                - saltenv: {{ saltenv }}
                - os: {{ grains['os'] }}
            """,
        )
        args = self.high("web")["vars"]["test"]
        self.assertEqual(
            args[:6],
            [
                {"sls": "web"},
                {"slspath": "web"},
                {"tpldir": "web"},
                {"tplroot": "web"},
                {"saltenv": "base"},
                {"os": "Debian"},
            ],
        )


class IncludeTests(TreeTestCase):
    """
    C{include:} as Salt follows it.
    """

    def test_relativeAndOrder(self) -> None:
        """
        C{.config} from C{web/init.sls} is C{web.config}; the included
        file's states come after the includer's in the high data but are
        numbered first, and carry C{__sls_included_from__}.
        """
        self.write(
            "web/init.sls",
            """
            include:
              - .config
            nginx:
              pkg.installed
            """,
        )
        self.write("web/config.sls", "conf:\n  file.managed:\n    - name: /etc/x\n")
        high = self.high("web")
        self.assertEqual(list(high), ["nginx", "conf"])
        self.assertEqual(high["conf"]["__sls__"], "web.config")
        self.assertEqual(high["conf"]["__sls_included_from__"], ["web"])
        self.assertEqual(high["conf"]["file"][-1], {"order": 10000})
        self.assertEqual(high["nginx"]["pkg"][-1], {"order": 10001})

    def test_missing(self) -> None:
        self.write("web.sls", "include:\n  - nothere\n")
        high, errors = self.compile("web")
        self.assertEqual(
            errors,
            [
                "Specified SLS nothere in saltenv base is not available on the salt master"
                " or through a configured fileserver (included by SLS 'base:web')"
            ],
        )

    def test_topLevelMissing(self) -> None:
        high, errors = self.compile("nothere")
        self.assertEqual(errors, ["No matching sls found for 'nothere' in env 'base'"])
