# -*- test-case-name: tests.integration.test_state_runfeatures -*-
"""
Integration tests of the state runner's Salt features on real daemons
driven by the installed C{salttwist} command: a chunk's C{umask},
C{state_max_parallel} (minion config), C{state_compress_ids} (master
config, the highstate outputter) and C{--progress -b}.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster

MINIONS = ("minion1", "minion2")

UMASK = """\
private:
  file.managed:
    - name: {out}/{{{{ grains['id'] }}}}.private
    - contents: secret
    - umask: "077"

shared:
  file.managed:
    - name: {out}/{{{{ grains['id'] }}}}.shared
    - contents: public
"""

PARALLEL = """\
{% set log = "{out}/" ~ grains['id'] ~ ".log" %}
{% for n in (1, 2, 3) %}
p{{ n }}:
  cmd.run:
    - name: echo start >> {{ log }}; sleep 0.2; echo end >> {{ log }}
    - parallel: True
{% endfor %}
"""

NAMES = """\
many:
  test.succeed_with_changes:
    - names:
      - a
      - b
      - c
"""


def writeFile(root: str, relative: str, data: str) -> None:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(data)


class RunFeaturesTests(TestCase):
    """
    A master (with C{state_compress_ids}) and two minions (with
    C{state_max_parallel: 1}).
    """

    timeout = 240

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        self.roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        self.out = os.path.join(self.cluster.baseDir, "out")
        os.makedirs(self.out)
        writeFile(self.roots, "umask.sls", UMASK.format(out=self.out))
        writeFile(self.roots, "parallel.sls", PARALLEL.replace("{out}", self.out))
        writeFile(self.roots, "names.sls", NAMES)
        self.cluster.writeMasterConfig(file_roots={"base": [self.roots]}, state_compress_ids=True)
        await self.cluster.startReady(MINIONS, state_max_parallel=1)

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def salt(self, *args: str) -> Any:
        result = await self.cluster.salt(*args)
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        return result

    async def test_umask(self) -> None:
        """
        A file managed under C{umask: "077"} is 0600; the next one, without
        it, gets the minion's usual 0644.
        """
        result = await self.salt("minion1", "state.sls", "umask", "--out", "json")
        returns = json.loads(result.out)["minion1"]
        self.assertTrue(all(r["result"] for r in returns.values()), returns)
        mode = stat.S_IMODE(os.stat(os.path.join(self.out, "minion1.private")).st_mode)
        self.assertEqual(mode, 0o600)
        mode = stat.S_IMODE(os.stat(os.path.join(self.out, "minion1.shared")).st_mode)
        self.assertEqual(mode, 0o644)

    async def test_maxParallel(self) -> None:
        """
        With C{state_max_parallel: 1}, three parallel commands run one
        after another: their log never shows two starts in a row.
        """
        result = await self.salt("minion1", "state.sls", "parallel", "--out", "json")
        returns = json.loads(result.out)["minion1"]
        self.assertEqual(len(returns), 3)
        self.assertTrue(all(r["result"] for r in returns.values()), returns)
        self.assertTrue(all(r.get("__parallel__") for r in returns.values()), returns)
        with open(os.path.join(self.out, "minion1.log")) as f:
            self.assertEqual(f.read().split(), ["start", "end"] * 3)

    async def test_compressIds(self) -> None:
        """
        With C{state_compress_ids: True} in the master's config, the three
        names of one id print as one terse line with their count.
        """
        result = await self.salt("minion1", "state.sls", "names", "--state-output", "terse_id")
        self.assertIn("Name: many (3) - Function: test.succeed_with_changes", result.out)
        self.assertIn("Succeeded: 3 (changed=3)", result.out)

    async def test_batchProgress(self) -> None:
        """
        C{--progress -b 1} on a state run counts each minion's states as
        its batch runs, on standard error (not a terminal: a line each),
        and the returns out of both minions.

        The events and the returns reach the command by different
        connections: the events of the last minion may come after its
        return, and the command waits for them, so both minions show
        all their states.
        """
        result = await self.salt("--progress", "-b", "1", "*", "state.sls", "names")
        self.assertIn("Executing run on ['minion1']", result.out)
        self.assertIn("Executing run on ['minion2']", result.out)
        self.assertIn("Progress: 2/2 returns", result.err)
        self.assertIn("minion1: 3/3 states", result.err, result.err)
        self.assertIn("minion2: 3/3 states", result.err, result.err)
        self.assertLess(
            result.err.index("minion1: 3/3 states"),
            result.err.index("Progress: 2/2 returns"),
            result.err,
        )
