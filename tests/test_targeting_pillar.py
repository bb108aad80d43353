# -*- test-case-name: tests.test_targeting_pillar -*-
"""
Tests for pillar and ipcidr targeting in L{salttwist.targeting}: the
C{pillar}, C{pillar_pcre}, C{pillar_exact} and C{ipcidr} target types, the
C{I@}, C{J@} and C{S@} compound words, the master's three-valued selection
when it has not cached a minion's pillar, and the same targets through a
master and minions connected in memory.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt
from salttwist.master.pillarcache import PillarCache
from salttwist.pki.keystore import ACCEPTED
from salttwist.targeting import (
    TARGET_TYPES,
    TargetError,
    checkMinions,
    compileTarget,
    matchMinion,
    validateTarget,
)
from tests.test_minion import OTHER_KEY, OTHER_PEM, MinionTestCase

PILLARS: dict[str, dict[str, Any]] = {
    "web1": {
        "role": "web",
        "apps": ["nginx", "Redis"],
        "net": {"dc": "Paris", "vlan": 10},
        "team": [{"name": "ops"}, {"name": "dev"}],
        "a|b": "pipe",
    },
    "web2": {"role": "web", "apps": ["nginx"], "net": {"dc": "Lyon", "vlan": 20}},
    "db1": {"role": "db", "apps": ["postgres"], "net": {"dc": "Paris"}, "enabled": True},
    "bare": {},
}
GRAINS: dict[str, dict[str, Any]] = {
    "web1": {"ipv4": ["10.0.1.5", "127.0.0.1"], "ipv6": ["::1", "fe80::1"]},
    "web2": {"ipv4": ["10.0.2.7", "127.0.0.1"], "ipv6": ["2001:db8::7"]},
    "db1": {"ipv4": ["192.168.1.9"], "ipv6": []},
    "bare": {},
}
IDS = sorted(PILLARS)


def mine(tgt: Any, tgtType: str, delimiter: str = ":") -> list[str]:
    """
    The minions that decide for themselves that C{tgt} targets them.
    """
    return [
        m
        for m in IDS
        if matchMinion(m, tgt, tgtType, grains=GRAINS[m], pillar=PILLARS[m], delimiter=delimiter)
    ]


class PillarTargetTests(SynchronousTestCase):
    """
    C{pillar} targets (C{-I}): Salt's C{subdict_match} on the pillar.
    """

    def test_types(self) -> None:
        """
        The new target types are listed in L{TARGET_TYPES}.
        """
        for tgtType in ("pillar", "pillar_pcre", "pillar_exact", "ipcidr"):
            self.assertIn(tgtType, TARGET_TYPES)

    def test_value(self) -> None:
        """
        A top-level key and a glob on its value, case-insensitive as Salt's.
        """
        self.assertEqual(mine("role:web", "pillar"), ["web1", "web2"])
        self.assertEqual(mine("role:WE*", "pillar"), ["web1", "web2"])
        self.assertEqual(mine("role:d?", "pillar"), ["db1"])
        self.assertEqual(mine("role:*", "pillar"), ["db1", "web1", "web2"])
        self.assertEqual(mine("enabled:true", "pillar"), ["db1"])

    def test_nested(self) -> None:
        """
        Nested keys are followed; a number matches its text.
        """
        self.assertEqual(mine("net:dc:paris", "pillar"), ["db1", "web1"])
        self.assertEqual(mine("net:vlan:10", "pillar"), ["web1"])
        self.assertEqual(mine("net:vlan:[12]0", "pillar"), ["web1", "web2"])
        # A dict value matches if the pattern names one of its keys.
        self.assertEqual(mine("net:vlan", "pillar"), ["web1", "web2"])

    def test_lists(self) -> None:
        """
        A list value matches if any member does; dicts in a list are
        searched by key.
        """
        self.assertEqual(mine("apps:redis", "pillar"), ["web1"])
        self.assertEqual(mine("apps:nginx", "pillar"), ["web1", "web2"])
        self.assertEqual(mine("team:name:ops", "pillar"), ["web1"])

    def test_delimiter(self) -> None:
        """
        Another delimiter, for the target type and in a compound word.
        """
        self.assertEqual(mine("net|dc|Lyon", "pillar", delimiter="|"), ["web2"])
        self.assertEqual(mine("I|@net|dc|Lyon", "compound"), ["web2"])
        # With "/" as the delimiter a ":" is part of a key.
        self.assertEqual(mine("a|b/pipe", "pillar", delimiter="/"), ["web1"])

    def test_noDelimiter(self) -> None:
        """
        A pillar target without a key and a value is refused by name.
        """
        e = self.assertRaises(TargetError, validateTarget, "role", "pillar")
        self.assertIn("pillar target 'role'", str(e))
        e = self.assertRaises(TargetError, validateTarget, "web* and I@role", "compound")
        self.assertIn("'role' at position 11", str(e))
        self.assertEqual(e.position, 11)

    def test_noPillar(self) -> None:
        """
        The minion's own view: no pillar is an empty pillar.
        """
        self.assertFalse(matchMinion("web1", "role:*", "pillar"))
        self.assertTrue(matchMinion("web1", "not I@role:web", "compound"))

    def test_pcre(self) -> None:
        """
        C{pillar_pcre} (C{-J}, C{J@}): the value is a regular expression
        applied with C{re.match}, case-insensitive.
        """
        self.assertEqual(mine("role:w.b$", "pillar_pcre"), ["web1", "web2"])
        self.assertEqual(mine("apps:^(redis|postgres)$", "pillar_pcre"), ["db1", "web1"])
        self.assertEqual(mine("net:dc:PAR", "pillar_pcre"), ["db1", "web1"])
        self.assertEqual(mine("J@net:vlan:\\d0", "compound"), ["web1", "web2"])
        self.assertEqual(mine("J|@net|dc|^ly", "compound"), ["web2"])

    def test_badRegex(self) -> None:
        """
        An invalid regular expression is refused with its position.
        """
        e = self.assertRaises(TargetError, validateTarget, "role:(web", "pillar_pcre")
        self.assertIn("invalid regular expression", str(e))
        e = self.assertRaises(TargetError, validateTarget, "db* or J@role:[a", "compound")
        self.assertIn("invalid regular expression '[a'", str(e))
        self.assertEqual(e.position, 14)

    def test_exact(self) -> None:
        """
        C{pillar_exact}: the value compared whole, no glob, no regex (still
        case-insensitive, as Salt lowercases both sides).
        """
        self.assertEqual(mine("role:web", "pillar_exact"), ["web1", "web2"])
        self.assertEqual(mine("role:WEB", "pillar_exact"), ["web1", "web2"])
        self.assertEqual(mine("role:we*", "pillar_exact"), [])
        self.assertEqual(mine("role:w.b", "pillar_exact"), [])
        self.assertEqual(mine("net:dc:paris", "pillar_exact"), ["db1", "web1"])
        self.assertEqual(mine("apps:redis", "pillar_exact"), ["web1"])
        # Key existence is still "key:*", as in Salt's subdict_match.
        self.assertEqual(mine("net:*", "pillar_exact"), ["db1", "web1", "web2"])

    def test_compound(self) -> None:
        """
        Pillar words mix with id, grain and ipcidr words.
        """
        self.assertEqual(mine("I@role:web and not web1", "compound"), ["web2"])
        self.assertEqual(mine("I@role:db or G@ipv4:10.0.2.*", "compound"), ["db1", "web2"])
        self.assertEqual(
            mine(["(", "I@net:dc:Paris", "or", "bare", ")", "and", "not", "J@role:d"], "compound"),
            ["bare", "web1"],
        )

    def test_nodegroup(self) -> None:
        """
        A nodegroup may hold pillar words.
        """
        groups = {"webs": "I@role:web", "paris": ["N@webs", "and", "I@net:dc:paris"]}
        self.assertEqual(
            checkMinions(IDS, "paris", "nodegroup", GRAINS, groups, pillarById=PILLARS),
            ["web1"],
        )


class IpCidrTargetTests(SynchronousTestCase):
    """
    C{ipcidr} targets (C{-S}, C{S@}): the C{ipv4} and C{ipv6} grains.
    """

    def test_network(self) -> None:
        """
        A network in CIDR notation matches minions with an address in it.
        """
        self.assertEqual(mine("10.0.0.0/8", "ipcidr"), ["web1", "web2"])
        self.assertEqual(mine("10.0.1.0/24", "ipcidr"), ["web1"])
        self.assertEqual(mine("127.0.0.0/8", "ipcidr"), ["web1", "web2"])
        self.assertEqual(mine("0.0.0.0/0", "ipcidr"), ["db1", "web1", "web2"])
        self.assertEqual(mine("172.16.0.0/12", "ipcidr"), [])

    def test_address(self) -> None:
        """
        A single address matches the minions that have it.
        """
        self.assertEqual(mine("192.168.1.9", "ipcidr"), ["db1"])
        self.assertEqual(mine("10.0.1.6", "ipcidr"), [])
        self.assertEqual(mine("10.0.1.5/32", "ipcidr"), ["web1"])

    def test_ipv6(self) -> None:
        """
        An IPv6 target is matched against the C{ipv6} grain, in any
        spelling.
        """
        self.assertEqual(mine("::1", "ipcidr"), ["web1"])
        self.assertEqual(mine("0:0::1", "ipcidr"), ["web1"])
        self.assertEqual(mine("2001:db8::/32", "ipcidr"), ["web2"])
        self.assertEqual(mine("fe80::/10", "ipcidr"), ["web1"])
        self.assertEqual(mine("::/0", "ipcidr"), ["web1", "web2"])

    def test_compound(self) -> None:
        """
        C{S@} in a compound target.
        """
        self.assertEqual(mine("S@10.0.0.0/8 and not S@10.0.2.0/24", "compound"), ["web1"])
        self.assertEqual(mine("S@192.168.0.0/16 or I@role:web", "compound"), IDS[1:])

    def test_oddGrains(self) -> None:
        """
        A string grain is a list of one; values that are not addresses, and
        a grain that is neither, do not match and do not raise.
        """
        matcher = compileTarget("10.0.0.0/8", "ipcidr")
        self.assertTrue(matcher.matches("m", {"ipv4": "10.1.1.1"}))
        self.assertTrue(matcher.matches("m", {"ipv4": ["bogus", 7, None, "10.9.9.9"]}))
        self.assertFalse(matcher.matches("m", {"ipv4": {"10.1.1.1": 1}}))
        self.assertFalse(matcher.matches("m", {"ipv4": None}))
        self.assertFalse(matcher.matches("m", {"ipv6": ["::ffff:10.0.0.1"]}))
        self.assertFalse(matcher.matches("m", None))

    def test_badTarget(self) -> None:
        """
        Something that is neither an address nor a network is a
        L{TargetError} naming it (and where, in a compound target); so is a
        network with host bits set, as for Salt's C{ip_network}.
        """
        for bad in ("10.0.0.300", "10.0.0.0/33", "web1", "10.0.0.1/8", "::1/129", "10/8"):
            e = self.assertRaises(TargetError, validateTarget, bad, "ipcidr")
            self.assertIn(f"invalid IP address or CIDR network {bad!r}", str(e))
        e = self.assertRaises(TargetError, validateTarget, "web1 or S@1.2.3.4/40", "compound")
        self.assertIn("'1.2.3.4/40' at position 10", str(e))
        self.assertEqual(e.position, 10)
        self.assertRaises(TargetError, validateTarget, "S@", "compound")


class ThreeValuedSelectionTests(SynchronousTestCase):
    """
    The master's selection: a minion whose pillar it has not cached may
    match a pillar word.
    """

    def test_allKnown(self) -> None:
        """
        With every pillar known, the master expects exactly the minions that
        decide to run the job.
        """
        for tgt, tgtType in [
            ("role:web", "pillar"),
            ("net:dc:P*", "pillar"),
            ("role:^d", "pillar_pcre"),
            ("role:web", "pillar_exact"),
            ("10.0.0.0/8", "ipcidr"),
            ("not I@role:web", "compound"),
            ("I@role:web and S@10.0.1.0/24 or J@apps:post", "compound"),
        ]:
            self.assertEqual(
                checkMinions(IDS, tgt, tgtType, GRAINS, pillarById=PILLARS), mine(tgt, tgtType)
            )

    def test_unknownIncluded(self) -> None:
        """
        A minion without a cached pillar is expected for a pillar word and
        for its negation; one whose cached pillar does not match is not.
        """
        known = {m: p for m, p in PILLARS.items() if m != "web2"}
        self.assertEqual(
            checkMinions(IDS, "role:web", "pillar", GRAINS, pillarById=known), ["web1", "web2"]
        )
        self.assertEqual(
            checkMinions(IDS, "not I@role:web", "compound", GRAINS, pillarById=known),
            ["bare", "db1", "web2"],
        )
        # Nothing cached at all: every minion may match.
        self.assertEqual(checkMinions(IDS, "role:db", "pillar", GRAINS), IDS)
        # A None entry is unknown too.
        self.assertEqual(
            checkMinions(IDS, "role:db", "pillar", GRAINS, pillarById={**known, "db1": None}),
            ["db1", "web2"],
        )

    def test_unknownRuledOut(self) -> None:
        """
        The rest of the target still rules out a minion whose pillar is
        unknown.
        """
        self.assertEqual(checkMinions(IDS, "I@role:web and db*", "compound", GRAINS), ["db1"])
        self.assertEqual(
            checkMinions(IDS, "I@role:x or S@192.168.0.0/16", "compound", GRAINS, pillarById={}),
            IDS,
        )
        self.assertEqual(
            checkMinions(IDS, "I@role:web and S@192.168.0.0/16", "compound", GRAINS, pillarById={}),
            ["db1"],
        )

    def test_grainsAndPillarIndependent(self) -> None:
        """
        Unknown grains do not make a pillar word unknown, nor the reverse.
        """
        matcher = compileTarget("I@role:web and G@ipv4:10.*", "compound")
        self.assertIs(matcher.evaluate("web1", GRAINS["web1"], PILLARS["web1"]), True)
        self.assertIsNone(matcher.evaluate("web1", None, PILLARS["web1"]))
        self.assertIsNone(matcher.evaluate("web1", GRAINS["web1"], None))
        self.assertIs(matcher.evaluate("db1", None, PILLARS["db1"]), False)
        self.assertIs(matcher.evaluate("db1", GRAINS["db1"], None), False)
        # evaluate without pillar: unknown.
        self.assertIsNone(compileTarget("role:web", "pillar").evaluate("web1", {}))

    def test_usesPillar(self) -> None:
        """
        L{TargetMatcher.usesPillar} says whether the master needs its pillar
        cache; S@ uses grains.
        """
        self.assertTrue(compileTarget("role:web", "pillar").usesPillar)
        self.assertTrue(compileTarget("role:web", "pillar_exact").usesPillar)
        self.assertTrue(compileTarget("x or not ( J@a:b )", "compound").usesPillar)
        self.assertFalse(compileTarget("x or G@a:b", "compound").usesPillar)
        ipcidr = compileTarget("S@10.0.0.0/8", "compound")
        self.assertFalse(ipcidr.usesPillar)
        self.assertTrue(ipcidr.usesGrains)
        self.assertFalse(compileTarget("role:web", "pillar").usesGrains)

    def test_pillarCacheView(self) -> None:
        """
        The master's L{PillarCache} view is what selection reads.
        """
        cache = PillarCache()
        cache.store("web1", PILLARS["web1"])
        cache.store("db1", PILLARS["db1"])
        self.assertEqual(
            checkMinions(["web1", "db1", "new"], "role:web", "pillar", pillarById=cache.byId()),
            ["new", "web1"],
        )


_KEYS = st.sampled_from(["role", "env", "net", "apps"])
_VALUES = st.sampled_from(["web", "db", "Prod", "dev", "x1", "10", "Paris"])
_PILLAR = st.dictionaries(
    _KEYS,
    st.one_of(
        _VALUES,
        st.lists(_VALUES, max_size=3),
        st.dictionaries(st.sampled_from(["dc", "vlan"]), _VALUES, max_size=2),
    ),
    max_size=4,
)
_PATTERNS = st.sampled_from(["web", "w*", "*", "d?", "prod", "1*", "paris", "x[0-9]"])
_WORDS = st.one_of(
    st.tuples(_KEYS, _PATTERNS).map(lambda kv: f"I@{kv[0]}:{kv[1]}"),
    st.tuples(st.sampled_from(["net:dc", "net:vlan"]), _PATTERNS).map(
        lambda kv: f"I@{kv[0]}:{kv[1]}"
    ),
    st.tuples(_KEYS, st.sampled_from(["^w", "d.$", "(prod|dev)", "x\\d"])).map(
        lambda kv: f"J@{kv[0]}:{kv[1]}"
    ),
    st.sampled_from(["S@10.0.0.0/8", "S@10.0.1.0/24", "S@::1", "S@192.168.0.0/16"]),
    st.sampled_from(["m1", "m*", "E@m[02]", "L@m3,m4", "G@os:deb*"]),
)
_EXPRESSIONS = st.recursive(
    _WORDS.map(lambda w: [w]),
    lambda sub: st.one_of(
        st.tuples(sub, st.sampled_from(["and", "or"]), sub).map(lambda t: [*t[0], t[1], *t[2]]),
        sub.map(lambda e: ["not", "(", *e, ")"]),
        sub.map(lambda e: ["(", *e, ")"]),
    ),
    max_leaves=6,
)
_GRAINS = st.fixed_dictionaries(
    {
        "os": st.sampled_from(["Debian", "CentOS"]),
        "ipv4": st.lists(st.sampled_from(["10.0.1.1", "10.0.2.2", "192.168.3.3"]), max_size=2),
        "ipv6": st.lists(st.sampled_from(["::1", "fe80::2"]), max_size=1),
    }
)
_MINIONS = st.dictionaries(
    st.sampled_from([f"m{i}" for i in range(6)]),
    st.tuples(_GRAINS, _PILLAR),
    min_size=1,
    max_size=6,
)
PROPERTIES = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class PillarPropertyTests(SynchronousTestCase):
    """
    Over generated pillars, grains and compound targets, master and minions
    agree.
    """

    @PROPERTIES
    @given(_MINIONS, _EXPRESSIONS, st.data())
    def test_masterAgreesWithMinions(
        self, minions: dict[str, Any], words: list[str], data: st.DataObject
    ) -> None:
        """
        With every pillar known, the master expects exactly the minions
        that run the job; with some pillars unknown, it expects every minion
        that runs it, and decides exactly for the others.
        """
        expr = " ".join(words)
        ids = sorted(minions)
        grainsById = {m: g for m, (g, _) in minions.items()}
        pillarById = {m: p for m, (_, p) in minions.items()}
        matcher = compileTarget(expr, "compound")
        running = {m for m in ids if matcher.matches(m, grainsById[m], pillarById[m])}
        self.assertEqual(set(matcher.select(ids, grainsById, pillarById)), running, expr)
        self.assertEqual(
            set(checkMinions(ids, words, "compound", grainsById, pillarById=pillarById)), running
        )
        hidden = set(data.draw(st.lists(st.sampled_from(ids), unique=True)))
        known = {m: p for m, p in pillarById.items() if m not in hidden}
        expected = set(matcher.select(ids, grainsById, known))
        self.assertLessEqual(running, expected, expr)
        self.assertEqual(expected - hidden, running - hidden, expr)
        self.assertEqual(
            expected & hidden,
            {m for m in hidden if matcher.evaluate(m, grainsById[m], None) is not False},
            expr,
        )

    @PROPERTIES
    @given(_PILLAR, st.tuples(_KEYS, _PATTERNS))
    def test_singleWord(self, pillar: dict[str, Any], keyPattern: tuple[str, str]) -> None:
        """
        C{I@k:v} is the C{pillar} target C{k:v}; C{pillar_exact} matches
        only where C{pillar} does.
        """
        tgt = ":".join(keyPattern)
        word = matchMinion("m", "I@" + tgt, "compound", pillar=pillar)
        self.assertEqual(word, matchMinion("m", tgt, "pillar", pillar=pillar))
        if matchMinion("m", tgt, "pillar_exact", pillar=pillar):
            self.assertTrue(word)


class PillarTargetingThroughMasterTests(MinionTestCase):
    """
    Pillar and ipcidr targets published by a master to two minions
    connected in memory: the master expects the minions from its pillar
    cache, and each minion decides with its own pillar.
    """

    def setUp(self) -> None:
        """
        Two ready minions: m1 whose pillar has role=web, m2 with role=db.
        """
        super().setUp()
        self.first = self.readyMinion("m1", grains={"ipv4": ["10.0.1.1"]})
        self.net.keyStore.putKey(ACCEPTED, "m2", OTHER_PEM)
        config = self.makeMinion("m2", grains={"ipv4": ["192.168.1.1"]}).config
        crypt.writePrivateFile(
            os.path.join(config["pki_dir"], "minion.pem"), crypt.privateKeyToPem(OTHER_KEY)
        )
        self.second = self.net.buildMinion(config)
        self.addCleanup(self.second.stop)
        ready = self.second.whenReady()
        self.second.start()
        self.net.flush()
        self.successResultOf(ready)
        # Each minion fetched its pillar once subscribed (empty: the master
        # has no pillar_roots) and the master cached it; start from pillars
        # set here, which the master has not cached.
        self.first.executor.context.pillar = {"role": "web", "net": {"dc": "Paris"}}
        self.second.executor.context.pillar = {"role": "db", "net": {"dc": "Lyon"}}
        self.master.pillarCache.forget("m1")
        self.master.pillarCache.forget("m2")

    def cacheBoth(self) -> None:
        """
        The master's pillar cache holds both minions' pillars.
        """
        self.master.pillarCache.store("m1", self.first.executor.context.pillar)
        self.master.pillarCache.store("m2", self.second.executor.context.pillar)

    def expectAndRun(self, tgt: Any, tgtType: str) -> tuple[list[str], list[str]]:
        """
        Publish C{test.ping} to C{tgt}.

        @return: the minions the master expected, and those that returned.
        """
        reply = self.successResultOf(
            self.master.clientPublish(None, {"tgt": tgt, "tgt_type": tgtType, "fun": "test.ping"})  # type: ignore[arg-type]
        )
        self.net.flush()
        returned = sorted(
            tag.rsplit("/", 1)[1]
            for tag, _ in self.net.eventsTagged(f"salt/job/{reply['jid']}/ret/")
        )
        return reply["minions"], returned

    def test_sharedCache(self) -> None:
        """
        The master's publisher reads the master's own pillar cache.
        """
        self.assertIs(self.master.jobPublisher.pillarCache, self.master.pillarCache)

    def test_pillarCached(self) -> None:
        """
        With both pillars cached, the master expects only the matching
        minion, which alone runs the job.
        """
        self.cacheBoth()
        self.assertEqual(self.expectAndRun("role:web", "pillar"), (["m1"], ["m1"]))
        self.assertEqual(self.expectAndRun("role:^d", "pillar_pcre"), (["m2"], ["m2"]))
        self.assertEqual(self.expectAndRun("role:DB", "pillar_exact"), (["m2"], ["m2"]))
        self.assertEqual(
            self.expectAndRun("I@net:dc:lyon or G@id:nobody", "compound"), (["m2"], ["m2"])
        )

    def test_pillarNotCached(self) -> None:
        """
        Without a cached pillar the master expects both minions; only the
        one whose own pillar matches runs the job.
        """
        self.assertEqual(self.expectAndRun("role:web", "pillar"), (["m1", "m2"], ["m1"]))
        self.assertEqual(self.expectAndRun("not I@role:web", "compound"), (["m1", "m2"], ["m2"]))
        self.assertEqual(self.expectAndRun("I@role:web and m2", "compound"), (["m2"], []))
        # An empty pillar cached is known: it matches no pillar word.
        self.master.pillarCache.store("m2", {})
        self.assertEqual(self.expectAndRun("role:web", "pillar"), (["m1"], ["m1"]))

    def test_minionDecides(self) -> None:
        """
        When the master's cache is stale, the minion's own pillar decides.
        """
        self.master.pillarCache.store("m1", {"role": "db"})
        self.master.pillarCache.store("m2", {"role": "db"})
        self.assertEqual(self.expectAndRun("role:db", "pillar"), (["m1", "m2"], ["m2"]))

    def test_ipcidr(self) -> None:
        """
        C{ipcidr} targets the minions by their C{ipv4} grain, on the master
        (grains cache) and on the minions.
        """
        self.assertEqual(self.expectAndRun("10.0.0.0/8", "ipcidr"), (["m1"], ["m1"]))
        self.assertEqual(
            self.expectAndRun("S@192.168.1.1 or S@10.0.1.0/24", "compound"),
            (["m1", "m2"], ["m1", "m2"]),
        )

    def test_badCidrRefused(self) -> None:
        """
        A bad CIDR is refused by the master, naming it.
        """
        error = self.assertRaises(
            ValueError,
            self.master.clientPublish,
            None,  # type: ignore[arg-type]
            {"tgt": "10.0.0.0/99", "tgt_type": "ipcidr", "fun": "test.ping"},
        )
        self.assertIn("'10.0.0.0/99'", str(error))
