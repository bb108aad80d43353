# -*- test-case-name: tests.test_render_fastyaml -*-
"""
L{salttwist.render.fastyaml}: the fast path gives exactly what the full
loader gives, or leaves the document to it.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from salttwist.render import RenderError, loadYaml
from salttwist.render.fastyaml import Unhandled, fastLoad
from salttwist.render.yamlio import _SaltLoader, _WireLoader


def fullLoad(text: str, wire: bool = False) -> Any:
    """
    @return: C{text} loaded by the full loader only.
    """
    return yaml.load(text, Loader=_WireLoader if wire else _SaltLoader)  # noqa: S506


def same(a: Any, b: Any) -> bool:
    """
    Equal, with the same types all the way down (C{1 == True} and
    C{1 == 1.0} are not the same here), NaN equal to NaN.
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


#: Plain scalars whose implicit type YAML 1.1 decides, and some lookalikes.
SCALARS = [
    "yes", "No", "ON", "off", "true", "False", "y", "n", "~", "null", "Null", "",
    "0", "-1", "+5", "012", "0o12", "0x1F", "0b101", "1_000", "1:30", "190:20:30",
    "1.5", "-.5", "1e3", "6.8523015e+5", ".inf", "-.Inf", ".NaN", "1_000.5",
    "2024-01-31", "2001-12-14t21:59:43.10-05:00", "1.2.3", "0x", "web1", "t0-1",
    "=", "<<", "item-0-m1", "'quoted'", '"1"', "a b", "12:30:00",
    "99999999999999999999999", "-99999999999999999999999",
]  # fmt: skip


class ScalarTests(SynchronousTestCase):
    """
    Every kind of implicit scalar resolves as the full loader resolves it.
    """

    def test_scalars(self) -> None:
        """
        Alone, as a mapping value and as a key (wire or not), each scalar
        loads to the same value and type as with the full loader, or is
        left to it.
        """
        for scalar in SCALARS:
            for text in (scalar, f"k: {scalar}\n", f"- {scalar}\n", f"{scalar or 'e'}: v\n"):
                for wire in (False, True):
                    try:
                        expected = fullLoad(text, wire)
                    except yaml.YAMLError:
                        self.assertRaises(Unhandled, fastLoad, text, wire)
                        continue
                    try:
                        got = fastLoad(text, wire)
                    except Unhandled:
                        continue
                    self.assertTrue(same(got, expected), (text, wire, got, expected))

    def test_pillarShapesTakeTheFastPath(self) -> None:
        """
        Mappings, sequences, block and flow styles, quoted and multi-line
        strings, comments: loaded without the full loader.
        """
        text = (
            "# a pillar\n"
            "users:\n"
            "  alice: {uid: 1000, shell: /bin/bash, groups: [wheel, 'adm']}\n"
            "  bob:\n"
            "    uid: 1001\n"
            "    keys:\n"
            "      - ssh-ed25519 AAAA\n"
            "motd: |\n"
            "  Welcome\n"
            "  here\n"
            'quoted: "yes"\n'
            "empty:\n"
            "folded: >\n"
            "  one\n"
            "  two\n"
        )
        self.assertTrue(same(fastLoad(text), fullLoad(text)))
        self.assertEqual(fastLoad(""), None)
        self.assertEqual(fastLoad("# only a comment\n"), None)

    def test_leftToTheFullLoader(self) -> None:
        """
        Anchors and aliases, merge keys, explicit tags, complex keys, a
        repeated key, several documents and invalid YAML are left to the
        full loader, which gives the same data or the error naming the
        line (through L{loadYaml}).
        """
        for text in (
            "a: &x 1\nb: *x\n",
            "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n",
            "a: !!str 1\n",
            "a: !!set {x, y}\n",
            "? [a, b]\n: 1\n",
            "a: 1\na: 2\n",
            "a: 1\n---\nb: 2\n",
            "a: [1,\n",
        ):
            self.assertRaises(Unhandled, fastLoad, text)
        self.assertEqual(loadYaml("a: &x 1\nb: *x\n"), {"a": 1, "b": 1})
        self.assertEqual(loadYaml("a: !!str 1\n"), {"a": "1"})
        error = self.assertRaises(RenderError, loadYaml, "a: 1\na: 2\n", "p.sls")
        self.assertEqual(error.line, 2)
        self.assertIn("duplicate key", str(error))
        error = self.assertRaises(RenderError, loadYaml, "a: [1,\n", "p.sls")
        self.assertEqual(error.path, "p.sls")

    def test_keysSameBeforeTheWire(self) -> None:
        """
        On the wire, keys that are the same to the full loader before they
        are made text (C{1} and C{yes}) are a duplicate left to it, which
        names the line.
        """
        for text in ("yes: a\n1: b\n", "{0: a, 0.0: b}\n", "x: {1: a, on: b}\n"):
            self.assertRaises(Unhandled, fastLoad, text, True)
            self.assertRaises(RenderError, loadYaml, text, "p.sls", wire=True)
        self.assertEqual(fastLoad("{1: a, 2: b}", True), {"1": "a", "2": "b"})


_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    | st.sampled_from(SCALARS)
)
_data = st.recursive(
    _leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=20,
)


class PropertyTests(SynchronousTestCase):
    """
    On generated data dumped by PyYAML in each style, the fast path gives
    what the full loader gives.
    """

    @settings(max_examples=300, deadline=None)
    @given(_data, st.sampled_from([None, False, True]), st.booleans())
    def test_sameAsFullLoader(self, data: Any, flowStyle: bool | None, wire: bool) -> None:
        """
        C{fastLoad} of a dump equals the full loader's load of it (or is
        left to it), wire or not.
        """
        text = yaml.safe_dump(data, default_flow_style=flowStyle, allow_unicode=True)
        expected = fullLoad(text, wire)
        try:
            got = fastLoad(text, wire)
        except Unhandled:
            return
        self.assertTrue(same(got, expected), (text, got, expected))
