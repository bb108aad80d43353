# -*- test-case-name: tests.test_eauth_engine -*-
"""
Tests for L{salttwist.eauth.engine}, the ACL engine shared by
publisher_acl and external_auth.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from salttwist.eauth.engine import (
    AclRefused,
    Decision,
    Permissions,
    Rule,
    SpecialRule,
    authorize,
    compileRules,
    uncoveredMinions,
)

GRAINS = {
    "web1": {"os": "Debian", "roles": ["web"]},
    "web2": {"os": "RedHat", "roles": ["web"]},
    "db1": {"os": "Debian", "roles": ["db"]},
}


class CompileRulesTests(SynchronousTestCase):
    """
    L{compileRules} turns auth list items into rules.
    """

    def test_kinds(self) -> None:
        """
        Strings are functions on every minion, one-key mappings target
        restrictions, and C{@} items special rules.
        """
        rules = compileRules(
            "fred",
            ["test.ping", {"web*": ["pkg.*"]}, "@runner", {"@wheel": ["key.list_all"]}],
        )
        self.assertEqual(
            rules,
            [
                Rule("fred", ("test.ping",), None),
                Rule("fred", ("pkg.*",), "web*"),
                SpecialRule("fred", "runner", None),
                SpecialRule("fred", "wheel", ("key.list_all",)),
            ],
        )
        self.assertIsNotNone(rules[1].matcher)

    def test_notSpecial(self) -> None:
        """
        With C{special=False} (publisher_acl), an C{@} item is a function
        pattern, which matches no function.
        """
        [rule] = compileRules("fred", ["@runner"], special=False)
        self.assertEqual(rule, Rule("fred", ("@runner",), None))
        self.assertFalse(rule.allows("manage.up"))

    def test_badTarget(self) -> None:
        """
        An invalid target is refused, naming the option, entry and target.
        """
        e = self.assertRaises(
            ValueError, compileRules, "fred", [{"G@": ["test.ping"]}], None, True, "external_auth"
        )
        self.assertIn("external_auth entry 'fred': invalid target 'G@'", str(e))


class UncoveredMinionsTests(SynchronousTestCase):
    """
    L{uncoveredMinions}: the minions no allowing rule surely reaches.
    """

    def test_eachMinionByAnyRule(self) -> None:
        """
        Each minion may be covered by a different rule.
        """
        rules = [
            r
            for r in compileRules("u", [{"web1": ["test.*"]}, {"db*": ["test.*"]}])
            if isinstance(r, Rule)
        ]
        self.assertEqual(uncoveredMinions(rules, ["web1", "db1", "web2"], GRAINS), ["web2"])

    def test_unknownGrains(self) -> None:
        """
        A grain word does not surely match a minion whose grains are unknown.
        """
        rules = [r for r in compileRules("u", [{"G@os:Debian": ["test.*"]}]) if isinstance(r, Rule)]
        self.assertEqual(uncoveredMinions(rules, ["web1", "new"], GRAINS), ["new"])


class PermissionsLocalTests(SynchronousTestCase):
    """
    L{Permissions.authorize} for jobs published to minions.
    """

    def setUp(self) -> None:
        self.perms = Permissions.fromItems(
            ["test.ping", {"web*": ["pkg.*", "test.*"]}, {"G@os:Debian": ["cmd.run"]}, "@runner"]
        )

    def test_everywhere(self) -> None:
        """
        A function without a target is allowed on any minions.
        """
        self.assertEqual(
            self.perms.authorize("test.ping", ["db1", "web1"]), Decision(restricted=False)
        )

    def test_globIsNotRegex(self) -> None:
        """
        Patterns are globs unless they use regex syntax: C{test.*} does not
        allow C{testinfra.run}; C{test.ping} does not allow C{test.pingx}.
        """
        self.assertRaises(AclRefused, Permissions.fromItems(["test.ping"]).authorize, "test.pingx")
        perms = Permissions.fromItems(["test.*"])
        perms.authorize("test.version")
        self.assertRaises(AclRefused, perms.authorize, "testinfra.run")

    def test_regex(self) -> None:
        """
        A pattern with regex syntax is a regular expression matching the
        whole name.
        """
        perms = Permissions.fromItems(["(test|grains)\\..*"])
        perms.authorize("grains.items")
        self.assertRaises(AclRefused, perms.authorize, "grains", [])
        self.assertRaises(AclRefused, perms.authorize, "xgrains.items", [])

    def test_restricted(self) -> None:
        """
        A function allowed only on some minions is allowed when every
        targeted minion is among them, and the decision says so.
        """
        self.assertEqual(
            self.perms.authorize("pkg.install", ["web1", "web2"], grainsById=GRAINS),
            Decision(restricted=True),
        )
        self.assertEqual(
            self.perms.authorize("cmd.run", ["web1", "db1"], grainsById=GRAINS),
            Decision(restricted=True),
        )

    def test_restrictedRefused(self) -> None:
        """
        A minion outside every allowing target is refused, by name.
        """
        e = self.assertRaises(
            AclRefused,
            self.perms.authorize,
            "cmd.run",
            ["web1", "web2", "db1"],
            "local",
            GRAINS,
            "fred",
        )
        self.assertEqual(
            str(e),
            "Authorization error occurred: fred is not permitted to run cmd.run on web2:"
            " external_auth allows cmd.run for fred only on minions matching 'G@os:Debian'",
        )

    def test_notAllowed(self) -> None:
        """
        A function no item allows is refused, saying what is allowed.
        """
        e = self.assertRaises(AclRefused, self.perms.authorize, "state.apply", ["web1"])
        self.assertIn("is not permitted to run state.apply", str(e))
        self.assertIn("test.ping on every minion", str(e))
        self.assertIn("pkg.*, test.* on minions matching 'web*'", str(e))

    def test_specialNotLocal(self) -> None:
        """
        C{@runner} allows no job on minions.
        """
        perms = Permissions.fromItems(["@runner", "@wheel"])
        e = self.assertRaises(AclRefused, perms.authorize, "test.ping", ["web1"])
        self.assertIn("allows the user no function on minions", str(e))

    def test_compound(self) -> None:
        """
        A list of functions must be allowed whole; it is restricted if any
        of them is.
        """
        self.assertEqual(
            self.perms.authorize(["test.ping", "pkg.install"], ["web1"], grainsById=GRAINS),
            Decision(restricted=True),
        )
        self.assertEqual(
            self.perms.authorize(("test.ping", "test.ping"), ["db1"]), Decision(restricted=False)
        )
        e = self.assertRaises(
            AclRefused, self.perms.authorize, ["test.ping", "state.apply"], ["web1"]
        )
        self.assertIn("state.apply", str(e))
        self.assertRaises(ValueError, self.perms.authorize, [], ["web1"])
        perms = Permissions.fromItems(["@runner"])
        self.assertEqual(
            perms.authorize(["manage.up", "jobs.list_jobs"], kind="runner"), Decision(False)
        )

    def test_unknownKind(self) -> None:
        """
        An unknown kind of call is an error, not a refusal.
        """
        e = self.assertRaises(ValueError, self.perms.authorize, "test.ping", [], "cloud")
        self.assertNotIsInstance(e, AclRefused)
        self.assertIn("unknown kind of call 'cloud'", str(e))


class PermissionsSpecialTests(SynchronousTestCase):
    """
    L{Permissions.authorize} for runner, wheel and jobs calls: Salt's
    C{spec_check}.
    """

    def test_runnerAll(self) -> None:
        """
        C{@runner} (or C{@runners}) allows every runner function and no
        wheel function.
        """
        for item in ("@runner", "@runners"):
            perms = Permissions.fromItems([item])
            perms.authorize("manage.up", kind="runner")
            self.assertRaises(AclRefused, perms.authorize, "key.list_all", kind="wheel")

    def test_wheelList(self) -> None:
        """
        C{{'@wheel': [patterns]}} matches the whole C{module.function}.
        """
        perms = Permissions.fromItems([{"@wheel": ["key.list_*"]}])
        perms.authorize("key.list_all", kind="wheel")
        e = self.assertRaises(AclRefused, perms.authorize, "key.delete", kind="wheel")
        self.assertIn("not permitted to run the wheel function key.delete", str(e))

    def test_module(self) -> None:
        """
        C{@<module>} allows that module's functions, of either kind; with a
        list, the patterns match the function's name within the module.
        """
        perms = Permissions.fromItems(["@manage", {"@key": ["list_all", "finger"]}])
        perms.authorize("manage.up", kind="runner")
        perms.authorize("key.finger", kind="wheel")
        self.assertRaises(AclRefused, perms.authorize, "key.delete", kind="wheel")
        self.assertRaises(AclRefused, perms.authorize, "jobs.list_jobs", kind="runner")

    def test_jobs(self) -> None:
        """
        A C{jobs} call is a call of the runner module C{jobs}: C{@jobs} and
        C{@runner} allow it, C{@wheel} does not.
        """
        Permissions.fromItems(["@jobs"]).authorize("list_jobs", kind="jobs")
        Permissions.fromItems(["@jobs"]).authorize("jobs.lookup_jid", kind="jobs")
        Permissions.fromItems(["@runner"]).authorize("list_jobs", kind="jobs")
        self.assertRaises(
            AclRefused, Permissions.fromItems(["@wheel"]).authorize, "list_jobs", kind="jobs"
        )
        self.assertRaises(
            AclRefused, Permissions.fromItems(["test.*"]).authorize, "list_jobs", kind="jobs"
        )

    def test_badName(self) -> None:
        """
        A runner function that is not C{module.function} is a syntax error,
        as in Salt, not a refusal.
        """
        perms = Permissions.fromItems(["@runner"])
        for fun in ("manage", "a.b.c", ".up"):
            e = self.assertRaises(ValueError, perms.authorize, fun, kind="runner")
            self.assertNotIsInstance(e, AclRefused)
            self.assertIn("Check syntax", str(e))

    def test_functionItemsNotSpecial(self) -> None:
        """
        A function pattern allows no runner: C{.*} is for minions only.
        """
        self.assertRaises(
            AclRefused, Permissions.fromItems([".*"]).authorize, "manage.up", kind="runner"
        )


class AuthorizeTests(SynchronousTestCase):
    """
    L{authorize} takes compiled permissions or an auth list as a token keeps it.
    """

    def test_authList(self) -> None:
        """
        A raw auth list is compiled, with the nodegroups for C{N@} words.
        """
        items = [{"N@webs": ["test.*"]}]
        self.assertEqual(
            authorize(items, "test.ping", ["web1"], nodegroups={"webs": "web*"}),
            Decision(restricted=True),
        )
        self.assertRaises(
            AclRefused, authorize, items, "test.ping", ["db1"], nodegroups={"webs": "web*"}
        )

    def test_permissions(self) -> None:
        """
        Compiled permissions are used as they are.
        """
        perms = Permissions.fromItems(["@wheel"])
        self.assertEqual(authorize(perms, "key.list_all", kind="wheel"), Decision(False))
