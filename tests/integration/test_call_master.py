# -*- test-case-name: tests.integration.test_call_master -*-
"""
Integration tests of C{salttwist-call} without C{--local}: a real master and
minion daemon on 127.0.0.1, and the real C{salttwist-call}, C{salttwist} and
C{salttwist-run} commands. The call runs beside the minion daemon of the
same id, with the same key. And a call whose config lists two masters, the
first of them down (L{CallMastersTests}).
"""

from __future__ import annotations

import json
import os
from typing import Any

import yaml
from twisted.trial.unittest import TestCase

from salttwist.events.client import listenEvents
from salttwist.master.service import EVENT_PUB_SOCKET
from tests.integration.harness import Cluster, CommandResult, runCommand, seedKeyPair, waitFor

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


class CallMastersTests(TestCase):
    """
    C{salttwist-call} with C{master: [A, B]}: master A was started and
    stopped (its port refuses connections), master B runs with C{minion1}
    connected; both masters share one key pair, as a cluster's do.
    """

    timeout = 120

    async def setUp(self) -> None:
        """
        Start B and C{minion1}; start A with B's key pair, then stop it.
        """
        self.b = Cluster(self)
        await self.b.startReady((MINION,))
        assert self.b.ports is not None
        self.portB = self.b.ports["ret_port"]
        self.a = Cluster(self)
        self.a.writeMasterConfig()
        seedKeyPair(self.a.masterPkiDir, "master", "master")
        await self.a.startMaster()
        assert self.a.ports is not None
        self.portA = self.a.ports["ret_port"]
        await self.a.stopMaster()
        self.events: list[tuple[str, dict[str, Any]]] = []
        proto = await listenEvents(
            _reactor(),
            os.path.join(self.b.sockDir, EVENT_PUB_SOCKET),
            ["salt/job/"],
            lambda tag, data: self.events.append((tag, data)),
        )
        self.addCleanup(lambda: proto.lost)
        self.addCleanup(proto.transport.loseConnection)

    def logs(self) -> str:
        return f"== master A ==\n{self.a.logs()}\n== master B ==\n{self.b.logs()}"

    async def call(self, *args: str, **options: Any) -> CommandResult:
        """
        Run C{salttwist-call ARGS} with C{minion1}'s id and key and a config
        listing A then B (the running daemon read its own config at start).
        """
        directory = self.b.minionDir(MINION)
        config = {
            "root_dir": directory,
            "id": MINION,
            "master": [f"127.0.0.1:{self.portA}", f"127.0.0.1:{self.portB}"],
            "log_level": "info",
            **options,
        }
        with open(os.path.join(directory, "minion"), "w") as f:
            yaml.safe_dump(config, f)
        return await runCommand(["salttwist-call", "-c", directory, *args], cwd=self.b.baseDir)

    async def test_firstMasterDown(self) -> None:
        """
        With C{master_type: failover}, and with a plain list (Salt's
        multi-master), the call leaves A and sends its return to B, which
        fires it on its bus: no warning. With B stopped too, the local
        result is still printed and the warning names both masters and why
        each was left.
        """
        for options in ({"master_type": "failover"}, {}):
            call = await self.call("test.echo", "across", **options)
            self.assertEqual(
                (call.code, call.out, call.err),
                (0, "local:\n    across\n", ""),
                f"{options}: {call}\n{self.logs()}",
            )

        def returns() -> list[dict[str, Any]]:
            return [data for tag, data in self.events if tag.endswith(f"/ret/{MINION}")]

        await waitFor(lambda: len(returns()) == 2, "both returns on B's bus", context=self.logs)
        self.assertEqual([data["return"] for data in returns()], ["across", "across"])

        await self.b.stopMaster()
        call = await self.call("test.echo", "alone", master_type="failover")
        self.assertEqual((call.code, call.out), (0, "local:\n    alone\n"), str(call))
        self.assertIn(
            "Warning: the result was not sent to the master: none of the 2 masters took the "
            f"session; tried 127.0.0.1:{self.portA}: cannot reach the master at "
            f"127.0.0.1:{self.portA}",
            call.err,
        )
        self.assertIn(
            f"; 127.0.0.1:{self.portB}: cannot reach the master at 127.0.0.1:{self.portB}",
            call.err,
        )
