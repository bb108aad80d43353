# -*- test-case-name: tests.test_modules_service -*-
"""
Tests for L{salttwist.modules.service}: the sysvinit provider with a real
init script (in C{/etc/init.d} with C{update-rc.d}, and in a temporary
root with links made here), and the systemd provider's boot settings with
the real C{systemctl --root} (systemd does not run on the test machine:
its start and stop are checked as command lines only).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time

from twisted.trial.unittest import SynchronousTestCase

from salttwist.modules import CommandExecutionError, service
from tests._initscript import actions, daemonPid, installScript, newName
from tests._statectx import makeLoaderContext


def _removeRcLinks(rcDir: str, name: str) -> None:
    for link in glob.glob(os.path.join(rcDir, "rc?.d", f"[SK][0-9][0-9]{name}")):
        os.unlink(link)


class SysvMachineTests(SynchronousTestCase):
    """
    The sysvinit provider on the machine's own C{/etc/init.d}, as a minion
    without systemd uses it.
    """

    def setUp(self) -> None:
        if os.geteuid() != 0:
            raise self.skipTest("installing an init script needs root")
        if os.path.isdir("/run/systemd/system"):
            raise self.skipTest("systemd runs here: the sysvinit provider is not the machine's")
        if shutil.which("update-rc.d") is None:
            raise self.skipTest("update-rc.d is not installed")
        self.name = newName()
        self.context = makeLoaderContext()
        self.addCleanup(_removeRcLinks, "/etc", self.name)
        self.state = installScript(self, "/etc/init.d", self.name)

    def test_lifecycle(self) -> None:
        """
        start, status, restart, reload, stop run the script; the daemon
        runs and stops.
        """
        c, name = self.context, self.name
        self.assertTrue(service.available(c, name))
        self.assertFalse(service.missing(c, name))
        self.assertIn(name, service.get_all(c))
        self.assertFalse(service.status(c, name))
        self.assertTrue(service.start(c, name))
        pid = daemonPid(self.state)
        self.assertIsNotNone(pid)
        self.assertTrue(service.status(c, name))
        self.assertEqual(service.status(c, name[:-3] + "*"), {name: True})
        self.assertTrue(service.restart(c, name))
        self.assertNotEqual(daemonPid(self.state), pid)
        self.assertTrue(service.reload_(c, name))
        self.assertTrue(service.stop(c, name))
        self.assertIsNone(daemonPid(self.state))
        self.assertFalse(service.status(c, name))
        self.assertFalse(service.reload_(c, name))
        self.assertEqual(
            actions(self.state),
            [
                "status",
                "start",
                "status",
                "status",
                "restart",
                "reload",
                "stop",
                "status",
                "reload",
            ],
        )

    def test_enableDisable(self) -> None:
        """
        enable and disable go through update-rc.d: the rc2.d link starts
        or stops the service.
        """
        c, name = self.context, self.name
        self.assertFalse(service.enabled(c, name))
        self.assertTrue(service.disabled(c, name))
        self.assertIn(name, service.get_disabled(c))
        self.assertTrue(service.enable(c, name))
        self.assertEqual(len(glob.glob(f"/etc/rc2.d/S??{name}")), 1)
        self.assertTrue(service.enabled(c, name))
        self.assertIn(name, service.get_enabled(c))
        self.assertTrue(service.disable(c, name))
        self.assertEqual(glob.glob(f"/etc/rc2.d/S??{name}"), [])
        self.assertEqual(len(glob.glob(f"/etc/rc2.d/K??{name}")), 1)
        self.assertFalse(service.enabled(c, name))

    def test_sig(self) -> None:
        """
        With C{sig}, status looks for a process whose command line holds it.
        """
        c = self.context
        self.assertFalse(service.status(c, self.name, sig=f"no-such-{self.name}"))
        proc = subprocess.Popen(["sleep", f"30.{os.getpid()}"])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        for _ in range(200):
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                if f.read().startswith(b"sleep"):
                    break
            time.sleep(0.01)
        self.assertTrue(service.status(c, self.name, sig=f"sleep 30.{os.getpid()}"))

    def test_missing(self) -> None:
        """
        A service without a script is not available; starting it names it.
        """
        c = self.context
        self.assertFalse(service.available(c, f"{self.name}-none"))
        error = self.assertRaises(CommandExecutionError, service.start, c, f"{self.name}-none")
        self.assertEqual(str(error), f"The named service {self.name}-none is not available")
        self.assertRaises(CommandExecutionError, service.start, c, "../bin/sh")


class SysvRootTests(SynchronousTestCase):
    """
    The sysvinit provider over a temporary root (C{service_init_dir},
    C{service_rc_dir}): boot links are made here.
    """

    def setUp(self) -> None:
        self.root = os.path.abspath(self.mktemp())
        self.name = newName()
        self.initDir = os.path.join(self.root, "init.d")
        self.state = installScript(self, self.initDir, self.name)
        self.context = makeLoaderContext(
            {
                "service_init_dir": self.initDir,
                "service_rc_dir": self.root,
                "providers": {"service": "sysvinit"},
            }
        )

    def test_links(self) -> None:
        """
        enable makes S links in the script's start runlevels and K links in
        its stop ones, relative to the init directory; disable turns the S
        links into K links.
        """
        c, name = self.context, self.name
        self.assertEqual(service.get_all(c), [name])
        self.assertEqual(service.get_enabled(c), [])
        self.assertTrue(service.enable(c, name))
        self.assertEqual(
            os.readlink(os.path.join(self.root, "rc2.d", f"S01{name}")), f"../init.d/{name}"
        )
        self.assertTrue(os.path.islink(os.path.join(self.root, "rc0.d", f"K01{name}")))
        self.assertTrue(service.enabled(c, name))
        self.assertEqual(service.get_enabled(c), [name])
        self.assertTrue(service.disable(c, name))
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "rc2.d"))), [f"K01{name}"])
        self.assertTrue(service.disabled(c, name))
        self.assertTrue(service.enable(c, name))
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "rc5.d"))), [f"S01{name}"])

    def test_runAndFail(self) -> None:
        """
        The script runs from the given directory; a failing start is False.
        """
        c, name = self.context, self.name
        open(os.path.join(self.state, "fail-start"), "w").close()
        self.assertFalse(service.start(c, name))
        os.unlink(os.path.join(self.state, "fail-start"))
        self.assertTrue(service.start(c, name))
        self.assertTrue(service.full_restart(c, name))
        self.assertEqual(actions(self.state)[-2:], ["stop", "start"])
        self.assertTrue(service.stop(c, name))


UNIT = """\
[Unit]
Description=salttwist test
[Service]
ExecStart=/bin/sleep 100
[Install]
WantedBy=multi-user.target
"""


class SystemdTests(SynchronousTestCase):
    """
    The systemd provider: boot settings through the real C{systemctl
    --root} on a temporary image; the other commands as command lines.
    """

    def test_argv(self) -> None:
        """
        Each action is C{systemctl <verb> <unit>}, C{.service} added.
        """
        provider = service.SystemdProvider()
        self.assertEqual(provider.argv("start", "nginx"), ["systemctl", "start", "nginx.service"])
        self.assertEqual(
            provider.argv("stop", "nginx", noBlock=True),
            ["systemctl", "--no-block", "stop", "nginx.service"],
        )
        self.assertEqual(
            provider.argv("is-active", "x.socket", "--quiet"),
            ["systemctl", "is-active", "--quiet", "x.socket"],
        )
        rooted = service.SystemdProvider("/img")
        self.assertEqual(
            rooted.argv("enable", "a"), ["systemctl", "--root=/img", "enable", "a.service"]
        )
        self.assertEqual(rooted.argv("restart", "a"), ["systemctl", "restart", "a.service"])

    def test_bootSettings(self) -> None:
        """
        enable, disable, enabled, get_all, get_enabled on a unit file of a
        temporary image.
        """
        if shutil.which("systemctl") is None:
            raise self.skipTest("systemctl is not installed")
        root = os.path.abspath(self.mktemp())
        units = os.path.join(root, "usr/lib/systemd/system")
        os.makedirs(units)
        os.makedirs(os.path.join(root, "etc/systemd/system"))
        with open(os.path.join(units, "stt.service"), "w") as f:
            f.write(UNIT)
        c = makeLoaderContext({"providers": {"service": "systemd"}, "service_systemd_root": root})
        self.assertEqual(service.get_all(c), ["stt"])
        self.assertTrue(service.available(c, "stt"))
        self.assertFalse(service.enabled(c, "stt"))
        self.assertTrue(service.disabled(c, "stt"))
        self.assertTrue(service.enable(c, "stt"))
        self.assertTrue(
            os.path.islink(
                os.path.join(root, "etc/systemd/system/multi-user.target.wants/stt.service")
            )
        )
        self.assertTrue(service.enabled(c, "stt"))
        self.assertEqual(service.get_enabled(c), ["stt"])
        self.assertTrue(service.disable(c, "stt"))
        self.assertFalse(service.enabled(c, "stt"))
        self.assertEqual(service.get_disabled(c), ["stt"])


class ProviderTests(SynchronousTestCase):
    """
    L{service._providerFor} picks the provider.
    """

    def test_choice(self) -> None:
        """
        C{providers: {service: ...}} picks one; without it, systemd when it
        runs, else sysvinit; an unknown one is named.
        """
        self.assertIsInstance(
            service._providerFor({"providers": {"service": "systemd"}}), service.SystemdProvider
        )
        self.assertIsInstance(
            service._providerFor({"providers": {"service": "debian_service"}}), service.SysvProvider
        )
        expected = (
            service.SystemdProvider
            if os.path.isdir("/run/systemd/system")
            else service.SysvProvider
        )
        self.assertIsInstance(service._providerFor({}), expected)
        error = self.assertRaises(
            CommandExecutionError, service._providerFor, {"providers": {"service": "launchd"}}
        )
        self.assertEqual(str(error), "Unknown service provider 'launchd' (systemd or sysvinit)")
