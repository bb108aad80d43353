# -*- test-case-name: tests.test_pillar_compile -*-
"""
Tests for L{salttwist.pillar.compiler}: top files matched with every target
type, SLS rendering and includes, merging, errors in C{_errors}, pillarenv,
ext_pillar order, the override, confinement to C{pillar_roots}; all with
real files in temporary directories.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.pillar import compilePillar, compilePillarWithErrors, showTop, showTopWithErrors
from salttwist.pillar.compiler import MAX_INCLUDE_DEPTH

GRAINS: dict[str, Any] = {
    "os": "Debian",
    "roles": ["web", "cache"],
    "ipv4": ["10.1.2.3", "127.0.0.1"],
}


class PillarTree:
    """
    Pillar roots on disk, written file by file.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        os.makedirs(base)

    def root(self, name: str) -> str:
        path = os.path.join(self.base, name)
        os.makedirs(path, exist_ok=True)
        return path

    def write(self, root: str, relPath: str, text: str) -> str:
        path = os.path.join(self.root(root), relPath)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
        return path


class CompileTestCase(SynchronousTestCase):
    """
    Helpers: a temporary tree and options pointing at it.
    """

    def setUp(self) -> None:
        self.tree = PillarTree(os.path.abspath(self.mktemp()))
        self.opts: dict[str, Any] = {
            "pillar_roots": {"base": [self.tree.root("base")]},
            "pillar_source_merging_strategy": "smart",
            "pillar_merge_lists": False,
            "ext_pillar": [],
            "ext_pillar_first": False,
            "pillarenv": None,
            "pillarenv_from_saltenv": False,
            "pillar_safe_render_error": True,
            "renderer": "jinja|yaml",
            "nodegroups": {},
        }

    def write(self, relPath: str, text: str, root: str = "base") -> str:
        return self.tree.write(root, relPath, text)

    def top(self, text: str, root: str = "base") -> None:
        self.write("top.sls", text, root)

    def compile(self, minionId: str = "web1", grains: dict | None = None, **kw: Any) -> dict:
        return compilePillar(self.opts, minionId, GRAINS if grains is None else grains, **kw)


class TopMatchingTests(CompileTestCase):
    """
    The top file is matched with each of Salt's target types.
    """

    def setUp(self) -> None:
        super().setUp()
        for name in ("a", "b", "c"):
            self.write(f"{name}.sls", f"{name}: true\n")

    def matched(self, target: str, match: str | None, minionId: str = "web1", **kw: Any) -> bool:
        item = f"\n    - match: {match}" if match else ""
        self.top(f"base:\n  '{target}':{item}\n    - a\n")
        return showTop(self.opts, minionId, kw.get("grains", GRAINS)) == {"base": ["a"]}

    def test_defaultCompound(self) -> None:
        """
        Without C{match:} a target is a compound one (a glob is a compound
        word), as Salt's C{confirm_top}.
        """
        self.assertTrue(self.matched("web*", None))
        self.assertTrue(self.matched("web* and G@os:Debian", None))
        self.assertFalse(self.matched("db*", None))

    def test_glob(self) -> None:
        self.assertTrue(self.matched("web?", "glob"))
        self.assertFalse(self.matched("db*", "glob"))

    def test_pcre(self) -> None:
        self.assertTrue(self.matched("^web\\d+$", "pcre"))
        self.assertFalse(self.matched("^db", "pcre"))

    def test_list(self) -> None:
        self.assertTrue(self.matched("db1,web1", "list"))
        self.assertFalse(self.matched("db1,db2", "list"))

    def test_grain(self) -> None:
        self.assertTrue(self.matched("roles:web", "grain"))
        self.assertFalse(self.matched("os:RedHat", "grain"))

    def test_grainPcre(self) -> None:
        self.assertTrue(self.matched("os:Deb.*", "grain_pcre"))
        self.assertFalse(self.matched("os:Red.*", "grain_pcre"))

    def test_nodegroup(self) -> None:
        self.opts["nodegroups"] = {"webs": "web* or L@db9", "dbs": ["db1", "db2"]}
        self.assertTrue(self.matched("webs", "nodegroup"))
        self.assertFalse(self.matched("dbs", "nodegroup"))
        self.assertTrue(self.matched("dbs", "nodegroup", minionId="db2"))

    def test_ipcidr(self) -> None:
        self.assertTrue(self.matched("10.1.0.0/16", "ipcidr"))
        self.assertFalse(self.matched("192.168.0.0/16", "ipcidr"))

    def test_pillarFromExtPillarFirst(self) -> None:
        """
        A C{pillar} target matches the pillar compiled so far: with
        C{ext_pillar_first}, the external pillar's data.
        """
        self.opts["ext_pillar_first"] = True
        self.opts["ext_pillar"] = [{"cmd_yaml": "echo 'role: db'"}]
        self.assertTrue(self.matched("role:db", "pillar"))
        self.assertFalse(self.matched("role:web", "pillar"))

    def test_badTarget(self) -> None:
        """
        A malformed target is an error in the top's errors; other targets
        still match.
        """
        self.top("base:\n  'web* and and':\n    - a\n  '*':\n    - b\n")
        top, errors = showTopWithErrors(self.opts, "web1", GRAINS)
        self.assertEqual(top, {"base": ["b"]})
        self.assertEqual(len(errors), 1)
        self.assertIn("web* and and", errors[0])

    def test_orderAndDuplicates(self) -> None:
        """
        C{order} sorts the targets; an SLS named twice is rendered once.
        """
        self.top(
            """\
            base:
              '*':
                - b
                - order: 2
              'web*':
                - a
                - b
                - order: 1
            """
        )
        self.assertEqual(showTop(self.opts, "web1", GRAINS), {"base": ["a", "b"]})

    def test_jinjaInTop(self) -> None:
        """
        The top file is rendered with the grains.
        """
        self.top(
            """\
            base:
              '*':
            {% if grains.os == 'Debian' %}
                - c
            {% endif %}
            """
        )
        self.assertEqual(self.compile(), {"c": True})

    def test_several(self) -> None:
        """
        Every matching target's SLS files are compiled, in top order.
        """
        self.top("base:\n  '*':\n    - a\n  'web*':\n    - b\n  'db*':\n    - c\n")
        self.assertEqual(self.compile(), {"a": True, "b": True})
        self.assertEqual(self.compile("db1"), {"a": True, "c": True})

    def test_slsGlob(self) -> None:
        """
        An SLS name in the top may be a glob over the saltenv's SLS files.
        """
        self.write("apps/x.sls", "x: 1\n")
        self.write("apps/y/init.sls", "y: 2\n")
        self.top("base:\n  '*':\n    - apps.*\n")
        self.assertEqual(self.compile(), {"x": 1, "y": 2})


class SlsTests(CompileTestCase):
    """
    SLS files: context, includes, layout.
    """

    def test_context(self) -> None:
        """
        An SLS sees C{grains}, C{opts} (with the minion's id), C{saltenv},
        C{sls}, and C{pillar} as compiled so far.
        """
        self.top("base:\n  '*':\n    - first\n    - second\n")
        self.write("first.sls", "color: blue\n")
        self.write(
            "second.sls",
            "info: '{{ grains.os }} {{ opts.id }} {{ saltenv }} {{ sls }} {{ pillar.color }}'\n",
        )
        self.assertEqual(self.compile()["info"], "Debian web1 base second blue")

    def test_noSaltFunctions(self) -> None:
        """
        C{salt} is not available on the master: using it is an error naming
        it, in C{_errors}.
        """
        self.opts["pillar_safe_render_error"] = False
        self.top("base:\n  '*':\n    - s\n")
        self.write("s.sls", "x: {{ salt['cmd.run']('id') }}\n")
        pillar = self.compile()
        self.assertIn("'salt' is undefined", pillar["_errors"][0])

    def test_initSls(self) -> None:
        """
        C{a.b} is C{a/b.sls}, else C{a/b/init.sls}.
        """
        self.top("base:\n  '*':\n    - web\n    - db.main\n")
        self.write("web/init.sls", "web: init\n")
        self.write("db/main.sls", "db: main\n")
        self.write("db/main/init.sls", "db: shadowed\n")
        self.assertEqual(self.compile(), {"web": "init", "db": "main"})

    def test_severalRoots(self) -> None:
        """
        Roots of a saltenv are searched in order: the first holding a file
        wins.
        """
        self.opts["pillar_roots"]["base"].append(self.tree.root("base2"))
        self.top("base:\n  '*':\n    - one\n    - two\n")
        self.write("one.sls", "one: first\n")
        self.write("one.sls", "one: second\n", root="base2")
        self.write("two.sls", "two: second\n", root="base2")
        self.assertEqual(self.compile(), {"one": "first", "two": "second"})

    def test_include(self) -> None:
        """
        C{include:} renders the named SLS first; the including file's
        values win.
        """
        self.top("base:\n  '*':\n    - web\n")
        self.write("web/init.sls", "include:\n  - common\nrole: web\nshared: web\n")
        self.write("common.sls", "shared: common\nbase_only: 1\n")
        self.assertEqual(self.compile(), {"role": "web", "shared": "web", "base_only": 1})

    def test_relativeInclude(self) -> None:
        """
        C{.name} is relative to the SLS's package: its directory for an
        C{init.sls}, its parent for another file.
        """
        self.top("base:\n  '*':\n    - web\n    - db.server\n")
        self.write("web/init.sls", "include:\n  - .nginx\nweb: 1\n")
        self.write("web/nginx.sls", "nginx: 1\n")
        self.write("db/server.sls", "include:\n  - .users\ndb: 1\n")
        self.write("db/users.sls", "users: 1\n")
        self.assertEqual(self.compile(), {"web": 1, "nginx": 1, "db": 1, "users": 1})

    def test_includeDefaultsAndKey(self) -> None:
        """
        The mapping form passes C{defaults} as variables and nests the
        result under C{key} (C{a:b} is C{{a: {b: ...}}}).
        """
        self.top("base:\n  '*':\n    - main\n")
        self.write(
            "main.sls",
            """\
            include:
              - users:
                  defaults:
                    shell: /bin/zsh
                  key: accounts:local
            main: 1
            """,
        )
        self.write("users.sls", "alice:\n  shell: {{ shell }}\n")
        self.assertEqual(
            self.compile(), {"main": 1, "accounts": {"local": {"alice": {"shell": "/bin/zsh"}}}}
        )

    def test_includesOverrideSls(self) -> None:
        """
        With C{pillar_includes_override_sls}, the included files win.
        """
        self.opts["pillar_includes_override_sls"] = True
        self.top("base:\n  '*':\n    - web\n")
        self.write("web/init.sls", "include:\n  - common\nshared: web\n")
        self.write("common.sls", "shared: common\n")
        self.assertEqual(self.compile(), {"shared": "common"})

    def test_ignoreMissing(self) -> None:
        """
        C{ignore_missing} on a target hides its missing SLS files.
        """
        self.top("base:\n  '*':\n    - nothere\n    - ignore_missing: True\n")
        self.assertEqual(self.compile(), {})

    def test_includeCycle(self) -> None:
        """
        Files including each other are each rendered once.
        """
        self.top("base:\n  '*':\n    - a\n")
        self.write("a.sls", "include:\n  - b\na: 1\n")
        self.write("b.sls", "include:\n  - a\nb: 1\n")
        self.assertEqual(self.compile(), {"a": 1, "b": 1})

    def test_jinjaImportFromRoots(self) -> None:
        """
        Jinja imports load files of the same saltenv's roots.
        """
        self.top("base:\n  '*':\n    - web\n")
        self.write("web/map.jinja", "{% set port = 8080 %}\n")
        self.write("web/init.sls", '{% from "./map.jinja" import port %}\nport: {{ port }}\n')
        self.assertEqual(self.compile(), {"port": 8080})

    def test_shebangs(self) -> None:
        """
        C{#!yaml} and C{#!json} SLS files, and the C{renderer} option.
        """
        self.top("base:\n  '*':\n    - y\n    - j\n")
        self.write("y.sls", "#!yaml\ny: '{{ raw }}'\n")
        self.write("j.sls", '#!json\n{"j": [1, 2]}\n')
        self.assertEqual(self.compile(), {"y": "{{ raw }}", "j": [1, 2]})
        self.opts["renderer"] = "yaml"
        self.write("y.sls", "y: '{{ raw2 }}'\n")
        self.assertEqual(self.compile()["y"], "{{ raw2 }}")

    def test_deliverable(self) -> None:
        """
        The pillar is made of what the wire carries (msgpack, string keys):
        SLS, external pillar and override keys that are not strings become
        their text.
        """
        from salttwist import serial

        self.top("base:\n  '*':\n    - ports\n")
        self.write("ports.sls", "ports:\n  80: http\n  443: https\n")
        self.opts["ext_pillar"] = [{"cmd_yaml": "echo '8080: alt'"}]
        pillar = self.compile(override={"o": {1: {2, 3}}})
        self.assertEqual(
            pillar,
            {"ports": {"80": "http", "443": "https"}, "8080": "alt", "o": {"1": [2, 3]}},
        )
        self.assertEqual(serial.loads(serial.dumps(pillar)), pillar)

    def test_emptySls(self) -> None:
        """
        An empty SLS adds nothing and is no error.
        """
        self.top("base:\n  '*':\n    - empty\n")
        self.write("empty.sls", "{# nothing yet #}\n")
        self.assertEqual(self.compile(), {})

    def test_twoHundredKeysWithLoops(self) -> None:
        """
        A 200-key pillar made with Jinja loops.
        """
        self.top("base:\n  '*':\n    - big\n")
        self.write(
            "big.sls",
            """\
            {% for i in range(200) %}
            key{{ i }}:
              index: {{ i }}
              host: {{ grains.os | lower }}-{{ i }}
              tags: [{% for j in range(3) %}t{{ j }}{% if not loop.last %}, {% endif %}{% endfor %}]
            {% endfor %}
            """,
        )
        for minionId in ("web1", "web2"):
            pillar = self.compile(minionId)
            self.assertEqual(len(pillar), 200)
            self.assertEqual(
                pillar["key199"], {"index": 199, "host": "debian-199", "tags": ["t0", "t1", "t2"]}
            )


class ErrorTests(CompileTestCase):
    """
    Errors go to C{_errors} and never stop the rest of the pillar.
    """

    def setUp(self) -> None:
        super().setUp()
        self.top("base:\n  '*':\n    - good\n    - bad\n    - missing\n    - later\n")
        self.write("good.sls", "good: 1\n")
        self.badPath = self.write("bad.sls", "a: 1\n\nb: c: d\n")
        self.write("later.sls", "later: 1\n")

    def test_safeRenderError(self) -> None:
        """
        With C{pillar_safe_render_error} (the default) the minion sees which
        SLS failed; the full text names file, line and cause.
        """
        pillar, full = compilePillarWithErrors(self.opts, "web1", GRAINS)
        self.assertEqual(pillar["good"], 1)
        self.assertEqual(pillar["later"], 1)
        self.assertEqual(
            pillar["_errors"],
            [
                "Rendering SLS 'bad' failed. Please see master log for details.",
                "Specified SLS 'missing' in environment 'base' is not available on the salt master",
            ],
        )
        self.assertEqual(len(full), 2)
        self.assertIn(f"{self.badPath}, line 3: mapping values are not allowed", full[0])
        self.assertIn("'base:bad'", full[0])
        self.assertNotIn(self.badPath, repr(pillar))

    def test_unsafeRenderError(self) -> None:
        """
        Without C{pillar_safe_render_error} the minion sees the full text.
        """
        self.opts["pillar_safe_render_error"] = False
        pillar, full = compilePillarWithErrors(self.opts, "web1", GRAINS)
        self.assertEqual(pillar["_errors"], full)
        self.assertIn("line 3", pillar["_errors"][0])

    def test_jinjaErrorLine(self) -> None:
        """
        A Jinja error names the line of the template.
        """
        self.opts["pillar_safe_render_error"] = False
        path = self.write("bad.sls", "a: 1\nb: {{ nothing.here }}\n")
        errors = self.compile()["_errors"]
        self.assertIn(f"{path}, line 2: 'nothing' is undefined", errors[0])

    def test_notADictionary(self) -> None:
        """
        An SLS that renders to a list is Salt's error.
        """
        self.write("bad.sls", "- a\n- b\n")
        self.assertIn("SLS 'bad' does not render to a dictionary", self.compile()["_errors"])

    def test_badInclude(self) -> None:
        """
        An include that is not a list, or names a missing SLS, is an error.
        """
        self.write("bad.sls", "include: common\nx: 1\n")
        pillar = self.compile()
        self.assertIn("Include Declaration in SLS 'bad' is not formed as a list", pillar["_errors"])
        self.assertEqual(pillar["x"], 1)

    def test_topError(self) -> None:
        """
        A top file that does not render is an error; nothing is matched.
        """
        self.top("base:\n  '*': [\n")
        pillar, full = compilePillarWithErrors(self.opts, "web1", GRAINS)
        self.assertEqual(
            pillar,
            {
                "_errors": [
                    "Rendering Primary Top file of saltenv 'base' failed."
                    " Please see master log for details."
                ]
            },
        )
        self.assertIn("top.sls, line", full[0])

    def test_badSlsName(self) -> None:
        """
        SLS names that would leave the roots are refused.
        """
        self.top("base:\n  '*':\n    - ../../etc/passwd\n    - good\n")
        pillar = self.compile()
        self.assertEqual(pillar["good"], 1)
        self.assertIn("not a dotted name", pillar["_errors"][0])

    def test_symlinkOutOfRoot(self) -> None:
        """
        An SLS or template that is a symbolic link out of the root is not
        read.
        """
        outside = os.path.join(self.tree.base, "secret.sls")
        with open(outside, "w") as f:
            f.write("secret: 1\n")
        os.symlink(outside, os.path.join(self.tree.root("base"), "bad.sls.tmp"))
        os.replace(os.path.join(self.tree.root("base"), "bad.sls.tmp"), self.badPath)
        pillar = self.compile()
        self.assertNotIn("secret", pillar)
        self.assertIn(
            "Specified SLS 'bad' in environment 'base' is not available on the salt master",
            pillar["_errors"],
        )

    def test_includeOutOfRoot(self) -> None:
        """
        A Jinja include above the root is refused, naming the file.
        """
        self.opts["pillar_safe_render_error"] = False
        self.write("bad.sls", "{% include '../../../etc/passwd' %}\n")
        errors = self.compile()["_errors"]
        self.assertIn("leaves the file-server root", errors[0])
        self.assertIn(self.badPath, errors[0])

    def test_deepIncludeChain(self) -> None:
        """
        A chain of includes deeper than L{MAX_INCLUDE_DEPTH} stops there
        with an error; the rest is kept.
        """
        self.top("base:\n  '*':\n    - good\n    - chain.n0\n")
        for i in range(MAX_INCLUDE_DEPTH + 5):
            self.write(f"chain/n{i}.sls", f"include:\n  - .n{i + 1}\nn{i}: {i}\n")
        pillar = self.compile()
        self.assertEqual(pillar["good"], 1)
        self.assertEqual(pillar["n0"], 0)
        self.assertEqual(pillar[f"n{MAX_INCLUDE_DEPTH}"], MAX_INCLUDE_DEPTH)
        self.assertNotIn(f"n{MAX_INCLUDE_DEPTH + 1}", pillar)
        self.assertIn("deeper than", pillar["_errors"][0])

    def test_neverRaises(self) -> None:
        """
        Options of a shape nobody checked give C{_errors}, not an
        exception.
        """
        self.opts["pillar_roots"] = {"base": 5}
        pillar, full = compilePillarWithErrors(self.opts, "web1", GRAINS)
        self.assertEqual(
            pillar, {"_errors": ["Pillar compilation failed. Please see master log for details."]}
        )
        self.assertIn("TypeError", full[0])
        top, errors = showTopWithErrors(self.opts, "web1", GRAINS)
        self.assertEqual(top, {})
        self.assertIn("TypeError", errors[0])

    def test_badOverride(self) -> None:
        """
        An override that is not a mapping is an error, not a crash.
        """
        pillar = compilePillar(self.opts, "web1", GRAINS, override=["x"])  # type: ignore[arg-type]
        self.assertIn("Pillar data must be a dictionary", pillar["_errors"])


class EnvTests(CompileTestCase):
    """
    Saltenvs, C{pillarenv}, C{pillarenv_from_saltenv} and the C{none}
    strategy.
    """

    def setUp(self) -> None:
        super().setUp()
        self.opts["pillar_roots"]["dev"] = [self.tree.root("dev")]
        self.top("base:\n  '*':\n    - common\n")
        self.write("common.sls", "where: base\nbase: 1\n")
        self.top("dev:\n  '*':\n    - common\n", root="dev")
        self.write("common.sls", "where: dev\ndev: 1\n", root="dev")

    def test_allEnvs(self) -> None:
        """
        Every saltenv's top is read, C{base} first; later values win.
        """
        self.assertEqual(self.compile(), {"where": "dev", "base": 1, "dev": 1})
        self.assertEqual(
            showTop(self.opts, "web1", GRAINS), {"base": ["common"], "dev": ["common"]}
        )

    def test_pillarenv(self) -> None:
        """
        C{pillarenv} restricts to one saltenv.
        """
        self.assertEqual(self.compile(pillarenv="dev"), {"where": "dev", "dev": 1})
        self.opts["pillarenv"] = "base"
        self.assertEqual(self.compile(), {"where": "base", "base": 1})
        self.assertEqual(self.compile(pillarenv="nowhere"), {})

    def test_pillarenvFromSaltenv(self) -> None:
        """
        With C{pillarenv_from_saltenv}, the saltenv asked for is the
        pillarenv.
        """
        self.opts["pillarenv_from_saltenv"] = True
        self.assertEqual(self.compile(saltenv="base"), {"where": "base", "base": 1})

    def test_noneStrategy(self) -> None:
        """
        With C{none}, only the requested saltenv's top file is read.
        """
        self.opts["pillar_source_merging_strategy"] = "none"
        self.assertEqual(self.compile(), {"where": "base", "base": 1})
        self.assertEqual(self.compile(saltenv="dev"), {"where": "dev", "dev": 1})

    def test_unknownEnvInTop(self) -> None:
        """
        A top naming a saltenv without pillar_roots is Salt's error.
        """
        self.top("base:\n  '*':\n    - common\nqa:\n  '*':\n    - x\n")
        self.assertIn(
            "No matching pillar environment for environment 'qa' found", self.compile()["_errors"]
        )

    def test_mergeStrategies(self) -> None:
        """
        The strategy applies between SLS files.
        """
        self.opts["pillar_roots"] = {"base": [self.tree.root("m")]}
        self.top("base:\n  '*':\n    - one\n    - two\n", root="m")
        self.write("one.sls", "d: {a: 1}\nl: [1]\n", root="m")
        self.write("two.sls", "d: {b: 2}\nl: [2]\n", root="m")
        self.assertEqual(self.compile(), {"d": {"a": 1, "b": 2}, "l": [2]})
        self.opts["pillar_merge_lists"] = True
        self.assertEqual(self.compile(), {"d": {"a": 1, "b": 2}, "l": [1, 2]})
        self.opts["pillar_source_merging_strategy"] = "overwrite"
        self.assertEqual(self.compile(), {"d": {"b": 2}, "l": [2]})


class ExtPillarOrderTests(CompileTestCase):
    """
    C{ext_pillar} entries run in order, after the SLS files or, with
    C{ext_pillar_first}, before them; the override is merged last.
    """

    def setUp(self) -> None:
        super().setUp()
        self.top("base:\n  '*':\n    - s\n")
        self.write("s.sls", 'who: sls\nsls: 1\nseen: \'{{ pillar.get("who", "") }}\'\n')
        py = sys.executable
        self.opts["ext_pillar"] = [
            {"cmd_json": f'{py} -c "print(\'{{\\"who\\": \\"one\\", \\"one\\": 1}}\')"'},
            {"cmd_yaml": "echo 'who: two'; echo 'id: %s'"},
        ]

    def test_afterSls(self) -> None:
        """
        By default the external pillars come after the SLS files, in order.
        """
        self.assertEqual(
            self.compile(), {"who": "two", "sls": 1, "seen": "", "one": 1, "id": "web1"}
        )

    def test_first(self) -> None:
        """
        With C{ext_pillar_first} the SLS files come last and see the
        external data.
        """
        self.opts["ext_pillar_first"] = True
        self.assertEqual(
            self.compile(), {"who": "sls", "sls": 1, "seen": "two", "one": 1, "id": "web1"}
        )

    def test_override(self) -> None:
        """
        The override (Salt's C{pillar=}) wins over everything.
        """
        pillar = self.compile(override={"who": "cli", "extra": {"x": 1}})
        self.assertEqual(pillar["who"], "cli")
        self.assertEqual(pillar["extra"], {"x": 1})

    def test_unknownAndFailing(self) -> None:
        """
        An unknown name and a failing command are errors; the others still
        run.
        """
        self.opts["ext_pillar"].insert(0, {"no_such_pillar": {}})
        self.opts["ext_pillar"].insert(1, {"cmd_json": "exit 3"})
        pillar, full = compilePillarWithErrors(self.opts, "web1", GRAINS)
        self.assertEqual(pillar["who"], "two")
        self.assertEqual(
            pillar["_errors"],
            [
                "ext_pillar interface named no_such_pillar is unavailable",
                "Failed to load ext_pillar cmd_json. Please see master log for details.",
            ],
        )
        self.assertEqual(
            full[1], "Failed to load ext_pillar cmd_json: command exited with status 3"
        )

    def test_fileTreeRelativeToPillarenv(self) -> None:
        """
        The external pillars see the pillarenv chosen for the compilation:
        C{file_tree}'s relative C{root_dir} is under its roots.
        """
        self.write("ext/hosts/web1/motd", "hello\n")
        self.opts["ext_pillar"] = [{"file_tree": {"root_dir": "ext"}}]
        self.assertEqual(self.compile(pillarenv="base")["motd"], "hello")
        self.assertIn(
            "pillarenv is not set", compilePillarWithErrors(self.opts, "web1", GRAINS)[1][0]
        )

    def test_excluded(self) -> None:
        """
        C{exclude_ext_pillar} skips the named external pillars.
        """
        self.opts["exclude_ext_pillar"] = ["cmd_yaml"]
        self.assertEqual(self.compile()["who"], "one")
