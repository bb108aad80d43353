# -*- test-case-name: tests.test_eauth_config -*-
"""
Tests for L{salttwist.eauth.config}: the C{external_auth} option, and its
rows in the master's config table.
"""

from __future__ import annotations

import os

from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import config as configModule
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.eauth.config import (
    ExternalAuth,
    checkExternalAuthConfig,
    checkTokenExpireUserOverride,
)
from salttwist.eauth.engine import AclRefused, Permissions

FILE = {"^filename": "/etc/htpasswd", "^filetype": "htpasswd"}


class CheckExternalAuthTests(SynchronousTestCase):
    """
    L{checkExternalAuthConfig} accepts Salt's format and names every problem.
    """

    def test_valid(self) -> None:
        """
        Users, patterns, groups, the wildcard, targets and special items are
        accepted; a lone string becomes a list.
        """
        value = {
            "pam": {
                "fred": "test.*",
                "dev*": [{"web*": ["test.*", "pkg.*"]}],
                "admins%": [".*", "@runner", "@wheel", "@jobs"],
                "*": ["test.ping"],
                "ops": [{"@runner": ["manage.*"]}, {"@key": "list_all"}],
            },
            "file": {**FILE, "dean": ["test.*"]},
        }
        checked = checkExternalAuthConfig(value)
        self.assertEqual(checked["pam"]["fred"], ["test.*"])
        self.assertEqual(checked["pam"]["ops"], [{"@runner": ["manage.*"]}, {"@key": ["list_all"]}])
        self.assertEqual(checked["file"]["^filename"], "/etc/htpasswd")
        self.assertEqual(checkExternalAuthConfig(None), {})

    def assertRefused(self, value: object, *fragments: str) -> None:
        e = self.assertRaises(ValueError, checkExternalAuthConfig, value)
        for fragment in fragments:
            self.assertIn(fragment, str(e))

    def test_errors(self) -> None:
        """
        Each mistake is refused with a message naming it.
        """
        self.assertRefused(["pam"], "not a mapping")
        self.assertRefused(
            {"ldap": {}}, "unknown eauth backend 'ldap'", "does not have", "pam, file"
        )
        self.assertRefused({"kerberos": {}}, "unknown eauth backend 'kerberos'")
        self.assertRefused({"pam": ["fred"]}, "backend 'pam' must be a mapping of users")
        self.assertRefused({"pam": {"fred": {"a": 1}}}, "the entry of 'fred' must be a list")
        self.assertRefused({"pam": {"fred": ["test.(ping"]}}, "not a valid regular expression")
        self.assertRefused({"pam": {"%": ["test.*"]}}, "a group entry needs a name")
        self.assertRefused({"pam": {"fred": ["@run ner"]}}, "'@run ner' is not a special item")
        self.assertRefused({"pam": {"fred": [{"@": ["x"]}]}}, "'@' is not a special item")
        self.assertRefused(
            {"pam": {"fred": [{"web*": ["a"], "db*": ["b"]}]}}, "exactly one key", "item 1"
        )
        self.assertRefused({"pam": {"fred": [{"web*": []}]}}, "target 'web*' must be a non-empty")
        self.assertRefused(
            {"pam": {"fred": [{"test.arg": {"args": ["a"]}}]}}, "target 'test.arg' must be"
        )
        self.assertRefused(
            {"pam": {"fred": [{"web*": [{"test.arg": {"args": ["a"]}}]}]}},
            "argument restrictions",
        )
        self.assertRefused({"pam": {"^service": "login"}}, "unknown option '^service'")
        self.assertRefused({"file": {"dean": ["x"]}}, "needs ^filename")
        self.assertRefused({"file": {"^filename": "/f"}}, "needs '^filetype: htpasswd'", "'text'")
        self.assertRefused(
            {"file": {**FILE, "^filetype": "htdigest"}}, "'htdigest' is not supported"
        )
        self.assertRefused({"file": {**FILE, "^filename": ""}}, "^filename must be a non-empty")

    def test_tokenExpireUserOverride(self) -> None:
        """
        C{token_expire_user_override} is a boolean or backends' user lists.
        """
        self.assertIs(checkTokenExpireUserOverride(True), True)
        self.assertEqual(checkTokenExpireUserOverride({"pam": ["fred"]}), {"pam": ["fred"]})
        self.assertRaises(ValueError, checkTokenExpireUserOverride, "yes")
        e = self.assertRaises(ValueError, checkTokenExpireUserOverride, {"pam": "fred"})
        self.assertIn("users of 'pam'", str(e))


class ExternalAuthTests(SynchronousTestCase):
    """
    L{ExternalAuth.authList} builds a user's items as Salt's C{fill_auth_list}.
    """

    def setUp(self) -> None:
        self.config = checkExternalAuthConfig(
            {
                "pam": {
                    "fred": ["test.*"],
                    "dev*": [{"web*": ["pkg.*"]}],
                    "admins%": ["@runner"],
                    "*": ["grains.items"],
                },
                "file": {**FILE, "dean": ["@wheel"]},
            }
        )
        self.eauth = ExternalAuth(self.config)

    def test_names(self) -> None:
        """
        Every entry matching the name or a group adds its items; the
        backend's options are not users.
        """
        self.assertEqual(self.eauth.authList("pam", "fred"), ["test.*"])
        self.assertEqual(
            self.eauth.authList("pam", "devon", ["admins"]), [{"web*": ["pkg.*"]}, "@runner"]
        )
        self.assertEqual(self.eauth.authList("file", "dean"), ["@wheel"])
        self.assertEqual(
            self.eauth.options("file"), {"filename": "/etc/htpasswd", "filetype": "htpasswd"}
        )
        self.assertEqual(list(self.eauth.users("file")), ["dean"])
        self.assertTrue(self.eauth.needsGroups("pam"))
        self.assertFalse(self.eauth.needsGroups("file"))

    def test_wildcard(self) -> None:
        """
        C{'*'} applies only to users no name entry matches, group entries
        notwithstanding; with C{permissive_acl}, to everyone.
        """
        self.assertEqual(self.eauth.authList("pam", "zoe"), ["grains.items"])
        self.assertEqual(self.eauth.authList("pam", "zoe", ["admins"]), ["@runner", "grains.items"])
        self.assertEqual(self.eauth.authList("pam", "fred"), ["test.*"])
        permissive = ExternalAuth(self.config, permissive=True)
        self.assertEqual(permissive.authList("pam", "fred"), ["test.*", "grains.items"])

    def test_unknownBackend(self) -> None:
        """
        A backend not configured grants nothing; nor does one without entries.
        """
        self.assertEqual(self.eauth.authList("ldap", "fred"), [])
        self.assertEqual(self.eauth.authList("file", "fred"), [])

    def test_engine(self) -> None:
        """
        The auth list is what the engine evaluates.
        """
        perms = Permissions.fromItems(self.eauth.authList("pam", "devon"))
        perms.authorize("pkg.install", ["web1"])
        self.assertRaises(AclRefused, perms.authorize, "pkg.install", ["db1"])

    def test_badTarget(self) -> None:
        """
        Targets are compiled at once: an invalid one is refused by name.
        """
        config = checkExternalAuthConfig({"pam": {"fred": [{"N@nope": ["test.*"]}]}})
        e = self.assertRaises(ValueError, ExternalAuth, config)
        self.assertIn("external_auth entry 'pam: fred': invalid target 'N@nope'", str(e))
        ExternalAuth(config, {"nope": "web*"})

    def test_fromConfig(self) -> None:
        """
        L{ExternalAuth.fromConfig} reads the master's options.
        """
        eauth = ExternalAuth.fromConfig(
            {"external_auth": self.config, "nodegroups": {}, "permissive_acl": True}
        )
        self.assertEqual(eauth.backends, ["pam", "file"])
        self.assertTrue(eauth.permissive)


class MasterConfigTests(SynchronousTestCase):
    """
    The options are rows of the master's config table.
    """

    def load(self, text: str) -> dict:
        path = self.mktemp()
        os.makedirs(path)
        with open(os.path.join(path, "master"), "w") as f:
            f.write(text)
        return loadMasterConfig(path)

    def test_defaults(self) -> None:
        """
        Salt's defaults: no external_auth, tokens of 12 hours, no override,
        the ACL looked up again at each use.
        """
        config = self.load("")
        self.assertEqual(config["external_auth"], {})
        self.assertEqual(config["token_expire"], 43200)
        self.assertIs(config["token_expire_user_override"], False)
        self.assertIs(config["keep_acl_in_token"], False)
        self.assertIs(config["permissive_acl"], False)
        self.assertEqual(config["auth.pam.service"], "login")

    def test_implemented(self) -> None:
        """
        salttwist-api uses external_auth: setting it no longer warns that it
        does nothing.
        """
        self.patch(configModule, "_warned", set())
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        self.load("external_auth:\n  pam:\n    fred: [test.*]\n")
        warnings = [formatEvent(e) for e in observer if e["log_level"] == LogLevel.warn]
        self.assertEqual(warnings, [])

    def test_checked(self) -> None:
        """
        A bad external_auth stops the load, naming the option and the problem.
        """
        config = self.load("external_auth:\n  pam:\n    fred: [test.*]\ntoken_expire: 60\n")
        self.assertEqual(config["external_auth"], {"pam": {"fred": ["test.*"]}})
        self.assertEqual(config["token_expire"], 60)
        e = self.assertRaises(ConfigError, self.load, "external_auth:\n  ldap: {}\n")
        self.assertIn("external_auth", str(e))
        self.assertIn("unknown eauth backend 'ldap'", str(e))
        e = self.assertRaises(ConfigError, self.load, "token_expire: 0\n")
        self.assertIn("token_expire", str(e))
