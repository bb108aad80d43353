# -*- test-case-name: tests.test_targeting_property -*-
"""
Seeded random property tests for L{salttwist.targeting}: the minions the
master expects are exactly the minions that decide to run the job, with
grain, pillar and ipcidr words (hypothesis tests of pillar targets are in
L{tests.test_targeting_pillar}).
"""

from __future__ import annotations

import random
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from salttwist.targeting import (
    TargetMatcher,
    checkMinions,
    compileTarget,
    expandNodegroup,
    matchMinion,
)

SEED = 20240604
MINION_COUNT = 200
EXPRESSION_COUNT = 300

PREFIXES = ["web", "db", "cache", "app", "lb"]
OSES = ["Debian", "Ubuntu", "CentOS", "debian", "Arch"]
ROLES = ["web", "db", "cache", "queue", "mail"]

GLOBS = ["web*", "db?", "*1", "cache[0-4]*", "app1*", "*", "w*b*", "lb[!0]*", "nomatch*"]
REGEXES = [r"E@web\d+", r"E@db[0-9]$", r"E@(web|db)1", r"E@.*5", r"E@c", r"E@app\d{2}$"]
GRAIN_WORDS = [
    "G@os:Debian",
    "G@os:deb*",
    "G@os:*",
    "G@roles:web",
    "G@roles:d*",
    "G@cpu:count:4",
    "G@cpu:count:[1-3]",
    "G@cpu:model:intel*",
    "G@tags:*",
    "G@tags:env",
    "G@tags:env:prod",
    "G@*:CentOS",
    "G@num:1?",
    "G@flag:true",
    "G@nic:eth0:10.*",
    "G@nic:0:x",
    "G@missing:x",
    "G|@tags|env|dev",
    "P@os:(debian|ubuntu)$",
    "P@roles:d.",
    r"P@num:[0-3]\d?$",
    r"P@nic:eth0:10\.0\.1",
    "P|@cpu|count|[48]",
]
PILLAR_WORDS = [
    "I@role:web",
    "I@role:d*",
    "I@env:PROD",
    "I@net:dc:paris",
    "I@apps:*",
    "I@apps:redis",
    "I|@net|vlan|1?",
    "J@role:^(web|db)$",
    "J@net:dc:^l",
    "S@10.0.0.0/8",
    "S@10.0.1.0/24",
    "S@10.0.2.3",
    "S@::1",
    "S@fe80::/10",
]


def makeMinions(rng: random.Random) -> dict[str, dict[str, Any]]:
    """
    Generate L{MINION_COUNT} minions with random grains: some grains are
    missing, some are lists, some nested dicts, some numbers or booleans.
    """
    minions: dict[str, dict[str, Any]] = {}
    while len(minions) < MINION_COUNT:
        minionId = f"{rng.choice(PREFIXES)}{rng.randrange(100)}"
        grains: dict[str, Any] = {"os": rng.choice(OSES)}
        if rng.random() < 0.8:
            grains["roles"] = rng.sample(ROLES, rng.randrange(4))
        if rng.random() < 0.7:
            grains["cpu"] = {
                "count": rng.choice([1, 2, 4, 8]),
                "model": rng.choice(["Intel", "AMD"]),
            }
        if rng.random() < 0.6:
            tags: dict[str, Any] = {}
            if rng.random() < 0.7:
                tags["env"] = rng.choice(["prod", "dev"])
            grains["tags"] = tags
        grains["num"] = rng.randrange(40)
        grains["flag"] = rng.random() < 0.5
        if rng.random() < 0.5:
            grains["nic"] = {"eth0": [f"10.0.{rng.randrange(3)}.{rng.randrange(256)}"]}
        if rng.random() < 0.8:
            grains["ipv4"] = [f"10.0.{rng.randrange(3)}.{rng.randrange(8)}", "127.0.0.1"]
            grains["ipv6"] = rng.sample(["::1", "fe80::1", "2001:db8::1"], rng.randrange(3))
        minions[minionId] = grains
    return minions


def makePillars(rng: random.Random, ids: list[str]) -> dict[str, dict[str, Any]]:
    """
    A random pillar for each of C{ids}: some keys missing, some lists,
    some nested dicts.
    """
    pillars: dict[str, dict[str, Any]] = {}
    for minionId in ids:
        pillar: dict[str, Any] = {}
        if rng.random() < 0.8:
            pillar["role"] = rng.choice(ROLES)
        if rng.random() < 0.6:
            pillar["env"] = rng.choice(["prod", "dev"])
        if rng.random() < 0.6:
            pillar["net"] = {"dc": rng.choice(["Paris", "Lyon"]), "vlan": rng.randrange(5, 25)}
        if rng.random() < 0.5:
            pillar["apps"] = rng.sample(["nginx", "redis", "postgres"], rng.randrange(3))
        pillars[minionId] = pillar
    return pillars


def makeWord(rng: random.Random, ids: list[str], groups: list[str]) -> str:
    """
    One random target word: a glob, a regex, a list, a grain word, or a
    reference to one of C{groups}.
    """
    kind = rng.random()
    if kind < 0.25:
        return rng.choice(GLOBS)
    if kind < 0.4:
        return rng.choice(REGEXES)
    if kind < 0.5:
        return "L@" + ",".join(rng.sample(ids, rng.randrange(1, 6)))
    if kind < 0.75:
        return rng.choice(GRAIN_WORDS)
    if kind < 0.9 or not groups:
        return rng.choice(PILLAR_WORDS)
    return "N@" + rng.choice(groups)


def makeExpression(
    rng: random.Random, ids: list[str], groups: list[str], depth: int = 0
) -> list[str]:
    """
    A random compound expression as a list of words: terms joined by
    C{and}/C{or}, each maybe negated (never C{not not}), maybe a
    parenthesised sub-expression; sometimes C{and} before C{not} is left
    out, as Salt allows.
    """
    words: list[str] = []
    for i in range(rng.randrange(1, 4)):
        negated = rng.random() < 0.3
        if i:
            if negated and rng.random() < 0.3:
                pass  # "x not y" means "x and not y"
            else:
                words.append(rng.choice(["and", "or"]))
        if negated:
            words.append("not")
        if depth < 3 and rng.random() < 0.3:
            words += ["(", *makeExpression(rng, ids, groups, depth + 1), ")"]
        else:
            words.append(makeWord(rng, ids, groups))
    return words


def makeNodegroups(rng: random.Random, ids: list[str]) -> dict[str, Any]:
    """
    Random nodegroups C{ng0}...C{ng5}: each a compound string, a list of
    words or a list of ids; C{ngI} refers only to C{ngJ} with J > I, so
    there is no cycle.
    """
    groups: dict[str, Any] = {}
    for i in reversed(range(6)):
        later = [f"ng{j}" for j in range(i + 1, 6)]
        kind = rng.random()
        if kind < 0.2:
            groups[f"ng{i}"] = rng.sample(ids, rng.randrange(1, 5))
        elif kind < 0.5:
            groups[f"ng{i}"] = makeExpression(rng, ids, later)
        else:
            groups[f"ng{i}"] = " ".join(makeExpression(rng, ids, later))
    return groups


def saltEvaluate(
    words: list[str],
    minionId: str,
    grains: dict[str, Any],
    nodegroups: dict[str, Any],
    pillar: dict[str, Any],
) -> bool:
    """
    Salt's own algorithm (C{salt.matchers.compound_match}), as an oracle:
    replace each target word by its result, insert C{and} before a C{not}
    that follows a target, and evaluate the Python expression. C{eval} is
    safe here: the string holds only C{True}, C{False}, operators and
    parentheses.
    """
    results: list[str] = []
    for word in words:
        if word in ("and", "or", "not", "(", ")"):
            if word == "not" and results and results[-1] not in ("and", "or", "("):
                results.append("and")
            results.append(word)
        else:
            results.append(
                str(
                    matchMinion(
                        minionId,
                        word,
                        "compound",
                        grains=grains,
                        nodegroups=nodegroups,
                        pillar=pillar,
                    )
                )
            )
    return bool(eval(" ".join(results)))  # noqa: S307


class CheckMinionsPropertyTests(SynchronousTestCase):
    """
    Over random minions and random compound targets, the master's expected
    minions agree with each minion's own decision.
    """

    def setUp(self) -> None:
        """
        Generate the minions, nodegroups and expressions from L{SEED}.
        """
        self.rng = random.Random(SEED)
        self.grains = makeMinions(self.rng)
        self.ids = sorted(self.grains)
        self.pillars = makePillars(self.rng, self.ids)
        self.nodegroups = makeNodegroups(self.rng, self.ids)
        groups = sorted(self.nodegroups)
        self.expressions = [
            makeExpression(self.rng, self.ids, groups) for _ in range(EXPRESSION_COUNT)
        ]

    def test_generatorCoverage(self) -> None:
        """
        The generated expressions are varied: none is invalid, and across
        them every kind of word and operator appears and targets select
        anywhere from no minion to every minion.
        """
        text = " ".join(" ".join(words) for words in self.expressions)
        for fragment in ["G@", "P@", "I@", "J@", "S@", "E@", "L@", "N@", " and ", " or ", "not "]:
            self.assertIn(fragment, text)
        self.assertIn("( ", text)
        sizes = {
            len(
                checkMinions(
                    self.ids, w, "compound", self.grains, self.nodegroups, pillarById=self.pillars
                )
            )
            for w in self.expressions
        }
        self.assertIn(0, sizes)
        self.assertIn(len(self.ids), sizes)
        self.assertGreater(len(sizes), 50)

    def test_masterEqualsMinions(self) -> None:
        """
        With every minion's grains known, L{checkMinions} is exactly the
        set of minions for which L{matchMinion} is true, for string and
        list forms of each expression.
        """
        for words in self.expressions:
            expr = " ".join(words)
            expected = [
                m
                for m in self.ids
                if matchMinion(
                    m,
                    expr,
                    "compound",
                    grains=self.grains[m],
                    nodegroups=self.nodegroups,
                    pillar=self.pillars[m],
                )
            ]
            for tgt in (expr, words):
                self.assertEqual(
                    checkMinions(
                        self.ids,
                        tgt,
                        "compound",
                        grainsById=self.grains,
                        nodegroups=self.nodegroups,
                        pillarById=self.pillars,
                    ),
                    expected,
                    expr,
                )

    def test_sameAsSaltAlgorithm(self) -> None:
        """
        Each minion's decision is the one Salt's C{eval}-based compound
        matcher reaches, so precedence and the implicit C{and} before
        C{not} are Salt's.
        """
        for words in self.expressions:
            matcher = compileTarget(words, "compound", nodegroups=self.nodegroups)
            for m in self.ids[::4]:
                self.assertEqual(
                    matcher.matches(m, self.grains[m], self.pillars[m]),
                    saltEvaluate(words, m, self.grains[m], self.nodegroups, self.pillars[m]),
                    (" ".join(words), m),
                )

    def test_unknownGrainsGreedy(self) -> None:
        """
        When the master does not know some minions' grains or pillar, it
        still expects every minion that runs the job, and it decides exactly
        for the minions whose grains and pillar it knows.
        """
        noGrains = set(self.rng.sample(self.ids, len(self.ids) // 3))
        noPillar = set(self.rng.sample(self.ids, len(self.ids) // 3))
        hidden = noGrains | noPillar
        known = {m: g for m, g in self.grains.items() if m not in noGrains}
        knownPillars = {m: p for m, p in self.pillars.items() if m not in noPillar}
        for words in self.expressions:
            matcher = compileTarget(words, "compound", nodegroups=self.nodegroups)
            expected = set(
                checkMinions(
                    self.ids,
                    words,
                    "compound",
                    known,
                    nodegroups=self.nodegroups,
                    pillarById=knownPillars,
                )
            )
            actual = {m for m in self.ids if matcher.matches(m, self.grains[m], self.pillars[m])}
            self.assertLessEqual(actual, expected, " ".join(words))
            self.assertEqual(expected - hidden, actual - hidden, " ".join(words))
            self.assertEqual(
                expected & hidden,
                {
                    m
                    for m in hidden
                    if matcher.evaluate(m, known.get(m), knownPillars.get(m)) is not False
                },
            )

    def test_nodegroupsEqualExpansion(self) -> None:
        """
        Every nodegroup selects the same minions as its expansion into a
        compound target, both on the master and on each minion.
        """
        for name in sorted(self.nodegroups):
            words = expandNodegroup(name, self.nodegroups)
            byGroup = checkMinions(
                self.ids,
                name,
                "nodegroup",
                self.grains,
                nodegroups=self.nodegroups,
                pillarById=self.pillars,
            )
            byWords = checkMinions(
                self.ids, words, "compound", self.grains, pillarById=self.pillars
            )
            self.assertEqual(byGroup, byWords, name)
            self.assertEqual(
                byGroup,
                [
                    m
                    for m in self.ids
                    if matchMinion(
                        m,
                        name,
                        "nodegroup",
                        grains=self.grains[m],
                        nodegroups=self.nodegroups,
                        pillar=self.pillars[m],
                    )
                ],
            )

    def test_singleWordTypes(self) -> None:
        """
        A compound target of one word selects the same minions as the
        equivalent plain target type.
        """
        cases: list[tuple[str, str, str, str]] = [(g, g, "glob", ":") for g in GLOBS]
        cases += [(r, r[2:], "pcre", ":") for r in REGEXES]
        engines = {
            "G": "grain",
            "P": "grain_pcre",
            "I": "pillar",
            "J": "pillar_pcre",
            "S": "ipcidr",
        }
        for word in GRAIN_WORDS + PILLAR_WORDS:
            tgtType = engines[word[0]]
            if word[1] == "@":
                cases.append((word, word[2:], tgtType, ":"))
            else:
                cases.append((word, word[3:], tgtType, word[1]))
        for word, tgt, tgtType, delimiter in cases:
            self.assertEqual(
                checkMinions(self.ids, word, "compound", self.grains, pillarById=self.pillars),
                checkMinions(
                    self.ids,
                    tgt,
                    tgtType,
                    self.grains,
                    delimiter=delimiter,
                    pillarById=self.pillars,
                ),
                word,
            )
            matcher: TargetMatcher = compileTarget(word, "compound")
            self.assertEqual(
                matcher.usesGrains, tgtType.startswith("grain") or tgtType == "ipcidr", word
            )
            self.assertEqual(matcher.usesPillar, tgtType.startswith("pillar"), word)
