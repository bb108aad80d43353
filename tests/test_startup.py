# -*- test-case-name: tests.test_startup -*-
"""
Tests for L{salttwist._startup}: what the commands put off at start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from salttwist._startup import deferModule


class DeferModuleTests(SynchronousTestCase):
    """
    L{deferModule} registers a module that runs only when first used.
    """

    def setUp(self) -> None:
        self.directory = self.mktemp()
        package = os.path.join(self.directory, "salttwist_lazy_pkg")
        os.makedirs(package)
        with open(os.path.join(package, "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(package, "probe.py"), "w") as f:
            f.write("import sys\nsys.salttwist_lazy_probe_ran = True\nVALUE = 42\n")
        sys.path.insert(0, self.directory)
        self.addCleanup(sys.path.remove, self.directory)
        self.addCleanup(sys.modules.pop, "salttwist_lazy_pkg", None)
        self.addCleanup(sys.modules.pop, "salttwist_lazy_pkg.probe", None)
        self.addCleanup(lambda: sys.__dict__.pop("salttwist_lazy_probe_ran", None))

    def test_runsOnFirstAttribute(self) -> None:
        """
        The module is in C{sys.modules} at once, bound on its package as
        C{from package import module} (Twisted's form) expects, but its code
        runs only when an attribute is first read; then it behaves as usual.
        """
        deferModule("salttwist_lazy_pkg.probe")
        self.assertIn("salttwist_lazy_pkg.probe", sys.modules)
        self.assertFalse(getattr(sys, "salttwist_lazy_probe_ran", False))
        from salttwist_lazy_pkg import probe  # type: ignore[import-not-found]

        self.assertFalse(getattr(sys, "salttwist_lazy_probe_ran", False))
        self.assertEqual(probe.VALUE, 42)
        self.assertTrue(sys.salttwist_lazy_probe_ran)  # type: ignore[attr-defined]

    def test_missingModuleIgnored(self) -> None:
        """
        A module that does not exist is left for the real import to report.
        """
        deferModule("salttwist_no_such_module_anywhere")
        self.assertNotIn("salttwist_no_such_module_anywhere", sys.modules)

    def test_alreadyImportedUntouched(self) -> None:
        """
        A module already imported is not replaced.
        """
        before = sys.modules["os"]
        deferModule("os")
        self.assertIs(sys.modules["os"], before)


class CommandStartupTests(SynchronousTestCase):
    """
    A command's interpreter imports neither C{http.cookiejar}'s code nor
    pyOpenSSL, and its reactor still works.
    """

    def test_cliStartsLean(self) -> None:
        """
        After importing the CLI and running the reactor as the commands do,
        C{http.cookiejar} has not run and pyOpenSSL is not loaded.
        """
        script = (
            "import sys\n"
            "from salttwist.cli.reactor import runWithReactor\n"
            "import salttwist.cli.salt\n"
            "async def command(reactor):\n"
            "    from twisted.internet.task import deferLater\n"
            "    return await deferLater(reactor, 0, lambda: 'ran')\n"
            "value, code = runWithReactor(command)\n"
            "import types\n"
            "cookiejar = sys.modules.get('http.cookiejar')\n"
            "ran = cookiejar is not None and type(cookiejar) is types.ModuleType\n"
            "print(value, code, ran, sys.modules.get('OpenSSL'))\n"
        )
        output = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout
        self.assertEqual(output.split(), ["ran", "None", "False", "None"])


class DaemonTLSTests(SynchronousTestCase):
    """
    The daemon wrappers keep pyOpenSSL out unless the config may need it.
    """

    def test_minion(self) -> None:
        """
        A minion needs it for any transport but the built-in C{tcp}.
        """
        from salttwist.cli.daemons import minionNeedsTLS

        self.assertFalse(minionNeedsTLS({"transport": "tcp"}))
        self.assertTrue(minionNeedsTLS({"transport": "tls"}))
        self.assertTrue(minionNeedsTLS({"transport": "thirdparty"}))

    def test_master(self) -> None:
        """
        A master needs it for a transport other than C{tcp} or an
        C{https} C{autosign_url}.
        """
        from salttwist.cli.daemons import masterNeedsTLS

        self.assertFalse(masterNeedsTLS({"transport": "tcp", "autosign_url": None}))
        self.assertFalse(masterNeedsTLS({"transport": "tcp", "autosign_url": "http://x/"}))
        self.assertTrue(masterNeedsTLS({"transport": "tcp", "autosign_url": "HTTPS://x/"}))
        self.assertTrue(masterNeedsTLS({"transport": "tls", "autosign_url": None}))
