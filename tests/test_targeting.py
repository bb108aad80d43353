# -*- test-case-name: tests.test_targeting -*-
"""
Tests for L{salttwist.targeting}.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist import targeting
from salttwist.targeting import (
    MAX_DEPTH,
    MAX_REGEX_LENGTH,
    MAX_SIZE,
    TARGET_TYPES,
    TargetError,
    TargetMatcher,
    checkMinions,
    compileTarget,
    expandNodegroup,
    matchMinion,
    validateTarget,
)

MINIONS = ["web2", "db1", "web1", "web10", "cache"]

#: Grains of the minions used by the compound and nodegroup tests.
GRAINS: dict[str, dict[str, Any]] = {
    "web1": {"os": "Debian", "roles": ["web"]},
    "web2": {"os": "Ubuntu", "roles": ["web"]},
    "db1": {"os": "Debian", "roles": ["db"]},
    "db2": {"os": "CentOS", "roles": ["db"]},
    "a": {"os": "CentOS"},
    "b": {"os": "Debian"},
}
IDS = sorted(GRAINS)


def compound(tgt: object, nodegroups: dict[str, Any] | None = None) -> list[str]:
    """
    The minions of L{GRAINS} that the compound target C{tgt} matches, asked
    of each minion with L{matchMinion}.
    """
    return [
        m for m in IDS if matchMinion(m, tgt, "compound", grains=GRAINS[m], nodegroups=nodegroups)
    ]


def grain(tgt: str, grains: dict[Any, Any], tgtType: str = "grain", **kw: Any) -> bool:
    """
    Whether a minion with C{grains} matches the grain target C{tgt}.
    """
    return matchMinion("m", tgt, tgtType, grains=grains, **kw)


class GlobTests(SynchronousTestCase):
    """
    Glob targets match minion ids with shell wildcards.
    """

    def test_star(self) -> None:
        """
        C{*} matches every minion.
        """
        self.assertEqual(checkMinions(MINIONS, "*"), sorted(MINIONS))

    def test_patterns(self) -> None:
        """
        C{*}, C{?} and C{[...]} work as in the shell.
        """
        self.assertTrue(matchMinion("web1", "web*"))
        self.assertFalse(matchMinion("db1", "web*"))
        self.assertEqual(checkMinions(MINIONS, "web?"), ["web1", "web2"])
        self.assertEqual(checkMinions(MINIONS, "web[12]"), ["web1", "web2"])
        self.assertEqual(checkMinions(MINIONS, "web[!1]"), ["web2"])

    def test_exact(self) -> None:
        """
        A glob without wildcards matches only that id.
        """
        self.assertEqual(checkMinions(MINIONS, "web1"), ["web1"])

    def test_caseSensitive(self) -> None:
        """
        Matching is case-sensitive.
        """
        self.assertFalse(matchMinion("web1", "WEB1"))

    def test_globIsDefault(self) -> None:
        """
        The default target type is C{glob}.
        """
        self.assertTrue(matchMinion("web1", "w*"))
        self.assertEqual(checkMinions(MINIONS, "d*"), ["db1"])

    def test_emptyGlob(self) -> None:
        """
        An empty glob, or one that is not a string, raises L{TargetError}.
        """
        self.assertRaises(TargetError, checkMinions, MINIONS, "")
        self.assertRaises(TargetError, matchMinion, "web1", "", "glob")
        self.assertRaises(TargetError, matchMinion, "web1", ["web1"], "glob")


class PcreTests(SynchronousTestCase):
    """
    C{pcre} targets apply a regular expression to the id with C{re.match}, as
    Salt does: anchored at the start only.
    """

    def test_anchoredAtStart(self) -> None:
        """
        The expression must match at the start of the id, but may stop
        before its end.
        """
        self.assertEqual(checkMinions(MINIONS, "web", "pcre"), ["web1", "web10", "web2"])
        self.assertEqual(checkMinions(MINIONS, "eb", "pcre"), [])
        self.assertEqual(checkMinions(MINIONS, r"web\d$", "pcre"), ["web1", "web2"])

    def test_syntax(self) -> None:
        """
        Alternation, classes and repetition work; matching is
        case-sensitive.
        """
        self.assertEqual(checkMinions(MINIONS, r"(db|cache)\w*", "pcre"), ["cache", "db1"])
        self.assertFalse(matchMinion("web1", "WEB", "pcre"))

    def test_invalid(self) -> None:
        """
        An invalid expression raises L{TargetError} naming it and the
        offset of the error.
        """
        e = self.assertRaises(TargetError, validateTarget, "web(1", "pcre")
        self.assertIn("'web(1'", str(e))
        self.assertIn("at position 3", str(e))
        self.assertEqual(e.position, 3)

    def test_tooLong(self) -> None:
        """
        An expression longer than L{MAX_REGEX_LENGTH} is refused.
        """
        e = self.assertRaises(TargetError, validateTarget, "a" * (MAX_REGEX_LENGTH + 1), "pcre")
        self.assertIn(f"the limit is {MAX_REGEX_LENGTH}", str(e))
        self.assertIsNone(validateTarget("a" * MAX_REGEX_LENGTH, "pcre"))

    def test_empty(self) -> None:
        """
        An empty expression, or one that is not a string, is refused.
        """
        self.assertRaises(TargetError, validateTarget, "", "pcre")
        self.assertRaises(TargetError, validateTarget, ["web"], "pcre")


class ListTests(SynchronousTestCase):
    """
    List targets name minions exactly, as a comma-separated string or a list.
    """

    def test_string(self) -> None:
        """
        A comma-separated string names minions; spaces around names are
        ignored.
        """
        self.assertEqual(checkMinions(MINIONS, "web1, db1,nope", "list"), ["db1", "web1"])
        self.assertTrue(matchMinion("web1", "db1,web1", "list"))
        self.assertFalse(matchMinion("web10", "web1", "list"))

    def test_list(self) -> None:
        """
        A list of strings names minions.
        """
        self.assertEqual(checkMinions(MINIONS, ["web2", "cache"], "list"), ["cache", "web2"])

    def test_noWildcards(self) -> None:
        """
        Names in a list target are not globs.
        """
        self.assertEqual(checkMinions(MINIONS, "web*", "list"), [])

    def test_empty(self) -> None:
        """
        A list target naming nobody raises L{TargetError}.
        """
        for tgt in ["", " , ", []]:
            self.assertRaises(TargetError, checkMinions, MINIONS, tgt, "list")

    def test_badItems(self) -> None:
        """
        A list holding non-strings, or a target of another type, raises
        L{TargetError}.
        """
        self.assertRaises(TargetError, checkMinions, MINIONS, ["web1", 2], "list")
        self.assertRaises(TargetError, checkMinions, MINIONS, 7, "list")


class GrainTests(SynchronousTestCase):
    """
    C{grain} targets follow Salt's C{salt.utils.data.subdict_match}.
    """

    def test_simple(self) -> None:
        """
        C{key:value} matches a minion whose grain C{key} is C{value}; a
        minion without the grain does not match.
        """
        self.assertTrue(grain("os:Debian", {"os": "Debian"}))
        self.assertFalse(grain("os:Ubuntu", {"os": "Debian"}))
        self.assertFalse(grain("kernel:Linux", {"os": "Debian"}))

    def test_caseInsensitiveValue(self) -> None:
        """
        Values are compared case-insensitively (Salt lowercases both); keys
        are not.
        """
        self.assertTrue(grain("os:debian", {"os": "Debian"}))
        self.assertTrue(grain("os:DEBIAN", {"os": "Debian"}))
        self.assertFalse(grain("OS:Debian", {"os": "Debian"}))

    def test_globValue(self) -> None:
        """
        The value is a glob over the whole value.
        """
        grains = {"os": "Debian"}
        self.assertTrue(grain("os:Deb*", grains))
        self.assertTrue(grain("os:?ebian", grains))
        self.assertTrue(grain("os:[cd]ebian", grains))
        self.assertTrue(grain("os:*", grains))
        self.assertFalse(grain("os:Deb", grains))

    def test_nonStringValues(self) -> None:
        """
        Values that are not strings are compared as C{str(value).lower()}.
        """
        grains = {"num_cpus": 4, "virtual": False, "gpu": None, "ver": 1.5}
        self.assertTrue(grain("num_cpus:4", grains))
        self.assertTrue(grain("num_cpus:[1-4]", grains))
        self.assertFalse(grain("num_cpus:40", grains))
        self.assertTrue(grain("virtual:false", grains))
        self.assertTrue(grain("virtual:False", grains))
        self.assertTrue(grain("gpu:none", grains))
        self.assertTrue(grain("ver:1.5", grains))

    def test_listValue(self) -> None:
        """
        A list-valued grain matches if any element does.
        """
        grains = {"roles": ["web", "cache"]}
        self.assertTrue(grain("roles:web", grains))
        self.assertTrue(grain("roles:cach*", grains))
        self.assertFalse(grain("roles:db", grains))

    def test_nested(self) -> None:
        """
        C{a:b:c} looks C{b} up in the dict C{a}, at any depth.
        """
        grains = {"tags": {"env": "prod", "team": {"name": "Ops"}}}
        self.assertTrue(grain("tags:env:prod", grains))
        self.assertFalse(grain("tags:env:dev", grains))
        self.assertTrue(grain("tags:team:name:ops", grains))
        self.assertTrue(grain("tags:team:name:O*", grains))

    def test_dictValueKeys(self) -> None:
        """
        For a dict-valued grain, the last part may name one of its keys, or
        be C{*} for "the grain exists".
        """
        grains = {"tags": {"env": "prod"}}
        self.assertTrue(grain("tags:env", grains))
        self.assertTrue(grain("tags:*", grains))
        self.assertFalse(grain("tags:team", grains))

    def test_emptyDictNeverMatches(self) -> None:
        """
        An empty dict is taken as a missing grain, as in Salt.
        """
        self.assertFalse(grain("tags:*", {"tags": {}}))

    def test_valueContainingDelimiter(self) -> None:
        """
        Deeper keys are tried first, then shorter keys with the rest as the
        value, so a value may contain the delimiter.
        """
        self.assertTrue(grain("url:http://x", {"url": "http://x"}))
        self.assertTrue(grain("a:b:c", {"a": "b:c"}))
        self.assertTrue(grain("a:b:c", {"a": {"b": "c"}}))

    def test_listIndex(self) -> None:
        """
        A numeric key indexes a list.
        """
        grains = {"disks": ["sda", "sdb"]}
        self.assertTrue(grain("disks:1:sdb", grains))
        self.assertFalse(grain("disks:0:sdb", grains))
        self.assertFalse(grain("disks:5:sdb", grains))

    def test_listOfDicts(self) -> None:
        """
        Keys are looked up in the dicts of a list of dicts.
        """
        grains = {"disks": [{"name": "sda"}, {"name": "sdb"}]}
        self.assertTrue(grain("disks:name:sda", grains))
        self.assertTrue(grain("disks:name:sdb", grains))
        self.assertFalse(grain("disks:name:sdc", grains))

    def test_numericKey(self) -> None:
        """
        A key that is not found as a string is tried as the number (or
        boolean) YAML would read it as, as Salt does.
        """
        self.assertTrue(grain("ports:80:http", {"ports": {80: "http"}}))
        self.assertTrue(grain("flags:true:on", {"flags": {True: "on"}}))
        self.assertFalse(grain("ports:81:http", {"ports": {80: "http"}}))

    def test_topLevelWildcard(self) -> None:
        """
        C{*:value} matches a minion with any top-level grain of that value.
        """
        self.assertTrue(grain("*:Debian", {"os": "Debian"}))
        self.assertTrue(grain("*:debian", {"roles": ["x", "Debian"]}))
        self.assertFalse(grain("*:Debian", {"os": "Ubuntu"}))

    def test_needsDelimiter(self) -> None:
        """
        A grain target without the delimiter raises L{TargetError} naming
        it.
        """
        e = self.assertRaises(TargetError, validateTarget, "os", "grain")
        self.assertIn("'os'", str(e))
        self.assertIn("':'", str(e))
        self.assertRaises(TargetError, validateTarget, "", "grain")
        self.assertRaises(TargetError, validateTarget, {"os": "x"}, "grain")

    def test_customDelimiter(self) -> None:
        """
        The C{delimiter} argument replaces C{:}.
        """
        grains = {"tags": {"env": "prod"}, "url": "http://x"}
        self.assertTrue(grain("tags|env|prod", grains, delimiter="|"))
        self.assertTrue(grain("url|http://x", grains, delimiter="|"))
        self.assertRaises(TargetError, validateTarget, "os:Debian", "grain", delimiter="|")
        self.assertEqual(
            checkMinions(["m"], "tags|env|prod", "grain", grainsById={"m": grains}, delimiter="|"),
            ["m"],
        )

    def test_noGrains(self) -> None:
        """
        On the minion, C{grains=None} means no grains: grain targets do not
        match.
        """
        self.assertFalse(matchMinion("m", "os:*", "grain"))
        self.assertFalse(matchMinion("m", "os:*", "grain", grains=None))


class GrainPcreTests(SynchronousTestCase):
    """
    C{grain_pcre} targets are grain targets whose value is a regular
    expression applied with C{re.match}.
    """

    def test_match(self) -> None:
        """
        The expression is anchored at the start of the value only.
        """
        grains = {"os": "Debian"}
        self.assertTrue(grain("os:Deb.*", grains, "grain_pcre"))
        self.assertTrue(grain("os:Deb", grains, "grain_pcre"))
        self.assertFalse(grain("os:Deb$", grains, "grain_pcre"))
        self.assertFalse(grain("os:ebian", grains, "grain_pcre"))
        self.assertTrue(grain("os:(debian|ubuntu)$", grains, "grain_pcre"))

    def test_caseInsensitive(self) -> None:
        """
        Matching ignores case, as Salt's lowercasing does.
        """
        self.assertTrue(grain("os:DEBIAN", {"os": "Debian"}, "grain_pcre"))
        self.assertTrue(grain("os:[a-z]+$", {"os": "Debian"}, "grain_pcre"))

    def test_upperCaseEscapes(self) -> None:
        """
        Upper-case escapes keep their meaning (Salt's lowercasing of the
        pattern would turn C{\\D} into C{\\d}).
        """
        self.assertFalse(grain(r"num:\D", {"num": "42"}, "grain_pcre"))
        self.assertTrue(grain(r"num:\d+$", {"num": 42}, "grain_pcre"))

    def test_listAndNested(self) -> None:
        """
        Lists and nested keys work as for C{grain}.
        """
        grains = {"roles": ["web", "db"], "ip": {"eth0": ["10.0.0.7"]}}
        self.assertTrue(grain("roles:d.", grains, "grain_pcre"))
        self.assertTrue(grain(r"ip:eth0:10\.0\.0\.\d$", grains, "grain_pcre"))
        self.assertFalse(grain(r"ip:eth0:10\.1", grains, "grain_pcre"))

    def test_delimiterInsideRegex(self) -> None:
        """
        A regex containing the delimiter is valid as long as one split into
        key and value gives a valid regex.
        """
        self.assertIsNone(validateTarget("foo:(a|b:c)", "grain_pcre"))
        self.assertTrue(grain("foo:(a|b:c)", {"foo": "b:c"}, "grain_pcre"))

    def test_invalid(self) -> None:
        """
        An invalid expression raises L{TargetError} naming it and the offset
        of the error.
        """
        e = self.assertRaises(TargetError, validateTarget, "os:Deb(", "grain_pcre")
        self.assertIn("'Deb('", str(e))
        self.assertIn("at position 6", str(e))

    def test_tooLong(self) -> None:
        """
        An expression longer than L{MAX_REGEX_LENGTH} is refused.
        """
        e = self.assertRaises(TargetError, validateTarget, "os:" + "a" * 5000, "grain_pcre")
        self.assertIn(f"the limit is {MAX_REGEX_LENGTH}", str(e))


class CompoundTests(SynchronousTestCase):
    """
    C{compound} targets combine words with C{and}, C{or}, C{not} and
    parentheses, as Salt does.
    """

    def test_issueExample(self) -> None:
        """
        The example of the issue: C{and} binds tighter than C{or}, C{not}
        tighter than C{and}.
        """
        self.assertEqual(
            compound(r"G@os:Debian and web* or L@a,b and not E@db\d+"), ["a", "b", "web1"]
        )

    def test_andBeforeOr(self) -> None:
        """
        C{x or y and z} is C{x or (y and z)}.
        """
        self.assertEqual(compound("web* or db* and G@os:Debian"), ["db1", "web1", "web2"])
        self.assertEqual(compound("( web* or db* ) and G@os:Debian"), ["db1", "web1"])

    def test_notBeforeAnd(self) -> None:
        """
        C{not x and y} is C{(not x) and y}; C{not} applies to a
        parenthesised group as a whole.
        """
        self.assertEqual(compound("not web* and G@os:Debian"), ["b", "db1"])
        self.assertEqual(compound("not ( web* and G@os:Debian )"), ["a", "b", "db1", "db2", "web2"])
        self.assertEqual(compound("not web* or G@os:Ubuntu"), ["a", "b", "db1", "db2", "web2"])

    def test_implicitAndBeforeNot(self) -> None:
        """
        A C{not} straight after a target or C{)} means C{and not}, as in
        Salt.
        """
        self.assertEqual(compound("web* not web1"), ["web2"])
        self.assertEqual(compound("G@os:Debian not b"), ["db1", "web1"])
        self.assertEqual(compound("( web* ) not web2"), ["web1"])
        self.assertEqual(compound("db1 or web* not web1"), ["db1", "web2"])

    def test_nestedParentheses(self) -> None:
        """
        Parentheses nest.
        """
        self.assertEqual(
            compound("( ( web1 or db1 ) and not ( G@os:Ubuntu or G@os:CentOS ) ) or a"),
            ["a", "db1", "web1"],
        )

    def test_words(self) -> None:
        """
        Plain words are globs on the id; C{E@} is a regex on the id
        (anchored at the start only); C{L@} a list; C{G@} a grain glob;
        C{P@} a grain regex.
        """
        self.assertEqual(compound("web?"), ["web1", "web2"])
        self.assertEqual(compound("E@db"), ["db1", "db2"])
        self.assertEqual(compound("E@b"), ["b"])
        self.assertEqual(compound("L@a,db2"), ["a", "db2"])
        self.assertEqual(compound("G@roles:db"), ["db1", "db2"])
        self.assertEqual(compound("P@os:(debian|ubuntu)$"), ["b", "db1", "web1", "web2"])

    def test_wordDelimiter(self) -> None:
        """
        C{G|@} and C{P|@} choose C{|} as the grain delimiter.
        """
        self.assertEqual(compound("G|@os|Debian"), ["b", "db1", "web1"])
        self.assertEqual(compound("P|@os|cent"), ["a", "db2"])

    def test_delimiterArgumentIgnored(self) -> None:
        """
        The C{delimiter} argument applies to C{grain} targets only; compound
        words choose theirs, as in Salt.
        """
        self.assertTrue(
            matchMinion("m", "G@os:Debian", "compound", grains={"os": "Debian"}, delimiter="|")
        )

    def test_listOfWords(self) -> None:
        """
        A compound target may be a list of words.
        """
        self.assertEqual(compound(["G@os:Debian", "and", "web*"]), ["web1"])
        self.assertEqual(compound(("(", "web1", "or", "a", ")", "and", "G@os:CentOS")), ["a"])

    def test_whitespace(self) -> None:
        """
        Any whitespace separates words.
        """
        self.assertEqual(compound("  web1\tor\n db1  "), ["db1", "web1"])

    def test_operatorsAreLowerCase(self) -> None:
        """
        Only lower-case C{and}, C{or} and C{not} are operators.
        """
        e = self.assertRaises(TargetError, validateTarget, "web1 OR web2", "compound")
        self.assertIn("before 'OR' at position 5", str(e))

    def test_starInCompound(self) -> None:
        """
        C{*} matches every minion, C{not *} none.
        """
        self.assertEqual(compound("*"), IDS)
        self.assertEqual(compound("not *"), [])

    def test_balancedParenthesesInGlob(self) -> None:
        """
        A word with balanced parentheses is a glob like any other, and a
        regex may hold parentheses.
        """
        self.assertTrue(matchMinion("web(1)", "web(1)", "compound"))
        self.assertEqual(compound("E@(web|db)1"), ["db1", "web1"])


class MalformedCompoundTests(SynchronousTestCase):
    """
    A malformed compound target raises L{TargetError} naming the 0-based
    character offset of the problem.
    """

    def assertMalformed(self, tgt: object, message: str, position: int | None = None) -> None:
        """
        Assert that C{tgt} is refused with C{message} in the error, and that
        the error's C{position} is C{position}.
        """
        e = self.assertRaises(TargetError, validateTarget, tgt, "compound")
        self.assertIn(message, str(e))
        self.assertEqual(e.position, position)

    def test_unbalancedClose(self) -> None:
        """
        A C{)} without its C{(} is named with its offset.
        """
        e = self.assertRaises(TargetError, validateTarget, "( web* or db10 ) ) or x", "compound")
        self.assertEqual(str(e), "compound target: unbalanced ')' at position 17")
        self.assertEqual(e.position, 17)
        self.assertEqual(e.expression, "( web* or db10 ) ) or x")
        self.assertMalformed(") web1", "unbalanced ')' at position 0", 0)

    def test_unclosedOpen(self) -> None:
        """
        A C{(} never closed is named with its offset.
        """
        self.assertMalformed("( web1", "unclosed '(' at position 0", 0)
        self.assertMalformed("web1 and ( db1 or ( db2 )", "unclosed '(' at position 9", 9)
        self.assertMalformed("(", "unclosed '(' at position 0", 0)

    def test_dangling(self) -> None:
        """
        An operator with nothing after it is dangling.
        """
        self.assertMalformed("web* and", "dangling 'and' at position 5", 5)
        self.assertMalformed("web* or", "dangling 'or' at position 5", 5)
        self.assertMalformed("not", "dangling 'not' at position 0", 0)
        self.assertMalformed("web1 and not", "dangling 'not' at position 9", 9)
        self.assertMalformed("( web1 and )", "dangling 'and' at position 7", 7)

    def test_missingLeftOperand(self) -> None:
        """
        C{and} or C{or} at the start, after C{(} or after another operator
        is refused.
        """
        self.assertMalformed("and web1", "'and' at position 0 has no left operand", 0)
        self.assertMalformed("( or web1 )", "'or' at position 2 has no left operand", 2)
        self.assertMalformed("web1 and or db1", "'or' at position 9 has no left operand", 9)
        self.assertMalformed("not and web1", "'and' at position 4 has no left operand", 4)

    def test_empty(self) -> None:
        """
        An empty target, or one of whitespace only, is refused.
        """
        for tgt in ["", "   ", [], [" "]]:
            self.assertMalformed(tgt, "compound target: empty expression")

    def test_emptyParentheses(self) -> None:
        """
        C{( )} is refused.
        """
        self.assertMalformed("web1 or ( )", "empty parentheses at position 8", 8)

    def test_missingOperator(self) -> None:
        """
        Two targets in a row, or a target followed by C{(}, need an operator
        between them.
        """
        self.assertMalformed("web1 db1", "missing 'and' or 'or' before 'db1' at position 5", 5)
        self.assertMalformed("web1 ( db1 )", "missing 'and' or 'or' before '(' at position 5", 5)
        self.assertMalformed("( web1 ) db1", "before 'db1' at position 9", 9)

    def test_doubleNot(self) -> None:
        """
        C{not not} is refused (it is a syntax error in Salt too).
        """
        self.assertMalformed("not not web1", "'not' at position 4 cannot follow 'not'", 4)
        self.assertMalformed("web1 and not not db1", "at position 13", 13)

    def test_unknownEngine(self) -> None:
        """
        An unknown prefix is refused by name.
        """
        self.assertMalformed("X@foo", "unknown target engine 'X@' at position 0", 0)
        self.assertMalformed("web1 or Q@x", "unknown target engine 'Q@' at position 8", 8)

    def test_unsupportedEngine(self) -> None:
        """
        Salt's engines that salttwist lacks (range, resource, managing
        minion) are refused by name, listing the supported ones.
        """
        for word in ["R@%x", "G@os:x or T@y", "M@x"]:
            e = self.assertRaises(TargetError, validateTarget, word, "compound")
            self.assertIn("is not supported", str(e))
            self.assertIn("G@, P@, I@, J@, S@, E@, L@, N@", str(e))

    def test_emptyPattern(self) -> None:
        """
        A prefix with nothing after it is refused.
        """
        self.assertMalformed("G@", "nothing after 'G@' at position 0", 0)
        self.assertMalformed("web1 or E@", "nothing after 'E@' at position 8", 8)
        self.assertMalformed("L@,", "list at position 0 names no minion", 0)

    def test_badRegex(self) -> None:
        """
        An invalid regular expression is named, with the offset of the
        error in the whole target.
        """
        self.assertMalformed("E@db(", "invalid regular expression 'db(' at position 4", 4)
        self.assertMalformed("web1 or E@db[", "invalid regular expression 'db[' at position 12", 12)
        self.assertMalformed("P@os:Deb(", "invalid regular expression 'Deb(' at position 8", 8)

    def test_regexTooLong(self) -> None:
        """
        A regular expression longer than L{MAX_REGEX_LENGTH} is refused.
        """
        self.assertMalformed(
            "web1 or E@" + "a" * (MAX_REGEX_LENGTH + 1), f"the limit is {MAX_REGEX_LENGTH}", 10
        )

    def test_grainWithoutDelimiter(self) -> None:
        """
        A grain word without its delimiter is refused.
        """
        self.assertMalformed("web1 or G@os", "grain target 'os' at position 10", 10)

    def test_gluedParentheses(self) -> None:
        """
        Parentheses must stand apart as words; Salt would silently take
        C{(web*} as a literal glob.
        """
        self.assertMalformed("(web* or db*)", "separated from targets by spaces: '(web*'", 0)
        self.assertMalformed("( web* or db*)", "'db*)' at position 10", 10)
        self.assertMalformed("( G@os:Debian)", "'G@os:Debian)' at position 2", 2)

    def test_tooDeep(self) -> None:
        """
        Parentheses nest at most L{MAX_DEPTH} levels.
        """
        ok = "( " * MAX_DEPTH + "web1" + " )" * MAX_DEPTH
        self.assertEqual(checkMinions(["web1"], ok, "compound"), ["web1"])
        deep = "( " * (MAX_DEPTH + 1) + "web1" + " )" * (MAX_DEPTH + 1)
        self.assertMalformed(deep, f"nested deeper than {MAX_DEPTH} levels", MAX_DEPTH * 2)

    def test_badTypes(self) -> None:
        """
        A compound target must be a string or a list of strings.
        """
        self.assertMalformed(5, "a compound target is a string or a list of words")
        self.assertMalformed(["web1", 2], "a list of words must hold only strings")

    def test_listPositions(self) -> None:
        """
        For a list of words, offsets are in the words joined by spaces.
        """
        e = self.assertRaises(TargetError, validateTarget, ["web1", "and"], "compound")
        self.assertIn("dangling 'and' at position 5", str(e))
        self.assertEqual(e.expression, "web1 and")

    def test_matchMinionRaises(self) -> None:
        """
        L{matchMinion} and L{checkMinions} raise for a malformed target too.
        """
        self.assertRaises(TargetError, matchMinion, "web1", "web1 and", "compound")
        self.assertRaises(TargetError, checkMinions, ["web1"], "web1 and", "compound")


NODEGROUPS: dict[str, Any] = {
    "webs": "web*",
    "debian": "G@os:Debian",
    "dbs": ["db1", "db2"],
    "pair": "web1 db2",
    "debwebs": "N@webs and N@debian",
    "either": "web1 or web2",
    "eitherUbuntu": "N@either and G@os:Ubuntu",
    "notdb": ["not", "db*"],
    "regexy": "web[12]",
    "self": "N@self",
    "ping": "N@pong or web1",
    "pong": "N@ping",
    "ghostref": "web1 or N@ghost",
    "bad": "web1 and",
    "empty": "",
    "number": 5,
}


def nodegroup(name: str, nodegroups: dict[str, Any] = NODEGROUPS) -> list[str]:
    """
    The minions of L{GRAINS} in nodegroup C{name}, asked of each minion.
    """
    return [
        m for m in IDS if matchMinion(m, name, "nodegroup", grains=GRAINS[m], nodegroups=nodegroups)
    ]


class NodegroupTests(SynchronousTestCase):
    """
    C{nodegroup} targets name a group from the master's C{nodegroups}.
    """

    def test_compoundString(self) -> None:
        """
        A nodegroup defined by a compound string matches what the string
        does.
        """
        self.assertEqual(nodegroup("webs"), ["web1", "web2"])
        self.assertEqual(nodegroup("debian"), ["b", "db1", "web1"])
        self.assertEqual(nodegroup("either"), ["web1", "web2"])

    def test_listOfIds(self) -> None:
        """
        A list of ids is a list target.
        """
        self.assertEqual(nodegroup("dbs"), ["db1", "db2"])

    def test_stringOfIds(self) -> None:
        """
        A string of ids without operators, wildcards or prefixes is a list
        target, as in Salt.
        """
        self.assertEqual(nodegroup("pair"), ["db2", "web1"])

    def test_listOfWords(self) -> None:
        """
        A list holding operators is a compound target as a list of words.
        """
        self.assertEqual(nodegroup("notdb"), ["a", "b", "web1", "web2"])

    def test_regexQuirk(self) -> None:
        """
        As in Salt, an operator-free nodegroup whose words hold a regex
        character (and no C{*}) is read as a regex, anchored at the start
        only: C{web[12]} matches C{web10}.
        """
        ids = ["web1", "web2", "web10", "web3"]
        self.assertEqual(
            checkMinions(ids, "regexy", "nodegroup", nodegroups=NODEGROUPS),
            ["web1", "web10", "web2"],
        )

    def test_nested(self) -> None:
        """
        C{N@group} refers to another nodegroup.
        """
        self.assertEqual(nodegroup("debwebs"), ["web1"])
        self.assertEqual(compound("N@dbs or web1", NODEGROUPS), ["db1", "db2", "web1"])

    def test_nestedIsParenthesised(self) -> None:
        """
        A referenced nodegroup is evaluated as a whole, as if in
        parentheses.
        """
        self.assertEqual(nodegroup("eitherUbuntu"), ["web2"])
        self.assertEqual(compound("not N@either", NODEGROUPS), ["a", "b", "db1", "db2"])

    def test_cycleSelf(self) -> None:
        """
        A nodegroup referring to itself raises L{TargetError}.
        """
        e = self.assertRaises(TargetError, validateTarget, "self", "nodegroup", NODEGROUPS)
        self.assertIn("nodegroup cycle", str(e))
        self.assertIn("self -> self", str(e))

    def test_cycleMutual(self) -> None:
        """
        A cycle through several nodegroups is named in full, also from a
        compound target.
        """
        e = self.assertRaises(TargetError, validateTarget, "ping", "nodegroup", NODEGROUPS)
        self.assertIn("ping -> pong -> ping", str(e))
        e = self.assertRaises(
            TargetError, validateTarget, "a or N@pong", "compound", nodegroups=NODEGROUPS
        )
        self.assertIn("pong -> ping -> pong", str(e))

    def test_unknown(self) -> None:
        """
        An unknown nodegroup is named, with the defined ones.
        """
        e = self.assertRaises(TargetError, validateTarget, "ghost", "nodegroup", NODEGROUPS)
        self.assertIn("unknown nodegroup 'ghost'", str(e))
        self.assertIn("debian, debwebs", str(e))
        e = self.assertRaises(TargetError, validateTarget, "ghostref", "nodegroup", NODEGROUPS)
        self.assertIn("nodegroup 'ghostref': unknown nodegroup 'ghost' at position 8", str(e))
        e = self.assertRaises(TargetError, validateTarget, "web1 or N@x", "compound", NODEGROUPS)
        self.assertIn("unknown nodegroup 'x' at position 8", str(e))

    def test_noNodegroups(self) -> None:
        """
        Without nodegroups, every nodegroup is unknown.
        """
        e = self.assertRaises(TargetError, validateTarget, "webs", "nodegroup")
        self.assertIn("(defined: none)", str(e))
        self.assertRaises(TargetError, matchMinion, "web1", "N@webs", "compound")

    def test_errorInDefinition(self) -> None:
        """
        An error in a nodegroup's definition names the nodegroup, and its
        position is in the definition.
        """
        e = self.assertRaises(TargetError, validateTarget, "bad", "nodegroup", NODEGROUPS)
        self.assertEqual(str(e), "nodegroup 'bad': dangling 'and' at position 5")
        self.assertEqual(e.expression, "web1 and")
        self.assertEqual(e.position, 5)

    def test_badDefinitions(self) -> None:
        """
        An empty nodegroup, or one that is neither a string nor a list, is
        refused; so is a name that is not a string.
        """
        e = self.assertRaises(TargetError, validateTarget, "empty", "nodegroup", NODEGROUPS)
        self.assertIn("nodegroup 'empty' is empty", str(e))
        e = self.assertRaises(TargetError, validateTarget, "number", "nodegroup", NODEGROUPS)
        self.assertIn("nodegroup 'number' is int", str(e))
        self.assertRaises(TargetError, validateTarget, ["webs"], "nodegroup", NODEGROUPS)
        self.assertRaises(TargetError, validateTarget, "", "nodegroup", NODEGROUPS)

    def test_nonStringWords(self) -> None:
        """
        Items of a list nodegroup that are not strings are used as their
        C{str}, as in Salt (YAML may read an id as a number).
        """
        self.assertEqual(
            checkMinions(["123", "web1"], "g", "nodegroup", nodegroups={"g": [123]}), ["123"]
        )

    def test_sharedReferences(self) -> None:
        """
        A nodegroup may be referenced several times.
        """
        groups = {"g0": "N@g1 and not ( N@g1 and db* )", "g1": "web* or db*"}
        self.assertEqual(
            checkMinions(["web1", "db1", "a"], "g0", "nodegroup", nodegroups=groups), ["web1"]
        )

    def test_tooLarge(self) -> None:
        """
        A target that grows past L{MAX_SIZE} words and operators once its
        nodegroups are expanded is refused, promptly: forty levels that each
        refer twice to the next would be 2**40 words.
        """
        groups = {f"g{i}": f"N@g{i + 1} or N@g{i + 1}" for i in range(40)}
        groups["g40"] = "web1"
        e = self.assertRaises(TargetError, validateTarget, "g0", "nodegroup", groups)
        self.assertIn(f"more than {MAX_SIZE} words and operators", str(e))
        self.assertRaises(TargetError, expandNodegroup, "g0", groups)

    def test_tooDeep(self) -> None:
        """
        Nodegroups nest at most L{MAX_DEPTH} levels.
        """
        groups = {f"g{i}": f"N@g{i + 1}" for i in range(MAX_DEPTH + 5)}
        groups[f"g{MAX_DEPTH + 5}"] = "web1"
        e = self.assertRaises(TargetError, validateTarget, "g0", "nodegroup", groups)
        self.assertIn(f"nested deeper than {MAX_DEPTH} levels", str(e))

    def test_expand(self) -> None:
        """
        L{expandNodegroup} gives the words of an equivalent compound target,
        with referenced nodegroups in parentheses.
        """
        self.assertEqual(
            expandNodegroup("debwebs", NODEGROUPS),
            ["(", "web*", ")", "and", "(", "G@os:Debian", ")"],
        )
        self.assertEqual(expandNodegroup("dbs", NODEGROUPS), ["L@db1,db2"])
        self.assertEqual(expandNodegroup("regexy", NODEGROUPS), ["E@web[12]"])
        self.assertEqual(expandNodegroup("notdb", NODEGROUPS), ["not", "db*"])
        self.assertRaises(TargetError, expandNodegroup, "ping", NODEGROUPS)
        self.assertRaises(TargetError, expandNodegroup, "ghost", NODEGROUPS)

    def test_expandEquivalent(self) -> None:
        """
        The expansion of every valid nodegroup matches the same minions as
        the nodegroup.
        """
        for name in ["webs", "debian", "dbs", "pair", "debwebs", "eitherUbuntu", "notdb"]:
            words = expandNodegroup(name, NODEGROUPS)
            self.assertEqual(compound(words), nodegroup(name), name)


class GreedyCheckMinionsTests(SynchronousTestCase):
    """
    L{checkMinions} includes a minion whose grains are unknown whenever the
    target may match it.
    """

    def test_unknownIncluded(self) -> None:
        """
        A minion absent from C{grainsById}, or mapped to C{None}, is
        included by a grain target.
        """
        grainsById = {"web1": {"os": "Debian"}, "web2": {"os": "Ubuntu"}, "web3": None}
        self.assertEqual(
            checkMinions(["web1", "web2", "web3", "web4"], "os:Debian", "grain", grainsById),
            ["web1", "web3", "web4"],
        )
        self.assertEqual(
            checkMinions(["web2", "web4"], "os:Deb.*", "grain_pcre", grainsById), ["web4"]
        )

    def test_noGrainsAtAll(self) -> None:
        """
        Without C{grainsById}, a grain target includes every minion.
        """
        self.assertEqual(checkMinions(MINIONS, "os:Debian", "grain"), sorted(MINIONS))

    def test_negationStillIncludesUnknown(self) -> None:
        """
        C{not G@...} also includes a minion whose grains are unknown: it may
        match.
        """
        grainsById = {"web1": {"os": "Debian"}, "web2": {"os": "Ubuntu"}}
        self.assertEqual(
            checkMinions(["web1", "web2", "web3"], "not G@os:Debian", "compound", grainsById),
            ["web2", "web3"],
        )

    def test_idWordsStillDecide(self) -> None:
        """
        Words on the id are decided even when grains are unknown.
        """
        ids = ["web1", "db3", "a"]
        self.assertEqual(
            checkMinions(ids, "G@os:Debian and db*", "compound", {"web1": {"os": "Debian"}}),
            ["db3"],
        )
        self.assertEqual(
            checkMinions(ids, "G@os:Debian or a", "compound", {"db3": {"os": "CentOS"}}),
            ["a", "web1"],
        )
        self.assertEqual(
            checkMinions(ids, "not ( G@os:Debian or web* )", "compound", {}), ["a", "db3"]
        )

    def test_knownGrainsExact(self) -> None:
        """
        With every minion's grains known, L{checkMinions} gives exactly the
        minions L{matchMinion} accepts.
        """
        for tgt in [
            "G@os:Debian",
            "not G@os:Debian",
            "G@roles:web or E@db",
            "( G@os:CentOS and not a ) or ( web* and not G@os:Ubuntu )",
        ]:
            self.assertEqual(checkMinions(IDS, tgt, "compound", GRAINS), compound(tgt), tgt)

    def test_evaluate(self) -> None:
        """
        L{TargetMatcher.evaluate} is three-valued; L{TargetMatcher.matches}
        treats missing grains as no grains.
        """
        matcher = compileTarget("G@os:Debian and db*", "compound")
        self.assertIsInstance(matcher, TargetMatcher)
        self.assertTrue(matcher.usesGrains)
        self.assertIsNone(matcher.evaluate("db1", None))
        self.assertIs(matcher.evaluate("web1", None), False)
        self.assertIs(matcher.evaluate("db1", {"os": "Debian"}), True)
        self.assertFalse(matcher.matches("db1"))
        self.assertTrue(matcher.matches("db1", {"os": "debian"}))
        self.assertFalse(compileTarget("web* or L@a", "compound").usesGrains)

    def test_sortedAndDistinct(self) -> None:
        """
        The result is sorted and without duplicates.
        """
        self.assertEqual(checkMinions(["b", "a", "b"], "*"), ["a", "b"])
        self.assertEqual(checkMinions(["b", "a", "b"], "os:x", "grain"), ["a", "b"])

    def test_parsedOnce(self) -> None:
        """
        L{checkMinions} parses a compound target once, however many
        minions there are.
        """
        calls = []
        parse = targeting._Parser.parse

        def counting(self: Any) -> Any:
            calls.append(1)
            return parse(self)

        self.patch(targeting._Parser, "parse", counting)
        ids = [f"web{i}" for i in range(1000)]
        result = checkMinions(ids, "web1* and not web10 and not test_parsedOnce", "compound")
        self.assertEqual(len(result), 110)
        self.assertEqual(len(calls), 1)


class TargetTypeTests(SynchronousTestCase):
    """
    Unknown target types are refused by name.
    """

    def test_targetTypes(self) -> None:
        """
        Every Salt type of the issue is supported.
        """
        self.assertEqual(
            set(TARGET_TYPES),
            {
                "glob",
                "pcre",
                "list",
                "grain",
                "grain_pcre",
                "pillar",
                "pillar_pcre",
                "pillar_exact",
                "ipcidr",
                "compound",
                "nodegroup",
            },
        )

    def test_unknownType(self) -> None:
        """
        An unknown type raises L{TargetError} naming the type and every
        supported type.
        """
        e = self.assertRaises(TargetError, checkMinions, MINIONS, "10.0.0.0/8", "range")
        message = str(e)
        self.assertIn("'range'", message)
        for supported in TARGET_TYPES:
            self.assertIn(supported, message)
        self.assertRaises(TargetError, matchMinion, "web1", "*", "Glob")
        self.assertRaises(TargetError, validateTarget, "*", None)  # type: ignore[arg-type]

    def test_validTargets(self) -> None:
        """
        L{validateTarget} accepts a valid target of each type.
        """
        self.assertIsNone(validateTarget("*", "glob"))
        self.assertIsNone(validateTarget("a,b", "list"))
        self.assertIsNone(validateTarget(["a"], "list"))
        self.assertIsNone(validateTarget(r"web\d+", "pcre"))
        self.assertIsNone(validateTarget("os:Debian", "grain"))
        self.assertIsNone(validateTarget("os:Deb.*", "grain_pcre"))
        self.assertIsNone(validateTarget("G@os:Debian and not web1", "compound"))
        self.assertIsNone(validateTarget("webs", "nodegroup", nodegroups=NODEGROUPS))

    def test_targetErrorIsValueError(self) -> None:
        """
        L{TargetError} is a L{ValueError}; its C{position} and
        C{expression} are C{None} when the problem is not at one place.
        """
        self.assertTrue(issubclass(TargetError, ValueError))
        e = self.assertRaises(TargetError, validateTarget, "", "glob")
        self.assertIsNone(e.position)
        self.assertIsNone(e.expression)


class CheckMinionsTests(SynchronousTestCase):
    """
    L{checkMinions} returns the targeted ids, sorted.
    """

    def test_sorted(self) -> None:
        """
        The result is sorted whatever the input order.
        """
        self.assertEqual(checkMinions(["c", "a", "b"], "*"), ["a", "b", "c"])
        self.assertEqual(checkMinions(iter(["web2", "web1"]), "web*"), ["web1", "web2"])

    def test_noMatch(self) -> None:
        """
        A valid target that matches nobody gives an empty list.
        """
        self.assertEqual(checkMinions(MINIONS, "nope*"), [])
        self.assertEqual(checkMinions([], "*"), [])
        self.assertEqual(checkMinions([], "os:x", "grain"), [])
