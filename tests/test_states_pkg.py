"""
Tests for L{salttwist.states.pkg}: the states against a real local apt
repository (L{tests._aptrepo}), through the real C{pkg} execution
functions, as a state run calls them.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from twisted.trial.unittest import TestCase

from tests._aptrepo import APP, BASE, OTHER, AptRepoMixin
from tests._statectx import runState
from tests.test_states_cmd import stateContextWithRoots

CONF = f"/etc/{APP}.conf"


class PkgStateTestCase(AptRepoMixin, TestCase):
    """
    A state test with the test repository.
    """

    async def state(self, function: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await runState(f"pkg.{function}", *args, **kwargs)


class InstalledTests(PkgStateTestCase):
    """
    C{pkg.installed}.
    """

    async def test_installs(self) -> None:
        """
        A missing package is installed (with its dependency); again, it is
        already installed.
        """
        ret = await self.state("installed", APP)
        self.assertEqual(
            ret,
            {
                "name": APP,
                "result": True,
                "changes": {APP: {"old": "", "new": "2.0"}, BASE: {"old": "", "new": "1.0"}},
                "comment": f"The following packages were installed/updated: {APP}",
            },
        )
        self.assertEqual(self.installedVersion(APP), "2.0")
        ret = await self.state("installed", APP)
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, "All specified packages are already installed", {}),
        )

    async def test_version(self) -> None:
        """
        A version: installed at it (down from a newer one); then in state.
        """
        self.install(f"{APP}=2.0")
        ret = await self.state("installed", APP, version="1.0")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"], {APP: {"old": "2.0", "new": "1.0"}})
        self.assertEqual(ret["comment"], "1 targeted package was installed/updated.")
        ret = await self.state("installed", APP, version="1.0")
        self.assertEqual(
            ret["comment"],
            "All specified packages are already installed and are at the desired version",
        )

    async def test_pkgs(self) -> None:
        """
        C{pkgs}: only the missing ones are installed, in one call; the
        comment names both kinds.
        """
        self.install(OTHER)
        ret = await self.state("installed", "several", pkgs=[{APP: "1.0"}, OTHER])
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(set(ret["changes"]), {APP, BASE})
        self.assertEqual(
            ret["comment"],
            "1 targeted package was installed/updated.\n"
            f"The following packages were already installed: {OTHER}",
        )
        ret = await self.state("installed", "several", pkgs=[{APP: "1.0"}, OTHER])
        self.assertEqual(
            ret["comment"],
            "All specified packages are already installed and are at the desired version",
        )

    async def test_testMode(self) -> None:
        """
        Test mode installs nothing and says what would be, with versions.
        """
        self.install(OTHER)
        ret = await self.state("installed", "x", pkgs=[APP, OTHER, {BASE: "1.0"}], test=True)
        self.assertEqual(
            ret,
            {
                "name": "x",
                "result": None,
                "changes": {
                    APP: {"new": "2.0", "old": ""},
                    BASE: {"new": "1.0", "old": ""},
                },
                "comment": f"The following packages would be installed/updated: {APP}, {BASE}",
            },
        )
        self.assertIsNone(self.installedVersion(APP))

    async def test_hold(self) -> None:
        """
        C{hold=True} holds after installing; C{hold=False} releases.
        """
        ret = await self.state("installed", APP, version="1.0", hold=True)
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["changes"][APP], {"old": "install", "new": "1.0\nhold"})
        self.assertIn(f"Package {APP} is now being held.", ret["comment"])
        self.assertEqual(self.heldPackages(), [APP])
        ret = await self.state("installed", APP, hold=False, test=True)
        self.assertEqual(ret["result"], None)
        self.assertIn(f"Package {APP} is set not to be held.", ret["comment"])
        ret = await self.state("installed", APP, hold=False)
        self.assertEqual(
            ret["comment"],
            "All specified packages are already installed.\n"
            f"Package {APP} is no longer being held.",
        )
        self.assertEqual(ret["changes"], {APP: {"old": "hold", "new": "install"}})
        ret = await self.state("installed", APP, hold=False)
        self.assertEqual(
            (ret["comment"], ret["changes"]),
            (
                "All specified packages are already installed.\n"
                f"Package {APP} is already set not to be held.",
                {},
            ),
        )
        self.assertEqual(self.heldPackages(), [])

    def heldPackages(self) -> list[str]:
        import subprocess

        out = subprocess.run(
            ["dpkg", "--get-selections", "salttwist-test-*"], capture_output=True, text=True
        ).stdout
        return [line.split()[0] for line in out.splitlines() if line.split()[1:] == ["hold"]]

    async def test_latestVersion(self) -> None:
        """
        C{version: latest}: an older installed version is upgraded; the
        newest is in state.
        """
        self.install(f"{APP}=1.0")
        ret = await self.state("installed", APP, version="latest")
        self.assertEqual(ret["changes"], {APP: {"old": "1.0", "new": "2.0"}}, ret)
        ret = await self.state("installed", APP, version="latest")
        self.assertEqual((ret["result"], ret["changes"]), (True, {}))

    async def test_sources(self) -> None:
        """
        C{sources}: package files, local or from the file server.
        """
        roots = os.path.abspath(self.mktemp())
        os.makedirs(roots)
        shutil.copy(os.path.join(self.repo.pool, f"{OTHER}_1.0_all.deb"), roots)
        cachedir = os.path.abspath(self.mktemp())
        ctx = stateContextWithRoots(roots, cachedir)
        ret = await runState(
            "pkg.installed", "x", sources=[{OTHER: f"salt://{OTHER}_1.0_all.deb"}], ctx=ctx
        )
        self.assertEqual(ret["changes"], {OTHER: {"old": "", "new": "1.0"}}, ret)
        ret = await runState("pkg.installed", "x", sources=[{BASE: "salt://nothere.deb"}], ctx=ctx)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "Unable to cache salt://nothere.deb from saltenv 'base'"),
        )
        ret = await self.state(
            "installed",
            "x",
            sources=[{BASE: os.path.join(self.repo.pool, f"{BASE}_1.0_all.deb")}],
        )
        self.assertEqual(ret["changes"], {BASE: {"old": "", "new": "1.0"}}, ret)

    async def test_unknown(self) -> None:
        """
        A package no repository has fails with apt's words.
        """
        ret = await self.state("installed", "salttwist-test-nothere")
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            "Problem encountered installing package(s). Additional info follows:\n\n"
            "errors:\n    - E: Unable to locate package salttwist-test-nothere",
        )

    async def test_badPkgs(self) -> None:
        """
        A malformed C{pkgs}: Salt's words.
        """
        ret = await self.state("installed", "x", pkgs="notalist")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "Invalidly formatted 'pkgs' parameter. See minion log."),
        )

    async def test_modWatch(self) -> None:
        """
        C{mod_watch} runs the watching function again.
        """
        ret = await self.state("mod_watch", OTHER, sfun="installed")
        self.assertEqual(ret["changes"], {OTHER: {"old": "", "new": "1.0"}})
        ret = await self.state("mod_watch", OTHER, sfun="uptodate")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "pkg.uptodate does not work with the watch requisite"),
        )


class LatestTests(PkgStateTestCase):
    """
    C{pkg.latest}.
    """

    async def test_upgrades(self) -> None:
        """
        An old version is upgraded; then it is up to date.
        """
        self.install(f"{APP}=1.0")
        ret = await self.state("latest", APP, test=True)
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (
                None,
                f"The following packages would be installed/upgraded: {APP}",
                {APP: {"old": "1.0", "new": "2.0"}},
            ),
        )
        self.assertEqual(self.installedVersion(APP), "1.0")
        ret = await self.state("latest", APP)
        self.assertEqual(
            ret,
            {
                "name": APP,
                "result": True,
                "changes": {APP: {"old": "1.0", "new": "2.0"}},
                "comment": f"The following packages were successfully installed/upgraded: {APP}",
            },
        )
        ret = await self.state("latest", APP, refresh=True)
        self.assertEqual(
            (ret["result"], ret["comment"]), (True, f"Package {APP} is already up-to-date")
        )

    async def test_pkgs(self) -> None:
        """
        C{pkgs}: missing ones installed, those up to date named.
        """
        self.install(OTHER)
        ret = await self.state("latest", "x", pkgs=[APP, OTHER])
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            ret["comment"],
            f"The following packages were successfully installed/upgraded: {APP} "
            f"The following packages were already up-to-date: {OTHER}",
        )
        ret = await self.state("latest", "x", pkgs=[APP, OTHER])
        self.assertEqual(ret["comment"], f"All packages are up-to-date ({APP}, {OTHER}).")

    async def test_unknown(self) -> None:
        """
        A package nobody has: Salt's words.
        """
        ret = await self.state("latest", "salttwist-test-nothere")
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (False, "No information found for 'salttwist-test-nothere'."),
        )


class RemovedPurgedTests(PkgStateTestCase):
    """
    C{pkg.removed} and C{pkg.purged}.
    """

    async def test_removed(self) -> None:
        """
        Removed, the conffile staying; absent, in state.
        """
        ret = await self.state("removed", APP)
        self.assertEqual(
            (ret["result"], ret["comment"]), (True, "All specified packages are already absent")
        )
        self.install(APP)
        ret = await self.state("removed", APP, test=True)
        self.assertEqual(
            ret,
            {
                "name": APP,
                "result": None,
                "changes": {APP: {"new": "removed", "old": ""}},
                "comment": f"The following packages will be removed: {APP}.",
            },
        )
        self.assertEqual(self.installedVersion(APP), "2.0")
        ret = await self.state("removed", APP)
        self.assertEqual(
            ret,
            {
                "name": APP,
                "result": True,
                "changes": {APP: {"old": "2.0", "new": ""}},
                "comment": "All targeted packages were removed.",
            },
        )
        self.assertIsNone(self.installedVersion(APP))
        self.assertTrue(os.path.exists(CONF))

    async def test_removedVersion(self) -> None:
        """
        With a version, another installed version stays.
        """
        self.install(f"{APP}=2.0")
        ret = await self.state("removed", APP, version="1.0")
        self.assertEqual(
            ret["comment"],
            "All specified packages (matching specified versions) are already absent",
        )
        self.assertEqual(self.installedVersion(APP), "2.0")

    async def test_purged(self) -> None:
        """
        A removed package's conffile is purged; a package partly absent is
        named.
        """
        self.install(APP)
        await self.state("removed", APP)
        ret = await self.state("purged", "x", pkgs=[APP, BASE, OTHER])
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            ret["changes"],
            {
                "removed": {APP: {"old": "2.0", "new": ""}},
                "installed": {BASE: {"old": "1.0", "new": ""}},
            },
        )
        self.assertEqual(
            ret["comment"],
            f"The following packages were not installed: {OTHER} "
            f"The following packages were purged: {APP}, {BASE}.",
        )
        self.assertFalse(os.path.exists(CONF))
        ret = await self.state("purged", APP)
        self.assertEqual(
            (ret["result"], ret["comment"]),
            (True, "None of the targeted packages are installed or partially installed"),
        )


class UptodateTests(PkgStateTestCase):
    """
    C{pkg.uptodate}, confined to the test packages by C{pkgs} (and apt
    sees no other repository).
    """

    async def test_uptodate(self) -> None:
        """
        Test mode lists the upgrade; then it is applied; then in state.
        """
        self.install(f"{APP}=1.0", OTHER)
        ret = await self.state("uptodate", "up", pkgs=[APP, OTHER], test=True)
        self.assertEqual(
            ret,
            {
                "name": "up",
                "result": None,
                "changes": {APP: {"new": "2.0", "old": "1.0"}},
                "comment": "System update will be performed",
            },
        )
        self.assertEqual(self.installedVersion(APP), "1.0")
        ret = await self.state("uptodate", "up", pkgs=[APP, OTHER])
        self.assertEqual(
            (ret["result"], ret["comment"], ret["changes"]),
            (True, "Upgrade ran successfully", {APP: {"old": "1.0", "new": "2.0"}}),
        )
        ret = await self.state("uptodate", "up", pkgs=[APP, OTHER], refresh=True)
        self.assertEqual((ret["result"], ret["comment"]), (True, "System is already up-to-date"))

    async def test_wholeSystemTestMode(self) -> None:
        """
        Without C{pkgs}, only in test mode (the whole system would be
        upgraded otherwise): the test package's upgrade is listed.
        """
        self.install(f"{APP}=1.0")
        ret = await self.state("uptodate", "up", test=True)
        self.assertEqual(ret["result"], None)
        self.assertEqual(ret["changes"], {APP: {"new": "2.0", "old": "1.0"}})

    async def test_badRefresh(self) -> None:
        """
        C{refresh} must be a boolean.
        """
        ret = await self.state("uptodate", "up", refresh="yes")
        self.assertEqual(
            (ret["result"], ret["comment"]), (False, "refresh must be either True or False")
        )
