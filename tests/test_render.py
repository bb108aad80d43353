# -*- test-case-name: tests.test_render -*-
"""
Tests for L{salttwist.render}: the pipelines, Salt's Jinja (sandbox,
includes, data tags, filters) and Salt's YAML, and the errors naming file,
line and cause.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.render import (
    RenderError,
    confineName,
    dumpYaml,
    loadYaml,
    parsePipeline,
    renderJinja,
    renderText,
)
from salttwist.render.datacache import MISSING, DataCache


class DictLoader:
    """
    A loader over a mapping of names to texts, recording what it was asked.
    """

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.asked: list[str] = []

    def __call__(self, name: str) -> tuple[str, str]:
        self.asked.append(name)
        if name not in self.files:
            raise LookupError(f"no file {name!r} in saltenv 'base'")
        return self.files[name], "/srv/salt/" + name


class FileLoader:
    """
    A loader over a real directory, the way the pillar and file server use
    one.
    """

    def __init__(self, root: str) -> None:
        self.root = root

    def __call__(self, name: str) -> tuple[str, str]:
        path = os.path.join(self.root, name)
        with open(path, encoding="utf-8") as f:
            return f.read(), path


class PipelineTests(SynchronousTestCase):
    """
    L{renderText} honours the shebang pipeline, left to right.
    """

    def test_defaultJinjaYaml(self) -> None:
        """
        Without a shebang the default pipeline C{jinja|yaml} runs: Jinja
        with the context, then YAML.
        """
        data = renderText("os: {{ grains.os }}\nn: {{ 1 + 2 }}\n", {"grains": {"os": "Debian"}})
        self.assertEqual(data, {"os": "Debian", "n": 3})

    def test_yamlOnly(self) -> None:
        """
        C{#!yaml} skips Jinja: braces stay text.
        """
        data = renderText("#!yaml\na: '{{ x }}'\n", {"x": 1})
        self.assertEqual(data, {"a": "{{ x }}"})

    def test_json(self) -> None:
        """
        C{#!json} parses JSON; C{#!jinja|json} renders Jinja first.
        """
        self.assertEqual(renderText('#!json\n{"a": [1, 2]}', {}), {"a": [1, 2]})
        self.assertEqual(renderText('#!jinja|json\n{"a": {{ n }}}', {"n": 5}), {"a": 5})

    def test_spacesInShebang(self) -> None:
        """
        Spaces around the renderer names are allowed.
        """
        self.assertEqual(renderText("#! jinja | yaml\na: {{ 2 }}", {}), {"a": 2})

    def test_defaultPipelineParameter(self) -> None:
        """
        C{defaultPipeline} (the C{renderer} option) applies without a
        shebang.
        """
        self.assertEqual(renderText("a: '{{ x }}'", {}, defaultPipeline="yaml"), {"a": "{{ x }}"})

    def test_jinjaOnlyGivesText(self) -> None:
        """
        A pipeline ending in C{jinja} gives text.
        """
        self.assertEqual(renderText("#!jinja\nhello {{ who }}", {"who": "you"}), "\nhello you")

    def test_unknownRenderer(self) -> None:
        """
        An unknown renderer is a L{RenderError} naming it.
        """
        e = self.assertRaises(RenderError, renderText, "#!jinja|gpg\na: 1", {}, path="/p/x.sls")
        self.assertIn("'gpg'", e.cause)
        self.assertEqual((e.path, e.line), ("/p/x.sls", 1))
        self.assertRaises(RenderError, parsePipeline, "jinja||yaml")

    def test_shebangKeepsLineNumbers(self) -> None:
        """
        The shebang line is emptied, not removed: errors point at the
        file's own line.
        """
        e = self.assertRaises(RenderError, renderText, "#!yaml\na: 1\nb: c: d\n", {})
        self.assertEqual(e.line, 3)

    def test_emptyDocument(self) -> None:
        """
        An empty file renders to L{None}.
        """
        self.assertIsNone(renderText("", {}))
        self.assertIsNone(renderText("{# nothing #}\n", {}))

    def test_slsVariables(self) -> None:
        """
        Salt's SLS variables are in the context: C{sls}, C{slspath},
        C{slsdotpath}, C{slscolonpath}, C{sls_path}, C{tpldir}, C{saltenv}.
        """
        text = (
            "v: '{{ sls }} {{ slspath }} {{ slsdotpath }} {{ slscolonpath }}"
            " {{ sls_path }} {{ tpldir }} {{ tplfile }} {{ saltenv }} {{ tplroot }}'"
        )
        self.assertEqual(
            renderText(text, {}, sls="web.nginx.conf", saltenv="dev")["v"],
            "web.nginx.conf web/nginx web.nginx web:nginx web_nginx web/nginx"
            " web/nginx/conf.sls dev web",
        )
        self.assertEqual(
            renderText(text, {}, sls="web.nginx", name="web/nginx/init.sls")["v"],
            "web.nginx web/nginx web.nginx web:nginx web_nginx web/nginx"
            " web/nginx/init.sls base web",
        )


class ErrorTests(SynchronousTestCase):
    """
    Every failure is a L{RenderError} naming the file, the line and the
    cause (and the SLS with its saltenv).
    """

    def test_message(self) -> None:
        """
        C{str(e)} names SLS, saltenv, file, line and cause.
        """
        e = self.assertRaises(
            RenderError,
            renderText,
            "a: 1\nb: 2\n\nd: e: f\n",
            {},
            path="/srv/pillar/web/nginx.sls",
            sls="web.nginx",
        )
        self.assertEqual(e.line, 4)
        self.assertEqual(e.path, "/srv/pillar/web/nginx.sls")
        self.assertIn("mapping values are not allowed", e.cause)
        self.assertEqual(
            str(e),
            f"Rendering SLS 'base:web.nginx' failed: /srv/pillar/web/nginx.sls, line 4: {e.cause}",
        )
        self.assertIsInstance(e, ValueError)

    def test_messageWithoutSls(self) -> None:
        """
        Outside an SLS the message names the file.
        """
        e = RenderError("/x.j2", None, "boom")
        self.assertEqual(str(e), "Rendering '/x.j2' failed: /x.j2: boom")

    def test_jinjaSyntax(self) -> None:
        """
        A Jinja syntax error names its line.
        """
        e = self.assertRaises(RenderError, renderText, "a: 1\n{% for %}\n", {}, path="/f.sls")
        self.assertEqual((e.path, e.line), ("/f.sls", 2))
        self.assertIn("expression", e.cause)

    def test_undefinedAttribute(self) -> None:
        """
        An undefined variable is an error naming it and the line, as Salt's
        (Jinja's StrictUndefined); with Salt's C{allow_undefined} option in
        C{opts} it renders empty, but an attribute of one is still an
        error.
        """
        e = self.assertRaises(RenderError, renderText, "a: 1\n'{{ nothing }}'\n", {}, path="/f")
        self.assertEqual(e.line, 2)
        self.assertIn("'nothing' is undefined", e.cause)
        self.assertEqual(renderText("a: {{ x is defined }}", {}), {"a": False})
        self.assertEqual(renderText("a: '{{ x | default(1) }}'", {}), {"a": "1"})
        lenient = {"opts": {"allow_undefined": True}}
        self.assertEqual(renderText("a: '{{ nothing }}'", lenient), {"a": ""})
        e = self.assertRaises(RenderError, renderText, "a: 1\n\nb: {{ x.y }}\n", lenient, path="/f")
        self.assertEqual(e.line, 3)
        self.assertIn("'x' is undefined", e.cause)

    def test_errorInInclude(self) -> None:
        """
        An error inside an included file names that file and its line.
        """
        loader = DictLoader({"lib/inc.jinja": "ok\n{{ a.b.c }}\n"})
        e = self.assertRaises(
            RenderError, renderText, "x: 1\n{% include 'lib/inc.jinja' %}\n", {}, loader=loader
        )
        self.assertEqual((e.path, e.line), ("/srv/salt/lib/inc.jinja", 2))

    def test_syntaxErrorInImport(self) -> None:
        """
        A syntax error in an imported file names that file.
        """
        loader = DictLoader({"m.jinja": "{% macro x() %}\n{% if %}\n"})
        e = self.assertRaises(
            RenderError, renderJinja, "{% import 'm.jinja' as m %}", {}, loader=loader
        )
        self.assertEqual((e.path, e.line), ("/srv/salt/m.jinja", 2))

    def test_missingInclude(self) -> None:
        """
        A missing include names the template and the including line.
        """
        loader = DictLoader({})
        e = self.assertRaises(
            RenderError, renderJinja, "\n{% include 'nope.sls' %}", {}, path="/t", loader=loader
        )
        self.assertEqual((e.path, e.line), ("/t", 2))
        self.assertIn("nope.sls", e.cause)

    def test_badDataInLoadBlock(self) -> None:
        """
        Bad YAML in a C{load_yaml} block names the template's file and line
        and the line inside the block.
        """
        text = "a\n{% load_yaml as d %}\nx: [\n{% endload %}\n"
        e = self.assertRaises(RenderError, renderJinja, text, {}, path="/t.sls")
        self.assertEqual(e.path, "/t.sls")
        self.assertIsNotNone(e.line)
        self.assertIn("load_yaml: line", e.cause)

    def test_raise(self) -> None:
        """
        Salt's C{raise()} global fails the render with its message.
        """
        e = self.assertRaises(RenderError, renderJinja, "\n{{ raise('bad role') }}", {}, path="/t")
        self.assertEqual((e.line, e.cause), (2, "bad role"))

    def test_pythonErrorInTemplate(self) -> None:
        """
        A Python error raised while rendering becomes a L{RenderError}.
        """
        e = self.assertRaises(RenderError, renderJinja, "{{ 1 / 0 }}", {}, path="/t")
        self.assertIn("ZeroDivisionError", e.cause)
        self.assertEqual(e.line, 1)


class SandboxTests(SynchronousTestCase):
    """
    Templates run in Jinja's sandbox: no private or dunder attributes, no
    escaping the file-server root.
    """

    def test_dunderRefused(self) -> None:
        """
        Walking from an object to its class hierarchy fails.
        """
        e = self.assertRaises(
            RenderError, renderJinja, "{{ ''.__class__.__mro__[1].__subclasses__() }}", {}
        )
        self.assertIn("unsafe", e.cause)

    def test_boundedRepeat(self) -> None:
        """
        C{*} and C{**} cannot build values that would fill the memory;
        ordinary arithmetic still works.
        """
        for text in ("{{ 'x' * 10**9 }}", "{{ [1] * 100000000 }}", "{{ 10 ** 100000 }}"):
            e = self.assertRaises(RenderError, renderJinja, text, {})
            self.assertIn("beyond", e.cause)
        self.assertEqual(
            renderJinja("{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ 3 * 4 }}", {}), "ababab 1024 12"
        )

    def test_boundedRange(self) -> None:
        """
        C{range} is the sandbox's bounded one, in a loop or not, with
        Jinja's loop arguments or not; small ranges work.
        """
        for text in (
            "{{ range(10**9) | list | length }}",
            "{% for i in range(2) %}{% for j in range(10**9) %}{% endfor %}{% endfor %}",
        ):
            e = self.assertRaises(RenderError, renderJinja, text, {})
            self.assertIn("MAX_RANGE", e.cause)
        self.assertEqual(
            renderJinja("{% for i in range(2) %}{{ range(i, 3) | list }}{% endfor %}", {}),
            "[0, 1, 2][1, 2]",
        )

    def test_privateRefused(self) -> None:
        """
        C{_private} attributes of context objects are not reachable.
        """

        class Thing:
            _secret = "s3cret"
            public = "ok"

        e = self.assertRaises(RenderError, renderJinja, "{{ t._secret }}", {"t": Thing()})
        self.assertIn("'_secret' of 'Thing' object is unsafe", e.cause)
        lenient = {"t": Thing(), "opts": {"allow_undefined": True}}
        self.assertEqual(renderJinja("{{ t.public }}{{ t._secret }}", lenient), "ok")

    def test_includeOutsideRoot(self) -> None:
        """
        A name leaving the root is refused before the loader is asked.
        """
        loader = DictLoader({})
        for name in ("../../etc/passwd", "/etc/passwd", "a/../../../x", "./../../x"):
            e = self.assertRaises(
                RenderError,
                renderJinja,
                f"{{% include '{name}' %}}",
                {},
                loader=loader,
                name="a/b.sls",
            )
            self.assertTrue(
                "leaves the file-server root" in e.cause or "not a relative path" in e.cause,
                e.cause,
            )
        self.assertEqual(loader.asked, [])

    def test_confineName(self) -> None:
        """
        L{confineName} resolves C{salt://}, root-relative and
        template-relative names.
        """
        self.assertEqual(confineName("salt://x/map.jinja"), "x/map.jinja")
        self.assertEqual(confineName("./map.jinja", "web/init.sls"), "web/map.jinja")
        self.assertEqual(confineName("../lib/m.jinja", "web/nginx/init.sls"), "web/lib/m.jinja")
        self.assertEqual(confineName("lib/m.jinja", "web/init.sls"), "lib/m.jinja")
        self.assertRaises(RenderError, confineName, "../x", "top.sls")
        self.assertRaises(RenderError, confineName, "a\x00b")


class IncludeTests(SynchronousTestCase):
    """
    Includes, imports and Salt's data tags load files through the loader,
    by names relative to the root or to the template.
    """

    def setUp(self) -> None:
        self.root = self.mktemp()
        os.makedirs(os.path.join(self.root, "web", "files"))
        files = {
            "web/map.jinja": (
                "{% set nginx = {'pkg': 'nginx-' ~ grains.os | lower} %}\n"
                "{% macro port() %}8080{% endmacro %}\n"
            ),
            "web/files/defaults.yaml": "user: www\nworkers: {{ 2 * 2 }}\n",
            "web/files/extra.json": '{"gzip": true}',
            "web/files/motd.txt": "hello",
            "common.sls": "common: {{ grains.os }}\n",
        }
        for name, text in files.items():
            with open(os.path.join(self.root, name), "w", encoding="utf-8") as f:
                f.write(text)
        self.loader = FileLoader(self.root)
        self.context: dict[str, Any] = {"grains": {"os": "Debian"}}

    def render(self, text: str) -> Any:
        return renderText(
            text,
            self.context,
            path=os.path.join(self.root, "web", "init.sls"),
            sls="web",
            name="web/init.sls",
            loader=self.loader,
        )

    def test_fromImportWithContext(self) -> None:
        """
        C{{% from "x/map.jinja" import y with context %}} sees the grains.
        """
        data = self.render(
            '{% from "web/map.jinja" import nginx, port with context %}\n'
            "pkg: {{ nginx.pkg }}\nport: {{ port() }}\n"
        )
        self.assertEqual(data, {"pkg": "nginx-debian", "port": 8080})

    def test_relativeImport(self) -> None:
        """
        C{./} names resolve from the template's directory.
        """
        data = self.render(
            '{% from "./map.jinja" import port with context %}\nport: {{ port() }}\n'
        )
        self.assertEqual(data, {"port": 8080})

    def test_include(self) -> None:
        """
        C{{% include %}} inserts the rendered file with the context.
        """
        self.assertEqual(self.render("{% include 'common.sls' %}\n"), {"common": "Debian"})

    def test_importYaml(self) -> None:
        """
        C{import_yaml} renders the file through Jinja and parses it.
        """
        data = self.render(
            '{% import_yaml "./files/defaults.yaml" as defaults %}\nd: {{ defaults | json }}\n'
        )
        self.assertEqual(data, {"d": {"user": "www", "workers": 4}})

    def test_importJsonAndText(self) -> None:
        """
        C{import_json} and C{import_text} load JSON and plain text.
        """
        data = self.render(
            '{% import_json "salt://web/files/extra.json" as extra %}\n'
            '{% import_text "web/files/motd.txt" as motd %}\n'
            "gzip: {{ extra.gzip }}\nmotd: {{ motd }}\n"
        )
        self.assertEqual(data, {"gzip": True, "motd": "hello"})

    def test_importYamlWithContext(self) -> None:
        """
        C{import_yaml ... with context} renders the file with the caller's
        variables.
        """
        with open(os.path.join(self.root, "os.yaml"), "w") as f:
            f.write("os: {{ grains.os }}\n")
        data = self.render('{% import_yaml "os.yaml" as o with context %}\nos: {{ o.os }}\n')
        self.assertEqual(data, {"os": "Debian"})

    def test_importYamlBadData(self) -> None:
        """
        Bad YAML in an imported file names that file and its line.
        """
        with open(os.path.join(self.root, "bad.yaml"), "w") as f:
            f.write("a: 1\nb: [\n")
        e = self.assertRaises(RenderError, self.render, '{% import_yaml "bad.yaml" as b %}')
        self.assertEqual(e.path, os.path.join(self.root, "bad.yaml"))
        self.assertIsNotNone(e.line)
        self.assertIn("base:web", str(e))

    def test_loadBlocks(self) -> None:
        """
        C{load_yaml}, C{load_json} and C{load_text} blocks parse their
        output.
        """
        data = self.render(
            "{% load_yaml as y %}\nroles: [{{ 'web' }}, db]\n{% endload %}\n"
            '{% load_json as j %}{"n": {{ 3 }}}{% endload %}\n'
            "{% load_text as t %}plain{% endload %}\n"
            "roles: {{ y.roles | json }}\nn: {{ j.n }}\nt: {{ t }}\n"
        )
        self.assertEqual(data, {"roles": ["web", "db"], "n": 3, "t": "plain"})

    def test_templateCompiledOnce(self) -> None:
        """
        The same template rendered twice gives the same result (the second
        from the compiled cache), and a changed text is compiled again.
        """
        self.assertEqual(renderJinja("{{ a }}", {"a": 1}, path="/c"), "1")
        self.assertEqual(renderJinja("{{ a }}", {"a": 2}, path="/c"), "2")
        self.assertEqual(renderJinja("{{ a }}!", {"a": 2}, path="/c"), "2!")

    def test_plainTextAsJinjaGivesIt(self) -> None:
        """
        A text in which no Jinja syntax can start renders to itself, as
        Jinja renders it; one with a carriage return or a tag goes through
        Jinja.
        """
        from jinja2 import Environment

        jinja = Environment(keep_trailing_newline=True)
        texts = [
            "",
            "\n",
            "a: 1\nb:\n  - x}}\n  - '%} #}'\n",
            "no newline at the end",
            "ünïcode: ✓\n\n\n",
            "  indented:\n    - 1\n",
        ]
        for text in texts:
            self.assertEqual(renderJinja(text, {}), jinja.from_string(text).render())
            self.assertEqual(renderJinja(text, {}, name="x/y.sls"), text)
        self.assertEqual(renderJinja("a\r\nb\r\n", {}), "a\nb\n")
        self.assertEqual(renderJinja("a: {{ 1 + 1 }}\n", {}), "a: 2\n")
        self.assertRaises(RenderError, renderJinja, "a: {{ missing }}\n", {})

    def test_importedModuleNotShared(self) -> None:
        """
        What one render does to a module imported without context (its
        dicts changed with C{do}) is not seen by the next render of the
        same, cached, templates (another minion's pillar).
        """
        with open(os.path.join(self.root, "defaults.jinja"), "w") as f:
            f.write("{% set conf = {'users': []} %}\n")
        text = (
            '{% import "defaults.jinja" as d %}\n'
            "{% do d.conf.users.append(grains.os) %}\n"
            "users: {{ d.conf.users | json }}\n"
        )
        self.assertEqual(self.render(text), {"users": ["Debian"]})
        self.context = {"grains": {"os": "Arch"}}
        self.assertEqual(self.render(text), {"users": ["Arch"]})

    def test_changedIncludeRenderedAgain(self) -> None:
        """
        A cached template is used only for the same text: an included file
        that changed between two renders gives its new text.
        """
        text = "{% include 'common.sls' %}\n"
        self.assertEqual(self.render(text), {"common": "Debian"})
        with open(os.path.join(self.root, "common.sls"), "w") as f:
            f.write("common: changed-{{ grains.os }}\n")
        self.assertEqual(self.render(text), {"common": "changed-Debian"})

    def test_eachRenderItsOwnLoader(self) -> None:
        """
        Two roots holding different files of the same name: each render
        includes its own root's file, whichever rendered first.
        """
        other = self.mktemp()
        os.makedirs(other)
        with open(os.path.join(other, "common.sls"), "w") as f:
            f.write("common: other\n")
        text = "{% include 'common.sls' %}\n"
        self.assertEqual(self.render(text), {"common": "Debian"})
        self.loader = FileLoader(other)
        self.assertEqual(self.render(text), {"common": "other"})
        self.loader = FileLoader(self.root)
        self.assertEqual(self.render(text), {"common": "Debian"})

    def test_undefinedPolicyPerRender(self) -> None:
        """
        The same template is strict about undefined variables, or renders
        them empty with C{allow_undefined}, as each render's options say.
        """
        text = "x{{ missing }}y"
        self.assertEqual(renderJinja(text, {"opts": {"allow_undefined": True}}, path="/u"), "xy")
        self.assertRaises(RenderError, renderJinja, text, {"opts": {}}, path="/u")
        self.assertEqual(renderJinja(text, {"opts": {"allow_undefined": True}}, path="/u"), "xy")


class FilterTests(SynchronousTestCase):
    """
    Salt's Jinja filters and extensions.
    """

    def j(self, text: str, **context: Any) -> str:
        return renderJinja(text, context)

    def test_yaml(self) -> None:
        """
        C{yaml} dumps in flow style; C{yaml_encode}, C{yaml_dquote},
        C{yaml_squote} quote scalars.
        """
        self.assertEqual(self.j("{{ v | yaml }}", v={"a": [1, "x"]}), "{a: [1, x]}")
        self.assertEqual(self.j("{{ v | yaml(False) }}", v={"a": 1}), "a: 1")
        self.assertEqual(self.j("{{ 'a: b' | yaml_encode }}"), "'a: b'")
        self.assertEqual(self.j("{{ true | yaml_encode }}"), "true")
        self.assertEqual(self.j("{{ 'say \"hi\"' | yaml_dquote }}"), '"say \\"hi\\""')
        self.assertEqual(self.j('{{ "it\'s" | yaml_squote }}'), "'it''s'")
        self.assertEqual(
            loadYaml("v: " + self.j("{{ 'x: \"y\"' | yaml_dquote }}")), {"v": 'x: "y"'}
        )

    def test_json(self) -> None:
        """
        C{json} (keys sorted) and C{tojson} dump JSON, unescaped.
        """
        self.assertEqual(self.j("{{ v | json }}", v={"b": 1, "a": "<"}), '{"a": "<", "b": 1}')
        self.assertEqual(self.j("{{ v | tojson }}", v=[1, None]), "[1, null]")

    def test_load(self) -> None:
        """
        C{load_yaml} and C{load_json} parse strings.
        """
        self.assertEqual(self.j("{{ ('a: [1]' | load_yaml).a[0] }}"), "1")
        self.assertEqual(self.j("{{ ('{\"k\": 2}' | load_json).k }}"), "2")

    def test_unique(self) -> None:
        """
        C{unique} keeps the first of each value, in order.
        """
        self.assertEqual(self.j("{{ [3, 1, 3, 2, 1] | unique | join(',') }}"), "3,1,2")

    def test_toBool(self) -> None:
        """
        C{to_bool} as Salt's.
        """
        cases = {"'yes'": True, "'True'": True, "'no'": False, "1": True, "0": False, "none": False}
        cases.update({"[1]": True, "[]": False})
        for expr, expected in cases.items():
            self.assertEqual(self.j(f"{{{{ {expr} | to_bool }}}}"), str(expected), expr)

    def test_regex(self) -> None:
        """
        C{regex_search}, C{regex_match} return the groups or None;
        C{regex_replace} substitutes.
        """
        self.assertEqual(self.j("{{ 'db12' | regex_search('(\\\\d+)') }}"), "('12',)")
        self.assertEqual(self.j("{{ 'db12' | regex_match('(\\\\d+)') }}"), "None")
        self.assertEqual(self.j("{{ 'DB12' | regex_match('(db)', ignorecase=True) }}"), "('DB',)")
        self.assertEqual(self.j("{{ 'a-b-c' | regex_replace('-', '_') }}"), "a_b_c")

    def test_sequenceAndHashes(self) -> None:
        """
        C{sequence} wraps a scalar in a list; C{sha256}, C{md5} hash text.
        """
        self.assertEqual(self.j("{{ 'a' | sequence | list }}"), "['a']")
        self.assertEqual(self.j("{{ ['a'] | sequence | list }}"), "['a']")
        self.assertEqual(self.j("{{ 'x' | sha256 }}"), hashlib.sha256(b"x").hexdigest())
        self.assertEqual(self.j("{{ 'x' | md5 }}"), hashlib.md5(b"x").hexdigest())  # noqa: S324

    def test_traverse(self) -> None:
        """
        C{traverse} follows C{a:b:0}, with a default.
        """
        self.assertEqual(self.j("{{ d | traverse('a:b:1') }}", d={"a": {"b": [1, 2]}}), "2")
        self.assertEqual(self.j("{{ d | traverse('a:x', 'dflt') }}", d={"a": {}}), "dflt")

    def test_extensions(self) -> None:
        """
        C{do} and loop controls are enabled.
        """
        text = "{% set l = [] %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}"
        text += "{% do l.append(i) %}{% endfor %}{{ l }}"
        self.assertEqual(self.j(text), "[0, 1, 2]")


class YamlTests(SynchronousTestCase):
    """
    Salt's YAML: safe, duplicate keys refused, dates kept as text.
    """

    def test_safe(self) -> None:
        """
        Python tags are refused.
        """
        e = self.assertRaises(RenderError, loadYaml, "a: !!python/object/apply:os.system [id]\n")
        self.assertEqual(e.line, 1)

    def test_duplicateKey(self) -> None:
        """
        A duplicate key names the key and its line.
        """
        e = self.assertRaises(RenderError, loadYaml, "a:\n  b: 1\n  c: 2\n  b: 3\n", "/f.sls")
        self.assertEqual((e.path, e.line), ("/f.sls", 4))
        self.assertIn("duplicate key 'b'", e.cause)

    def test_dates(self) -> None:
        """
        Timestamps stay strings.
        """
        self.assertEqual(loadYaml("d: 2024-01-31\n"), {"d": "2024-01-31"})

    def test_mergeKeys(self) -> None:
        """
        YAML merge keys (C{<<}) still work.
        """
        data = loadYaml("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n")
        self.assertEqual(data["other"], {"x": 1, "y": 2})

    def test_wire(self) -> None:
        """
        With C{wire}, the data is what msgpack with string keys carries;
        without, keys keep their YAML types as in Salt.
        """
        text = "ports:\n  80: http\n  true: yes\n  ~: none\nbig: 123456789012345678901234567890\n"
        text += "s: !!set {b: null, a: null}\nsmall: 5\n"
        self.assertEqual(
            loadYaml(text, wire=True),
            {
                "ports": {"80": "http", "True": True, "None": "none"},
                "big": "123456789012345678901234567890",
                "s": ["a", "b"],
                "small": 5,
            },
        )
        self.assertEqual(loadYaml(text)["ports"][80], "http")
        e = self.assertRaises(RenderError, loadYaml, "1: a\n'1': b\n", wire=True)
        self.assertEqual((e.line, e.cause), (2, "duplicate key '1'"))
        self.assertEqual(
            renderText('#!json\n{"n": 123456789012345678901234567890}', {}, wire=True),
            {"n": "123456789012345678901234567890"},
        )

    def test_dumpRoundTrip(self) -> None:
        """
        L{dumpYaml} output loads back.
        """
        value = {"a": [1, {"b": "c: d"}], "u": "\u00e9"}
        self.assertEqual(loadYaml(dumpYaml(value)), value)


class DataCacheTests(SynchronousTestCase):
    """
    L{DataCache} keeps parsed data by text and hands out fresh copies.
    """

    def test_freshCopies(self) -> None:
        """
        Each hit is a new object equal to what was parsed.
        """
        cache = DataCache()
        data = {"a": [1, {"b": None}], 2: b"raw", "f": 1.5, "t": True}
        cache.put("yaml", "text", data)
        first = cache.get("yaml", "text")
        self.assertEqual(first, data)
        first["a"].append("changed")
        self.assertEqual(cache.get("yaml", "text"), data)
        self.assertIs(cache.get("json", "text"), MISSING)
        self.assertEqual((cache.hits, cache.misses), (2, 1))

    def test_notCached(self) -> None:
        """
        Data msgpack cannot give back exactly is not kept.
        """
        cache = DataCache()
        cache.put("yaml", "set", {"s": {1, 2}})
        self.assertIs(cache.get("yaml", "set"), MISSING)
        cache.put("yaml", "tuplekey", {(1, 2): "x"})
        self.assertIs(cache.get("yaml", "tuplekey"), MISSING)

    def test_bounded(self) -> None:
        """
        The oldest entries go past the entry and byte bounds.
        """
        cache = DataCache(maxEntries=2, maxBytes=1000)
        for i in range(3):
            cache.put("yaml", str(i), i)
        self.assertIs(cache.get("yaml", "0"), MISSING)
        self.assertEqual(cache.get("yaml", "2"), 2)
        cache.put("yaml", "big", "x" * 200)
        cache.put("yaml", "big2", "y" * 200)
        self.assertIs(cache.get("yaml", "2"), MISSING)
        cache.put("yaml", "huge", "z" * 900)
        self.assertIs(cache.get("yaml", "huge"), MISSING)

    def test_admitAfterTwo(self) -> None:
        """
        With C{admitAfter=2}, a text's data is kept only when the same text
        is put a second time (a text seen once is not packed); the texts
        seen once are bounded.
        """
        cache = DataCache(maxEntries=2, admitAfter=2)
        cache.put("yaml", "a", {"x": 1})
        self.assertIs(cache.get("yaml", "a"), MISSING)
        cache.put("yaml-wire", "a", {"x": 1})
        self.assertIs(cache.get("yaml", "a"), MISSING)
        cache.put("yaml", "a", {"x": 1})
        self.assertEqual(cache.get("yaml", "a"), {"x": 1})
        cache.put("yaml", "a", {"x": 1})
        self.assertEqual(cache.get("yaml", "a"), {"x": 1})
        for i in range(17):
            cache.put("yaml", f"once{i}", i)
        cache.put("yaml", "once0", 0)
        self.assertIs(cache.get("yaml", "once0"), MISSING)
        cache.put("yaml", "once16", 16)
        self.assertEqual(cache.get("yaml", "once16"), 16)
        cache.clear()
        cache.put("yaml", "once16", 16)
        self.assertIs(cache.get("yaml", "once16"), MISSING)

    def test_renderTextCached(self) -> None:
        """
        With C{cacheData}, rendering the same text twice gives equal,
        distinct data; errors are never cached.
        """
        first = renderText("k: [1, 2]\n", {}, cacheData=True)
        second = renderText("k: [1, 2]\n", {}, cacheData=True)
        self.assertEqual(first, second)
        self.assertIsNot(first, second)
        for _ in range(2):
            self.assertRaises(RenderError, renderText, "k: [\n", {}, cacheData=True)
