"""
Tests for the changing functions of L{salttwist.modules.pkg}, against a
real local apt repository (L{tests._aptrepo}): packages really installed,
upgraded, held, removed and purged with apt-get and dpkg.
"""

from __future__ import annotations

import fcntl
import os

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, LoaderContext, SaltInvocationError, pkg
from tests._aptrepo import APP, BASE, OTHER, AptRepoMixin

CONF = f"/etc/{APP}.conf"


class VersionCmpTests(SynchronousTestCase):
    """
    L{pkg.version_cmp} orders versions as dpkg does.
    """

    def test_order(self) -> None:
        """
        Epochs, tildes, numbers and revisions.
        """
        cases = [
            ("1.0", "1.0", 0),
            ("1.0", "2.0", -1),
            ("1.10", "1.9", 1),
            ("1:0.1", "2.0", 1),
            ("1.0~rc1", "1.0", -1),
            ("1.0-1", "1.0-2", -1),
            ("1.0-10", "1.0-9", 1),
            ("1.0a", "1.0", 1),
            ("1.0+b1", "1.0", 1),
            ("5.2.15-2+b8", "5.2.15-2+b10", -1),
            ("0.2.4-0ubuntu1", "0.2.4.1-0ubuntu1", -1),
        ]
        for a, b, expected in cases:
            self.assertEqual(pkg.version_cmp(a, b), expected, (a, b))
            self.assertEqual(pkg.version_cmp(b, a), -expected, (b, a))
        self.assertEqual(pkg.version_cmp("1:1.0", "2:1.0", ignore_epoch=True), 0)


class AptTests(AptRepoMixin, SynchronousTestCase):
    """
    The functions against the test repository, blocking as they run in
    the loader's thread.
    """

    def setUp(self) -> None:
        super().setUp()
        self.context = LoaderContext(opts={}, grains={}, reactor=None)

    def call(self, name: str, *args: object, **kwargs: object) -> object:
        return getattr(pkg, name)(self.context, *args, **kwargs)

    def test_installWithDependency(self) -> None:
        """
        Installing a package installs its dependency; both are in the
        changes, and its files are on disk.
        """
        changes = self.call("install", APP)
        self.assertEqual(changes, {APP: {"old": "", "new": "2.0"}, BASE: {"old": "", "new": "1.0"}})
        with open("/usr/share/salttwist-test/app") as f:
            self.assertEqual(f.read(), f"{APP} 2.0\n")
        self.assertEqual(self.call("install", APP), {})

    def test_installPkgs(self) -> None:
        """
        C{pkgs} with names and C{{name: version}} maps, in one call.
        """
        changes = self.call("install", pkgs=[{APP: "1.0"}, OTHER])
        self.assertEqual(
            changes,
            {
                APP: {"old": "", "new": "1.0"},
                BASE: {"old": "", "new": "1.0"},
                OTHER: {"old": "", "new": "1.0"},
            },
        )
        self.assertEqual(self.installedVersion(APP), "1.0")

    def test_installVersionDowngrades(self) -> None:
        """
        An older pinned version is installed over a newer one.
        """
        self.install(f"{APP}=2.0")
        changes = self.call("install", APP, version="1.0")
        self.assertEqual(changes, {APP: {"old": "2.0", "new": "1.0"}})

    def test_installUnknown(self) -> None:
        """
        A package no repository has: apt's error, nothing installed.
        """
        error = self.assertRaises(
            pkg.PackageError, self.call, "install", pkgs=[OTHER, "salttwist-test-nothere"]
        )
        self.assertEqual(error.errors, ["E: Unable to locate package salttwist-test-nothere"])
        self.assertEqual(error.changes, {})
        self.assertEqual(
            str(error),
            "Problem encountered installing package(s). Additional info follows:\n\n"
            "errors:\n    - E: Unable to locate package salttwist-test-nothere",
        )
        self.assertIsNone(self.installedVersion(OTHER))

    def test_fromrepo(self) -> None:
        """
        C{fromrepo} names the release (here the test repository's suite);
        an unknown one is apt's error.
        """
        self.assertEqual(
            self.call("latest_version", OTHER, refresh=False, fromrepo="salttwist-test"), "1.0"
        )
        changes = self.call("install", OTHER, fromrepo="salttwist-test")
        self.assertEqual(changes, {OTHER: {"old": "", "new": "1.0"}})
        error = self.assertRaises(
            CommandExecutionError, self.call, "install", BASE, fromrepo="nowhere"
        )
        self.assertIn("nowhere", str(error))
        self.assertIsNone(self.installedVersion(BASE))

    def test_installSources(self) -> None:
        """
        C{sources}: a local package file.
        """
        deb = os.path.join(self.repo.pool, f"{OTHER}_1.0_all.deb")
        changes = self.call("install", sources=[{OTHER: deb}])
        self.assertEqual(changes, {OTHER: {"old": "", "new": "1.0"}})
        self.assertRaises(
            SaltInvocationError, self.call, "install", pkgs=[OTHER], sources=[{OTHER: deb}]
        )

    def test_latestVersion(self) -> None:
        """
        The candidate when not installed or newer, else C{""}.
        """
        self.assertEqual(self.call("latest_version", APP, refresh=False), "2.0")
        self.assertEqual(
            self.call("latest_version", APP, OTHER, "salttwist-test-nothere", refresh=False),
            {APP: "2.0", OTHER: "1.0", "salttwist-test-nothere": ""},
        )
        self.install(f"{APP}=1.0")
        self.assertEqual(self.call("latest_version", APP, refresh=False), "2.0")
        self.assertTrue(self.call("upgrade_available", APP, refresh=False))
        self.install(f"{APP}=2.0")
        self.assertEqual(self.call("latest_version", APP, refresh=False), "")
        self.assertFalse(self.call("upgrade_available", APP, refresh=False))
        self.assertEqual(
            self.call("latest_version", APP, refresh=False, show_installed=True), "2.0"
        )

    def test_listUpgradesAndUpgrade(self) -> None:
        """
        An old version installed: it is the only upgrade apt sees (the
        system's packages are out of sight), and C{upgrade(pkgs=...)}
        applies it.
        """
        self.install(f"{APP}=1.0")
        self.assertEqual(self.call("list_upgrades", refresh=False), {APP: "2.0"})
        changes = self.call("upgrade", refresh=False, pkgs=[APP])
        self.assertEqual(changes, {APP: {"old": "1.0", "new": "2.0"}})
        self.assertEqual(self.call("list_upgrades", refresh=False), {})

    def test_holdUnhold(self) -> None:
        """
        A held package is not upgraded; released, it is again.
        """
        self.install(f"{APP}=1.0")
        held = self.call("hold", APP)
        self.assertEqual(
            held,
            {
                APP: {
                    "name": APP,
                    "changes": {"old": "install", "new": "hold"},
                    "result": True,
                    "comment": f"Package {APP} is now being held.",
                }
            },
        )
        self.assertEqual(
            self.call("hold", APP)[APP]["comment"], f"Package {APP} is already set to be held."
        )
        self.assertEqual(self.call("get_selections", APP), {"hold": [APP]})
        self.assertEqual(self.call("list_upgrades", refresh=False), {})
        self.assertRaises(CommandExecutionError, self.call, "upgrade", refresh=False, pkgs=[APP])
        self.assertEqual(self.installedVersion(APP), "1.0")
        changes = self.call("install", APP, version="2.0")
        self.assertEqual(changes, {APP: {"old": "1.0", "new": "2.0"}})
        self.assertEqual(self.call("get_selections", APP), {"hold": [APP]})
        changes = self.call("install", APP, version="1.0")
        released = self.call("unhold", pkgs=[APP])
        self.assertEqual(released[APP]["comment"], f"Package {APP} is no longer being held.")
        self.assertEqual(self.call("list_upgrades", refresh=False), {APP: "2.0"})
        self.assertEqual(
            self.call("hold", "salttwist-test-nothere")["salttwist-test-nothere"]["comment"],
            "Package salttwist-test-nothere not currently held.",
        )

    def test_removeAndPurge(self) -> None:
        """
        C{remove} keeps the conffile (the package is then among
        C{removed}); C{purge} removes it, in Salt's nested shape.
        """
        self.install(APP)
        changes = self.call("remove", APP)
        self.assertEqual(changes, {APP: {"old": "2.0", "new": ""}})
        self.assertTrue(os.path.exists(CONF))
        self.assertEqual(self.installedVersion(BASE), "1.0")
        self.assertEqual(self.call("remove", APP), {})
        changes = self.call("purge", pkgs=[APP, BASE])
        self.assertEqual(
            changes,
            {
                "removed": {APP: {"old": "2.0", "new": ""}},
                "installed": {BASE: {"old": "1.0", "new": ""}},
            },
        )
        self.assertFalse(os.path.exists(CONF))
        self.assertEqual(self.call("purge", APP), {})

    def test_removeGlob(self) -> None:
        """
        A glob matches installed packages only.
        """
        self.install(OTHER)
        self.assertEqual(
            self.call("remove", "salttwist-test-oth*"), {OTHER: {"old": "1.0", "new": ""}}
        )

    def test_refreshDb(self) -> None:
        """
        C{refresh_db} reads the repository's index again.
        """
        ret = self.call("refresh_db")
        self.assertTrue(ret)
        self.assertTrue(all(self.repo.pool in source for source in ret))

    def test_lockTaken(self) -> None:
        """
        While another process holds the dpkg lock, apt waits
        C{apt_lock_timeout} seconds, then the error says so.
        """
        self.context.opts["apt_lock_timeout"] = 1
        fd = os.open("/var/lib/dpkg/lock-frontend", os.O_RDWR | os.O_CREAT, 0o640)
        self.addCleanup(os.close, fd)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.addCleanup(fcntl.lockf, fd, fcntl.LOCK_UN)
        error = self.assertRaises(CommandExecutionError, self.call, "install", OTHER)
        self.assertIn("another package manager holds the dpkg lock", str(error))
        self.assertIsNone(self.installedVersion(OTHER))
