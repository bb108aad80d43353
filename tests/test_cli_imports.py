# -*- test-case-name: tests.test_cli_imports -*-
"""
What the C{salttwist} command imports: the modules a command does not
need (the config module and PyYAML for C{--version}, the C{highstate}
outputter and C{pprint} for a job that does not print state returns) are
imported only when needed. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests._fresh import pythonOutput

#: The modules a short command should not pay for unless it uses them.
OPTIONAL = ("yaml", "salttwist.config", "salttwist.cli.highstate", "pprint")

_REPORT = "import sys\nprint(' '.join(m for m in {optional!r} if m in sys.modules) or '-')\n"


class LazyImportTests(SynchronousTestCase):
    """
    The C{salttwist} command imports its optional modules on use.
    """

    def loaded(self, script: str) -> list[str]:
        """
        @return: which of L{OPTIONAL} C{script} left imported.
        """
        output = pythonOutput(self, script + _REPORT.format(optional=OPTIONAL))
        return [name for name in output.split() if name != "-"]

    def test_version(self) -> None:
        """
        C{salttwist --version} prints the version without importing the
        config module, PyYAML, the C{highstate} outputter or C{pprint}.
        """
        script = (
            "import contextlib, io\n"
            "from salttwist.cli.salt import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
            "    main(['--version'])\n"
            "assert out.getvalue().startswith('salttwist '), out.getvalue()\n"
        )
        self.assertEqual(self.loaded(script), [])

    def printReturn(self, function: str) -> str:
        """
        @return: a script that prints a return of C{function} as
            C{salttwist} does, with the default outputter.
        """
        return (
            "import contextlib, io\n"
            "from salttwist.cli.salt import _Printer, buildParser\n"
            f"options = buildParser().parse_args(['*', {function!r}])\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    printer = _Printer(options, config={})\n"
            "    printer.stream = out\n"
            "    printer.returned('m1', {'return': {'a': 1}})\n"
            "assert 'm1' in out.getvalue(), out.getvalue()\n"
        )

    def test_jobWithoutStates(self) -> None:
        """
        A C{test.ping}-like job's returns print (with C{nested}) without
        the C{highstate} outputter or C{pprint}.
        """
        self.assertEqual(self.loaded(self.printReturn("test.echo")), [])

    def test_stateJob(self) -> None:
        """
        A state run's returns print with the C{highstate} outputter, which
        is then imported.
        """
        self.assertIn("salttwist.cli.highstate", self.loaded(self.printReturn("state.apply")))
