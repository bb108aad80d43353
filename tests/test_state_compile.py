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


class PipelineTests(TreeTestCase):
    """
    An SLS may name its renderers on its first line.
    """

    def test_json(self) -> None:
        self.write("a.sls", '#!json\n{"x": {"cmd.run": [{"name": "echo"}]}}\n')
        self.assertEqual(self.high("a")["x"]["cmd"], [{"name": "echo"}, "run", {"order": 10000}])

    def test_jinjaJson(self) -> None:
        self.write("a.sls", '#!jinja|json\n{"{{ grains.os }}": {"cmd.run": []}}\n')
        self.assertEqual(list(self.high("a")), ["Debian"])

    def test_yamlOnly(self) -> None:
        """
        Without Jinja, C{{{ }}} is YAML data, as in Salt.
        """
        self.write("a.sls", "#!yaml\nx:\n  cmd.run:\n    - name: '{{ not jinja }}'\n")
        self.assertEqual(self.high("a")["x"]["cmd"][0], {"name": "{{ not jinja }}"})

    def test_defaultRenderer(self) -> None:
        self.write("a.sls", '{"x": {"cmd.run": []}}\n')
        high, errors = self.compile("a", renderer="json")
        self.assertEqual(errors, [])
        self.assertEqual(list(high), ["x"])

    def test_unknownRenderer(self) -> None:
        path = self.write("a.sls", "#!mako|yaml\nx: 1\n")
        high, errors = self.compile("a")
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].startswith(f"Rendering SLS 'base:a' failed: {path}, line 1: "))
        self.assertIn("unknown renderer 'mako'", errors[0])

    def test_emptyFile(self) -> None:
        """
        An SLS that renders to nothing adds nothing, without error.
        """
        self.write("a.sls", "{# nothing here #}\n")
        self.assertEqual(self.high("a"), {})

    def test_twoDottedSameModule(self) -> None:
        self.write("a.sls", "x:\n  file.managed:\n    - name: /a\n  file.absent:\n    - name: /b\n")
        high, errors = self.compile("a")
        self.assertIn(
            "ID 'x' in SLS 'a' contains multiple state declarations of the same type", errors
        )


class SaltVariableTests(TreeTestCase):
    def test_moduleAttributes(self) -> None:
        """
        C{salt.mod.fun} and C{salt['mod'].fun} work as C{salt['mod.fun']},
        as Salt's Jinja renderer allows.
        """
        self.variables["salt"] = {"test.echo": lambda text: text.upper()}
        self.write(
            "a.sls",
            """
            x:
              cmd.run:
                - names:
                  - {{ salt['test.echo']('a') }}
                  - {{ salt.test.echo('b') }}
                  - {{ salt['test'].echo('c') }}
                  - {{ 'test.echo' in salt }}
                  - {{ salt.test.nope is defined }}
            """,
        )
        names = self.high("a")["x"]["cmd"][0]["names"]
        self.assertEqual(names, ["A", "B", "C", True, False])


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


class SaltenvTests(TreeTestCase):
    """
    Saltenvs: matches in several, includes across them.
    """

    def setUp(self) -> None:
        super().setUp()
        self.write("common.sls", "dev_common:\n  cmd.run\n", env="dev")
        self.write("only_dev.sls", "only_dev:\n  cmd.run\n", env="dev")

    def test_includeOtherSaltenv(self) -> None:
        self.write("web.sls", "include:\n  - dev: common\nweb:\n  cmd.run\n")
        high = self.high("web")
        self.assertEqual(high["dev_common"]["__env__"], "dev")
        self.assertEqual(high["dev_common"]["__sls__"], "common")
        self.assertEqual(high["web"]["__env__"], "base")

    def test_xenv(self) -> None:
        """
        C{_xenv} resolves the name in whichever saltenv of the run has it.
        """
        self.write("web.sls", "include:\n  - _xenv: only_dev\n")
        high, errors = compileHigh(
            self.server(), {"base": ["web"], "dev": ["common"]}, self.variables, self.opts
        )
        self.assertEqual(errors, [])
        self.assertEqual(high["only_dev"]["__env__"], "dev")

    def test_nonexistentSaltenv(self) -> None:
        self.write("web.sls", "include:\n  - nope: common\n")
        high, errors = self.compile("web")
        self.assertEqual(
            errors,
            ["Nonexistent saltenv 'nope' found in include of 'common' within SLS 'base:web'"],
        )

    def test_matchesInTwoSaltenvs(self) -> None:
        self.write("web.sls", "web:\n  cmd.run\n")
        high, errors = compileHigh(
            self.server(), {"base": ["web"], "dev": ["common"]}, self.variables, self.opts
        )
        self.assertEqual(errors, [])
        self.assertEqual(list(high), ["web", "dev_common"])
        self.assertEqual(high["dev_common"]["cmd"][-1], {"order": 10001})

    def test_unknownSaltenv(self) -> None:
        high, errors = compileHigh(self.server(), {"qa": ["x"]}, self.variables, self.opts)
        self.assertEqual(errors, ["No matching salt environment for environment 'qa' found"])

    def test_globMatch(self) -> None:
        self.write("web/a.sls", "wa:\n  cmd.run\n")
        self.write("web/b.sls", "wb:\n  cmd.run\n")
        self.assertEqual(list(self.high("web.*")), ["wa", "wb"])


class ExcludeArgumentTests(TreeTestCase):
    def test_excludeArgument(self) -> None:
        """
        C{exclude=} (C{state.sls exclude=...}) drops SLS and ids as an
        C{exclude:} in a file would.
        """
        self.write("web/init.sls", "include:\n  - .a\n  - .b\nkeep:\n  cmd.run\ndrop:\n  cmd.run\n")
        self.write("web/a.sls", "wa:\n  cmd.run\n")
        self.write("web/b.sls", "wb:\n  cmd.run\n")
        high, errors = compileHigh(
            self.server(), {"base": ["web"]}, self.variables, self.opts, exclude="web.a"
        )
        self.assertEqual(errors, [])
        self.assertEqual(sorted(high), ["drop", "keep", "wb"])
        high, errors = compileHigh(
            self.server(), {"base": ["web"]}, self.variables, self.opts, exclude=[{"id": "drop"}]
        )
        self.assertEqual(sorted(high), ["keep", "wa", "wb"])


class TemplateTests(TreeTestCase):
    """
    Formula idioms: execution functions and imported maps.
    """

    def test_saltAndImport(self) -> None:
        self.variables["salt"] = {"test.echo": lambda text: text.upper()}
        self.write(
            "app/map.jinja",
            """
            {%- import_yaml tplroot ~ "/defaults.yaml" as defaults %}
            {%- set app = defaults.app %}
            {%- do app.update({'os': grains.os}) %}
            """,
        )
        self.write("app/defaults.yaml", "app:\n  pkg: app-core\n")
        self.write(
            "app/init.sls",
            """
            {%- from tplroot ~ "/map.jinja" import app with context %}
            {{ app.pkg }}:
              pkg.installed:
                - comment: {{ salt['test.echo']('hi') }} {{ app.os }}
            """,
        )
        self.assertEqual(
            self.high("app")["app-core"]["pkg"][:2],
            [{"comment": "HI Debian"}, "installed"],
        )


class ErrorTests(TreeTestCase):
    """
    Every error names the SLS, its saltenv and, when known, the file and
    the line.
    """

    def test_renderError(self) -> None:
        path = self.write("web.sls", "a:\n  cmd.run:\n    - name: {{ nope.x }}\n")
        high, errors = self.compile("web")
        self.assertEqual(high, {})
        self.assertEqual(
            errors, [f"Rendering SLS 'base:web' failed: {path}, line 3: 'nope' is undefined"]
        )

    def test_yamlError(self) -> None:
        path = self.write("web.sls", "a:\n  cmd.run:\n  - x: [\n")
        high, errors = self.compile("web")
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0].startswith(f"Rendering SLS 'base:web' failed: {path}, line "))

    def test_errorInImportedMap(self) -> None:
        """
        An error in an imported template names that template's file.
        """
        mapPath = self.write("app/map.jinja", "{% set x = {} %}\n{% set y = x.a.b %}\n")
        self.write("app/init.sls", '{% from "app/map.jinja" import x %}\nz:\n  cmd.run\n')
        high, errors = self.compile("app")
        self.assertEqual(len(errors), 1)
        self.assertIn(f"{mapPath}, line 2", errors[0])
        self.assertTrue(errors[0].startswith("Rendering SLS 'base:app' failed: "))

    def test_conflictingIds(self) -> None:
        a = self.write("a.sls", "same:\n  cmd.run:\n    - name: a\n")
        b = self.write("b.sls", "same:\n  cmd.run:\n    - name: b\n")
        high, errors = self.compile("a", "b")
        self.assertEqual(
            errors,
            [
                "Detected conflicting IDs, SLS IDs need to be globally unique.\n"
                "    The conflicting ID is 'same' and is found in SLS 'base:a' and SLS"
                f" 'base:b' (file {a} and file {b})"
            ],
        )

    def test_notADictionary(self) -> None:
        path = self.write("web.sls", "- a\n- b\n")
        high, errors = self.compile("web")
        self.assertEqual(errors, [f"SLS web does not render to a dictionary (file {path})"])

    def test_verifyNamesFile(self) -> None:
        path = self.write("web.sls", "x:\n  cmd:\n    - run\n    - wait\n")
        high, errors = self.compile("web")
        self.assertEqual(
            errors,
            [
                "Too many functions declared in state 'x' in SLS 'web'. Please choose one of"
                f" the following: run, wait (file {path})"
            ],
        )

    def test_includeNotAList(self) -> None:
        self.write("web.sls", "include: other\nx:\n  cmd.run\n")
        high, errors = self.compile("web")
        self.assertEqual(errors, ["Include Declaration in SLS web is not formed as a list"])

    def test_relativeBeyondTop(self) -> None:
        self.write("web.sls", "include:\n  - ...x\n")
        high, errors = self.compile("web")
        self.assertEqual(
            errors,
            [
                "Attempted relative include of '...x' within SLS 'base:web' goes beyond"
                " top level package "
            ],
        )

    def test_pathTrick(self) -> None:
        """
        An SLS name that would leave the root is refused, naming it.
        """
        high, errors = self.compile("..etc.passwd")
        self.assertEqual(len(errors), 1)
        self.assertIn("..etc.passwd", errors[0])

    def test_includeCycle(self) -> None:
        """
        Files including each other are each read once.
        """
        self.write("a.sls", "include:\n  - b\nx:\n  cmd.run\n")
        self.write("b.sls", "include:\n  - a\ny:\n  cmd.run\n")
        self.assertEqual(sorted(self.high("a")), ["x", "y"])


class _CountingFiles:
    """
    A file server that counts how often a saltenv is listed whole.
    """

    def __init__(self, server: FileServer) -> None:
        self.server = server
        self.listed: list[str] = []

    def envs(self) -> list[str]:
        return self.server.envs()

    def fileList(self, saltenv: str, prefix: str = "") -> list[str]:
        self.listed.append(saltenv)
        return self.server.fileList(saltenv, prefix)

    def findFile(self, path: str, saltenv: str) -> Any:
        return self.server.findFile(path, saltenv)


class ListingTests(TreeTestCase):
    """
    Only globs list a saltenv: plain names are looked up alone, so the time
    before the first state does not grow with unrelated files.
    """

    def test_plainNamesDoNotList(self) -> None:
        """
        Plain SLS names and plain includes (relative ones too) never list
        the saltenv.
        """
        self.write("web/init.sls", "include:\n  - .conf\nnginx:\n  test.nop: []\n")
        self.write("web/conf.sls", "conf:\n  test.nop: []\n")
        for index in range(50):
            self.write(f"unrelated/f{index}.txt", "x")
        files = _CountingFiles(self.server())
        high, errors = compileHigh(files, {"base": ["web"]}, self.variables, self.opts)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(high), ["conf", "nginx"])
        self.assertEqual(files.listed, [])

    def test_missingPlainName(self) -> None:
        """
        A plain name that no file has is still Salt's error, without a
        listing.
        """
        files = _CountingFiles(self.server())
        _, errors = compileHigh(files, {"base": ["nope"]}, self.variables, self.opts)
        self.assertEqual(len(errors), 1)
        self.assertEqual(errors[0], "No matching sls found for 'nope' in env 'base'")
        self.assertEqual(files.listed, [])

    def test_globsList(self) -> None:
        """
        A glob lists the saltenv once.
        """
        self.write("web/a.sls", "a:\n  test.nop: []\n")
        self.write("web/b.sls", "b:\n  test.nop: []\n")
        files = _CountingFiles(self.server())
        high, errors = compileHigh(files, {"base": ["web.*"]}, self.variables, self.opts)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(high), ["a", "b"])
        self.assertEqual(files.listed, ["base"])
