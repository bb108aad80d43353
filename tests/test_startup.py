# -*- test-case-name: tests.test_startup -*-
"""
Tests for L{salttwist._startup}: what the commands put off at start-up.
"""

from __future__ import annotations

import os
import sys

from twisted.trial.unittest import SynchronousTestCase

from salttwist._startup import deferModule
from tests._fresh import pythonOutput, runPython


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

    def test_importStatementDoesNotRun(self) -> None:
        """
        An C{import} statement naming a deferred module (which reads its
        C{__spec__}) binds it without running its code, as the modules that
        import C{pdb} or C{bz2} only to have it at hand do.
        """
        deferModule("salttwist_lazy_pkg.probe")
        import salttwist_lazy_pkg.probe  # type: ignore[import-not-found]

        self.assertFalse(getattr(sys, "salttwist_lazy_probe_ran", False))
        self.assertEqual(salttwist_lazy_pkg.probe.__spec__.name, "salttwist_lazy_pkg.probe")
        self.assertFalse(getattr(sys, "salttwist_lazy_probe_ran", False))
        self.assertEqual(salttwist_lazy_pkg.probe.VALUE, 42)

    def test_setAttributeRunsFirst(self) -> None:
        """
        Setting an attribute of a deferred module runs its code first, so
        the value set is not overwritten by it.
        """
        deferModule("salttwist_lazy_pkg.probe")
        from salttwist_lazy_pkg import probe

        probe.VALUE = 7
        self.assertTrue(sys.salttwist_lazy_probe_ran)  # type: ignore[attr-defined]
        self.assertEqual(probe.VALUE, 7)

    def test_failingModuleRemoved(self) -> None:
        """
        A deferred module whose code raises raises on first use, and is
        taken out of C{sys.modules} as a failed import is.
        """
        with open(os.path.join(self.directory, "salttwist_lazy_pkg", "broken.py"), "w") as f:
            f.write("raise ValueError('broken module')\n")
        self.addCleanup(sys.modules.pop, "salttwist_lazy_pkg.broken", None)
        deferModule("salttwist_lazy_pkg.broken")
        from salttwist_lazy_pkg import broken  # type: ignore[import-not-found]

        self.assertRaises(ValueError, getattr, broken, "anything")
        self.assertNotIn("salttwist_lazy_pkg.broken", sys.modules)

    def test_neededModuleMissing(self) -> None:
        """
        A module is not deferred if a module it needs cannot be found: its
        import then fails, or not, where it would have.
        """
        deferModule("salttwist_lazy_pkg.probe", ("salttwist_no_such_module_anywhere",))
        self.assertNotIn("salttwist_lazy_pkg.probe", sys.modules)


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
        output = pythonOutput(self, script)
        self.assertEqual(output.split(), ["ran", "None", "False", "None"])

    def test_cliWithoutAclRules(self) -> None:
        """
        The C{salttwist} command and its client do not import the
        C{publisher_acl} module: only a publisher_acl user's command needs it
        (to find its key file).
        """
        script = (
            "import sys\n"
            "import salttwist.cli.salt, salttwist.client.local\n"
            "print('salttwist.master.acl' in sys.modules)\n"
        )
        output = pythonOutput(self, script)
        self.assertEqual(output.split(), ["False"])


class AsyncioWithoutSSLTests(SynchronousTestCase):
    """
    L{salttwist._startup.asyncioWithoutSSL}: C{asyncio}, imported by
    Twisted's C{defer}, comes without C{ssl}, which stays importable.
    """

    def _output(self, script: str) -> list[str]:
        return pythonOutput(self, script).split()

    def test_commandsImportAsyncioWithoutSSL(self) -> None:
        """
        After a command's start-up (importing L{salttwist.cli}), importing
        Twisted's C{defer} imports C{asyncio} but not C{ssl}; C{asyncio}
        runs coroutines, and C{ssl} can still be imported afterwards.
        """
        script = (
            "import sys\n"
            "import salttwist.cli\n"
            "print('asyncio' in sys.modules)\n"
            "import twisted.internet.defer, asyncio\n"
            "print('asyncio' in sys.modules, 'ssl' in sys.modules, asyncio.sslproto.ssl)\n"
            "async def f():\n"
            "    return 'ran'\n"
            "print(asyncio.run(f()))\n"
            "import ssl\n"
            "print(hasattr(ssl, 'SSLContext'))\n"
        )
        self.assertEqual(self._output(script), ["False", "True", "False", "None", "ran", "True"])

    def test_sslAlreadyImported(self) -> None:
        """
        With C{ssl} already imported nothing is hidden: C{asyncio} gets it.
        """
        script = (
            "import ssl, sys\n"
            "from salttwist._startup import asyncioWithoutSSL\n"
            "print(asyncioWithoutSSL())\n"
            "import asyncio\n"
            "print(asyncio.sslproto.ssl is ssl)\n"
        )
        self.assertEqual(self._output(script), ["False", "True"])

    def test_onlyOnce(self) -> None:
        """
        Arranging it twice adds one finder; it leaves C{sys.meta_path} once
        C{asyncio} is imported.
        """
        script = (
            "import sys\n"
            "from salttwist._startup import asyncioWithoutSSL\n"
            "before = len(sys.meta_path)\n"
            "print(asyncioWithoutSSL(), asyncioWithoutSSL(), len(sys.meta_path) - before)\n"
            "import asyncio\n"
            "print(len(sys.meta_path) - before, asyncioWithoutSSL())\n"
        )
        self.assertEqual(self._output(script), ["True", "False", "1", "0", "False"])


class ImportDeferWithoutAsyncioTests(SynchronousTestCase):
    """
    L{salttwist._startup.importDeferWithoutAsyncio}: Twisted's C{defer}
    imported with a stand-in for C{asyncio}, which a later C{import asyncio}
    does not see.
    """

    def _output(self, script: str) -> list[str]:
        return pythonOutput(self, script).split()

    def test_withoutAsyncio(self) -> None:
        """
        C{defer} is imported and C{asyncio} is not; C{defer} still runs
        coroutines and refuses what is not one; then
        C{import asyncio} loads the real package, whose futures C{defer}
        adapts.
        """
        script = (
            "import sys, types\n"
            "import salttwist.cli\n"
            "from salttwist._startup import importDeferWithoutAsyncio\n"
            "print(importDeferWithoutAsyncio(), 'asyncio' in sys.modules)\n"
            "from twisted.internet import defer\n"
            "async def f():\n"
            "    return 'ran'\n"
            "print(defer.ensureDeferred(f()).result)\n"
            "try:\n"
            "    defer.ensureDeferred(1)\n"
            "except defer.NotACoroutineError:\n"
            "    print('refused')\n"
            "import asyncio\n"
            "print(isinstance(asyncio, types.ModuleType) and hasattr(asyncio, 'run'))\n"
            "async def h():\n"
            "    future = asyncio.get_running_loop().create_future()\n"
            "    future.set_result('adapted')\n"
            "    loop = asyncio.get_running_loop()\n"
            "    return await defer.Deferred.fromFuture(future).asFuture(loop)\n"
            "print(asyncio.run(h()))\n"
        )
        self.assertEqual(
            self._output(script), ["True", "False", "ran", "refused", "True", "adapted"]
        )

    def test_deferAlreadyImported(self) -> None:
        """
        With C{defer} already imported it does nothing.
        """
        script = (
            "import twisted.internet.defer\n"
            "from salttwist._startup import importDeferWithoutAsyncio\n"
            "print(importDeferWithoutAsyncio())\n"
        )
        self.assertEqual(self._output(script), ["False"])


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
        self.assertFalse(masterNeedsTLS({"transport": "tcp", "cluster_broker": "nats://h"}))
        self.assertTrue(masterNeedsTLS({"transport": "tcp", "cluster_broker": "tls://h"}))


class DaemonServerOptionsTests(SynchronousTestCase):
    """
    L{salttwist.cli.daemons.serverOptions}: twistd's options offering only
    the wrapper's own plugin, without scanning every installed one.
    """

    def test_onlyItsPlugin(self) -> None:
        """
        The options offer the one sub-command of the daemon, whose options
        are the plugin's, and parse a twistd command line with it.
        """
        from salttwist.cli.daemons import serverOptions
        from salttwist.minion.tap import Options as MinionOptions

        options = serverOptions("salttwist-minion")()
        self.assertEqual([command[0] for command in options.subCommands], ["salttwist-minion"])
        self.assertIsInstance(options.subCommands.__next__()[2](), MinionOptions)
        master = serverOptions("salttwist-master")()
        self.assertEqual([command[0] for command in master.subCommands], ["salttwist-master"])

    def test_noPluginScan(self) -> None:
        """
        Finding the daemon's sub-command imports no other plugin module
        (twistd's own scan imports Twisted's conch, web, words...).
        """
        script = (
            "import sys\n"
            "from salttwist.cli.daemons import serverOptions\n"
            "options = serverOptions('salttwist-master')()\n"
            "print([c[0] for c in options.subCommands])\n"
            "print(sorted(m for m in sys.modules if m.startswith('twisted.plugins.')))\n"
        )
        output = pythonOutput(self, script).splitlines()
        self.assertEqual(output, ["['salttwist-master']", "['twisted.plugins.salttwist_master']"])


class DaemonExitTests(SynchronousTestCase):
    """
    L{salttwist.cli.daemons.exitNow} ends the process at once after a clean
    stop, still running the C{atexit} functions and flushing the standard
    streams.
    """

    def test_exitNow(self) -> None:
        """
        The exit code is the one given, buffered output is written, and the
        C{atexit} functions ran; the interpreter's finalisation did not (an
        object's C{__del__} at teardown never runs).
        """
        script = (
            "import atexit, sys\n"
            "from salttwist._startup import exitNow\n"
            "class Finalised:\n"
            "    def __del__(self):\n"
            "        sys.stdout.write('finalised\\n')\n"
            "keep = Finalised()\n"
            "atexit.register(lambda: sys.stdout.write('atexit\\n'))\n"
            "sys.stdout.write('buffered\\n')\n"
            "exitNow(3)\n"
        )
        done = runPython(script)
        self.assertEqual((done.returncode, done.stdout), (3, "buffered\natexit\n"))


class GarbageCollectionTests(SynchronousTestCase):
    """
    L{holdGarbageCollection} and L{releaseGarbageCollection}: no
    collections during a command's start-up, then collections of what the
    command makes only.
    """

    def setUp(self) -> None:
        import gc

        self.addCleanup(gc.enable)
        self.addCleanup(gc.unfreeze)
        self.addCleanup(gc.set_threshold, *gc.get_threshold())

    def test_holdThenRelease(self) -> None:
        """
        Holding turns the collector off; releasing freezes what exists and
        turns it back on.
        """
        import gc

        from salttwist._startup import holdGarbageCollection, releaseGarbageCollection

        holdGarbageCollection()
        self.assertFalse(gc.isenabled())
        releaseGarbageCollection()
        self.assertTrue(gc.isenabled())
        self.assertGreater(gc.get_freeze_count(), 0)

    def test_releaseWithThresholds(self) -> None:
        """
        Releasing with thresholds (the master's) sets them as the collector
        comes back on.
        """
        import gc

        from salttwist._startup import (
            MASTER_GC_THRESHOLDS,
            holdGarbageCollection,
            releaseGarbageCollection,
        )

        holdGarbageCollection()
        releaseGarbageCollection(MASTER_GC_THRESHOLDS)
        self.assertTrue(gc.isenabled())
        self.assertEqual(gc.get_threshold(), MASTER_GC_THRESHOLDS)

    def test_daemonThresholds(self) -> None:
        """
        C{salttwist-master} runs twistd's application with the master's
        thresholds, C{salttwist-minion} with Python's defaults.
        """
        root = os.path.abspath(self.mktemp())
        for name, extra in (("master", ""), ("minion", "id: m1\nmaster: 127.0.0.1\n")):
            os.makedirs(os.path.join(root, name))
            with open(os.path.join(root, name, name), "w") as f:
                f.write(f"root_dir: {os.path.join(root, name)}\n{extra}")
        script = (
            "import sys\n"
            "from salttwist.cli import daemons\n"
            "from salttwist.config import loadMasterConfig, loadMinionConfig\n"
            "daemons._runApp = lambda config, gcThresholds=None: print(gcThresholds)\n"
            "for plugin, load, needsTLS, configDir in (\n"
            "    ('salttwist-master', loadMasterConfig, daemons.masterNeedsTLS, sys.argv[1]),\n"
            "    ('salttwist-minion', loadMinionConfig, daemons.minionNeedsTLS, sys.argv[2]),\n"
            "):\n"
            "    daemons._run(plugin, load, ['-c', configDir], needsTLS)\n"
        )
        env = dict(os.environ)
        env.pop("SALTTWIST_CONFIG_DIR", None)
        output = pythonOutput(
            self, script, os.path.join(root, "master"), os.path.join(root, "minion"), env=env
        )
        from salttwist._startup import MASTER_GC_THRESHOLDS

        self.assertEqual(output.splitlines()[-2:], [str(MASTER_GC_THRESHOLDS), "None"])

    def test_releaseWithoutHold(self) -> None:
        """
        Releasing a collector that was not held changes nothing.
        """
        import gc

        from salttwist._startup import releaseGarbageCollection

        frozen = gc.get_freeze_count()
        releaseGarbageCollection()
        self.assertTrue(gc.isenabled())
        self.assertEqual(gc.get_freeze_count(), frozen)


class CommandExitTests(SynchronousTestCase):
    """
    C{salttwist} run as its console script ends through L{exitNow} with
    the exit code and output it would have had.
    """

    def test_consoleScriptExitCode(self) -> None:
        """
        With no master listening, C{main()} (no C{argv}, as the console
        script calls it) prints the error and the process exits 2.
        """
        import socket

        root = os.path.abspath(self.mktemp())
        os.makedirs(root)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with open(os.path.join(root, "master"), "w") as f:
            f.write(f"root_dir: {root}\ninterface: 127.0.0.1\nret_port: {port}\n")
        script = (
            "import sys\n"
            f"sys.argv = ['salttwist', '-c', {root!r}, '*', 'test.ping']\n"
            "from salttwist.cli.salt import main\n"
            "main()\n"
            "print('not reached')\n"
        )
        done = runPython(script)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("Error:", done.stderr)
        self.assertNotIn("not reached", done.stdout)


class DirectCommandTests(SynchronousTestCase):
    """
    The C{salttwist} command on the C{tcp} transport runs without Twisted
    (L{salttwist.client.direct}).
    """

    def test_noTwisted(self) -> None:
        """
        Running a job through the command (here against a master that is
        not running) imports neither Twisted nor zope.interface.
        """
        configDir = self.mktemp()
        os.makedirs(configDir)
        with open(os.path.join(configDir, "master"), "w") as f:
            f.write(f"root_dir: {os.path.abspath(configDir)}\n")
        script = (
            "import sys\n"
            "from salttwist.cli import salt\n"
            f"code = salt.main(['-c', {configDir!r}, '*', 'test.ping'])\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('twisted', 'zope'))\n"
            "print(code, loaded)\n"
        )
        result = runPython(script)
        self.assertEqual(result.stdout.split(), ["2", "[]"], result.stderr)
        self.assertIn("event bus", result.stderr)
