# -*- test-case-name: tests.integration.test_state_reload -*-
"""
Integration test of custom state modules synced from the master during a
minion's state run (L{salttwist.state.runafter}): real daemons, the
installed C{salttwist} command.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from tests.integration.harness import Cluster

CUSTOM = """\
def present(name):
    return {"name": name, "result": True, "changes": {"custom": name}, "comment": "custom ran"}
"""

SLS = """\
sync:
  saltutil.sync_states: []

use_synced:
  mycustom.present:
    - require:
      - saltutil: sync
"""


class SyncDuringRunTests(TestCase):
    """
    A master whose state tree has a custom C{_states/mycustom.py} the
    minion has not synced yet.
    """

    timeout = 240

    async def setUp(self) -> None:
        self.cluster = Cluster(self)
        roots = os.path.join(self.cluster.baseDir, "srv", "salt")
        os.makedirs(os.path.join(roots, "_states"))
        with open(os.path.join(roots, "_states", "mycustom.py"), "w") as f:
            f.write(CUSTOM)
        with open(os.path.join(roots, "reload.sls"), "w") as f:
            f.write(SLS)
        self.cluster.writeMasterConfig(file_roots={"base": [roots]})
        await self.cluster.startReady(["minion1"])

    async def tearDown(self) -> None:
        await self.cluster.stopAll()

    async def test_syncedStateUsed(self) -> None:
        """
        C{state.sls} (no highstate sync first): the C{saltutil.sync_states}
        state syncs C{mycustom} from the master and the next state runs it.
        """
        result = await self.cluster.salt("minion1", "state.sls", "reload", "--out", "json")
        self.assertEqual(result.code, 0, self.cluster.explain(result))
        returns: dict[str, Any] = json.loads(result.out)["minion1"]
        byId = {entry["__id__"]: entry for entry in returns.values()}
        self.assertEqual(byId["sync"]["changes"], {"states": ["states.mycustom"]}, returns)
        self.assertEqual(byId["use_synced"]["comment"], "custom ran", returns)
        self.assertIs(byId["use_synced"]["result"], True, returns)
