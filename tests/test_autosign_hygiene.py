# -*- test-case-name: tests.test_autosign_hygiene -*-
"""
Tests for L{salttwist.pki.autosign.hygiene} and its use by the autosign
policies: real files in temporary directories with real modes and owners
(the tests run as root, and give files to C{nobody} to have them "owned by
someone else").
"""

from __future__ import annotations

import os
import pwd
import stat
from typing import Any

from twisted.internet.testing import EventLoggingObserver
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from salttwist.blocking import runSynchronously
from salttwist.pki.autosign import (
    ACCEPT,
    PENDING,
    AutoAcceptPolicy,
    AutorejectFilePolicy,
    AutosignFilePolicy,
    CompositeAutosignPolicy,
    GrainsPolicy,
    PolicyExecutablePolicy,
    PolicyProcessRunner,
    buildAutosignPolicy,
)
from salttwist.pki.autosign.hygiene import (
    UntrustedPathError,
    checkAutosignFiles,
    checkTrusted,
)

from .test_autosign import PEM, ProcessReactor, decided

CONTEXT: dict[str, Any] = {"peer": "192.0.2.7:51234", "autosign_grains": {"role": "web"}}


def _nobody() -> int:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:  # pragma: no cover
        return 65534


class _Files:
    """
    Files and directories with chosen modes, in a fresh trusted directory
    (0700, owned by the test's user) under trial's temporary directory.
    """

    def setUp(self) -> None:
        if os.geteuid() != 0:  # pragma: no cover
            self.skipTest("needs root to give files to another user")  # type: ignore[attr-defined]
        self.root = os.path.abspath(self.mktemp())  # type: ignore[attr-defined]
        os.makedirs(self.root)
        os.chmod(self.root, 0o700)
        self.observer = EventLoggingObserver.createWithCleanup(
            self,  # type: ignore[arg-type]
            globalLogPublisher,
        )

    def file(
        self,
        name: str,
        text: str = "web*\n",
        mode: int = 0o644,
        directory: str | None = None,
        owner: int | None = None,
    ) -> str:
        path = os.path.join(directory or self.root, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        if owner is not None:
            os.chown(path, owner, -1)
        return path

    def directory(self, name: str, mode: int = 0o755, owner: int | None = None) -> str:
        path = os.path.join(self.root, name)
        os.mkdir(path)
        os.chmod(path, mode)
        if owner is not None:
            os.chown(path, owner, -1)
        return path

    def errors(self) -> list[str]:
        return [
            formatEvent(e)
            for e in self.observer  # type: ignore[attr-defined]
            if e["log_level"] == LogLevel.error
        ]


class CheckTrustedTests(_Files, SynchronousTestCase):
    """
    L{checkTrusted} accepts only files that root and the master's user alone
    can change.
    """

    def assertUntrusted(self, path: str, *words: str, **kwargs: Any) -> str:
        e = self.assertRaises(UntrustedPathError, checkTrusted, path, "autosign_file", **kwargs)
        for word in words:
            self.assertIn(word, str(e))
        return str(e)

    def test_trusted(self) -> None:
        """
        A 0644 file owned by root in a 0755 directory is trusted, and so is
        one in a sticky world-writable directory (as /tmp).
        """
        checkTrusted(self.file("a"), "autosign_file")
        sticky = self.directory("sticky", 0o1777)
        checkTrusted(self.file("b", directory=sticky), "autosign_file")

    def test_worldWritable(self) -> None:
        """
        A 0666 file is refused; the message names the file and the fix.
        """
        path = self.file("a", mode=0o666)
        self.assertUntrusted(path, "autosign_file", path, "chmod go-w", "0666")

    def test_groupWritable(self) -> None:
        """
        A group-writable file is refused too.
        """
        self.assertUntrusted(self.file("a", mode=0o664), "chmod go-w")

    def test_ownedBySomeoneElse(self) -> None:
        """
        A file owned by another user (nobody) is refused, saying to chown it.
        """
        path = self.file("a", owner=_nobody())
        self.assertUntrusted(path, path, "chown root", f"uid {_nobody()}")

    def test_masterUserTrusted(self) -> None:
        """
        A file owned by the master's user (when it is not root) is trusted.
        """
        checkTrusted(self.file("a", owner=_nobody()), "autosign_file", euid=_nobody())

    def test_writableDirectory(self) -> None:
        """
        A good file in a group- or world-writable directory (no sticky bit)
        is refused, naming the directory and its fix.
        """
        for mode in (0o777, 0o775):
            directory = self.directory(f"d{mode:o}", mode)
            path = self.file("a", directory=directory)
            self.assertUntrusted(path, directory, f"chmod go-w {directory}")

    def test_directoryOwnedBySomeoneElse(self) -> None:
        """
        A good file in a directory owned by another user is refused.
        """
        directory = self.directory("d", owner=_nobody())
        self.assertUntrusted(self.file("a", directory=directory), directory, "chown")

    def test_ancestorChecked(self) -> None:
        """
        Every directory above is checked, not only the nearest.
        """
        top = self.directory("top", 0o777)
        inner = os.path.join(top, "inner")
        os.mkdir(inner, 0o755)
        self.assertUntrusted(self.file("a", directory=inner), top)

    def test_symlinkTargetChecked(self) -> None:
        """
        A link in a good directory to a file in a world-writable one is
        refused: the directories are checked once links are resolved too.
        """
        bad = self.directory("bad", 0o777)
        target = self.file("a", directory=bad)
        link = os.path.join(self.directory("good"), "link")
        os.symlink(target, link)
        self.assertUntrusted(link, bad)

    def test_fifoRefused(self) -> None:
        """
        A FIFO (which would block the reading thread) is not a regular file.
        """
        path = os.path.join(self.root, "fifo")
        os.mkfifo(path, 0o600)
        self.assertUntrusted(path, "not a regular file")

    def test_missing(self) -> None:
        """
        A missing file raises L{FileNotFoundError}: the policy decides what
        that means.
        """
        self.assertRaises(
            FileNotFoundError, checkTrusted, os.path.join(self.root, "no"), "autosign_file"
        )


class PolicyHygieneTests(_Files, SynchronousTestCase):
    """
    Every autosign policy file is checked at each use: an untrusted one is
    not used, the key stays pending, and an error names the file and fix.
    """

    def setUp(self) -> None:
        super().setUp()
        self.reactor = ProcessReactor()
        self.runner = PolicyProcessRunner(self.reactor, 10, 4, 65536, environ={})

    def assertRefused(self, policy: Any, path: str, fix: str = "chmod go-w") -> None:
        decision = decided(self, policy.decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn(path, decision.reason)
        self.assertEqual(self.reactor.spawns, [])
        [error] = self.errors()
        self.assertIn(path, error)
        self.assertIn(fix, error)

    def test_worldWritableWhitelist(self) -> None:
        """
        A world-writable C{autosign_file} holding C{*} accepts nothing;
        once fixed (chmod go-w) it is used at the next decision.
        """
        path = self.file("autosign.conf", "*\n", 0o666)
        policy = AutosignFilePolicy(path, self.runner, runSynchronously)
        self.assertRefused(policy, path)
        os.chmod(path, 0o644)
        self.assertEqual(decided(self, policy.decide("web1", PEM, CONTEXT)).verdict, ACCEPT)

    def test_whitelistOwnedBySomeoneElse(self) -> None:
        """
        An C{autosign_file} owned by another user is not used.
        """
        path = self.file("autosign.conf", "*\n", owner=_nobody())
        self.assertRefused(AutosignFilePolicy(path, self.runner, runSynchronously), path, "chown")

    def test_writableExecutableWhitelistNotRun(self) -> None:
        """
        An executable C{autosign_file} (a policy executable, as in Puppet)
        that others can write is never run.
        """
        path = self.file("autosign.conf", "#!/bin/sh\nexit 0\n", 0o777)
        self.assertRefused(AutosignFilePolicy(path, self.runner, runSynchronously), path)

    def test_trustedExecutableWhitelistRun(self) -> None:
        """
        A trusted executable C{autosign_file} is still run.
        """
        path = self.file("autosign.conf", "#!/bin/sh\nexit 0\n", 0o755)
        AutosignFilePolicy(path, self.runner, runSynchronously).decide("web1", PEM, CONTEXT)
        self.assertEqual(len(self.reactor.spawns), 1)

    def test_untrustedPolicyExecutable(self) -> None:
        """
        An C{autosign_policy} writable by its group, or in a world-writable
        directory, is not run.
        """
        path = self.file("policy", "#!/bin/sh\nexit 0\n", 0o775)
        self.assertRefused(PolicyExecutablePolicy(path, self.runner, runSynchronously), path)

    def test_policyExecutableInWritableDirectory(self) -> None:
        """
        A good C{autosign_policy} in a world-writable directory is not run.
        """
        directory = self.directory("bin", 0o777)
        path = self.file("policy", "#!/bin/sh\nexit 0\n", 0o755, directory=directory)
        policy = PolicyExecutablePolicy(path, self.runner, runSynchronously)
        self.assertRefused(policy, path, f"chmod go-w {directory}")

    def test_untrustedRejectFileStopsEverything(self) -> None:
        """
        An C{autoreject_file} others can write is not used, and (a rejection
        list that cannot be checked) no key is accepted, even by
        C{auto_accept}.
        """
        path = self.file("autoreject.conf", "nobody\n", 0o646)
        composite = CompositeAutosignPolicy(
            [AutorejectFilePolicy(path, runSynchronously)], [AutoAcceptPolicy()]
        )
        decision = decided(self, composite.decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))
        self.assertIn("chmod go-w", decision.reason)

    def test_untrustedGrainsDirectory(self) -> None:
        """
        A world-writable C{autosign_grains_dir} is not used.
        """
        directory = self.directory("grains", 0o777)
        self.file("role", "web\n", directory=directory)
        self.assertRefused(GrainsPolicy(directory, runSynchronously), directory)

    def test_untrustedGrainFile(self) -> None:
        """
        A grain file owned by another user, or writable by others, makes
        the grains policy refuse the directory.
        """
        directory = self.directory("grains")
        path = self.file("role", "web\n", directory=directory, owner=_nobody())
        policy = GrainsPolicy(directory, runSynchronously)
        self.assertRefused(policy, path, "chown")
        os.chown(path, 0, -1)
        self.assertEqual(decided(self, policy.decide("web1", PEM, CONTEXT)).verdict, ACCEPT)
        os.chmod(path, 0o666)
        decision = decided(self, policy.decide("web1", PEM, CONTEXT))
        self.assertEqual((decision.verdict, decision.failed), (PENDING, True))


class StartCheckTests(_Files, SynchronousTestCase):
    """
    The master checks the files at start, logging an error per problem.
    """

    def test_checkAutosignFiles(self) -> None:
        """
        L{checkAutosignFiles} reports each untrusted configured file and
        ignores missing ones.
        """
        grains = self.directory("grains")
        bad = self.file("role", "web\n", 0o666, directory=grains)
        config = {
            "autosign_file": self.file("autosign.conf", mode=0o666),
            "autoreject_file": self.file("autoreject.conf"),
            "autosign_policy": os.path.join(self.root, "missing"),
            "autosign_grains_dir": grains,
        }
        problems = checkAutosignFiles(config)
        self.assertEqual(len(problems), 2)
        self.assertIn(config["autosign_file"], problems[0])
        self.assertIn(bad, problems[1])

    def test_loggedAtBuild(self) -> None:
        """
        L{buildAutosignPolicy} (the master's start) logs an error naming an
        untrusted file and the fix.
        """
        path = self.file("autosign.conf", mode=0o666)
        buildAutosignPolicy({"autosign_file": path}, ProcessReactor(), runSynchronously)
        [error] = self.errors()
        self.assertIn(path, error)
        self.assertIn("chmod go-w", error)

    def test_nothingLoggedWhenClean(self) -> None:
        """
        Trusted files log nothing at start.
        """
        buildAutosignPolicy(
            {"autosign_file": self.file("autosign.conf")}, ProcessReactor(), runSynchronously
        )
        self.assertEqual(self.errors(), [])


class TrialTempIsTrusted(SynchronousTestCase):
    """
    The other autosign tests write their files under trial's temporary
    directory; they rely on it being trusted (mode bits of this checkout).
    """

    def test_trialTemp(self) -> None:
        path = os.path.abspath(self.mktemp())
        os.makedirs(path)
        with open(os.path.join(path, "f"), "w"):
            pass
        info = os.stat(os.path.dirname(os.path.dirname(path)))
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):  # pragma: no cover
            self.skipTest("trial's temporary directory is group- or world-writable")
        checkTrusted(os.path.join(path, "f"), "autosign_file")
