# -*- test-case-name: tests.integration.test_installed -*-
"""
salttwist as users install it: the wheel carries the twistd plugins, and
C{pip install .}, C{pip install -e .} and the wheel of C{python -m build}
each give daemons that start, through their commands and through twistd,
also from a site-packages the daemon's user cannot write.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import zipfile

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SkipTest, TestCase

from salttwist.daemon import RunAs
from tests._installed import (
    CHECKOUT,
    PLUGIN_FILES,
    InstalledCopy,
    cleanCopyOfCheckout,
    installedCopy,
    makeVirtualenv,
    publicInterpreter,
    run,
)
from tests.integration.harness import Cluster, makeTraversable

#: The daemons' twistd plugins.
DAEMON_PLUGINS = ("salttwist-master", "salttwist-minion")

#: Where the README's install command puts the virtualenv, and the source
#: tree it installs.
README_VENV = "/opt/salttwist"
README_SOURCE = "/path/to/salttwist"


def readmeInstallCommand() -> str:
    """
    @return: the first command of the README's "Running a real deployment"
        section: how a user installs salttwist.
    """
    with open(os.path.join(CHECKOUT, "README.md")) as f:
        text = f.read()
    start = text.index("\n## Running a real deployment\n")
    block = re.search(r"^```sh\n(.*?)^```$", text[start:], re.M | re.S)
    assert block is not None, "no sh block in the README's deployment section"
    return block.group(1).strip().splitlines()[0]


def twistdPlugins(copy: InstalledCopy) -> str:
    """
    @return: what C{twistd --help} of C{copy} prints, run outside the
        checkout.
    """
    return run([os.path.join(copy.bin, "twistd"), "--help"], cwd=tempfile.gettempdir())


class InstalledCopyTests(TestCase):
    """
    The copy the integration tests run is the installed wheel, and it has
    what the daemons need.
    """

    def test_wheelCarriesThePlugins(self) -> None:
        """
        The wheel built with C{python -m build} has every twistd plugin,
        and installing it put them into the virtualenv's site-packages.
        """
        copy = installedCopy()
        if copy.wheel is not None:
            names = zipfile.ZipFile(copy.wheel).namelist()
            for plugin in PLUGIN_FILES:
                self.assertIn(plugin, names)
        sitePackages = copy.sitePackages()
        for plugin in PLUGIN_FILES:
            self.assertTrue(os.path.isfile(os.path.join(sitePackages, plugin)), plugin)

    def test_notTheCheckout(self) -> None:
        """
        The installed interpreter imports salttwist from its site-packages,
        not from the checkout.
        """
        copy = installedCopy()
        where = run(
            [copy.python, "-c", "import salttwist; print(salttwist.__file__)"],
            cwd=tempfile.gettempdir(),
        ).strip()
        self.assertTrue(where.startswith(copy.sitePackages() + os.sep), where)
        self.assertFalse(where.startswith(CHECKOUT + os.sep), where)

    def test_twistdKnowsThePlugins(self) -> None:
        """
        The installed C{twistd} offers C{salttwist-master} and
        C{salttwist-minion}.
        """
        output = twistdPlugins(installedCopy())
        for plugin in DAEMON_PLUGINS:
            self.assertIn(plugin, output)


class InstallModesTests(TestCase):
    """
    Each way a user installs salttwist gives working daemons: a master
    started by its command or by twistd runs, and stops with exit status 0
    on SIGTERM.
    """

    async def assertDaemonsStart(self, copy: InstalledCopy) -> None:
        """
        C{salttwist-master} and C{twistd -n salttwist-master} of C{copy}
        each start a master that stops cleanly, and twistd lists both
        daemons' plugins.
        """
        output = await deferToThread(twistdPlugins, copy)
        for plugin in DAEMON_PLUGINS:
            self.assertIn(plugin, output)
        for argv in (
            [os.path.join(copy.bin, "salttwist-master")],
            [os.path.join(copy.bin, "twistd"), "-n", "salttwist-master"],
        ):
            cluster = Cluster(self)
            cluster.writeMasterConfig()
            master = await cluster.startMaster([*argv, "-c", cluster.masterDir])
            await master.stop()
            self.assertEqual((master.exitCode, master.signal), (0, None), cluster.logs())

    def installInto(self, *requirements: str, editable: str | None = None) -> InstalledCopy:
        """
        @return: a fresh virtualenv in a temporary directory, removed after
            the test, with C{requirements} (and C{-e editable}) installed.
        """
        where = tempfile.mkdtemp(prefix="salttwist-install-")
        self.addCleanup(shutil.rmtree, where, ignore_errors=True)
        return makeVirtualenv(os.path.join(where, "venv"), *requirements, editable=editable)

    def sourceTree(self) -> str:
        """
        @return: a fresh copy of the checkout's tracked files (as they are
            now), removed after the test.
        """
        where = tempfile.mkdtemp(prefix="salttwist-source-")
        self.addCleanup(shutil.rmtree, where, ignore_errors=True)
        return cleanCopyOfCheckout(os.path.join(where, "salttwist"))

    async def test_pipInstallSource(self) -> None:
        """
        The README's install command, typed as written (with a temporary
        directory for C{/opt/salttwist} and a fresh copy of the checkout
        for C{/path/to/salttwist}).
        """
        source = self.sourceTree()
        where = tempfile.mkdtemp(prefix="salttwist-install-")
        self.addCleanup(shutil.rmtree, where, ignore_errors=True)
        venv = os.path.join(where, "opt-salttwist")
        command = readmeInstallCommand()
        self.assertIn(README_VENV, command)
        self.assertIn(README_SOURCE, command)
        command = command.replace(README_VENV, venv).replace(README_SOURCE, source)
        await deferToThread(run, ["bash", "-c", command], where)
        await self.assertDaemonsStart(InstalledCopy(venv))

    async def test_pipInstallEditable(self) -> None:
        """
        C{pip install -e /path/to/salttwist}, in pip's default editable mode.
        """
        source = self.sourceTree()
        copy = await deferToThread(self.installInto, editable=source)
        await self.assertDaemonsStart(copy)

    async def test_builtWheel(self) -> None:
        """
        The wheel of C{python -m build} (the copy the other integration
        tests run).
        """
        await self.assertDaemonsStart(installedCopy())


class ReadOnlySitePackagesTests(TestCase):
    """
    Installed by root and run by another user, who cannot write Twisted's
    plugin cache (C{dropin.cache}) in site-packages.
    """

    async def test_daemonRunsAsOtherUser(self) -> None:
        """
        With no plugin cache and a site-packages it cannot write, user
        nobody's C{twistd} lists the daemons' plugins, and C{twistd -n
        salttwist-master} starts, logs no error (nor the cache it could not
        write, an info line) at C{warning}, and stops with exit status 0.
        """
        nobody = pwd.getpwnam("nobody")
        runAs = RunAs("nobody", nobody.pw_uid, nobody.pw_gid)
        python = publicInterpreter()
        if python is None:
            raise SkipTest("no Python interpreter that every user can run")
        where = tempfile.mkdtemp(prefix="salttwist-readonly-")
        self.addCleanup(shutil.rmtree, where, ignore_errors=True)
        os.chmod(where, 0o755)
        wheel = installedCopy().wheel
        if wheel is None:
            raise SkipTest("the installed copy was not built here (SALTTWIST_INSTALLED_VENV)")
        copy = await deferToThread(
            makeVirtualenv, os.path.join(where, "venv"), wheel, python=python
        )
        plugins = os.path.join(copy.sitePackages(), "twisted", "plugins")
        cache = os.path.join(plugins, "dropin.cache")
        if os.path.exists(cache):
            os.remove(cache)
        self.assertFalse(os.stat(plugins).st_mode & (stat.S_IWGRP | stat.S_IWOTH))

        cluster = Cluster(self)
        makeTraversable(cluster.baseDir)
        makeTraversable(os.path.realpath(cluster.baseDir))
        cluster.writeMasterConfig(log_level="warning")
        for directory, _, files in os.walk(os.path.realpath(cluster.masterDir)):
            for name in [directory, *(os.path.join(directory, f) for f in files)]:
                os.chown(name, runAs.uid, runAs.gid)
        twistd = os.path.join(copy.bin, "twistd")
        listed = await deferToThread(
            subprocess.run,
            [twistd, "--help"],
            cwd=where,
            capture_output=True,
            text=True,
            user=runAs.uid,
            group=runAs.gid,
            extra_groups=[],
            check=False,
        )
        self.assertEqual(listed.returncode, 0, listed.stderr)
        for plugin in DAEMON_PLUGINS:
            self.assertIn(plugin, listed.stdout)
        master = await cluster.startMaster(
            [twistd, "-n", "--pidfile", "", "salttwist-master", "-c", cluster.masterDir],
            uid=runAs.uid,
            gid=runAs.gid,
        )
        await master.stop()
        self.assertEqual((master.exitCode, master.signal), (0, None), cluster.logs())
        for trouble in ("plugin cache", "dropin", "#error]", "#critical]", "Traceback"):
            self.assertNotIn(trouble, master.output(), cluster.logs())
        self.assertFalse(os.path.exists(cache), "nobody wrote the plugin cache")
