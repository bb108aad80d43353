# -*- test-case-name: tests.test_render_blockyaml -*-
"""
L{salttwist.render.blockyaml}: the line reader gives exactly what the full
loader gives, or leaves the document to the next loader; never another
result, never a document the full loader refuses.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from salttwist.render import RenderError, loadYaml
from salttwist.render.blockyaml import blockLoad
from salttwist.render.fastyaml import Unhandled
from tests.test_render_fastyaml import SCALARS, fullLoad, same

#: Values as written after C{key: } or C{- }: every implicit scalar and
#: lookalike, quoted ones, comments, colons, and what this path leaves to
#: the full loader (flow, block scalars, anchors, tags ...).
VALUES = [
    *SCALARS,
    "a #c", "a#b", "a # b: c", "a: b", "a:b", "a:", "http://x/y?z=1#f", "a  b  ",
    "'it''s'", "'a' #c", "'a'#c", "'a' b", "'unterminated", "''", "' '",
    '"esc\\n\\t\\\\\\""', '"bad\\x41"', '"u\\u00e9"', '"a" #c', '""', '"a\'b"',
    "[]", "{}", "[] #c", "[ ]", "[a]", "{a: 1}", "|", ">", "|-", "&a x", "*a",
    "!!str 1", "!x y", "- x", "-", "--", "---", "-1", "-x", "?x", "? x",
    ":x", ",x", "%x", "@x", "`x", "#", "# only", "é", "a\u00a0b", "0.", "+.inf",
    "1e3", "1.0e+3", "0b", "00", "08", "0o7", "1__0", "1_", "_1", "2001-12-14",
    "2001-12-14 21:59:43.10 -5", "TRUE", "tRue", "oN", "NULL", "~x", "x~",
]  # fmt: skip

#: Keys as written before C{: }.
KEYS = [
    "a", "b", "key", "yes", "no", "on", "1", "01", "1.5", "~", "null", "<<", "=",
    "a b", "a  ", "'q'", "'q''s'", '"d"', '"d\\n"', '"bad\\q"', "x#y", "x #y", "a:b",
    "-a", "?a", "[a]", "{a}", "&a a", "!t a", "é", "2024-01-31", ".inf", "''", '""',
    "True", "true", "1_0", "10",
]  # fmt: skip


def check(test: SynchronousTestCase, text: str, wire: bool) -> str:
    """
    Assert that L{blockLoad} gives what the full loader gives for C{text},
    or raises L{Unhandled}; and raises L{Unhandled} where the full loader
    fails.

    @return: C{"read"}, C{"left"} (to the next loader) or C{"invalid"}.
    """
    try:
        expected = fullLoad(text, wire)
    except yaml.YAMLError:
        try:
            got = blockLoad(text, wire)
        except Unhandled:
            return "invalid"
        test.fail(f"read {text!r} (wire={wire}) as {got!r}; the full loader refuses it")
    try:
        got = blockLoad(text, wire)
    except Unhandled:
        return "left"
    test.assertTrue(same(got, expected), (text, wire, got, expected))
    return "read"


class ScalarTests(SynchronousTestCase):
    """
    Every value and key, in every place a line can hold it, reads as the
    full loader reads it, or is left to it.
    """

    def test_values(self) -> None:
        """
        Each of L{VALUES} after a key, after a dash, after a dash and a key
        (a mapping starting in a sequence), at the top or nested, wire or
        not.
        """
        outcomes = set()
        for value in VALUES:
            for text in (
                f"k: {value}\n",
                f"k:   {value}   \n",
                f"- {value}\n",
                f"-   {value}\n",
                f"- k: {value}\n  j: 1\n",
                f"top:\n  k: {value}\n  j: 2\n",
                f"top:\n- {value}\n- z\n",
                f"top:\n  - a: {value}\n    b: {value}\n",
            ):
                for wire in (False, True):
                    outcomes.add(check(self, text, wire))
        self.assertEqual(outcomes, {"read", "left", "invalid"})

    def test_keys(self) -> None:
        """
        Each of L{KEYS} as a key with a value, with nothing, with a block
        below, in a sequence's mapping, twice (a duplicate, after
        resolution), wire or not.
        """
        for key in KEYS:
            for text in (
                f"{key}: v\n",
                f"{key}:\n",
                f"{key} : v\n",
                f"{key}:\n  x: 1\n",
                f"{key}:\n- 1\n",
                f"- {key}: v\n",
                f"- {key}:\n  - v\n",
                f"{key}: 1\n{key}: 2\n",
                f"{key}: 1\n'{key}': 2\n",
                f"other: 1\n{key}: 2\n",
            ):
                for wire in (False, True):
                    check(self, text, wire)

    def test_bigIntegersOnTheWire(self) -> None:
        """
        On the wire, an integer beyond 64 bits is its text, and a key that
        is not text is its text; otherwise both stay what they are.
        """
        text = "big: 99999999999999999999\n1: one\nno: 'true'\n~: null\n"
        self.assertEqual(
            blockLoad(text, wire=True),
            {"big": "99999999999999999999", "1": "one", "False": "true", "None": None},
        )
        self.assertEqual(
            blockLoad(text),
            {"big": 99999999999999999999, 1: "one", False: "true", None: None},
        )

    def test_keysSameBeforeTheWire(self) -> None:
        """
        Keys that are the same to the full loader before the wire makes
        them text (C{1} and C{yes}, C{0} and C{0.0}) are a duplicate it
        names; so are keys the same as text (C{1} and C{'1'}).
        """
        for text in ("yes: a\n1: b\n", "0: a\n0.0: b\n", "1: a\n'1': b\n", "x:\n  1: a\n  on: b\n"):
            self.assertRaises(Unhandled, blockLoad, text, True)
            self.assertRaises(RenderError, loadYaml, text, "p.sls", wire=True)
        self.assertEqual(
            blockLoad("x:\n  1: a\ny:\n  on: b\n", True), {"x": {"1": "a"}, "y": {"True": "b"}}
        )

    def test_emptyFlowIsNewEachTime(self) -> None:
        """
        C{[]} and C{{}} give a new list or mapping in each document and
        each place, though the line is read once.
        """
        first = blockLoad("a: []\nb: {}\nc:\n- []\n- []\n")
        second = blockLoad("a: []\nb: {}\nc:\n- []\n- []\n")
        self.assertEqual(first, {"a": [], "b": {}, "c": [[], []]})
        first["a"].append(1)
        first["b"]["x"] = 1
        first["c"][0].append(1)
        self.assertEqual(second, {"a": [], "b": {}, "c": [[], []]})
        self.assertEqual(first["c"][1], [])


class StructureTests(SynchronousTestCase):
    """
    The shapes of block YAML: read as the full loader reads them, and
    what is not valid is left to it.
    """

    #: Documents this path reads.
    READ = [
        "",
        "\n\n",
        "# only a comment\n   # another\n",
        "a: 1\n",
        "a: 1\nb: 2",
        "  a: 1\n  b: 2\n",
        "a:\n  b:\n    c: 1\n  d: 2\ne: 3\n",
        "a:\n- 1\n- 2\nb: 3\n",
        "a:\n  - 1\n  -\n  - 3\n",
        "- 1\n- a: 2\n  b:\n  - x\n  c: 3\n-\n  d: 4\n- \n",
        "a:\n  - b: 1\n    c:\n      d: 2\n  - e\n",
        "-   a: 1\n    b: 2\n",
        "a: # comment\n  b: 1 # comment\n\n  # comment\n  c: 2\n",
        "a:\n\n  b: 1\n",
        "a:\nb:\n",
        "- a:\n  - 1\n  - 2\n  b: 3\n",
        "key with spaces: value with spaces\n'q': \"d\"\n",
        "a:\n    - 1\n    - 2\n",
        "a:\n -\n   b: 1\n",
    ]
    #: Valid documents left to the other loaders.
    LEFT = [
        "a: [1, 2]\n",
        "a: |\n  text\n",
        "a: plain\n  continued\n",
        "a: 'quoted\n  continued'\n",
        "- - a\n",
        "a: &x 1\nb: *x\n",
        "---\na: 1\n",
        "a: 1\n...\n",
        "a:\tb\n",
        "a: 1\r\nb: 2\r\n",
        "\ufeffa: 1\n",
        "? a\n: b\n",
        "just text\n",
        "- a\n  - b\n",
    ]
    #: Invalid documents: left to the full loader, which names the line.
    INVALID = [
        ("a: 1\na: 2\n", 2),
        ("a:\n    b: 1\n  c: 2\n", 3),
        ("a: 1\n  b: 2\n", 2),
        ("- a\nb: 1\n", 2),
        ("a: 1\n- b\n", 2),
        ("a:\n  b: 1\n - c\n", 3),
        ("a: b: c\n", 1),
        ("a: 1\n---\nb: 2\n", 2),
        ("a: 1 # c\nb: x: y\n", 2),
        ("a: 'x'y\n", 1),
        ('a: "x" y\n', 1),
        ("-   a: 1\n  b: 2\n", 2),
    ]

    def test_read(self) -> None:
        """
        Each of L{READ} is read, as the full loader reads it.
        """
        for text in self.READ:
            for wire in (False, True):
                self.assertEqual(check(self, text, wire), "read", text)

    def test_left(self) -> None:
        """
        Each of L{LEFT} is valid and left to the other loaders, which
        read it (through L{loadYaml}).
        """
        for text in self.LEFT:
            self.assertEqual(check(self, text, False), "left", text)
            self.assertTrue(same(loadYaml(text), fullLoad(text)), text)

    def test_invalid(self) -> None:
        """
        Each of L{INVALID} is left to the full loader, and L{loadYaml}
        raises its error naming the line.
        """
        for text, line in self.INVALID:
            self.assertEqual(check(self, text, False), "invalid", text)
            error = self.assertRaises(RenderError, loadYaml, text, "p.sls")
            self.assertEqual((error.path, error.line), ("p.sls", line), (text, str(error)))

    def test_keySeenBefore(self) -> None:
        """
        A line whose key was seen before with another value (read the short
        way) reads as the full loader reads it, whatever its key: quoted
        with C{: } inside, after a dash, a comment, a key that is no key.
        """
        heads = ["k", "  k", "- k", "-  k", "'a: b'", '"a: b"', "- # c", "# c", "a:b", "-", "- -"]
        heads += ["k #c", "yes", "1", "'q'", "- 'q'", "x y", "é"]
        for head in heads:
            for value in ("first", "second", "12", "yes", "a b  ", "=", "x #y", "é"):
                for wire in (False, True):
                    check(self, f"{head}: {value}\n", wire)
                    check(self, f"top:\n  {head}: {value}\n", wire)

    def test_pillarTakesThisPath(self) -> None:
        """
        The benchmark's Jinja-rendered pillar (200 keys, maps of scalars
        and lists) is read here, as the full loader reads it.
        """
        lines = []
        for i in range(200):
            lines += [
                f"bench_key_{i}:",
                f"  index: {i}",
                "  minion: web-01",
                f"  name: item-{i}-web-01",
                "  tags:",
                *(f"    - t{i}-{j}" for j in range(3)),
            ]
        text = "\n".join(lines) + "\n"
        self.assertEqual(check(self, text, True), "read")


_indents = st.sampled_from([0, 0, 0, 1, 2, 2, 2, 3, 4, 4, 6])
_line = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", st.sampled_from(KEYS), st.sampled_from(VALUES)),
    st.builds(lambda k: f"{k}:", st.sampled_from(KEYS)),
    st.builds(lambda v: f"- {v}", st.sampled_from(VALUES)),
    st.builds(
        lambda k, v, s: f"-{s}{k}: {v}",
        st.sampled_from(KEYS),
        st.sampled_from(VALUES),
        st.sampled_from([" ", "  ", "   "]),
    ),
    st.sampled_from(["-", "- ", "", "# comment", "- # c", "k: # c", "---", "..."]),
)
_document = st.lists(st.tuples(_indents, _line), max_size=12).map(
    lambda lines: "".join(" " * indent + line + "\n" for indent, line in lines)
)

_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    | st.sampled_from(SCALARS)
    | st.sampled_from(VALUES)
)
_data = st.recursive(
    _leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(_keys | st.sampled_from(KEYS), children, max_size=4)
    ),
    max_leaves=24,
)


class PropertyTests(SynchronousTestCase):
    """
    On generated documents, the line reader gives what the full loader
    gives, or leaves the document to it, and never reads a document the
    full loader refuses.
    """

    @settings(max_examples=1500, deadline=None)
    @given(_document, st.booleans())
    @example("a:\n  - 1\n - 2\n", False)
    @example("- a: 1\n -b: 2\n", False)
    def test_linesOfAnyShape(self, text: str, wire: bool) -> None:
        """
        Documents of random lines (keys, values, dashes, comments, markers)
        at random indentations.
        """
        check(self, text, wire)

    @settings(max_examples=400, deadline=None)
    @given(_data, st.sampled_from([2, 3, 4]), st.booleans(), st.booleans())
    def test_dumpsOfData(self, data: Any, indent: int, wire: bool, indentless: bool) -> None:
        """
        Generated data dumped by PyYAML in block style (sequences indented
        or at their key's indentation).
        """

        class Dumper(yaml.SafeDumper):
            def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
                super().increase_indent(flow, indentless and not wantIndented)

        wantIndented = not indentless
        text = yaml.dump(
            data, Dumper=Dumper, default_flow_style=False, allow_unicode=True, indent=indent
        )
        check(self, text, wire)

    @settings(max_examples=600, deadline=None)
    @given(
        st.sampled_from(StructureTests.READ[3:]),
        st.integers(min_value=0, max_value=200),
        st.sampled_from([" ", "  ", "-", "- ", ":", ": ", "#", " #", "'", '"', "\n", "\n  "]),
        st.booleans(),
    )
    def test_mutations(self, text: str, where: int, insert: str, wire: bool) -> None:
        """
        Documents this path reads, with one piece inserted anywhere: a
        space, a dash, a colon, a comment sign, a quote, a line break.
        """
        where = where % (len(text) + 1)
        check(self, text[:where] + insert + text[where:], wire)
