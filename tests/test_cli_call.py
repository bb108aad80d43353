# -*- test-case-name: tests.test_cli_call -*-
"""
Tests for C{salttwist-call}: the real command in a child process (it runs
its own reactor), against a temporary minion config.
"""

from __future__ import annotations

import io
import json
import os
import sys

from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import SynchronousTestCase, TestCase

from salttwist.cli.call import buildParser


class BuildParserTests(SynchronousTestCase):
    """
    L{buildParser} reads C{salt-call}'s command line.
    """

    def setUp(self) -> None:
        """
        Capture standard error, where C{argparse} writes.
        """
        self.stderr = io.StringIO()
        self.patch(sys, "stderr", self.stderr)

    def test_noFunctionNamesOnlyIt(self) -> None:
        """
        A command line without a function is a usage error (exit 2) that
        names the function alone: its arguments are optional, and without
        them the list is empty.
        """
        e = self.assertRaises(SystemExit, buildParser().parse_args, ["--local"])
        self.assertEqual(e.code, 2)
        self.assertTrue(
            self.stderr.getvalue().endswith(
                "error: the following arguments are required: function\n"
            ),
            self.stderr.getvalue(),
        )
        self.assertEqual(buildParser().parse_args(["test.ping"]).arg, [])


class CallTests(TestCase):
    """
    C{salttwist-call} runs a function locally and prints it under C{local}.
    """

    def setUp(self) -> None:
        """
        A minion config directory with a grain.
        """
        self.configDir = os.path.abspath(self.mktemp())
        os.makedirs(self.configDir)
        with open(os.path.join(self.configDir, "minion"), "w") as f:
            f.write(f"root_dir: {self.configDir}\nid: caller1\ngrains:\n  role: db\n")

    async def call(self, *args: str) -> tuple[str, str, int]:
        """
        Run C{salttwist-call -c DIR ARGS}.
        """
        out, err, code = await getProcessOutputAndValue(
            sys.executable,
            ["-m", "salttwist.cli.call", "-c", self.configDir, *args],
            env=dict(os.environ),
        )
        return out.decode(), err.decode(), code

    async def test_ping(self) -> None:
        """
        C{test.ping} prints C{local: True} in the nested format, exit 0.
        """
        out, err, code = await self.call("test.ping")
        self.assertEqual((out, code), ("local:\n    True\n", 0), err)

    async def test_keyFinger(self) -> None:
        """
        C{--local key.finger} prints the fingerprint of the minion's public
        key in its C{pki_dir}, the one C{salttwist-key -f} shows on the
        master.
        """
        from salttwist.crypt import fingerprint
        from tests.test_cli_key import PEM_A

        pkiDir = os.path.join(self.configDir, "etc/salttwist/pki/minion")
        os.makedirs(pkiDir)
        with open(os.path.join(pkiDir, "minion.pub"), "wb") as f:
            f.write(PEM_A)
        out, err, code = await self.call("--local", "key.finger")
        self.assertEqual((out, code), (f"local:\n    {fingerprint(PEM_A)}\n", 0), err)

    async def test_grainsAndJson(self) -> None:
        """
        Config grains and core grains are there; C{--out json} works.
        """
        out, err, code = await self.call("grains.item", "role", "id", "--out", "json")
        self.assertEqual(json.loads(out), {"local": {"role": "db", "id": "caller1"}}, err)

    async def test_localSetsLocalOption(self) -> None:
        """
        C{--local} sets the C{local} option, as Salt's C{salt-call
        --local}: a state's C{fire_event} then fires nothing and warns of
        nothing (there is no master to send it to).
        """
        out, err, code = await self.call("--local", "config.get", "local", "--out", "json")
        self.assertEqual((json.loads(out), code), ({"local": True}, 0), err)
        out, err, code = await self.call(
            "--local",
            "state.single",
            "test.succeed_with_changes",
            "name=thing",
            "fire_event=True",
            "--out",
            "json",
        )
        self.assertEqual(code, 0, err)
        (ret,) = json.loads(out)["local"].values()
        self.assertIs(ret["result"], True)
        self.assertNotIn("fire", err.lower())
        self.assertNotIn("Traceback", err)

    async def test_retcodePassthrough(self) -> None:
        """
        With C{--retcode-passthrough} the exit code is the function's retcode;
        without it a failure exits 1.
        """
        _, _, code = await self.call("cmd.run", "exit 7", "--retcode-passthrough")
        self.assertEqual(code, 7)
        _, _, code = await self.call("cmd.run", "exit 7")
        self.assertEqual(code, 1)

    async def test_unknownFunction(self) -> None:
        """
        An unknown function prints Salt's message and exits non-zero.
        """
        out, _, code = await self.call("no.such")
        self.assertIn("'no.such' is not available.", out)
        self.assertNotEqual(code, 0)

    async def test_badConfig(self) -> None:
        """
        A bad config value exits 2 naming the option.
        """
        with open(os.path.join(self.configDir, "minion"), "w") as f:
            f.write("master_port: abc\n")
        _, err, code = await self.call("test.ping")
        self.assertEqual(code, 2)
        self.assertIn("master_port", err)
