# -*- test-case-name: tests.test_acl -*-
"""
Tests for L{salttwist.master.acl} (Salt's C{publisher_acl}), its options in
L{salttwist.config}, the per-user keys of the master and the local client
(L{salttwist.client.local.readClientKey}), and the checks L{Master} makes
in a session authenticated with a user's key.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from twisted.internet.testing import EventLoggingObserver, MemoryReactorClock
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist import crypt, serial, wire
from salttwist.client.local import MasterUnavailable, readClientKey
from salttwist.config import ConfigError, loadMasterConfig
from salttwist.daemon import StartupError
from salttwist.events.bus import LocalEventBus
from salttwist.master.acl import (
    FIND_JOB,
    Account,
    AclRefused,
    Group,
    InMemoryUserDatabase,
    PublisherAcl,
    isRegex,
    keyAccounts,
    patternMatches,
    readUserKey,
    removeStaleKeys,
    setUpUserKeys,
    unreachableDirectory,
    userKeyFile,
    writeUserKeys,
)
from salttwist.master.auth import NONCE_BYTES
from salttwist.master.core import Master, runSynchronously
from salttwist.master.keys import ROOT_KEY_FILE, MasterKeys
from salttwist.pki.keystore import InMemoryKeyStore
from salttwist.transport.reqclient import ReqClientProtocol
from tests.test_master_core import MASTER_KEY, MASTER_PEM, ROOT_KEY, MasterTestCase

FRED = Account("fred", 1001, 1001)
WILMA = Account("wilma", 1002, 100)
DEV1 = Account("dev1", 1003, 1003)
DEV2 = Account("dev2", 1004, 1004)
BARNEY = Account("barney", 1005, 1005)
USERS = InMemoryUserDatabase(
    [FRED, WILMA, DEV1, DEV2, BARNEY, Account("root", 0, 0)],
    [
        Group("admins", 50, ("wilma",)),
        Group("users", 100, ()),
        Group("operators", 60, ("barney",)),
    ],
)


def makeAcl(
    acl: dict[str, Any],
    blacklist: dict[str, list[str]] | None = None,
    users: InMemoryUserDatabase = USERS,
    nodegroups: dict[str, Any] | None = None,
) -> PublisherAcl:
    """
    Check C{acl} and C{blacklist} as the config does and build the ACL.
    """
    config = loadMasterConfig(
        os.path.abspath("cfg-unused"),
        overrides={"publisher_acl": acl, "publisher_acl_blacklist": blacklist or {}},
    )
    return PublisherAcl(
        config["publisher_acl"], config["publisher_acl_blacklist"], users, nodegroups
    )


class PatternTests(SynchronousTestCase):
    """
    Patterns are shell globs, or regular expressions when they use syntax
    no glob has.
    """

    def test_globs(self) -> None:
        """
        A glob matches the whole name, case-sensitively; C{test.*} is the
        C{test} module only, not C{testinfra.run} (which Salt's regex
        reading of it would allow).
        """
        self.assertTrue(patternMatches("test.*", "test.ping"))
        self.assertFalse(patternMatches("test.*", "testinfra.run"))
        self.assertFalse(patternMatches("test.*", "Test.ping"))
        self.assertTrue(patternMatches("dev?", "dev1"))
        self.assertTrue(patternMatches("pkg.[ir]*", "pkg.install"))
        self.assertTrue(patternMatches("fred", "fred"))
        self.assertFalse(patternMatches("fred", "fred2"))
        self.assertFalse(isRegex("network.*"))

    def test_regexes(self) -> None:
        """
        A pattern with C{| ( ) + ^ $ \\ { }} or a leading dot is a regular
        expression that must match the whole name; an invalid one matches
        nothing.
        """
        self.assertTrue(isRegex(".*"))
        self.assertTrue(patternMatches(".*", "cmd.run"))
        self.assertTrue(patternMatches("admin|manager_.*", "manager_bob"))
        self.assertFalse(patternMatches("admin|manager_.*", "administrator"))
        self.assertTrue(patternMatches("pkg.(install|remove)", "pkg.remove"))
        self.assertFalse(patternMatches("pkg.(install|remove)", "pkg.removed"))
        self.assertTrue(patternMatches("^(?!sudo_).*$", "root"))
        self.assertFalse(patternMatches("^(?!sudo_).*$", "sudo_fred"))
        self.assertFalse(patternMatches("pkg.(", "pkg.("))


class ConfigTests(SynchronousTestCase):
    """
    C{publisher_acl} and C{publisher_acl_blacklist} in the master config.
    """

    def configDir(self, text: str) -> str:
        """
        @return: a config directory whose C{master} file holds C{text}.
        """
        configDir = os.path.abspath(self.mktemp())
        os.makedirs(configDir)
        with open(os.path.join(configDir, "master"), "w") as f:
            f.write(text)
        return configDir

    def test_defaults(self) -> None:
        """
        Both options default to empty mappings: only the master's own user
        publishes.
        """
        config = loadMasterConfig(self.configDir(""))
        self.assertEqual(config["publisher_acl"], {})
        self.assertEqual(config["publisher_acl_blacklist"], {})

    def test_saltFormat(self) -> None:
        """
        Salt's format loads as written: user, glob and group entries with
        function lists and target restrictions; a lone function string is
        taken as a list of one.
        """
        config = loadMasterConfig(
            self.configDir(
                "publisher_acl:\n"
                "  fred: [test.ping, 'network.*']\n"
                "  'dev*':\n"
                "    - 'web*': ['test.*', 'pkg.*']\n"
                "  'admins%': ['.*']\n"
                "  barney: sys.doc\n"
                "publisher_acl_blacklist:\n"
                "  users: [root, '^(?!sudo_).*$']\n"
                "  modules: ['cmd.*']\n"
            )
        )
        self.assertEqual(
            config["publisher_acl"],
            {
                "fred": ["test.ping", "network.*"],
                "dev*": [{"web*": ["test.*", "pkg.*"]}],
                "admins%": [".*"],
                "barney": ["sys.doc"],
            },
        )
        self.assertEqual(
            config["publisher_acl_blacklist"],
            {"users": ["root", "^(?!sudo_).*$"], "modules": ["cmd.*"]},
        )

    def test_badValues(self) -> None:
        """
        A wrong shape or an invalid regular expression fails the load with
        a message naming the file, the option and the problem.
        """
        cases = [
            ("publisher_acl: [fred]\n", "publisher_acl", "it is not a mapping"),
            ("publisher_acl: {fred: [5]}\n", "publisher_acl", "'fred', item 1"),
            ("publisher_acl: {fred: {a: b}}\n", "publisher_acl", "must be a list"),
            ("publisher_acl: {'%': [x.y]}\n", "publisher_acl", "needs a name"),
            (
                "publisher_acl: {fred: [{a: [x.y], b: [x.y]}]}\n",
                "publisher_acl",
                "exactly one target",
            ),
            (
                "publisher_acl: {fred: [{'web*': [{test.echo: {args: [a]}}]}]}\n",
                "publisher_acl",
                "argument restrictions",
            ),
            (
                "publisher_acl: {fred: ['pkg.(install']}\n",
                "publisher_acl",
                "not a valid regular expression",
            ),
            ("publisher_acl_blacklist: [root]\n", "publisher_acl_blacklist", "not a mapping"),
            (
                "publisher_acl_blacklist: {user: [root]}\n",
                "publisher_acl_blacklist",
                "unknown key 'user'",
            ),
            (
                "publisher_acl_blacklist: {modules: 'cmd.*'}\n",
                "publisher_acl_blacklist",
                "'modules' must be a list",
            ),
        ]
        for text, option, problem in cases:
            configDir = self.configDir(text)
            error = self.assertRaises(ConfigError, loadMasterConfig, configDir)
            message = str(error)
            self.assertIn(os.path.join(configDir, "master"), message)
            self.assertIn(f"option {option!r}", message)
            self.assertIn(problem, message)

    def test_invalidTargetAtStart(self) -> None:
        """
        A target restriction that is not a valid compound target stops the
        master at start, naming the entry and the target.
        """
        error = self.assertRaises(
            ValueError, makeAcl, {"fred": [{"X@nope": ["test.ping"]}]}, None, USERS
        )
        self.assertIn("'fred'", str(error))
        self.assertIn("'X@nope'", str(error))


class RulesTests(SynchronousTestCase):
    """
    Which entries apply to a user: by name, glob, regex or group.
    """

    def test_byNameGlobRegexGroup(self) -> None:
        """
        A user gets the items of every entry that names it, matches it as a
        glob or regex, or names (C{group%}) a group it is a listed member
        of or whose gid is its primary group.
        """
        acl = makeAcl(
            {
                "fred": ["test.ping"],
                "dev*": ["pkg.*"],
                "fr(e)d|barney": ["sys.doc"],
                "admins%": ["cmd.run"],
                "users%": ["grains.items"],
                "oper*%": ["state.apply"],
            }
        )

        def functions(user: str) -> set[str]:
            return {f for rule in acl.rulesFor(user) for f in rule.functions}

        self.assertEqual(functions("fred"), {"test.ping", "sys.doc"})
        self.assertEqual(functions("dev1"), {"pkg.*"})
        self.assertEqual(functions("wilma"), {"cmd.run", "grains.items"})
        self.assertEqual(functions("barney"), {"sys.doc", "state.apply"})
        self.assertEqual(functions("nobody"), set())


class AuthorizeTests(SynchronousTestCase):
    """
    L{PublisherAcl.authorize}: functions, target restrictions, blacklist.
    """

    def setUp(self) -> None:
        """
        fred may run C{test.*} and C{network.*} anywhere, C{pkg.*} on
        C{web*}, C{cmd.run} on C{web1} and on C{G@role:db} minions.
        """
        self.acl = makeAcl(
            {
                "fred": [
                    "test.*",
                    "network.*",
                    {"web*": ["pkg.*"]},
                    {"web1": ["cmd.run"]},
                    {"G@role:db": ["cmd.run"]},
                ],
                "wilma": [{"N@webs": ["test.ping"]}],
            },
            {"users": ["barney"], "modules": ["network.reboot"]},
            nodegroups={"webs": "web*"},
        )

    def refusal(self, *args: Any, **kwargs: Any) -> str:
        """
        @return: the message of the refusal C{authorize(*args)} must raise.
        """
        return str(self.assertRaises(AclRefused, self.acl.authorize, *args, **kwargs))

    def test_allowedEverywhere(self) -> None:
        """
        A function an item without a target allows may be run on any
        minions; the decision is not restricted.
        """
        decision = self.acl.authorize("fred", "test.ping", ["web1", "db1", "x"])
        self.assertFalse(decision.restricted)

    def test_functionNotAllowed(self) -> None:
        """
        A function no item allows is refused, naming the user and the
        function and what the user may run.
        """
        message = self.refusal("fred", "state.apply", ["web1"])
        self.assertIn("Authorization error occurred", message)
        self.assertIn("user fred is not permitted to run state.apply", message)
        self.assertIn("test.*, network.* on every minion", message)
        self.assertIn("pkg.* on minions matching 'web*'", message)

    def test_unknownUser(self) -> None:
        """
        A user no entry names is refused, saying so.
        """
        message = self.refusal("dev1", "test.ping", ["web1"])
        self.assertIn("user dev1 is not permitted to publish", message)
        self.assertIn("no publisher_acl entry", message)

    def test_targetSubset(self) -> None:
        """
        A function allowed only on a target may be run when every targeted
        minion matches it; the decision is restricted.
        """
        self.assertTrue(self.acl.authorize("fred", "pkg.install", ["web1", "web2"]).restricted)

    def test_targetNotSubset(self) -> None:
        """
        If one targeted minion is outside the target, the publish is
        refused, naming the minions outside and the allowed target.
        """
        message = self.refusal("fred", "pkg.install", ["web1", "db1", "db2"])
        self.assertIn("user fred is not permitted to run pkg.install on db1, db2", message)
        self.assertIn("only on minions matching 'web*'", message)

    def test_manyRefusedMinionsShortened(self) -> None:
        """
        A refusal names at most ten minions and counts the rest.
        """
        minions = [f"db{n:02}" for n in range(25)]
        message = self.refusal("fred", "pkg.install", minions)
        self.assertIn("db09 and 15 more", message)
        self.assertNotIn("db10", message)

    def test_itemsCombine(self) -> None:
        """
        Each targeted minion may be covered by a different item allowing
        the function: C{web1} by name, C{db1} by its cached grains.
        """
        grains = {"db1": {"role": "db"}}
        decision = self.acl.authorize("fred", "cmd.run", ["web1", "db1"], grains)
        self.assertTrue(decision.restricted)

    def test_unknownGrainsNotCovered(self) -> None:
        """
        A minion whose grains the master does not know is not covered by a
        grain target, and neither is one whose grains do not match.
        """
        message = self.refusal("fred", "cmd.run", ["db1", "db2"], {"db2": {"role": "web"}})
        self.assertIn("cmd.run on db1, db2", message)

    def test_nodegroupTarget(self) -> None:
        """
        A target restriction may use the master's nodegroups (C{N@}).
        """
        self.assertTrue(self.acl.authorize("wilma", "test.ping", ["web3"]).restricted)
        self.assertIn("on db1", self.refusal("wilma", "test.ping", ["db1"]))

    def test_noMinions(self) -> None:
        """
        A target that reaches no minion is allowed when the function is
        allowed somewhere, refused otherwise.
        """
        self.acl.authorize("fred", "pkg.install", [])
        self.refusal("fred", "state.apply", [])

    def test_blacklistedUser(self) -> None:
        """
        A blacklisted user is refused whatever the ACL says, naming the
        pattern.
        """
        acl = makeAcl({"barney": [".*"]}, {"users": ["barn*"]})
        message = str(self.assertRaises(AclRefused, acl.authorize, "barney", "test.ping", []))
        self.assertIn("user barney may not publish anything", message)
        self.assertIn("'barn*' in publisher_acl_blacklist users", message)

    def test_blacklistedFunction(self) -> None:
        """
        A blacklisted function is refused even where the ACL allows it.
        """
        message = self.refusal("fred", "network.reboot", ["web1"])
        self.assertIn("user fred may not run network.reboot", message)
        self.assertIn("'network.reboot' in publisher_acl_blacklist modules", message)

    def test_saltBlacklistExample(self) -> None:
        """
        Salt's example blacklist refuses root and every user not named
        C{sudo_*}, and C{cmd.*} for everyone.
        """
        acl = makeAcl({}, {"users": ["root", "^(?!sudo_).*$"], "modules": ["cmd.*"]})
        self.assertRaises(AclRefused, acl.checkBlacklist, "root", "test.ping")
        self.assertRaises(AclRefused, acl.checkBlacklist, "fred", "test.ping")
        self.assertRaises(AclRefused, acl.checkBlacklist, "sudo_fred", "cmd.run")
        acl.checkBlacklist("sudo_fred", "test.ping")
        self.assertTrue(acl.enabled)
        self.assertFalse(makeAcl({}).enabled)

    def test_ownFindJob(self) -> None:
        """
        C{saltutil.find_job} about the user's own job is allowed though no
        item allows it; the blacklist still applies.
        """
        self.refusal("fred", FIND_JOB, ["web1"])
        self.acl.authorize("fred", FIND_JOB, ["web1"], ownFindJob=True)
        self.refusal("barney", FIND_JOB, ["web1"], ownFindJob=True)

    def test_runnerRefusal(self) -> None:
        """
        The refusal of a runner names the user and the runner and says why.
        """
        message = str(self.acl.refuseRunner("fred", "manage.up"))
        self.assertIn("user fred may not run the runner manage.up", message)
        self.assertIn("external_auth", message)


class KeyAccountsTests(SynchronousTestCase):
    """
    L{keyAccounts}: who gets a key file.
    """

    def test_whoGetsAKey(self) -> None:
        """
        Users named directly, matched by a glob against every user, and
        members of a group (listed or by primary group) get a key; uid 0
        and excluded uids do not; names that do not exist are noted.
        """
        acl = makeAcl(
            {
                "fred": ["test.ping"],
                "dev*": ["test.ping"],
                "users%": ["test.ping"],
                "ghost": ["test.ping"],
                "nogroup%": ["test.ping"],
                "root": [".*"],
            }
        )
        accounts, notes = keyAccounts(acl, excludeUids={0, 1004})
        self.assertEqual(sorted(accounts), ["dev1", "fred", "wilma"])
        self.assertEqual(accounts["fred"], FRED)
        self.assertEqual(
            notes,
            [
                "publisher_acl entry 'ghost': no such user",
                "publisher_acl entry 'nogroup%': no such group, or it has no members",
            ],
        )

    def test_invalidNamesSkipped(self) -> None:
        """
        A user whose name could not be a file name (a slash, a leading dot)
        gets no key, with a note.
        """
        users = InMemoryUserDatabase([Account("../x", 2000, 2000), Account(".hid", 2001, 2001)])
        acl = makeAcl({"*": ["test.ping"]}, users=users)
        accounts, notes = keyAccounts(acl)
        self.assertEqual(accounts, {})
        self.assertEqual(len(notes), 2)


class KeyFileTests(SynchronousTestCase):
    """
    Writing, reading and removing C{cachedir/.<user>_key}.
    """

    def setUp(self) -> None:
        """
        An empty cache directory and a recording C{chown}.
        """
        self.cachedir = os.path.abspath(self.mktemp())
        os.makedirs(self.cachedir)
        self.chowned: list[tuple[str, int]] = []

    def chown(self, path: str, uid: int) -> None:
        """
        Record a C{chown}.
        """
        self.chowned.append((path, uid))

    def test_writtenPrivate(self) -> None:
        """
        Each user's key is 32 random bytes, stored in hex in
        C{.<user>_key} with mode 0400, and given to the user's uid.
        """
        keys = writeUserKeys(self.cachedir, {"fred": FRED, "dev1": DEV1}, self.chown)
        self.assertEqual(sorted(keys), ["dev1", "fred"])
        self.assertNotEqual(keys["fred"], keys["dev1"])
        path = os.path.join(self.cachedir, ".fred_key")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o400)
        self.assertEqual(len(keys["fred"]), 32)
        self.assertEqual(readUserKey(self.cachedir, "fred"), keys["fred"])
        self.assertEqual(
            sorted(self.chowned), [(os.path.join(self.cachedir, ".dev1_key"), 1003), (path, 1001)]
        )

    def test_newKeyEachStart(self) -> None:
        """
        Writing again replaces the key (a symlink planted at the path is
        replaced, its target untouched).
        """
        first = writeUserKeys(self.cachedir, {"fred": FRED}, self.chown)["fred"]
        victim = os.path.join(self.cachedir, "victim")
        with open(victim, "w") as f:
            f.write("keep")
        path = os.path.join(self.cachedir, ".fred_key")
        os.chmod(path, 0o600)
        os.unlink(path)
        os.symlink(victim, path)
        second = writeUserKeys(self.cachedir, {"fred": FRED}, self.chown)["fred"]
        self.assertNotEqual(first, second)
        self.assertFalse(os.path.islink(path))
        with open(victim) as f:
            self.assertEqual(f.read(), "keep")

    def test_chownFailureWarned(self) -> None:
        """
        If the key cannot be given to the user (the master is not root),
        a warning says the user cannot publish.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)

        def refuse(path: str, uid: int) -> None:
            raise PermissionError(1, "Operation not permitted")

        keys = writeUserKeys(self.cachedir, {"fred": FRED}, refuse)
        self.assertIn("fred", keys)
        messages = [formatEvent(event) for event in observer]
        self.assertTrue(any("fred cannot read its key" in m for m in messages), messages)

    def test_staleKeysRemoved(self) -> None:
        """
        Key files of users no longer named are removed; C{.root_key}, the
        keys of named users and other files stay.
        """
        for name in (".root_key", ".fred_key", ".bob_key", ".old_key", "jobs.sqlite", ".key"):
            with open(os.path.join(self.cachedir, name), "w") as f:
                f.write("x")
        removed = removeStaleKeys(self.cachedir, ["fred"])
        self.assertEqual(removed, ["bob", "old"])
        self.assertEqual(
            sorted(os.listdir(self.cachedir)), [".fred_key", ".key", ".root_key", "jobs.sqlite"]
        )

    def test_userNamesValidated(self) -> None:
        """
        A name that could leave the cache directory or hide a file is
        refused before any path is built.
        """
        for name in ("../x", "a/b", ".x", "", "x\x00", "x y"):
            self.assertRaises(ValueError, userKeyFile, self.cachedir, name)
        self.assertEqual(userKeyFile("/c", "web$"), "/c/.web$_key")

    def test_setUp(self) -> None:
        """
        At start the master removes stale keys, writes the named users'
        keys, and warns about a user who cannot search a directory on the
        way to its key or to the event bus.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        with open(os.path.join(self.cachedir, ".gone_key"), "w") as f:
            f.write("x")
        sockDir = os.path.join(self.cachedir, "sock")
        acl = makeAcl({"fred": ["test.ping"], "root": [".*"]})

        def fakeStat(path: str) -> os.stat_result:
            # Everything searchable by others, except the socket directory.
            mode = stat.S_IFDIR | (0o700 if path == sockDir else 0o711)
            return os.stat_result((mode, 0, 0, 2, 0, 0, 0, 0, 0, 0))

        keys = setUpUserKeys(
            {"cachedir": self.cachedir, "sock_dir": sockDir}, acl, {0}, self.chown, fakeStat
        )
        self.assertEqual(list(keys), ["fred"])
        self.assertEqual(sorted(os.listdir(self.cachedir)), [".fred_key"])
        messages = [formatEvent(event) for event in observer]
        self.assertTrue(
            any(f"fred cannot reach the event bus: {sockDir}" in m for m in messages), messages
        )
        self.assertFalse(any("cannot reach its key" in m for m in messages), messages)


class UnreachableDirectoryTests(SynchronousTestCase):
    """
    L{unreachableDirectory}: can a user search every directory on a path?
    """

    def stat(self, modes: dict[str, tuple[int, int, int]]) -> Any:
        """
        @param modes: path -> (mode, uid, gid); other paths are 0755 root.
        """

        def fakeStat(path: str) -> os.stat_result:
            mode, uid, gid = modes.get(path, (0o755, 0, 0))
            return os.stat_result((stat.S_IFDIR | mode, 0, 0, 2, uid, gid, 0, 0, 0, 0))

        return fakeStat

    def test_bits(self) -> None:
        """
        The owner, group or other execute bit decides, whichever class the
        user falls in; uid 0 reaches everything.
        """
        modes = {"/srv": (0o700, 0, 0), "/srv/a": (0o710, 0, 60)}
        self.assertEqual(unreachableDirectory("/srv/a", FRED, [1001], self.stat(modes)), "/srv")
        modes["/srv"] = (0o711, 0, 0)
        self.assertEqual(unreachableDirectory("/srv/a", FRED, [1001], self.stat(modes)), "/srv/a")
        self.assertIsNone(unreachableDirectory("/srv/a", FRED, [60], self.stat(modes)))
        modes["/srv/a"] = (0o700, 1001, 0)
        self.assertIsNone(unreachableDirectory("/srv/a", FRED, [], self.stat(modes)))
        self.assertIsNone(
            unreachableDirectory("/srv/a", Account("root", 0, 0), [], self.stat({"/": (0, 1, 1)}))
        )


class ReadClientKeyTests(SynchronousTestCase):
    """
    L{readClientKey}: the local client picks its key.
    """

    def setUp(self) -> None:
        """
        A cache directory with a root key and fred's key.
        """
        self.cachedir = os.path.abspath(self.mktemp())
        os.makedirs(self.cachedir)
        self.rootKey = os.urandom(32)
        with open(os.path.join(self.cachedir, ROOT_KEY_FILE), "w") as f:
            f.write(self.rootKey.hex())
        self.owner = os.stat(os.path.join(self.cachedir, ROOT_KEY_FILE)).st_uid
        self.fredKey = writeUserKeys(self.cachedir, {"fred": FRED}, lambda path, uid: None)["fred"]

    def test_rootOrMastersUser(self) -> None:
        """
        Root and the owner of C{.root_key} (the master's user) use the root
        key.
        """
        self.assertEqual(readClientKey(self.cachedir, "root", euid=0), self.rootKey)
        self.assertEqual(readClientKey(self.cachedir, "salt", euid=self.owner), self.rootKey)

    def test_otherUser(self) -> None:
        """
        Any other user uses C{.<user>_key}.
        """
        self.assertEqual(readClientKey(self.cachedir, "fred", euid=self.owner + 1), self.fredKey)

    def test_noKey(self) -> None:
        """
        A user without a readable key gets an error naming the user, the
        key file and publisher_acl.
        """
        error = self.assertRaises(
            MasterUnavailable, readClientKey, self.cachedir, "barney", euid=self.owner + 1
        )
        message = str(error)
        self.assertIn("user barney may not publish", message)
        self.assertIn(os.path.join(self.cachedir, ".barney_key"), message)
        self.assertIn("publisher_acl", message)
        error = self.assertRaises(
            MasterUnavailable, readClientKey, self.cachedir, "../fred", euid=self.owner + 1
        )
        self.assertIn("may not publish", str(error))


FRED_KEY = os.urandom(32)
MASTER_ACL = {
    "fred": ["test.*", {"m1": ["cmd.run"]}, {"G@role:web": ["pkg.install"]}],
}


class AclSessionTests(MasterTestCase):
    """
    A master whose C{publisher_acl} names fred: sessions with fred's key
    publish as fred, within the ACL.
    """

    def setUp(self) -> None:
        """
        Sessions and subscriptions for C{m1} and C{m2}; fred's key.
        """
        super().setUp()
        self.master.acl = makeAcl(MASTER_ACL, {"modules": ["test.rand_sleep"]})
        self.master.masterKeys.userKeys = {"fred": FRED_KEY}
        self.received = {}
        for minionId in ("m1", "m2"):
            _, _, sessionKey = self.authMinion(minionId)
            _, _, received, answer = self.subscribe(minionId, sessionKey)
            self.assertEqual(answer, "subscribed")
            self.received[minionId] = received
        self.events.clear()

    def login(self, user: str | None, key: bytes) -> tuple[ReqClientProtocol, Any, dict[str, Any]]:
        """
        Authenticate as the local client of C{user} with C{key}.

        @return: the client (in session if accepted), the master's
            protocol and the reply.
        """
        client, server = self.connectReq()
        nonce = os.urandom(NONCE_BYTES)
        mac = crypt.hmacSha256(key, wire.clientAuthMessage(server.challenge, nonce, user))
        load: dict[str, Any] = {"cmd": "_client_auth", "nonce": nonce, "mac": mac}
        if user is not None:
            load["user"] = user
        d = client.sendClear(load)
        self.net.flush()
        reply = self.successResultOf(d)
        if reply == {"ret": "ok"}:
            client.startSession(
                crypt.deriveKey(key, wire.clientSessionContext(server.challenge, nonce))
            )
        return client, server, reply

    def publish(self, client: ReqClientProtocol, **load: Any) -> Any:
        """
        Send a publish request.
        """
        return self.request(client, {"cmd": "publish", "arg": [], **load})

    def test_userKeyAuthenticates(self) -> None:
        """
        A MAC with fred's key naming fred opens a session whose user is
        fred and which the ACL governs.
        """
        _, server, reply = self.login("fred", FRED_KEY)
        self.assertEqual(reply, {"ret": "ok"})
        self.assertEqual(
            (server.role, server.clientUser, server.clientAcl), ("client", "fred", True)
        )

    def test_keyMustMatchUser(self) -> None:
        """
        The key decides: fred's key naming another user, the root key naming
        fred, a wrong key, and a MAC over a different user name all fail.
        """
        self.assertEqual(self.login("barney", FRED_KEY)[2]["ret"], "error")
        self.assertEqual(self.login("fred", ROOT_KEY)[2]["ret"], "error")
        self.assertEqual(self.login("fred", os.urandom(32))[2]["ret"], "error")
        client, server = self.connectReq()
        nonce = os.urandom(NONCE_BYTES)
        mac = crypt.hmacSha256(FRED_KEY, wire.clientAuthMessage(server.challenge, nonce, "fred"))
        d = client.sendClear({"cmd": "_client_auth", "nonce": nonce, "mac": mac, "user": "fre"})
        self.net.flush()
        self.assertEqual(self.successResultOf(d)["ret"], "error")

    def test_rootKeySession(self) -> None:
        """
        The root key, naming root or the master's user or no one, opens an
        unrestricted session.
        """
        for user in (None, "root", "salt"):
            _, server, reply = self.login(user, ROOT_KEY)
            self.assertEqual(reply, {"ret": "ok"})
            self.assertEqual(server.clientUser, user or "root")
            self.assertFalse(server.clientAcl)

    def test_allowedPublishAsFred(self) -> None:
        """
        fred publishes an allowed function; the job's user is fred, whatever
        the load claims.
        """
        client, _, _ = self.login("fred", FRED_KEY)
        reply = self.successResultOf(self.publish(client, tgt="*", fun="test.ping", user="root"))
        self.assertEqual(reply["minions"], ["m1", "m2"])
        [(tag, data)] = self.eventsTagged("salt/job/")
        self.assertEqual(data["user"], "fred")
        self.assertEqual(self.master.jobs.get(reply["jid"]).load["user"], "fred")
        self.assertEqual(len(self.received["m1"]), 1)

    def test_refusedFunction(self) -> None:
        """
        A function the ACL does not allow fred is refused with the reason;
        nothing is published or fired.
        """
        client, _, _ = self.login("fred", FRED_KEY)
        message = self.requestError(
            client, {"cmd": "publish", "tgt": "*", "fun": "state.apply", "arg": []}
        )
        self.assertIn("Authorization error occurred", message)
        self.assertIn("user fred is not permitted to run state.apply", message)
        self.assertEqual(self.events, [])
        self.assertEqual(self.received, {"m1": [], "m2": []})

    def test_refusedTarget(self) -> None:
        """
        A function allowed only on C{m1} runs on C{m1} and is refused on
        C{*}, naming the minion outside the restriction.
        """
        client, _, _ = self.login("fred", FRED_KEY)
        reply = self.successResultOf(self.publish(client, tgt="m1", fun="cmd.run", arg=["id"]))
        self.assertEqual(reply["minions"], ["m1"])
        message = self.requestError(
            client, {"cmd": "publish", "tgt": "*", "fun": "cmd.run", "arg": ["id"]}
        )
        self.assertIn("user fred is not permitted to run cmd.run on m2", message)
        self.assertIn("only on minions matching 'm1'", message)
        # Only the allowed job was broadcast (every subscriber gets each).
        self.assertEqual(len(self.received["m2"]), 1)

    def test_everyAclJobPublishedByName(self) -> None:
        """
        Whatever its target, an ACL user's job (here a glob, and its own
        C{saltutil.find_job}) is published to the minions the ACL was
        checked for, by name: a minion accepted meanwhile, or whose real
        grains differ from the cache, cannot run it.
        """
        client, _, _ = self.login("fred", FRED_KEY)
        reply = self.successResultOf(self.publish(client, tgt="m*", fun="test.ping"))
        self.assertEqual(sorted(reply["minions"]), ["m1", "m2"])
        [frame] = self.received["m1"]
        publication = self.master.publicationKey
        load = serial.loads(
            publication.cipher().decrypt(frame["pub"], wire.publicationAad(frame["kid"]))
        )
        self.assertEqual(load["tgt_type"], "list")
        self.assertEqual(sorted(load["tgt"]), ["m1", "m2"])

    def test_grainTargetPublishedByName(self) -> None:
        """
        When a target restriction on grains allowed the job and the target
        itself uses grains, the job is published to the checked minions by
        name, so a minion whose real grains differ from the cache does not
        run it.
        """
        self.master.grainsCache.grains.update({"m1": {"role": "db"}, "m2": {"role": "web"}})
        client, _, _ = self.login("fred", FRED_KEY)
        reply = self.successResultOf(
            self.publish(client, tgt="G@role:web", tgt_type="compound", fun="pkg.install")
        )
        self.assertEqual(reply["minions"], ["m2"])
        [frame] = self.received["m2"]
        publication = self.master.publicationKey
        load = serial.loads(
            publication.cipher().decrypt(frame["pub"], wire.publicationAad(frame["kid"]))
        )
        self.assertEqual((load["tgt"], load["tgt_type"]), (["m2"], "list"))
        del self.master.grainsCache.grains["m1"]
        message = self.requestError(
            client,
            {"cmd": "publish", "tgt": "G@role:web", "tgt_type": "compound", "fun": "pkg.install"},
        )
        self.assertIn("pkg.install on m1", message)

    def test_findJobOwnJobsOnly(self) -> None:
        """
        fred may ask its job's minions about its own job with
        C{saltutil.find_job}, not about another user's job.
        """
        fred, _, _ = self.login("fred", FRED_KEY)
        root, _, _ = self.login(None, ROOT_KEY)
        own = self.successResultOf(self.publish(fred, tgt="m1", fun="test.ping"))["jid"]
        other = self.successResultOf(self.publish(root, tgt="m1", fun="test.ping"))["jid"]
        reply = self.successResultOf(
            self.publish(fred, tgt=["m1"], tgt_type="list", fun=FIND_JOB, arg=[own])
        )
        self.assertEqual(reply["minions"], ["m1"])
        findJob = {"cmd": "publish", "tgt_type": "list", "fun": FIND_JOB}
        message = self.requestError(fred, {**findJob, "tgt": ["m1"], "arg": [other]})
        self.assertIn(f"not permitted to run {FIND_JOB}", message)
        message = self.requestError(fred, {**findJob, "tgt": ["m1", "m2"], "arg": [own]})
        self.assertIn(f"not permitted to run {FIND_JOB}", message)

    def test_blacklistAppliesToRoot(self) -> None:
        """
        The blacklist refuses a function for the root key's session too,
        as in Salt; other functions run.
        """
        root, _, _ = self.login(None, ROOT_KEY)
        message = self.requestError(
            root, {"cmd": "publish", "tgt": "*", "fun": "test.rand_sleep", "arg": []}
        )
        self.assertIn("user root may not run test.rand_sleep", message)
        self.successResultOf(self.publish(root, tgt="*", fun="cmd.run", arg=["id"]))

    def test_runnerRefused(self) -> None:
        """
        A publisher_acl session may not run runners; the root key's may.
        """
        fred, _, _ = self.login("fred", FRED_KEY)
        message = self.requestError(fred, {"cmd": "runner", "fun": "manage.up", "arg": []})
        self.assertIn("user fred may not run the runner manage.up", message)
        self.assertEqual(self.eventsTagged("salt/run/"), [])
        root, _, _ = self.login(None, ROOT_KEY)
        self.successResultOf(self.request(root, {"cmd": "runner", "fun": "manage.up", "arg": []}))

    def test_invalidAclStopsMaster(self) -> None:
        """
        A master whose target restriction is invalid does not start; the
        error names the config file and the target.
        """
        root = self.mktemp()
        config = loadMasterConfig(
            root,
            overrides={"root_dir": root, "publisher_acl": {"fred": [{"X@x": ["test.ping"]}]}},
        )
        error = self.assertRaises(
            StartupError,
            Master,
            config,
            MasterKeys(MASTER_KEY, MASTER_PEM, ROOT_KEY),
            InMemoryKeyStore(),
            LocalEventBus(),
            runSynchronously,
            MemoryReactorClock(),
        )
        self.assertIn(config["conf_file"], str(error))
        self.assertIn("'X@x'", str(error))
