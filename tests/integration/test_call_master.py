# -*- test-case-name: tests.integration.test_call_master -*-
"""
Integration tests of C{salttwist-call} without C{--local}: a real master and
minion daemon on 127.0.0.1, and the real C{salttwist-call}, C{salttwist} and
C{salttwist-run} commands. The call runs beside the minion daemon of the
same id, with the same key.
"""

from __future__ import annotations

import json
import os
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.events.client import listenEvents
from salttwist.master.service import EVENT_PUB_SOCKET
from tests.integration.harness import Cluster, CommandResult, runCommand, waitFor

MINION = "minion1"


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class CallMasterTests(TestCase):
    """
    C{salttwist-call} sends its return to the master's job cache and its
    events to the master's bus without disturbing the running minion.
    """

    timeout = 120

    async def setUp(self) -> None:
        """
        Start the master and C{minion1}, its key accepted, and listen to
        the master's bus.
        """
        self.cluster = Cluster(self)
        await self.cluster.startReady((MINION,))
        self.events: list[tuple[str, dict[str, Any]]] = []
        proto = await listenEvents(
            _reactor(),
            os.path.join(self.cluster.sockDir, EVENT_PUB_SOCKET),
            ["salt/job/", "salt/minion/", "myco/"],
            lambda tag, data: self.events.append((tag, data)),
        )
        self.addCleanup(lambda: proto.lost)
        self.addCleanup(proto.transport.loseConnection)

    async def call(self, *args: str) -> CommandResult:
        """
        Run C{salttwist-call -c MINION_DIR ARGS}.
        """
        cluster = self.cluster
        return await runCommand(
            ["salttwist-call", "-c", cluster.minionDir(MINION), *args], cwd=cluster.baseDir
        )

    async def runJson(self, *args: str) -> Any:
        """
        Run C{salttwist-run ARGS --out json}, which must succeed.
        """
        cluster = self.cluster
        result = await runCommand(
            ["salttwist-run", "-c", cluster.masterDir, *args, "--out", "json"],
            cwd=cluster.baseDir,
        )
        self.assertEqual(result.code, 0, cluster.explain(result))
        return json.loads(result.out)

    async def test_callRecordedAndMinionUndisturbed(self) -> None:
        """
        C{salttwist-call test.echo hi} prints the result without a warning;
        the minion daemon keeps its connection (no new start event) and
        answers C{salttwist '*' test.ping}; C{jobs.list_jobs} shows the call
        (target the minion, type C{list}) and C{jobs.lookup_jid} its return.
        """
        starts = [tag for tag, _ in self.events if tag.endswith("/start")]
        call = await self.call("test.echo", "hi")
        self.assertEqual((call.code, call.out, call.err), (0, "local:\n    hi\n", ""), str(call))

        ping = await self.cluster.salt("*", "test.ping", "--out", "json")
        self.assertEqual(ping.code, 0, self.cluster.explain(ping))
        self.assertEqual(json.loads(ping.out), {MINION: True}, str(ping))
        self.assertEqual([tag for tag, _ in self.events if tag.endswith("/start")], starts)
        self.assertTrue(self.cluster.minions[MINION].running)

        async def listed() -> dict[str, Any]:
            return await self.runJson("jobs.list_jobs", "search_function=test.echo")

        jobs = await waitFor(listed, "the call in jobs.list_jobs", context=self.cluster.logs)
        [(jid, job)] = jobs.items()
        self.assertEqual(
            (job["Function"], job["Arguments"], job["Target"], job["Target-type"]),
            ("test.echo", ["hi"], MINION, "list"),
        )

        async def looked() -> dict[str, Any]:
            return await self.runJson("jobs.lookup_jid", jid)

        self.assertEqual(
            await waitFor(looked, "the call's return", context=self.cluster.logs), {MINION: "hi"}
        )
        tags = [tag for tag, _ in self.events if tag.startswith(f"salt/job/{jid}/")]
        self.assertEqual(tags, [f"salt/job/{jid}/new", f"salt/job/{jid}/ret/{MINION}"])

    async def test_eventSend(self) -> None:
        """
        C{salttwist-call event.send myco/x data=...} fires C{myco/x} on the
        master's bus with the minion's id; a forged C{salt/job/...} tag is
        refused with the rule and fires nothing.
        """
        sent = await self.call("event.send", "myco/x", 'data={"n": 1}')
        self.assertEqual((sent.code, sent.out, sent.err), (0, "local:\n    True\n", ""), str(sent))
        await waitFor(
            lambda: [data for tag, data in self.events if tag == "myco/x"],
            "the event on the bus",
            context=self.cluster.logs,
        )
        [data] = [data for tag, data in self.events if tag == "myco/x"]
        self.assertEqual((data["id"], data["data"]), (MINION, {"n": 1}))

        forged = "salt/job/20260101000000000001/ret/minion2"
        refused = await self.call("event.send", forged, 'data={"return": "x"}')
        self.assertEqual(refused.code, 1, str(refused))
        self.assertIn("tags under salt/ are the master's", refused.out)
        self.assertEqual([tag for tag, _ in self.events if tag == forged], [])
