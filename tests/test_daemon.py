# -*- test-case-name: tests.test_daemon -*-
"""
Tests for L{salttwist.daemon}, L{salttwist.logs} and the CI runner's
summary in C{tools/runtests.py}.
"""

from __future__ import annotations

import io
import os
import pwd
import stat

from twisted.logger import Logger, LogLevel, LogPublisher
from twisted.trial.unittest import SkipTest, SynchronousTestCase

from salttwist.daemon import (
    StartupError,
    checkMinionPki,
    checkPrivatePath,
    ensurePrivateDir,
    readRuntimeFile,
    writeRuntimeFile,
)
from salttwist.logs import filteredObserver
from tests._scripts import loadScript


class EnsurePrivateDirTests(SynchronousTestCase):
    """
    L{ensurePrivateDir} makes or vets a directory only its owner can write.
    """

    def setUp(self) -> None:
        """
        Make a base directory.
        """
        self.base = self.mktemp()
        os.makedirs(self.base)

    def mode(self, path: str) -> int:
        """
        @return: the permission bits of C{path}.
        """
        return stat.S_IMODE(os.lstat(path).st_mode)

    def test_creates(self) -> None:
        """
        A missing directory, and its missing parents, are created with mode
        0700, whatever the umask.
        """
        oldUmask = os.umask(0)
        self.addCleanup(os.umask, oldUmask)
        path = os.path.join(self.base, "a", "b")
        ensurePrivateDir(path)
        self.assertTrue(os.path.isdir(path))
        self.assertEqual(self.mode(path), 0o700)
        self.assertEqual(self.mode(os.path.join(self.base, "a")), 0o700)

    def test_existingParentsUntouched(self) -> None:
        """
        Parents that already exist keep their mode; only the missing ones are
        created.
        """
        os.chmod(self.base, 0o755)
        path = os.path.join(self.base, "new")
        ensurePrivateDir(path + os.sep)
        self.assertEqual(self.mode(self.base), 0o755)
        self.assertEqual(self.mode(path), 0o700)

    def test_fileInPath(self) -> None:
        """
        A regular file where a parent should be is a L{StartupError}.
        """
        blocker = os.path.join(self.base, "file")
        with open(blocker, "w") as f:
            f.write("x")
        self.assertRaises(StartupError, ensurePrivateDir, os.path.join(blocker, "sub"))

    def test_existingPrivate(self) -> None:
        """
        An existing directory not writable by others is accepted as it is.
        """
        path = os.path.join(self.base, "d")
        os.mkdir(path)
        os.chmod(path, 0o755)
        ensurePrivateDir(path)
        self.assertEqual(self.mode(path), 0o755)

    def test_groupOrOtherWritable(self) -> None:
        """
        A directory writable by group or others is refused with a
        L{StartupError} telling the admin to run C{chmod go-w}.
        """
        for mode in (0o770, 0o707, 0o777, 0o1777):
            path = os.path.join(self.base, f"d{mode:o}")
            os.mkdir(path)
            os.chmod(path, mode)
            e = self.assertRaises(StartupError, ensurePrivateDir, path)
            self.assertIn(f"chmod go-w {path}", str(e))

    def test_symlink(self) -> None:
        """
        A symlink, even to a private directory, is refused.
        """
        target = os.path.join(self.base, "real")
        os.mkdir(target, 0o700)
        link = os.path.join(self.base, "link")
        os.symlink(target, link)
        e = self.assertRaises(StartupError, ensurePrivateDir, link)
        self.assertIn("link", str(e))

    def test_file(self) -> None:
        """
        A regular file in the way is refused.
        """
        path = os.path.join(self.base, "file")
        with open(path, "w") as f:
            f.write("x")
        self.assertRaises(StartupError, ensurePrivateDir, path)


class MinionPkiTests(SynchronousTestCase):
    """
    L{checkMinionPki} refuses a minion C{pki_dir} (0700), C{minion.pem}
    (0600) or C{minion_master.pub} (not writable by group or others) that
    other users could read or change, on real files, naming the file and
    the fix.
    """

    def setUp(self) -> None:
        """
        Make a C{pki_dir} as a minion leaves it: 0700, its key 0600, the
        pinned master key 0644.
        """
        self.pki = os.path.abspath(self.mktemp())
        os.mkdir(self.pki, 0o700)
        self.pem = os.path.join(self.pki, "minion.pem")
        self.pinned = os.path.join(self.pki, "minion_master.pub")
        for path, mode in ((self.pem, 0o600), (self.pinned, 0o644)):
            with open(path, "w") as f:
                f.write("key")
            os.chmod(path, mode)

    def test_asCreated(self) -> None:
        """
        A C{pki_dir} as the minion creates it passes, as does one whose
        files do not exist yet (the minion creates them).
        """
        checkMinionPki(self.pki)
        os.chmod(self.pki, 0o500)
        checkMinionPki(self.pki)
        os.chmod(self.pki, 0o700)
        os.remove(self.pem)
        os.remove(self.pinned)
        checkMinionPki(self.pki)
        checkMinionPki(os.path.join(self.pki, "missing"))

    def test_pkiDirNotPrivate(self) -> None:
        """
        A C{pki_dir} that group or others may read, search or write is
        refused: the error names it and says C{chmod go-rwx}.
        """
        for mode in (0o750, 0o705, 0o755, 0o711, 0o777):
            os.chmod(self.pki, mode)
            e = self.assertRaises(StartupError, checkMinionPki, self.pki)
            self.assertIn(f"{self.pki} has mode {mode:o}", str(e))
            self.assertIn(f"run chmod go-rwx {self.pki}", str(e))

    def test_privateKeyNotPrivate(self) -> None:
        """
        A C{minion.pem} with any permission for group or others is refused.
        """
        for mode in (0o640, 0o604, 0o644, 0o660, 0o666, 0o601):
            os.chmod(self.pem, mode)
            e = self.assertRaises(StartupError, checkMinionPki, self.pki)
            self.assertIn(f"{self.pem} has mode {mode:o}", str(e))
            self.assertIn(f"run chmod go-rwx {self.pem}", str(e))
        os.chmod(self.pem, 0o400)
        checkMinionPki(self.pki)

    def test_pinnedKeyWritable(self) -> None:
        """
        A C{minion_master.pub} that group or others may write is refused
        (whoever rewrites it can pose as the master); readable is fine.
        """
        for mode in (0o664, 0o646, 0o666):
            os.chmod(self.pinned, mode)
            e = self.assertRaises(StartupError, checkMinionPki, self.pki)
            self.assertIn(f"{self.pinned} has mode {mode:o}", str(e))
            self.assertIn(f"run chmod go-w {self.pinned}", str(e))
        os.chmod(self.pinned, 0o444)
        checkMinionPki(self.pki)

    def test_symlinks(self) -> None:
        """
        A symlink in place of the key, the pinned key or C{pki_dir} itself
        is refused, even to a private target.
        """
        target = os.path.join(self.pki, "real")
        os.rename(self.pem, target)
        os.symlink(target, self.pem)
        e = self.assertRaises(StartupError, checkMinionPki, self.pki)
        self.assertIn(f"{self.pem} must be a regular file, not a symlink", str(e))
        os.remove(self.pem)
        os.rename(self.pinned, target)
        os.symlink(target, self.pinned)
        e = self.assertRaises(StartupError, checkMinionPki, self.pki)
        self.assertIn(self.pinned, str(e))
        link = self.pki + ".link"
        os.symlink(self.pki, link)
        e = self.assertRaises(StartupError, checkMinionPki, link)
        self.assertIn(f"{link} must be a directory", str(e))

    def test_directoryAsKey(self) -> None:
        """
        A directory where C{minion.pem} should be is refused.
        """
        os.remove(self.pem)
        os.mkdir(self.pem, 0o700)
        e = self.assertRaises(StartupError, checkMinionPki, self.pki)
        self.assertIn(f"{self.pem} must be a regular file", str(e))

    def test_ownedByAnotherUser(self) -> None:
        """
        A key file owned by another user than root, this process's user or
        the C{user} option's is refused (its owner could rewrite it); the
        C{user} option's user may own it.
        """
        if os.geteuid() != 0:
            raise SkipTest("giving a file to another user needs root")
        nobody = pwd.getpwnam("nobody")
        os.chown(self.pinned, nobody.pw_uid, nobody.pw_gid)
        e = self.assertRaises(StartupError, checkMinionPki, self.pki)
        self.assertIn(f"{self.pinned} belongs to uid {nobody.pw_uid}", str(e))
        checkMinionPki(self.pki, runAs="nobody")

    def test_otherPaths(self) -> None:
        """
        L{checkPrivatePath} checks one path for the bits it is given.
        """
        checkPrivatePath(self.pinned, 0o022)
        self.assertRaises(StartupError, checkPrivatePath, self.pinned, 0o044)
        self.assertRaises(StartupError, checkPrivatePath, self.pki, 0o077)
        checkPrivatePath(self.pki, 0o077, directory=True)


class RuntimeFileTests(SynchronousTestCase):
    """
    L{writeRuntimeFile} and L{readRuntimeFile} pass a JSON map between a
    daemon and local tools.
    """

    def setUp(self) -> None:
        """
        Make a directory for the files.
        """
        self.dir = self.mktemp()
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "master.ports")

    def test_roundTrip(self) -> None:
        """
        What is written is read back, and no temporary file is left.
        """
        data = {"ret_port": 4506, "publish_port": 0, "name": "m"}
        writeRuntimeFile(self.path, data)
        self.assertEqual(readRuntimeFile(self.path), data)
        self.assertEqual(os.listdir(self.dir), ["master.ports"])

    def test_overwrite(self) -> None:
        """
        Writing again replaces the previous contents.
        """
        writeRuntimeFile(self.path, {"a": 1})
        writeRuntimeFile(self.path, {"b": 2})
        self.assertEqual(readRuntimeFile(self.path), {"b": 2})

    def test_missing(self) -> None:
        """
        A missing file reads as L{None}.
        """
        self.assertIsNone(readRuntimeFile(self.path))

    def test_garbage(self) -> None:
        """
        A file that is not JSON, is empty, or holds JSON that is not a map
        reads as L{None}.
        """
        for content in ["not json {", "", "[1, 2]", '"text"', "\xff"]:
            with open(self.path, "w", encoding="latin-1") as f:
                f.write(content)
            self.assertIsNone(readRuntimeFile(self.path), repr(content))

    def test_directory(self) -> None:
        """
        A directory in place of the file reads as L{None}.
        """
        os.mkdir(self.path)
        self.assertIsNone(readRuntimeFile(self.path))


class FilteredObserverTests(SynchronousTestCase):
    """
    L{filteredObserver} writes only events at or above the Salt level.
    """

    def logAll(self, level: str) -> str:
        """
        Log one event at each level through an observer for Salt level
        C{level}.

        @return: what the observer wrote.
        """
        stream = io.StringIO()
        publisher = LogPublisher(filteredObserver(stream, level))
        log = Logger(namespace="test", observer=publisher)
        log.debug("debug-event")
        log.info("info-event")
        log.warn("warn-event")
        log.error("error-event")
        log.critical("critical-event")
        return stream.getvalue()

    def assertLevels(self, output: str, shown: list[str]) -> None:
        """
        Exactly the events of the levels in C{shown} are in C{output}.
        """
        for name in ("debug", "info", "warn", "error", "critical"):
            if name in shown:
                self.assertIn(f"{name}-event", output)
            else:
                self.assertNotIn(f"{name}-event", output)

    def test_warning(self) -> None:
        """
        At C{warning}, debug and info events are dropped.
        """
        self.assertLevels(self.logAll("warning"), ["warn", "error", "critical"])

    def test_debug(self) -> None:
        """
        At C{debug} (and Salt's finer levels) everything is written.
        """
        everything = ["debug", "info", "warn", "error", "critical"]
        self.assertLevels(self.logAll("debug"), everything)
        self.assertLevels(self.logAll("trace"), everything)

    def test_info(self) -> None:
        """
        At C{info}, only debug events are dropped.
        """
        self.assertLevels(self.logAll("info"), ["info", "warn", "error", "critical"])

    def test_quiet(self) -> None:
        """
        At C{quiet} and C{critical}, only critical events are written.
        """
        self.assertLevels(self.logAll("quiet"), ["critical"])
        self.assertLevels(self.logAll("critical"), ["critical"])

    def test_unknownLevel(self) -> None:
        """
        An unknown level falls back to C{warning}.
        """
        self.assertLevels(self.logAll("verbose"), ["warn", "error", "critical"])

    def test_filterIsObserver(self) -> None:
        """
        The observer can be called directly with an event dict.
        """
        stream = io.StringIO()
        observer = filteredObserver(stream, "error")
        observer(
            {
                "log_level": LogLevel.error,
                "log_format": "direct",
                "log_namespace": "t",
                "log_time": 0.0,
            }
        )
        self.assertIn("direct", stream.getvalue())


class SummarizeTests(SynchronousTestCase):
    """
    C{summarize} in C{tools/runtests.py} reads trial's summary line.
    """

    def setUp(self) -> None:
        """
        Import C{tools/runtests.py}.
        """
        self.summarize = loadScript("tools", "runtests.py").summarize

    def test_passed(self) -> None:
        """
        C{PASSED (successes=5)} is 5 passed, none failed or skipped.
        """
        self.assertEqual(self.summarize("Ran 5 tests\n\nPASSED (successes=5)\n"), (5, 0, 0))

    def test_failed(self) -> None:
        """
        Failures and errors count as failed; skips are counted apart.
        """
        output = "Ran 44 tests\n\nFAILED (skips=1, failures=2, errors=1, successes=40)\n"
        self.assertEqual(self.summarize(output), (40, 3, 1))

    def test_expectedAndUnexpected(self) -> None:
        """
        Expected failures count as passed, unexpected successes as failed.
        """
        output = "PASSED (expectedFailures=2, successes=3)\nFAILED (unexpectedSuccesses=1)\n"
        self.assertEqual(self.summarize(output), (0, 1, 0))
        self.assertEqual(self.summarize("PASSED (expectedFailures=2, successes=3)"), (5, 0, 0))

    def test_lastSummaryWins(self) -> None:
        """
        When several summary lines appear, the last one counts.
        """
        output = "FAILED (failures=9)\n...\nPASSED (successes=7)\n"
        self.assertEqual(self.summarize(output), (7, 0, 0))

    def test_noSummary(self) -> None:
        """
        Output without a summary line gives L{None}.
        """
        self.assertIsNone(self.summarize(""))
        self.assertIsNone(self.summarize("Traceback (most recent call last):\n  boom\n"))
        self.assertIsNone(self.summarize("  PASSED (successes=5) trailing text\n"))
