# -*- test-case-name: tests.test_state_top -*-
"""
Tests for L{salttwist.state.top}: the state top files of real temporary
C{file_roots} read through a real L{FileServer}, merged with each
C{top_file_merging_strategy}, C{env_order}, C{default_top},
C{state_top}, C{state_top_saltenv} and the C{saltenv} restriction, and
matched with every target type.
"""

from __future__ import annotations

import os
import textwrap
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.fileserver.server import FileServer
from salttwist.state import (
    MergedTop,
    TopError,
    TopFile,
    gatherTops,
    listStates,
    mergeTops,
    showTop,
    topEnvs,
    topFileName,
    topMatches,
)

GRAINS: dict[str, Any] = {
    "os": "Debian",
    "roles": ["web", "cache"],
    "ipv4": ["10.1.2.3", "127.0.0.1"],
}


class TopTestCase(SynchronousTestCase):
    """
    Helpers: saltenvs on disk, options pointing at them, a file server.
    """

    def setUp(self) -> None:
        self.base = os.path.abspath(self.mktemp())
        os.makedirs(self.base)
        self.roots: dict[str, list[str]] = {}
        self.opts: dict[str, Any] = {
            "file_roots": self.roots,
            "top_file_merging_strategy": "merge",
            "env_order": [],
            "default_top": "base",
            "state_top": "top.sls",
            "renderer": "jinja|yaml",
            "nodegroups": {},
        }
        self.env("base")

    def env(self, name: str, *dirs: str) -> list[str]:
        """
        Add saltenv C{name} to C{file_roots} (one root named after it, or
        C{dirs}).
        """
        paths = [os.path.join(self.base, d) for d in (dirs or (name,))]
        for path in paths:
            os.makedirs(path, exist_ok=True)
        self.roots[name] = paths
        return paths

    def write(self, env: str, relPath: str, text: str | bytes, root: int = 0) -> str:
        if env not in self.roots:
            self.env(env)
        path = os.path.join(self.roots[env][root], relPath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(text, str):
            text = textwrap.dedent(text).encode("utf-8")
        with open(path, "wb") as f:
            f.write(text)
        return path

    def top(self, env: str, text: str, name: str = "top.sls") -> str:
        return self.write(env, name, text)

    def server(self) -> FileServer:
        return FileServer(self.opts)

    def show(
        self, minionId: str = "web1", grains: dict | None = None, **kw: Any
    ) -> tuple[dict[str, list[str]], list[str]]:
        return showTop(
            self.opts, self.server(), minionId, GRAINS if grains is None else grains, **kw
        )

    def matches(self, minionId: str = "web1", **kw: Any) -> dict[str, list[str]]:
        matches, errors = self.show(minionId, **kw)
        self.assertEqual(errors, [])
        return matches


class TopFileNameTests(SynchronousTestCase):
    """
    L{topFileName} takes C{state_top} as Salt does.
    """

    def test_default(self) -> None:
        self.assertEqual(topFileName({}), "top.sls")
        self.assertEqual(topFileName({"state_top": None}), "top.sls")

    def test_saltUrlAndSlash(self) -> None:
        """
        C{salt://top.sls} and C{/top.sls} are C{top.sls}, as Salt's
        C{__gen_opts}.
        """
        self.assertEqual(topFileName({"state_top": "salt://tops/main.sls"}), "tops/main.sls")
        self.assertEqual(topFileName({"state_top": "/main.sls"}), "main.sls")

    def test_pathTrick(self) -> None:
        e = self.assertRaises(TopError, topFileName, {"state_top": "../etc/top.sls"})
        self.assertIn("'..'", str(e))
        self.assertIn("state_top", str(e))

    def test_saltenvInUrl(self) -> None:
        e = self.assertRaises(TopError, topFileName, {"state_top": "salt://top.sls?saltenv=dev"})
        self.assertIn("state_top_saltenv", str(e))

    def test_notString(self) -> None:
        e = self.assertRaises(TopError, topFileName, {"state_top": ["top.sls"]})
        self.assertIn("must be a string", str(e))


class TopEnvsTests(TopTestCase):
    """
    L{topEnvs}: Salt's C{_get_envs}.
    """

    def test_default(self) -> None:
        """
        C{base} first, then C{file_roots}' order.
        """
        self.env("prod")
        self.env("dev")
        self.assertEqual(topEnvs(self.opts, self.server()), ["base", "prod", "dev"])

    def test_envOrder(self) -> None:
        """
        C{env_order} gives the order, without repeats, keeping only served
        saltenvs.
        """
        self.env("prod")
        self.env("dev")
        self.opts["env_order"] = ["dev", "nothere", "base", "dev"]
        self.assertEqual(topEnvs(self.opts, self.server()), ["dev", "base"])

    def test_otherServedEnvs(self) -> None:
        """
        The saltenvs the file server serves that C{file_roots} of the
        options do not name come after (gitfs branches, for example).
        """
        self.env("dev")
        server = FileServer({"file_roots": dict(self.roots, qa=[self.env("qa")[0]])})
        del self.roots["qa"]
        self.assertEqual(topEnvs(self.opts, server), ["base", "dev", "qa"])


class ListStatesTests(TopTestCase):
    def test_listStates(self) -> None:
        self.write("base", "web/init.sls", "")
        self.write("base", "web/nginx.sls", "")
        self.write("base", "core.sls", "")
        self.write("base", "files/motd", "")
        self.assertEqual(listStates(self.server(), "base"), ["core", "web", "web.nginx"])
        self.assertEqual(listStates(self.server(), "nothere"), [])


class GatherTests(TopTestCase):
    """
    L{gatherTops} reads and renders each saltenv's top file.
    """

    def test_eachSaltenv(self) -> None:
        self.top("base", "base: {'*': [core]}\n")
        self.top("dev", "dev: {'*': [devtools]}\n")
        self.env("qa")
        errors: list[str] = []
        tops = gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(errors, [])
        self.assertEqual(list(tops), ["base", "dev", "qa"])
        self.assertEqual(tops["base"], [{"base": {"*": ["core"]}}])
        self.assertEqual(tops["dev"], [{"dev": {"*": ["devtools"]}}])
        self.assertEqual(tops["qa"], [{}])
        self.assertIsInstance(tops["base"][0], TopFile)
        self.assertTrue(tops["base"][0].found)
        self.assertEqual(tops["base"][0].path, os.path.join(self.roots["base"][0], "top.sls"))
        self.assertFalse(tops["qa"][0].found)

    def test_firstRootWins(self) -> None:
        """
        With several roots for a saltenv, the first holding C{top.sls}
        gives it.
        """
        self.env("base", "one", "two")
        self.write("base", "top.sls", "base: {'*': [two]}\n", root=1)
        self.write("base", "top.sls", "base: {'*': [one]}\n", root=0)
        tops = gatherTops(self.opts, self.server())
        self.assertEqual(tops["base"], [{"base": {"*": ["one"]}}])

    def test_context(self) -> None:
        """
        The top is rendered with C{grains}, C{pillar}, C{opts} and
        C{saltenv} in the context.
        """
        self.top(
            "base",
            """\
            base:
              '*':
                - {{ grains['os'] | lower }}
                - {{ pillar.get('role', 'none') }}
                - {{ opts['state_top'] }}
                - {{ saltenv }}
            """,
        )
        tops = gatherTops(
            self.opts, self.server(), context={"grains": GRAINS, "pillar": {"role": "db"}}
        )
        self.assertEqual(tops["base"], [{"base": {"*": ["debian", "db", "top.sls", "base"]}}])

    def test_jinjaIncludeThroughFileServer(self) -> None:
        """
        C{{% import %}} in a top file reads from the same saltenv through
        the file server.
        """
        self.write("base", "map.jinja", "{% set apps = ['a', 'b'] %}\n")
        self.top(
            "base",
            """\
            {% from 'map.jinja' import apps %}
            base:
              '*': {{ apps | tojson }}
            """,
        )
        self.assertEqual(
            gatherTops(self.opts, self.server())["base"], [{"base": {"*": ["a", "b"]}}]
        )

    def test_jinjaIncludeConfined(self) -> None:
        """
        A template name leaving the roots is refused, as an error naming
        the top file.
        """
        self.top("base", "{% include '../../etc/passwd' %}\n")
        errors: list[str] = []
        gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(len(errors), 1)
        self.assertIn(os.path.join(self.roots["base"][0], "top.sls"), errors[0])

    def test_stateTop(self) -> None:
        """
        C{state_top} names the top file.
        """
        self.top("base", "base: {'*': [wrong]}\n")
        self.top("base", "base: {'*': [right]}\n", name="tops/main.sls")
        self.opts["state_top"] = "salt://tops/main.sls"
        self.assertEqual(gatherTops(self.opts, self.server())["base"], [{"base": {"*": ["right"]}}])

    def test_stateTopSaltenv(self) -> None:
        """
        With C{state_top_saltenv}, only that saltenv's top file is read.
        """
        self.top("base", "base: {'*': [core]}\n")
        self.top("dev", "dev: {'*': [devtools]}\n")
        self.opts["state_top_saltenv"] = "dev"
        self.assertEqual(
            dict(gatherTops(self.opts, self.server())), {"dev": [{"dev": {"*": ["devtools"]}}]}
        )

    def test_stateTopSaltenvNotServed(self) -> None:
        self.opts["state_top_saltenv"] = "nothere"
        e = self.assertRaises(TopError, gatherTops, self.opts, self.server())
        self.assertIn("state_top_saltenv 'nothere'", str(e))

    def test_saltenvRestriction(self) -> None:
        """
        With C{saltenv}, only that saltenv's top file is read (the
        argument, else the C{saltenv} option).
        """
        self.top("base", "base: {'*': [core]}\n")
        self.top("dev", "dev: {'*': [devtools]}\n")
        self.assertEqual(list(gatherTops(self.opts, self.server(), saltenv="dev")), ["dev"])
        self.opts["saltenv"] = "base"
        self.assertEqual(list(gatherTops(self.opts, self.server())), ["base"])

    def test_saltenvNotConfigured(self) -> None:
        errors: list[str] = []
        self.assertEqual(gatherTops(self.opts, self.server(), saltenv="prod", errors=errors), {})
        self.assertEqual(errors, ["saltenv 'prod' is not configured on the file server"])

    def test_renderErrorNamesFileAndLine(self) -> None:
        """
        A top file that does not render is an error naming its path, the
        line and the cause; the other top files are still read.
        """
        path = self.top("base", "base:\n  '*':\n    - core\n  bad: [\n")
        self.top("dev", "dev: {'*': [devtools]}\n")
        errors: list[str] = []
        tops = gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(len(errors), 1)
        self.assertIn(f"{path}, line ", errors[0])
        self.assertIn("saltenv 'base'", errors[0])
        self.assertEqual(tops["base"], [{}])
        self.assertTrue(tops["base"][0].found)
        self.assertEqual(tops["dev"], [{"dev": {"*": ["devtools"]}}])

    def test_jinjaErrorLine(self) -> None:
        path = self.top("base", "base:\n  '*':\n    - {{ nothere.attr }}\n")
        errors: list[str] = []
        gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(len(errors), 1)
        self.assertIn(f"{path}, line 3", errors[0])
        self.assertIn("nothere", errors[0])

    def test_raisesWithoutErrorList(self) -> None:
        path = self.top("base", "base: [\n")
        e = self.assertRaises(TopError, gatherTops, self.opts, self.server())
        self.assertIn(path, str(e))

    def test_notUtf8(self) -> None:
        path = self.write("base", "top.sls", b"base:\n  '*': [caf\xe9]\n")
        errors: list[str] = []
        gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(len(errors), 1)
        self.assertIn(path, errors[0])
        self.assertIn("UTF-8", errors[0])

    def test_shebang(self) -> None:
        """
        A C{#!json} top file is JSON.
        """
        self.top("base", '#!json\n{"base": {"*": ["core"]}}\n')
        self.assertEqual(gatherTops(self.opts, self.server())["base"], [{"base": {"*": ["core"]}}])

    def test_emptyTop(self) -> None:
        self.top("base", "# nothing yet\n")
        errors: list[str] = []
        tops = gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual((tops["base"], errors), ([{}], []))

    def test_shapeErrors(self) -> None:
        """
        Malformed parts of a top file are errors naming the file, the
        saltenv and the target; the well-formed rest is kept.
        """
        path = self.top(
            "base",
            """\
            base:
              '*':
                - core
                - ''
                - 3
                - match: ''
              'web*': web
              'db*': {a: b}
              'x*':
            dev: [a, b]
            prod:
            7: {'*': [a]}
            """,
        )
        errors: list[str] = []
        tops = gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(tops["base"], [{"base": {"*": ["core"], "web*": ["web"]}}])
        self.assertEqual(len(errors), 8, errors)
        for error in errors:
            self.assertIn(f"Top file {path} (saltenv 'base')", error)
        text = "\n".join(errors)
        self.assertIn("target 'db*': malformed topfile", text)
        self.assertIn("target 'x*': malformed topfile", text)
        self.assertIn("saltenv 'dev' are not formatted as a dict", text)
        self.assertIn("saltenv 'prod' has no targets", text)
        self.assertIn("environment 7", text)
        self.assertIn("empty SLS name", text)

    def test_notMapping(self) -> None:
        path = self.top("base", "- a\n- b\n")
        errors: list[str] = []
        gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(
            errors,
            [
                f"Top file {path} (saltenv 'base') does not render to a mapping of saltenvs"
                " (got list)"
            ],
        )

    def test_sameNeedsDefaultTop(self) -> None:
        """
        C{same} without C{default_top} is an error, as Salt's.
        """
        self.opts["top_file_merging_strategy"] = "same"
        self.opts["default_top"] = None
        e = self.assertRaises(TopError, gatherTops, self.opts, self.server())
        self.assertIn("no default_top", str(e))
        # Not when a saltenv is asked for.
        self.assertEqual(list(gatherTops(self.opts, self.server(), saltenv="base")), ["base"])


class IncludeTests(TopTestCase):
    """
    A top file's C{include:} reads SLS files of its saltenv as more top
    files.
    """

    def test_include(self) -> None:
        self.top("base", "include: [tops.*]\nbase: {'*': [core]}\n")
        self.write("base", "tops/web.sls", "base: {'web*': [nginx]}\n")
        self.write("base", "tops/db/init.sls", "include: [more]\nbase: {'db*': [pg]}\n")
        self.write("base", "more.sls", "include: [tops.web]\nbase: {'*': [more]}\n")
        errors: list[str] = []
        tops = gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(errors, [])
        self.assertEqual(
            [dict(t) for t in tops["base"]],
            [
                {"include": ["tops.*"], "base": {"*": ["core"]}},
                {"include": ["more"], "base": {"db*": ["pg"]}},
                {"base": {"web*": ["nginx"]}},
                {"include": ["tops.web"], "base": {"*": ["more"]}},
            ],
        )
        self.assertEqual(
            tops["base"][1].path, os.path.join(self.roots["base"][0], "tops/db/init.sls")
        )
        # The merged top: base's later top files override a target.
        merged = mergeTops(tops, self.opts)
        self.assertEqual(merged, {"base": {"*": ["more"], "db*": ["pg"], "web*": ["nginx"]}})

    def test_includeOfItself(self) -> None:
        """
        An include naming the top file itself (or a glob matching it) does
        not read it again.
        """
        self.top("base", "include: ['*']\nbase: {'*': [core]}\n")
        self.write("base", "other.sls", "base: {'web*': [web]}\n")
        tops = gatherTops(self.opts, self.server())
        self.assertEqual(len(tops["base"]), 2)
        self.assertEqual(self.matches(), {"base": ["core", "web"]})

    def test_missingPlainInclude(self) -> None:
        path = self.top("base", "include: [nothere, maybe.*]\nbase: {'*': [core]}\n")
        errors: list[str] = []
        gatherTops(self.opts, self.server(), errors=errors)
        self.assertEqual(
            errors,
            [
                f"Top file {path} (saltenv 'base'): include 'nothere' names no SLS file of"
                " saltenv 'base'"
            ],
        )

    def test_includeInOtherSaltenvMerges(self) -> None:
        """
        Under C{merge}, a saltenv's included top files add to its section.
        """
        self.top("base", "base: {'*': [core]}\n")
        self.top("dev", "include: [devtop]\ndev: {'*': [a]}\n")
        self.write("dev", "devtop.sls", "dev: {'web*': [b]}\n")
        self.assertEqual(self.matches(), {"base": ["core"], "dev": ["a", "b"]})


class MergeStrategyTests(TopTestCase):
    """
    C{top_file_merging_strategy}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.top(
            "base",
            """\
            base:
              '*': [core]
            qa:
              '*': [qa_from_base]
            """,
        )
        self.top(
            "dev",
            """\
            base:
              '*': [base_from_dev]
            dev:
              '*': [devtools]
            """,
        )
        self.top(
            "qa",
            """\
            qa:
              '*': [qa_own]
            """,
        )
        self.env("prod")

    def test_merge(self) -> None:
        """
        C{merge}: base's top gives every section; another saltenv's top
        only its own, and not when base's defines it.
        """
        self.assertEqual(
            self.matches(),
            {"base": ["core"], "qa": ["qa_from_base"], "dev": ["devtools"]},
        )

    def test_mergeIsDefault(self) -> None:
        del self.opts["top_file_merging_strategy"]
        self.assertEqual(
            self.matches(), {"base": ["core"], "qa": ["qa_from_base"], "dev": ["devtools"]}
        )

    def test_unknownStrategyIsMerge(self) -> None:
        self.opts["top_file_merging_strategy"] = "bogus"
        with self.assertLogs("salttwist.state.top", "WARNING") as logged:
            self.assertEqual(
                self.matches(), {"base": ["core"], "qa": ["qa_from_base"], "dev": ["devtools"]}
            )
        self.assertIn("Invalid top_file_merging_strategy 'bogus'", logged.output[0])

    def test_same(self) -> None:
        """
        C{same}: each saltenv's section comes from its own top file only.
        """
        self.opts["top_file_merging_strategy"] = "same"
        self.assertEqual(self.matches(), {"base": ["core"], "dev": ["devtools"], "qa": ["qa_own"]})

    def test_sameDefaultTop(self) -> None:
        """
        C{same}: a saltenv without a top file takes its section from
        C{default_top}'s top file.
        """
        self.opts["top_file_merging_strategy"] = "same"
        os.remove(os.path.join(self.roots["qa"][0], "top.sls"))
        self.assertEqual(
            self.matches(), {"base": ["core"], "qa": ["qa_from_base"], "dev": ["devtools"]}
        )
        self.top("prod", "prod: {'*': [p]}\nqa: {'*': [qa_from_prod]}\n")
        self.opts["default_top"] = "prod"
        self.assertEqual(
            self.matches(),
            {"base": ["core"], "dev": ["devtools"], "qa": ["qa_from_prod"], "prod": ["p"]},
        )

    def test_sameNoFallbackForBrokenTop(self) -> None:
        """
        A top file that fails to render does not fall back on
        C{default_top}: it is an error.
        """
        self.opts["top_file_merging_strategy"] = "same"
        self.top("qa", "qa: [\n")
        matches, errors = self.show()
        self.assertEqual(matches, {"base": ["core"], "dev": ["devtools"]})
        self.assertEqual(len(errors), 1)
        self.assertIn("saltenv 'qa'", errors[0])

    def test_mergeAll(self) -> None:
        """
        C{merge_all}: every section of every top file, a target's SLS
        names joined.
        """
        self.opts["top_file_merging_strategy"] = "merge_all"
        self.assertEqual(
            self.matches(),
            {
                "base": ["core", "base_from_dev"],
                "qa": ["qa_from_base", "qa_own"],
                "dev": ["devtools"],
            },
        )

    def test_mergeAllEnvOrder(self) -> None:
        """
        C{env_order} orders the top files, hence the SLS names.
        """
        self.opts["top_file_merging_strategy"] = "merge_all"
        self.opts["env_order"] = ["qa", "dev", "base"]
        self.assertEqual(
            self.matches(),
            {
                "qa": ["qa_own", "qa_from_base"],
                "base": ["base_from_dev", "core"],
                "dev": ["devtools"],
            },
        )

    def test_envOrderLeavesOut(self) -> None:
        """
        A saltenv C{env_order} does not name has no top file read.
        """
        self.opts["env_order"] = ["base", "qa"]
        self.assertEqual(self.matches(), {"base": ["core"], "qa": ["qa_from_base"]})

    def test_mergeAllMatchType(self) -> None:
        """
        C{merge_all}: a target met again takes the later C{match:} and
        keeps the earlier's when the later has none.
        """
        tops = {
            "base": [{"base": {"G@os:Debian": ["a", {"match": "compound"}]}}],
            "dev": [
                {"base": {"G@os:Debian": ["b", "a"]}},
                {"base": {"G@os:Debian": [{"match": "glob"}, "c"]}},
            ],
        }
        merged = mergeTops(tops, {"top_file_merging_strategy": "merge_all"})
        self.assertEqual(merged, {"base": {"G@os:Debian": [{"match": "glob"}, "a", "b", "c"]}})
        self.assertEqual(
            topMatches(merged, "web1", GRAINS, errors=[]),
            {},
        )

    def test_saltenvRestriction(self) -> None:
        """
        With C{saltenv}, only that saltenv's top file and section count.
        """
        self.assertEqual(self.matches(saltenv="dev"), {"dev": ["devtools"]})
        self.assertEqual(self.matches(saltenv="base"), {"base": ["core"]})
        self.assertEqual(self.matches(saltenv="qa"), {"qa": ["qa_own"]})
        self.assertEqual(self.matches(saltenv="prod"), {})

    def test_stateTopSaltenv(self) -> None:
        """
        With C{state_top_saltenv}, only that saltenv's top file is read:
        under C{merge}, only its own section (or all, for C{base}).
        """
        self.opts["state_top_saltenv"] = "dev"
        self.assertEqual(self.matches(), {"dev": ["devtools"]})
        self.opts["state_top_saltenv"] = "base"
        self.assertEqual(self.matches(), {"base": ["core"], "qa": ["qa_from_base"]})

    def test_mergedTopOrigins(self) -> None:
        errors: list[str] = []
        merged = mergeTops(gatherTops(self.opts, self.server(), errors=errors), self.opts)
        self.assertIsInstance(merged, MergedTop)
        self.assertEqual(
            merged.origins[("dev", "*")], os.path.join(self.roots["dev"][0], "top.sls")
        )


class MatchTests(TopTestCase):
    """
    Targets are matched with their C{match:} type, C{compound} by default.
    """

    def matched(self, target: str, match: str | None, minionId: str = "web1", **kw: Any) -> bool:
        items: list[Any] = ["s"]
        if match is not None:
            items.append({"match": match})
        merged = {"base": {target: items}}
        errors: list[str] = []
        found = topMatches(merged, minionId, kw.pop("grains", GRAINS), errors=errors, **kw)
        self.assertEqual(errors, [])
        return found == {"base": ["s"]}

    def test_compoundDefault(self) -> None:
        self.assertTrue(self.matched("web*", None))
        self.assertFalse(self.matched("db*", None))
        self.assertTrue(self.matched("G@os:Debian and web*", None))
        self.assertFalse(self.matched("G@os:Debian and not web*", None))

    def test_glob(self) -> None:
        self.assertTrue(self.matched("web?", "glob"))
        self.assertFalse(self.matched("web?", "glob", minionId="web12"))

    def test_pcre(self) -> None:
        self.assertTrue(self.matched(r"web\d+", "pcre"))
        self.assertFalse(self.matched(r"db\d+", "pcre"))

    def test_list(self) -> None:
        self.assertTrue(self.matched("db1,web1", "list"))
        self.assertFalse(self.matched("db1,web2", "list"))

    def test_grain(self) -> None:
        self.assertTrue(self.matched("roles:web", "grain"))
        self.assertFalse(self.matched("roles:db", "grain"))
        self.assertTrue(self.matched("os:deb.*", "grain_pcre"))

    def test_pillar(self) -> None:
        pillar = {"role": "web", "tier": {"name": "front"}}
        self.assertTrue(self.matched("role:w*", "pillar", pillar=pillar))
        self.assertFalse(self.matched("role:w*", "pillar"))
        self.assertTrue(self.matched("tier:name:fr.*", "pillar_pcre", pillar=pillar))
        self.assertTrue(self.matched("role:web", "pillar_exact", pillar=pillar))
        self.assertFalse(self.matched("role:we", "pillar_exact", pillar=pillar))
        self.assertTrue(self.matched("I@role:web and web*", None, pillar=pillar))

    def test_ipcidr(self) -> None:
        self.assertTrue(self.matched("10.0.0.0/8", "ipcidr"))
        self.assertFalse(self.matched("192.168.0.0/16", "ipcidr"))

    def test_nodegroup(self) -> None:
        groups = {"webs": "web* and G@os:Debian", "dbs": ["L@db1,db2"]}
        self.assertTrue(self.matched("webs", "nodegroup", nodegroups=groups))
        self.assertFalse(self.matched("dbs", "nodegroup", nodegroups=groups))
        self.assertTrue(self.matched("N@webs or db1", None, nodegroups=groups))

    def test_badTargetIsError(self) -> None:
        """
        A target that does not compile is an error naming the top file,
        saltenv, target and match type; the other targets still match.
        """
        path = self.top(
            "base",
            """\
            base:
              '*': [core]
              'G@os:Debian and (':
                - broken
              'web*':
                - match: range
                - ranged
            """,
        )
        matches, errors = self.show()
        self.assertEqual(matches, {"base": ["core"]})
        self.assertEqual(len(errors), 2, errors)
        self.assertIn(
            f"Top file {path} (saltenv 'base'): target 'G@os:Debian and (' (match: compound)",
            errors[0],
        )
        self.assertIn("target 'web*' (match: range): unknown target type 'range'", errors[1])

    def test_orderAndDuplicates(self) -> None:
        """
        SLS names keep the top's order, each once per saltenv.
        """
        self.top(
            "base",
            """\
            base:
              '*': [core, users, core]
              'web*': [nginx, users]
              'G@os:Debian': [apt, core]
              'db*': [pg]
            """,
        )
        self.assertEqual(self.matches(), {"base": ["core", "users", "nginx", "apt"]})

    def test_shorthand(self) -> None:
        """
        A target given one SLS name as a string (Salt's shorthand).
        """
        self.top("base", "base:\n  '*': core\n")
        self.assertEqual(self.matches(), {"base": ["core"]})

    def test_subfilter(self) -> None:
        self.top(
            "base",
            """\
            base:
              'web*':
                - nginx
                - subfilter:
                    'G@os:Debian': [apt]
                    'G@os:RedHat': [yum]
            """,
        )
        self.assertEqual(self.matches(), {"base": ["nginx", "apt"]})
        self.assertEqual(self.matches("db1"), {})

    def test_otherSaltenvItem(self) -> None:
        """
        An item C{- dev: sls} gives an SLS of another served saltenv.
        """
        self.env("dev")
        self.top(
            "base",
            """\
            base:
              'web*':
                - core
                - dev: devtools
                - nothere: ignored
            """,
        )
        self.assertEqual(self.matches(), {"base": ["core"], "dev": ["devtools"]})

    def test_matchedEmpty(self) -> None:
        """
        A matching target whose list has only its C{match:} still names
        its saltenv, as Salt's.
        """
        self.top("base", "base:\n  'web*':\n    - match: glob\n")
        self.assertEqual(self.matches(), {"base": []})

    def test_saltenvArgument(self) -> None:
        merged = {"base": {"*": ["a"]}, "dev": {"*": ["b"]}}
        self.assertEqual(topMatches(merged, "m", {}, saltenv="dev"), {"dev": ["b"]})

    def test_raisesWithoutErrorList(self) -> None:
        e = self.assertRaises(
            TopError, topMatches, {"base": {"x": [{"match": "nope"}, "a"]}}, "m", {}
        )
        self.assertIn("saltenv 'base': target 'x' (match: nope)", str(e))


class ShowTopTests(TopTestCase):
    """
    L{showTop} as a whole.
    """

    def test_idAndContext(self) -> None:
        """
        C{opts['id']} is the minion's id; C{context} adds variables.
        """
        self.top(
            "base",
            """\
            base:
              '{{ opts['id'] }}':
                - {{ extra }}
                - {{ pillar['role'] }}
            """,
        )
        self.assertEqual(
            self.matches(pillar={"role": "db"}, context={"extra": "added"}),
            {"base": ["added", "db"]},
        )

    def test_pillarTarget(self) -> None:
        self.top("base", "base:\n  'role:db':\n    - match: pillar\n    - pg\n")
        self.assertEqual(self.matches(pillar={"role": "db"}), {"base": ["pg"]})
        self.assertEqual(self.matches(), {})

    def test_noTopFiles(self) -> None:
        self.assertEqual(self.show(), ({}, []))

    def test_badOptionsNeverRaise(self) -> None:
        """
        Options of a shape nobody checked give an error, not an exception.
        """
        self.top("base", "base: {'*': [core]}\n")
        self.opts["state_top"] = "../x"
        matches, errors = self.show()
        self.assertEqual(matches, {})
        self.assertEqual(len(errors), 1)
        self.assertIn("state_top '../x'", errors[0])
        self.opts["state_top"] = "top.sls"
        self.opts["env_order"] = 5
        matches, errors = self.show()
        self.assertEqual(matches, {})
        self.assertEqual(len(errors), 1)
        self.assertIn("State top failed: TypeError", errors[0])

    def test_partialOnError(self) -> None:
        """
        A broken top file is an error; the tops that rendered still match.
        """
        path = self.top("dev", "dev:\n  '*':\n    - {{ 1 / 0 }}\n")
        self.top("base", "base: {'*': [core]}\n")
        matches, errors = self.show()
        self.assertEqual(matches, {"base": ["core"]})
        self.assertEqual(len(errors), 1)
        self.assertIn(f"{path}, line 3", errors[0])
        self.assertIn("division by zero", errors[0])


class GitfsTests(TopTestCase):
    """
    Top files from a real git repository's branches (gitfs) beside
    C{file_roots}: the branches are saltenvs read after those of
    C{file_roots}, as Salt's C{_get_envs}.
    """

    def setUp(self) -> None:
        super().setUp()
        from tests.test_fileserver_contract import GitRepository

        self.repo = GitRepository(os.path.join(self.base, "repo"))
        self.repo.commitBranch(
            "master", {"top.sls": "base: {'*': [from_git]}\n", "gitonly.sls": ""}
        )
        self.repo.commitBranch(
            "feature",
            {
                "top.sls": "include: [extra]\nfeature: {'web*': [feat]}\n",
                "extra.sls": "feature: {'G@os:Debian': [feat_debian]}\n",
            },
        )
        self.top("base", "base: {'*': [from_roots]}\n")
        self.fileServer: FileServer | None = None

    def server(self) -> FileServer:
        from salttwist.fileserver.gitfs import GitBackend
        from salttwist.fileserver.roots import RootsBackend

        if self.fileServer is None:
            cachedir = os.path.join(self.base, "cache")
            git = GitBackend({"gitfs_remotes": [self.repo.path]}, cachedir)
            self.assertTrue(git.update())
            self.fileServer = FileServer(self.opts, [RootsBackend(self.opts), git])
        return self.fileServer

    def test_branchesAreSaltenvs(self) -> None:
        """
        The roots' C{base} top file wins over the git one (the first
        backend holding it); the branch's top and its include give its
        section.
        """
        self.assertEqual(topEnvs(self.opts, self.server()), ["base", "feature"])
        self.assertEqual(
            self.matches(), {"base": ["from_roots"], "feature": ["feat", "feat_debian"]}
        )

    def test_same(self) -> None:
        self.opts["top_file_merging_strategy"] = "same"
        self.assertEqual(self.matches(saltenv="feature"), {"feature": ["feat", "feat_debian"]})
        self.assertEqual(self.matches("db1", grains={}), {"base": ["from_roots"]})
        self.assertEqual(self.matches("db1"), {"base": ["from_roots"], "feature": ["feat_debian"]})


class DocsExampleTests(TopTestCase):
    """
    The example of C{docs/fileserver.md} ("Top files and saltenvs") gives
    what the page says.
    """

    def test_example(self) -> None:
        self.env("dev")
        self.write("dev", "devtools.sls", "")
        self.write("base", "tops/extra.sls", "base: {'db*': [backup]}\n")
        self.top(
            "base",
            """\
            include:
              - tops.*
            base:
              '*':
                - core
              'web* and G@os:Debian':
                - nginx
              'roles:db':
                - match: grain
                - postgres
              'role:cache':
                - match: pillar
                - redis
              webservers:
                - match: nodegroup
                - haproxy
                - subfilter:
                    'G@os:RedHat': [selinux]
                - dev: devtools
            dev:
              'web*':
                - nginx.debug
            """,
        )
        self.opts["nodegroups"] = {"webservers": "web*"}
        self.assertEqual(
            self.matches(pillar={"role": "cache"}),
            {"base": ["core", "nginx", "redis", "haproxy"], "dev": ["devtools", "nginx.debug"]},
        )
        self.assertEqual(
            self.matches("db1", grains={"os": "RedHat", "roles": ["db"]}),
            {"base": ["core", "postgres", "backup"]},
        )
