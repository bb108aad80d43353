# -*- test-case-name: tests.integration.test_states_local -*-
"""
Integration tests of masterless state runs (issue 21): the installed
C{salttwist-call --local state.*} with the minion config's own
C{file_roots} and C{pillar_roots}, no master anywhere.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import CommandResult, runCommand


def writeTree(root: str, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = os.path.join(root, *relative.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


STATES = {
    "top.sls": "base:\n  'web1':\n    - motd\n",
    "motd/init.sls": """\
motd:
  cmd.run:
    - name: cp {{ salt['cp.cache_file']('salt://motd/motd.txt') }} {{ pillar['out'] }}/motd
    - creates: {{ pillar['out'] }}/motd

announce:
  test.succeed_with_changes:
    - onchanges:
      - cmd: motd
""",
    "motd/motd.txt": "welcome to web1\n",
    "failing.sls": "broken:\n  test.fail_without_changes: []\n",
}


class MasterlessStatesTests(TestCase):
    """
    C{salttwist-call --local} applies states from local roots.
    """

    timeout = 120

    def setUp(self) -> None:
        self.base = os.path.abspath(self.mktemp())
        self.out = os.path.join(self.base, "out")
        os.makedirs(self.out)
        fileRoot = os.path.join(self.base, "salt")
        pillarRoot = os.path.join(self.base, "pillar")
        writeTree(fileRoot, STATES)
        writeTree(
            pillarRoot,
            {"top.sls": "base:\n  '*':\n    - paths\n", "paths.sls": f"out: {self.out}\n"},
        )
        self.configDir = os.path.join(self.base, "conf")
        os.makedirs(self.configDir)
        with open(os.path.join(self.configDir, "minion"), "w") as f:
            json.dump(
                {
                    "id": "web1",
                    "root_dir": self.base,
                    "file_roots": {"base": [fileRoot]},
                    "pillar_roots": {"base": [pillarRoot]},
                },
                f,
            )

    async def call(self, *args: str) -> CommandResult:
        return await runCommand(
            ["salttwist-call", "-c", self.configDir, "--local", "--out", "json", *args],
            cwd=self.base,
        )

    def parse(self, result: CommandResult) -> Any:
        return json.loads(result.out)["local"]

    async def test_apply(self) -> None:
        """
        The highstate from local roots: a salt:// file cached and copied,
        an C{onchanges} state run after it; the second run changes
        nothing and skips the C{onchanges} state.
        """
        result = await self.call("state.apply")
        self.assertEqual(result.code, 0, str(result))
        ret = self.parse(result)
        with open(os.path.join(self.out, "motd")) as f:
            self.assertEqual(f.read(), "welcome to web1\n")
        announce = ret["test_|-announce_|-announce_|-succeed_with_changes"]
        self.assertEqual(announce["result"], True, announce)
        self.assertTrue(announce["changes"])

        again = self.parse(await self.call("state.apply"))
        announce = again["test_|-announce_|-announce_|-succeed_with_changes"]
        self.assertEqual(announce["changes"], {}, announce)

    async def test_testMode(self) -> None:
        """
        C{state.apply test=True} copies nothing.
        """
        result = await self.call("state.apply", "motd", "test=True")
        self.assertEqual(result.code, 0, str(result))
        self.assertFalse(os.path.exists(os.path.join(self.out, "motd")))

    async def test_retcodes(self) -> None:
        """
        With C{--retcode-passthrough}: 2 for a failed state, 1 for an SLS
        that is not there (Salt's error).
        """
        result = await self.call("--retcode-passthrough", "state.sls", "failing")
        self.assertEqual(result.code, 2, str(result))
        result = await self.call("--retcode-passthrough", "state.sls", "nosuch")
        self.assertEqual(result.code, 1, str(result))
        self.assertEqual(self.parse(result), ["No matching sls found for 'nosuch' in env 'base'"])

    async def test_showTop(self) -> None:
        """
        C{state.show_top} reads the local top file.
        """
        result = await self.call("state.show_top")
        self.assertEqual(self.parse(result), {"base": ["motd"]}, str(result))
