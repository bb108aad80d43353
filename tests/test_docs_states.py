# -*- test-case-name: tests.test_docs_states -*-
"""
The SLS examples of docs/states.md compile as the guide says.

An example is a fenced block right after an HTML comment naming its file
in the state tree:

    <!-- sls: web/init.sls ids: nginx nginx_conf -->
    ```yaml
    ...
    ```

C{sls:} blocks are SLS files: each is compiled alone, as
C{state.show_sls} and C{state.show_low_sls} do, and must give exactly the
state ids listed after C{ids:}, without errors. C{file:} blocks
(C{map.jinja}, C{defaults.yaml}, a C{top.sls} ...) are only written to the
tree for the others to use. Every block is written into one temporary
state tree first, so an example may include or import another.
"""

from __future__ import annotations

import os
import re
from typing import Any, NamedTuple

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.config import loadMinionConfig
from salttwist.fileserver.server import FileServer
from salttwist.modules.extmods import SaltFunctions
from salttwist.state import apply as stateapply
from salttwist.states import loadStates
from tests._statectx import makeLoaderContext

GUIDE = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "states.md")

_MARKED = re.compile(
    r"<!-- (?P<kind>sls|file): (?P<path>\S+)(?: ids: (?P<ids>[^>]*?))? -->\n"
    r"```[A-Za-z0-9_-]*\n(?P<text>.*?)\n```",
    re.DOTALL,
)

#: What the examples' templates see of the minion.
GRAINS = {
    "id": "web1",
    "os": "Debian",
    "os_family": "Debian",
    "osfinger": "Debian-12",
    "kernel": "Linux",
}
PILLAR = {
    "nginx": {"port": 8080, "lookup": {"user": "www"}},
    "users": {"alice": {"uid": 2001}, "bob": {"uid": 2002}},
    "app": {"version": "1.2.3"},
}


class Example(NamedTuple):
    """
    One marked block of the guide.
    """

    kind: str
    path: str
    ids: list[str]
    text: str
    line: int


def examples(text: str) -> list[Example]:
    """
    @return: the marked blocks of C{text}, in order.
    """
    found = []
    for match in _MARKED.finditer(text):
        ids = (match.group("ids") or "").split()
        line = text.count("\n", 0, match.start()) + 1
        found.append(
            Example(match.group("kind"), match.group("path"), ids, match.group("text"), line)
        )
    return found


def slsName(path: str) -> str:
    """
    @return: the SLS name of a file of the tree: C{web/init.sls} is
        C{web}, C{web/conf.sls} is C{web.conf}.
    """
    name = path[: -len(".sls")]
    if name.endswith("/init"):
        name = name[: -len("/init")]
    return name.replace("/", ".")


_TABLE_ROW = re.compile(r"^\| (?P<module>[a-z_]+)(?: \([^)]*\))? \| (?P<functions>[a-z_, ()]+) \|$")


def moduleTable(text: str) -> dict[str, list[str]]:
    """
    @return: the rows of the guide's table of state modules (the one
        under C{| Module | Functions |}): C{{module: [function, ...]}},
        an alias in parentheses (C{wait (alias watch)}) counting as a
        function too.
    """
    start = text.index("| Module | Functions |")
    rows: dict[str, list[str]] = {}
    for line in text[start:].splitlines()[2:]:
        match = _TABLE_ROW.match(line)
        if match is None:
            break
        names = re.findall(r"[a-z_]+", match.group("functions").replace("alias", ""))
        rows[match.group("module")] = names
    return rows


def readGuide() -> str:
    with open(GUIDE, encoding="utf-8") as f:
        return f.read()


class ParsingTests(SynchronousTestCase):
    """
    L{examples} and L{slsName}.
    """

    def test_markedBlocks(self) -> None:
        """
        A C{sls:} comment with its ids and a C{file:} comment each give
        their block; an unmarked block is not an example.
        """
        text = (
            "intro\n"
            "<!-- sls: a/init.sls ids: x y -->\n```yaml\nx:\n  test.nop: []\n```\n"
            "```yaml\nnot: marked\n```\n"
            "<!-- file: a/map.jinja -->\n```jinja\n{% set m = {} %}\n```\n"
        )
        self.assertEqual(
            examples(text),
            [
                Example("sls", "a/init.sls", ["x", "y"], "x:\n  test.nop: []", 2),
                Example("file", "a/map.jinja", [], "{% set m = {} %}", 10),
            ],
        )

    def test_slsName(self) -> None:
        """
        C{init.sls} names its directory; other files their dotted path.
        """
        self.assertEqual(slsName("web/init.sls"), "web")
        self.assertEqual(slsName("web/conf.sls"), "web.conf")
        self.assertEqual(slsName("motd.sls"), "motd")

    def test_guideHasExamples(self) -> None:
        """
        The guide marks its examples, each file once, and every C{sls:}
        example lists the ids it gives.
        """
        found = examples(readGuide())
        slsExamples = [example for example in found if example.kind == "sls"]
        self.assertGreater(len(slsExamples), 20)
        paths = [example.path for example in found]
        self.assertEqual(
            sorted({path for path in paths if paths.count(path) > 1}),
            [],
            "each file of the guide's tree is given once",
        )
        self.assertEqual([example.line for example in slsExamples if not example.ids], [])


class ModuleTableTests(SynchronousTestCase):
    """
    The guide's table of state modules names only functions that exist.
    """

    def test_moduleTable(self) -> None:
        """
        L{moduleTable} reads a row, an alias and a module's note.
        """
        text = (
            "| Module | Functions |\n|---|---|\n"
            "| cmd | run, wait (alias watch) |\n"
            "| salt (orchestration) | state |\n\nafter\n"
        )
        self.assertEqual(moduleTable(text), {"cmd": ["run", "wait", "watch"], "salt": ["state"]})

    def test_functionsExist(self) -> None:
        """
        Every C{module.function} of the table is a loaded state function.
        """
        rows = moduleTable(readGuide())
        self.assertGreaterEqual(len(rows), 12)
        loaded = set(loadStates())
        listed = {
            f"{module}.{function}" for module, functions in rows.items() for function in functions
        }
        self.assertEqual(sorted(listed - loaded), [])


class CompileTests(TestCase):
    """
    Every C{sls:} example of the guide compiles to its ids, over one tree
    holding all the guide's files.
    """

    def setUp(self) -> None:
        root = os.path.abspath(self.mktemp())
        base = os.path.join(root, "srv")
        self.examples = examples(readGuide())
        for example in self.examples:
            path = os.path.join(base, example.path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(example.text + "\n")
        opts = loadMinionConfig(
            root,
            overrides={
                "root_dir": root,
                "id": GRAINS["id"],
                "file_roots": {"base": [base]},
                "cachedir": os.path.join(root, "cache"),
            },
        )
        loader = makeLoaderContext(opts, GRAINS, PILLAR)
        self.run = stateapply.StateRun(
            files=FileServer.fromConfig(opts),
            opts=loader.opts,
            minionId=GRAINS["id"],
            grains=GRAINS,
            pillar=PILLAR,
            salt=SaltFunctions(loader),
            reactor=loader.reactor,
        )

    def compileAll(self) -> list[str]:
        """
        Compile each C{sls:} example as C{state.show_sls} and
        C{state.show_low_sls} do.

        @return: what went wrong, one line per example.
        """
        problems = []
        for example in self.examples:
            if example.kind != "sls":
                continue
            where = f"docs/states.md line {example.line} ({example.path})"
            mods = slsName(example.path)
            high, errors = stateapply.showSls(self.run, mods)
            if errors:
                problems.append(f"{where}: show_sls errors {errors}")
                continue
            ids = sorted(key for key in high if not key.startswith("__"))
            if ids != sorted(example.ids):
                problems.append(f"{where}: ids {ids}, the guide says {sorted(example.ids)}")
            chunks, errors = stateapply.showLowSls(self.run, mods)
            if errors:
                problems.append(f"{where}: show_low_sls errors {errors}")
            elif not chunks:
                problems.append(f"{where}: no low chunks")
        return problems

    async def test_examplesCompile(self) -> None:
        """
        Each example gives its ids, and its low chunks, without errors.
        """
        problems: Any = await deferToThread(self.compileAll)
        self.assertEqual(problems, [], "\n".join(problems))
