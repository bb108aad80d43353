# -*- test-case-name: tests.test_daemon_user -*-
"""
Tests for the C{user} option and C{-u/--user}: resolving the user, the
paths handed over to it and the switch (L{salttwist.daemon}), and their
plumbing through C{salttwist-master}/C{salttwist-minion} and the twistd
plugins. Nothing here changes the uid of the test process: the ownership
and uid calls are replaced by recorders.
"""

from __future__ import annotations

import argparse
import io
import os
import pwd
import sys
from typing import Any

from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, globalLogPublisher
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from salttwist.cli import daemons
from salttwist.config import loadMasterConfig
from salttwist.daemon import (
    RunAs,
    StartupError,
    chownForUser,
    daemonPaths,
    dropPrivileges,
    resolveUser,
)
from salttwist.logs import FILE_ENV
from salttwist.master import tap as masterTap
from salttwist.minion import service as minionService
from salttwist.minion import tap as minionTap
from salttwist.minion.service import MinionService

ALICE = pwd.struct_passwd(("alice", "x", 1001, 1002, "", "/home/alice", "/bin/sh"))


def _getpwnam(name: str) -> pwd.struct_passwd:
    if name == "alice":
        return ALICE
    raise KeyError(name)


class ResolveUserTests(SynchronousTestCase):
    """
    Tests for L{resolveUser}.
    """

    def test_unset(self) -> None:
        """
        No user (C{None} or empty) means nothing to switch to.
        """
        self.assertIsNone(resolveUser(None, _getpwnam, lambda: 0))
        self.assertIsNone(resolveUser("", _getpwnam, lambda: 0))

    def test_rootSwitches(self) -> None:
        """
        Root asking for an existing user gets that user's uid and primary gid.
        """
        self.assertEqual(resolveUser("alice", _getpwnam, lambda: 0), RunAs("alice", 1001, 1002))

    def test_alreadyThatUser(self) -> None:
        """
        A daemon already running as the user has nothing to switch.
        """
        self.assertIsNone(resolveUser("alice", _getpwnam, lambda: 1001))

    def test_unknownUser(self) -> None:
        """
        A user that does not exist is a start error naming it and the option.
        """
        e = self.assertRaises(StartupError, resolveUser, "mallory", _getpwnam, lambda: 0)
        self.assertIn("'mallory'", str(e))
        self.assertIn("does not exist", str(e))
        self.assertIn("user", str(e))

    def test_notRoot(self) -> None:
        """
        Only root can switch to another user: anyone else gets an error that
        says so and names the user.
        """
        e = self.assertRaises(StartupError, resolveUser, "alice", _getpwnam, lambda: 1500)
        self.assertIn("'alice'", str(e))
        self.assertIn("only root", str(e))


class DaemonPathsTests(SynchronousTestCase):
    """
    Tests for L{daemonPaths}.
    """

    def test_paths(self) -> None:
        """
        The private directories are handed over with their content; the
        pidfile and the log files (the config's and the one the daemon
        logs to) as single files; no syslog URL or standard output.
        """
        self.patch(os, "environ", {FILE_ENV: "/other/log"})
        config = {
            "pki_dir": "/p",
            "cachedir": "/c",
            "sock_dir": "/s",
            "pidfile": "/run/x.pid",
            "log_file": "/log/master",
        }
        self.assertEqual(
            daemonPaths(config), (["/p", "/c", "/s"], ["/run/x.pid", "/log/master", "/other/log"])
        )
        self.patch(os, "environ", {FILE_ENV: "-"})
        config["log_file"] = "udp://localhost:514"
        self.assertEqual(daemonPaths(config)[1], ["/run/x.pid"])


class ChownForUserTests(SynchronousTestCase):
    """
    Tests for L{chownForUser}, with a recording C{lchown}.
    """

    def setUp(self) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self.top = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(self.top, "sub"))
        for name in ("a", os.path.join("sub", "b")):
            with open(os.path.join(self.top, name), "w") as f:
                f.write("x")

    def lchown(self, path: str, uid: int, gid: int) -> None:
        self.calls.append((path, uid, gid))

    def test_recursive(self) -> None:
        """
        The directory and everything in it go to the user, and so do the
        single files that exist; missing ones are skipped.
        """
        logFile = os.path.join(self.top, "..", "log-" + os.path.basename(self.top))
        with open(logFile, "w"):
            pass
        self.addCleanup(os.unlink, logFile)
        chownForUser(RunAs("alice", 1001, 1002), [self.top], [logFile, "/nonexistent"], self.lchown)
        paths = {path for path, uid, gid in self.calls if (uid, gid) == (1001, 1002)}
        top = self.top
        expected = {top, *(os.path.join(top, n) for n in ("a", "sub", os.path.join("sub", "b")))}
        self.assertEqual(paths, {*expected, logFile})
        self.assertEqual(len(self.calls), len(paths))

    def test_linksLeftAlone(self) -> None:
        """
        A symbolic link is not followed nor changed, and a file with several
        hard links is skipped: the user could have planted either to get a
        file of root's.
        """
        os.symlink("/etc/passwd", os.path.join(self.top, "link"))
        os.link(os.path.join(self.top, "a"), os.path.join(self.top, "hard"))
        chownForUser(RunAs("alice", 1001, 1002), [self.top], [], self.lchown)
        changed = {os.path.basename(path) for path, _, _ in self.calls}
        self.assertNotIn("link", changed)
        self.assertNotIn("hard", changed)
        self.assertNotIn("a", changed)
        self.assertIn("b", changed)

    def test_aclKeysLeftToTheirUsers(self) -> None:
        """
        The publisher_acl users' key files (C{.<user>_key}) keep their
        owners; the master's own C{.root_key} goes to the user like the rest.
        """
        for name in (".fred_key", ".root_key"):
            with open(os.path.join(self.top, name), "w") as f:
                f.write("k")
        chownForUser(RunAs("alice", 1001, 1002), [self.top], [], self.lchown)
        changed = {os.path.basename(path) for path, _, _ in self.calls}
        self.assertNotIn(".fred_key", changed)
        self.assertIn(".root_key", changed)

    def test_alreadyOwned(self) -> None:
        """
        Files that already belong to the user are not changed again.
        """
        me = RunAs("me", os.getuid(), os.getgid())
        chownForUser(me, [self.top], [], self.lchown)
        self.assertEqual([path for path, _, _ in self.calls], [self.top])


class DropPrivilegesTests(SynchronousTestCase):
    """
    Tests for L{dropPrivileges}.
    """

    def test_noUser(self) -> None:
        """
        Without a user nothing is changed.
        """
        calls: list[Any] = []
        dropPrivileges(None, {}, lambda *a: calls.append(a), lambda *a: calls.append(a))
        self.assertEqual(calls, [])

    def test_chownThenSwitch(self) -> None:
        """
        The paths are handed over first (as root), then the uid and gid are
        switched (which also sets the user's supplementary groups).
        """
        calls: list[Any] = []
        self.patch(os, "environ", {})
        config = {"pki_dir": "/p", "cachedir": "/c", "sock_dir": "/s", "pidfile": "/x.pid"}
        runAs = RunAs("alice", 1001, 1002)
        dropPrivileges(
            runAs,
            config,
            lambda *a: calls.append(("chown", *a)),
            lambda *a: calls.append(("switch", *a)),
        )
        self.assertEqual(
            calls,
            [("chown", runAs, ["/p", "/c", "/s"], ["/x.pid"]), ("switch", 1001, 1002)],
        )


class PlumbingTests(SynchronousTestCase):
    """
    C{-u/--user} through the command line wrappers and the twistd plugins.
    """

    def test_twistdArgs(self) -> None:
        """
        The wrapper hands C{-u USER} to the plugin, and nothing without it.
        """
        config = {"pidfile": "/x.pid"}
        options = argparse.Namespace(daemon=False, config_dir="/etc/st", user="alice")
        self.assertEqual(
            daemons.twistdArgs("salttwist-master", options, config)[-5:],
            ["salttwist-master", "-c", "/etc/st", "-u", "alice"],
        )
        options.user = None
        self.assertEqual(
            daemons.twistdArgs("salttwist-master", options, config)[-3:],
            ["salttwist-master", "-c", "/etc/st"],
        )

    def test_unknownUserExits2(self) -> None:
        """
        C{salttwist-master -u} with a user that does not exist exits 2 with
        a message naming it, before twistd runs.
        """
        stderr = io.StringIO()
        self.patch(sys, "stderr", stderr)
        configDir = self.mktemp()
        os.makedirs(configDir)
        code = daemons.masterMain(["-c", configDir, "-u", "no-such-user-st"])
        self.assertEqual(code, 2)
        self.assertIn("'no-such-user-st'", stderr.getvalue())
        self.assertIn("does not exist", stderr.getvalue())

    def test_pluginOptionOverridesConfig(self) -> None:
        """
        The plugin's C{-u} wins over the config's C{user}; the resolved user
        is kept for the service (L{None}: already that user).
        """
        configDir = self.mktemp()
        os.makedirs(configDir)
        with open(os.path.join(configDir, "minion"), "w") as f:
            f.write("user: no-such-user-st\n")
        me = pwd.getpwuid(os.geteuid()).pw_name
        options = minionTap.Options()
        options.parseOptions(["-c", configDir, "-u", me])
        self.assertEqual(options["config"]["user"], me)
        self.assertIsNone(options["runAs"])

    def test_pluginUnknownUser(self) -> None:
        """
        The plugin refuses a config whose user does not exist, naming it.
        """
        configDir = self.mktemp()
        os.makedirs(configDir)
        with open(os.path.join(configDir, "master"), "w") as f:
            f.write("user: no-such-user-st\n")
        options = masterTap.Options()
        e = self.assertRaises(usage.UsageError, options.parseOptions, ["-c", configDir])
        self.assertIn("'no-such-user-st'", str(e))

    def test_configUserDoesNotWarn(self) -> None:
        """
        C{user} is implemented: the config takes it as given, without the
        "not implemented yet" warning.
        """
        observer = EventLoggingObserver.createWithCleanup(self, globalLogPublisher)
        configDir = self.mktemp()
        os.makedirs(configDir)
        config = loadMasterConfig(configDir, {"user": "alice"})
        self.assertEqual(config["user"], "alice")
        self.assertEqual([e for e in observer if e["log_level"] == LogLevel.warn], [])

    def test_minionServiceDrops(self) -> None:
        """
        L{MinionService.privilegedStartService} switches to its C{runAs}
        with the minion's config.
        """
        calls: list[Any] = []
        self.patch(
            minionService, "dropPrivileges", lambda runAs, config: calls.append((runAs, config))
        )

        class FakeMinion:
            config = {"pki_dir": "/p"}

        service = MinionService(FakeMinion())  # type: ignore[arg-type]
        service.runAs = RunAs("alice", 1001, 1002)
        service.privilegedStartService()
        self.assertEqual(calls, [(RunAs("alice", 1001, 1002), {"pki_dir": "/p"})])
