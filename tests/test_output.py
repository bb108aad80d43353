# -*- test-case-name: tests.test_output -*-
"""
Tests for L{salttwist.cli.output}.

The expected strings are what Salt's outputters print for the same data.
"""

from __future__ import annotations

import json
from collections import OrderedDict

from twisted.trial.unittest import SynchronousTestCase

from salttwist.cli.output import OUTPUTTERS, minionReturnLine, render

PING = {"web1": True, "web2": True}

NESTED = {
    "web1": {
        "pkgs": ["vim", {"name": "git"}, ["a", "b"]],
        "motd": "hello\nworld",
        "count": 3,
        "ratio": 0.5,
        "nothing": None,
    }
}

NO_RESPONSE = {"db1": "Minion did not return. [No response]"}

# Salt's colours, as salt.textformat.TextFormat writes them.
GREEN = "\x1b[0;32m"
CYAN = "\x1b[0;36m"
RED = "\x1b[0;31m"
LIGHT_YELLOW = "\x1b[0;1;33m"
ENDC = "\x1b[0;0m"


class OutputtersTests(SynchronousTestCase):
    """
    Tests for L{OUTPUTTERS} and the errors of L{render}.
    """

    def test_outputters(self) -> None:
        """
        L{OUTPUTTERS} names the supported outputters, C{nested} first and
        C{quiet} last.
        """
        self.assertEqual(OUTPUTTERS, ("nested", "json", "yaml", "txt", "raw", "highstate", "quiet"))

    def test_unknownOutputter(self) -> None:
        """
        L{render} raises L{ValueError} naming an unknown outputter and
        listing the valid ones.
        """
        exc = self.assertRaises(ValueError, render, "pony", PING)
        self.assertIn("'pony'", str(exc))
        self.assertIn("nested, json, yaml, txt, raw", str(exc))

    def test_unknownOutputterMinionReturnLine(self) -> None:
        """
        L{minionReturnLine} raises L{ValueError} for an unknown outputter too.
        """
        self.assertRaises(ValueError, minionReturnLine, "web1", True, "pony")

    def test_endsWithNewline(self) -> None:
        """
        Every outputter's text but C{quiet}'s ends in exactly one newline;
        C{quiet} prints nothing at all.
        """
        self.assertEqual(render("quiet", NESTED), "")
        for outputter in OUTPUTTERS[:-1]:
            text = render(outputter, NESTED)
            self.assertTrue(text.endswith("\n"), outputter)
            self.assertFalse(text.endswith("\n\n"), outputter)

    def test_nothingToPrint(self) -> None:
        """
        When an outputter produces nothing, L{render} returns an empty
        string, not a lone newline: Salt prints nothing then.
        """
        self.assertEqual(render("nested", {}), "")
        self.assertEqual(render("txt", {}), "")


class NestedTests(SynchronousTestCase):
    """
    Tests for the C{nested} outputter.
    """

    def test_ping(self) -> None:
        """
        Each minion id is a C{id:} line at column 0 with its return indented
        by 4 below it.
        """
        self.assertEqual(
            render("nested", PING),
            "web1:\n    True\nweb2:\n    True\n",
        )

    def test_nestedStructure(self) -> None:
        """
        A nested dict starts with C{----------}, prints sorted C{key:} lines
        with values 4 columns further in; lists print C{- item} lines and
        nested containers under C{|_}; multi-line strings print one line per
        line; numbers and C{None} print plainly.
        """
        self.assertEqual(
            render("nested", NESTED),
            "web1:\n"
            "    ----------\n"
            "    count:\n"
            "        3\n"
            "    motd:\n"
            "        hello\n"
            "        world\n"
            "    nothing:\n"
            "        None\n"
            "    pkgs:\n"
            "        - vim\n"
            "        |_\n"
            "          ----------\n"
            "          name:\n"
            "              git\n"
            "        |_\n"
            "          - a\n"
            "          - b\n"
            "    ratio:\n"
            "        0.5\n",
        )

    def test_multiLineListItem(self) -> None:
        """
        The continuation lines of a multi-line string in a list line up under
        the text of its first line.
        """
        self.assertEqual(
            render("nested", {"web1": ["one\ntwo"]}),
            "web1:\n    - one\n      two\n",
        )

    def test_none(self) -> None:
        """
        C{None}, on its own or as a return, prints as C{None}.
        """
        self.assertEqual(render("nested", None), "None\n")
        self.assertEqual(render("nested", {"web1": None}), "web1:\n    None\n")

    def test_numbers(self) -> None:
        """
        Numbers print with C{repr()}, so floats keep their full precision.
        """
        self.assertEqual(
            render("nested", {"web1": [1, -2, 0.1 + 0.2, False]}),
            "web1:\n    - 1\n    - -2\n    - 0.30000000000000004\n    - False\n",
        )

    def test_noResponse(self) -> None:
        """
        The string Salt uses for a minion that did not return prints like any
        other string.
        """
        self.assertEqual(
            render("nested", NO_RESPONSE),
            "db1:\n    Minion did not return. [No response]\n",
        )

    def test_orderedDict(self) -> None:
        """
        Keys of an L{OrderedDict} keep their order; keys of a plain dict are
        sorted.
        """
        self.assertEqual(
            render("nested", OrderedDict([("b", 1), ("a", 2)])),
            "b:\n    1\na:\n    2\n",
        )
        self.assertEqual(render("nested", {"b": 1, "a": 2}), "a:\n    2\nb:\n    1\n")

    def test_bytes(self) -> None:
        """
        Bytes are decoded as UTF-8, undecodable bytes replaced.
        """
        self.assertEqual(render("nested", {"web1": b"ok\xff"}), "web1:\n    ok\ufffd\n")

    def test_noColor(self) -> None:
        """
        Without colour the text has no escape codes at all, even when a
        minion's strings or keys contain some.
        """
        text = render("nested", {"web1\x1b[2J": ["\x1b[31mred", NESTED]})
        self.assertNotIn("\x1b", text)
        self.assertIn("web1?[2J:\n", text)
        self.assertIn("- ?[31mred\n", text)

    def test_color(self) -> None:
        """
        With colour, keys are cyan, strings green, and C{None}, booleans and
        numbers light yellow, each reset after its text.
        """
        self.assertEqual(
            render("nested", {"web1": {"a": "x", "b": [None, 1, True]}}, color=True),
            f"{CYAN}web1{ENDC}:\n"
            f"    {CYAN}----------{ENDC}\n"
            f"    {CYAN}a{ENDC}:\n"
            f"        {GREEN}x{ENDC}\n"
            f"    {CYAN}b{ENDC}:\n"
            f"        {LIGHT_YELLOW}- None{ENDC}\n"
            f"        {LIGHT_YELLOW}- 1{ENDC}\n"
            f"        {LIGHT_YELLOW}- True{ENDC}\n",
        )

    def test_colorPing(self) -> None:
        """
        With colour, a ping result contains escape codes.
        """
        text = render("nested", PING, color=True)
        self.assertIn("\x1b", text)
        self.assertEqual(
            text,
            f"{CYAN}web1{ENDC}:\n    {LIGHT_YELLOW}True{ENDC}\n"
            f"{CYAN}web2{ENDC}:\n    {LIGHT_YELLOW}True{ENDC}\n",
        )

    def test_colorStripsMinionEscapes(self) -> None:
        """
        With colour, escape codes sent by a minion are still replaced; only
        ours remain.
        """
        self.assertEqual(
            render("nested", {"web1": "\x1b[2Jboom"}, color=True),
            f"{CYAN}web1{ENDC}:\n    {GREEN}?[2Jboom{ENDC}\n",
        )

    def test_failedReturnIsRed(self) -> None:
        """
        With a non-zero C{retcode}, keys and list markers are red.
        """
        self.assertEqual(
            render("nested", {"web1": [["x"]]}, color=True, retcode=1),
            f"{RED}web1{ENDC}:\n    {RED}|_{ENDC}\n      {GREEN}- x{ENDC}\n",
        )


class JSONTests(SynchronousTestCase):
    """
    Tests for the C{json} outputter.
    """

    def test_ping(self) -> None:
        """
        The default indent is 4.
        """
        self.assertEqual(
            render("json", PING),
            '{\n    "web1": true,\n    "web2": true\n}\n',
        )

    def test_keysNotSorted(self) -> None:
        """
        Keys are left in the order of the data, as in Salt.
        """
        self.assertEqual(render("json", {"b": 1, "a": 2}), '{\n    "b": 1,\n    "a": 2\n}\n')

    def test_nestedStructure(self) -> None:
        """
        Nested data is valid JSON holding the same data, multi-line strings
        escaped.
        """
        text = render("json", NESTED)
        self.assertEqual(json.loads(text), NESTED)
        self.assertIn('"motd": "hello\\nworld"', text)

    def test_noneAndNumbers(self) -> None:
        """
        C{None} is C{null}; numbers are JSON numbers.
        """
        self.assertEqual(render("json", None), "null\n")
        self.assertEqual(render("json", [1, 2.5], indent=-1), "[1, 2.5]\n")

    def test_noResponse(self) -> None:
        """
        The no-response string is an ordinary JSON string.
        """
        self.assertEqual(
            render("json", NO_RESPONSE),
            '{\n    "db1": "Minion did not return. [No response]"\n}\n',
        )

    def test_indent(self) -> None:
        """
        C{indent} sets the indent; a negative one prints a single line.
        """
        self.assertEqual(render("json", PING, indent=2), '{\n  "web1": true,\n  "web2": true\n}\n')
        self.assertEqual(render("json", PING, indent=-1), '{"web1": true, "web2": true}\n')

    def test_bytesAndUnicode(self) -> None:
        """
        Bytes keys and values are decoded as UTF-8 with replacement, and
        non-ASCII text is not escaped.
        """
        self.assertEqual(
            render("json", {b"k\xff": b"caf\xc3\xa9"}, indent=-1),
            '{"k\ufffd": "café"}\n',
        )

    def test_unserializable(self) -> None:
        """
        Values JSON cannot represent are shown with C{repr()}.
        """
        self.assertEqual(render("json", {"s": {1}}, indent=-1), '{"s": "{1}"}\n')

    def test_noColor(self) -> None:
        """
        JSON is never coloured.
        """
        self.assertNotIn("\x1b", render("json", PING, color=True))


class YAMLTests(SynchronousTestCase):
    """
    Tests for the C{yaml} outputter.
    """

    def test_ping(self) -> None:
        """
        A ping result is a block-style map.
        """
        self.assertEqual(render("yaml", PING), "web1: true\nweb2: true\n")

    def test_nestedStructure(self) -> None:
        """
        Nested data is block style with sorted keys.
        """
        self.assertEqual(
            render("yaml", NESTED),
            "web1:\n"
            "  count: 3\n"
            "  motd: 'hello\n"
            "\n"
            "    world'\n"
            "  nothing: null\n"
            "  pkgs:\n"
            "  - vim\n"
            "  - name: git\n"
            "  - - a\n"
            "    - b\n"
            "  ratio: 0.5\n",
        )

    def test_noneAndNumbers(self) -> None:
        """
        C{None} on its own is a YAML document holding C{null}.
        """
        self.assertEqual(render("yaml", None), "null\n...\n")
        self.assertEqual(render("yaml", {"n": 1, "f": 1.5}), "f: 1.5\nn: 1\n")

    def test_noResponse(self) -> None:
        """
        The no-response string needs no quoting.
        """
        self.assertEqual(render("yaml", NO_RESPONSE), "db1: Minion did not return. [No response]\n")

    def test_orderedDictAndUnknown(self) -> None:
        """
        An L{OrderedDict} is a plain map in its own order, and a type YAML
        cannot represent is C{NULL}, as with Salt's C{SafeOrderedDumper}.
        """
        self.assertEqual(
            render("yaml", OrderedDict([("b", 1), ("a", object())])),
            "b: 1\na: NULL\n",
        )

    def test_dictAndListSubclasses(self) -> None:
        """
        Subclasses of C{dict} and C{list} (the state compiler's high data)
        are the mapping and sequence they are, not C{NULL}.
        """

        class High(dict):
            pass

        class Items(list):
            pass

        self.assertEqual(
            render("yaml", {"local": High(web={"file": Items(["managed"])})}),
            "local:\n  web:\n    file:\n    - managed\n",
        )

    def test_indent(self) -> None:
        """
        A negative C{indent} gives flow style.
        """
        self.assertEqual(render("yaml", {"web1": [1, 2]}, indent=-1), "{web1: [1, 2]}\n")


class TxtTests(SynchronousTestCase):
    """
    Tests for the C{txt} outputter.
    """

    def test_ping(self) -> None:
        """
        Each return is an C{id: value} line.
        """
        self.assertEqual(render("txt", PING), "web1: True\nweb2: True\n")

    def test_multiLine(self) -> None:
        """
        Each line of a multi-line string is prefixed with the id.
        """
        self.assertEqual(
            render("txt", {"web1": "hello\nworld", "web2": "hi"}),
            "web1: hello\nweb1: world\nweb2: hi\n",
        )

    def test_nestedStructure(self) -> None:
        """
        Non-string returns print as their Python representation.
        """
        self.assertEqual(
            render("txt", {"web1": {"a": [1, None]}}),
            "web1: {'a': [1, None]}\n",
        )

    def test_noneAndNumbers(self) -> None:
        """
        C{None} and numbers, as returns or on their own, print with C{str()}.
        """
        self.assertEqual(render("txt", {"web1": None, "web2": 4}), "web1: None\nweb2: 4\n")
        self.assertEqual(render("txt", None), "None\n")

    def test_noResponse(self) -> None:
        """
        The no-response string prints after the id.
        """
        self.assertEqual(
            render("txt", NO_RESPONSE),
            "db1: Minion did not return. [No response]\n",
        )


class RawTests(SynchronousTestCase):
    """
    Tests for the C{raw} outputter.
    """

    def test_ping(self) -> None:
        """
        The output is C{str()} of the data.
        """
        self.assertEqual(render("raw", PING), "{'web1': True, 'web2': True}\n")

    def test_nestedStructure(self) -> None:
        """
        Nested data prints as its Python representation, on one line.
        """
        self.assertEqual(
            render("raw", {"web1": {"motd": "a\nb", "l": [1, None]}}),
            "{'web1': {'motd': 'a\\nb', 'l': [1, None]}}\n",
        )

    def test_noneAndNumbers(self) -> None:
        """
        C{None} and numbers print with C{str()}.
        """
        self.assertEqual(render("raw", None), "None\n")
        self.assertEqual(render("raw", 1.5), "1.5\n")

    def test_noResponse(self) -> None:
        """
        The no-response string is quoted inside the dict's representation.
        """
        self.assertEqual(
            render("raw", NO_RESPONSE),
            "{'db1': 'Minion did not return. [No response]'}\n",
        )


class MinionReturnLineTests(SynchronousTestCase):
    """
    Tests for L{minionReturnLine}.
    """

    def test_nested(self) -> None:
        """
        The entry is rendered as the one-entry dict C{{id: value}}.
        """
        self.assertEqual(minionReturnLine("web1", True, "nested"), "web1:\n    True\n")

    def test_json(self) -> None:
        """
        For C{json} the entry is one JSON object holding only that minion.
        """
        self.assertEqual(minionReturnLine("web1", True, "json"), '{\n    "web1": true\n}\n')
        self.assertEqual(
            minionReturnLine("web1", {"a": 1}, "json", indent=-1),
            '{"web1": {"a": 1}}\n',
        )

    def test_txt(self) -> None:
        """
        For C{txt} each line of the return is prefixed with the id.
        """
        self.assertEqual(
            minionReturnLine("db1", "Minion did not return. [No response]", "txt"),
            "db1: Minion did not return. [No response]\n",
        )

    def test_color(self) -> None:
        """
        Colour is passed through to the outputter, and off by default.
        """
        self.assertNotIn("\x1b", minionReturnLine("web1", True, "nested"))
        self.assertEqual(
            minionReturnLine("web1", True, "nested", color=True),
            f"{CYAN}web1{ENDC}:\n    {LIGHT_YELLOW}True{ENDC}\n",
        )
