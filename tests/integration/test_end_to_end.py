# -*- test-case-name: tests.integration.test_end_to_end -*-
"""
End-to-end tests: real C{salttwist-master} and C{salttwist-minion} daemons
on 127.0.0.1, driven with the real C{salttwist} and C{salttwist-key}
commands.

Each test starts its own processes (trial checks that none outlive a test),
so the tests of a class share a setup, not the daemons themselves.
"""

from __future__ import annotations

import json
import os
import signal
import time

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from salttwist.master.service import PORTS_FILE
from tests.integration.harness import (
    STOP_GRACE,
    Cluster,
    runCommand,
    waitFor,
)

MINIONS = ("minion1", "minion2")
NO_RESPONSE = "Minion did not return. [No response]"
NOT_CONNECTED = "Minion did not return. [Not connected]"


def _nestedBlocks(output: str) -> list[str]:
    """
    Split C{nested} output into one block per minion (a line C{id:} and the
    indented lines under it), so that tests need not know the arrival order.
    """
    blocks: list[str] = []
    for line in output.splitlines(keepends=True):
        if line.startswith(" ") and blocks:
            blocks[-1] += line
        else:
            blocks.append(line)
    return blocks


class IntegrationTestCase(TestCase):
    """
    A trial test case on the real reactor, with a generous timeout for
    machines under load; every wait of the harness has its own deadline.
    """

    timeout = 90

    def setUp(self) -> None:
        self.cluster = Cluster(self)


class KeyAcceptanceTests(IntegrationTestCase):
    """
    From new minions to the first job: the admin sees the pending keys,
    accepts them, and the minions answer.
    """

    async def setUp(self) -> None:
        super().setUp()
        await self.cluster.startMaster()
        self.events = await self.cluster.watchEvents()
        for minionId in MINIONS:
            self.cluster.startMinion(minionId)

    async def test_acceptThenPing(self) -> None:
        """
        The keys of new minions wait in C{minions_pre} (C{salttwist-key -L});
        once C{salttwist-key -a ID -y} accepts them, the minions authenticate
        without help and C{salttwist '*' test.ping} gets C{True} from both,
        with exit code 0, in the C{json} and the default C{nested} output.
        """
        cluster = self.cluster
        await cluster.waitForPending(MINIONS)
        listing = await cluster.key("-L", "--out", "json")
        self.assertEqual(listing.code, 0, cluster.explain(listing))
        keys = json.loads(listing.out)
        self.assertEqual(sorted(keys["minions_pre"]), list(MINIONS), cluster.explain(listing))
        self.assertEqual(keys["minions"], [], cluster.explain(listing))

        for minionId in MINIONS:
            accepted = await cluster.key("-a", minionId, "-y")
            self.assertEqual(accepted.code, 0, cluster.explain(accepted))
            self.assertIn(f"Key for minion {minionId} accepted.", accepted.out, str(accepted))
        await cluster.waitForStart(self.events, MINIONS)

        ping = await cluster.salt("*", "test.ping", "--static", "--out", "json")
        self.assertEqual(ping.code, 0, cluster.explain(ping))
        self.assertEqual(json.loads(ping.out), {"minion1": True, "minion2": True}, str(ping))
        self.assertEqual(ping.err, "", str(ping))

        nested = await cluster.salt("*", "test.ping")
        self.assertEqual(nested.code, 0, cluster.explain(nested))
        self.assertEqual(
            sorted(_nestedBlocks(nested.out)),
            ["minion1:\n    True\n", "minion2:\n    True\n"],
            str(nested),
        )


class JobTests(IntegrationTestCase):
    """
    Jobs other than C{test.ping} against two accepted, connected minions.
    """

    async def setUp(self) -> None:
        super().setUp()
        await self.cluster.startReady(MINIONS)

    async def test_grainTargets(self) -> None:
        """
        A grain set by a job reaches the master at once: C{-G} then targets
        only that minion (the master expects no other), and C{-C} mixes grain
        and id words.
        """
        cluster = self.cluster
        setval = await cluster.salt("minion1", "grains.setval", "role", "web", "--out", "json")
        self.assertEqual(setval.code, 0, cluster.explain(setval))
        grain = await cluster.salt("-G", "role:web", "test.ping", "--static", "--out", "json")
        self.assertEqual(grain.code, 0, cluster.explain(grain))
        self.assertEqual(json.loads(grain.out), {"minion1": True}, str(grain))
        compound = await cluster.salt(
            "-C", "G@role:web or minion2", "test.ping", "--static", "--out", "json"
        )
        self.assertEqual(json.loads(compound.out), {"minion1": True, "minion2": True})
        bad = await cluster.salt("-C", "minion1 and (", "test.ping")
        self.assertEqual(bad.code, 2, cluster.explain(bad))
        self.assertIn("position", bad.err)

    async def test_jobs(self) -> None:
        """
        C{cmd.run 'echo hi'} runs the shell command on every minion and
        returns its output without the newline. Arguments reach the minions
        as Salt reads them on the command line: text stays text, a YAML
        number becomes a number, C{key=value} a keyword argument; C{-L}
        targets a list of ids and a bare id targets that minion alone.
        """
        cluster = self.cluster
        hi = await cluster.salt("*", "cmd.run", "echo hi", "--static", "--out", "json")
        self.assertEqual(hi.code, 0, cluster.explain(hi))
        self.assertEqual(json.loads(hi.out), {"minion1": "hi", "minion2": "hi"}, str(hi))

        text = await cluster.salt("*", "test.echo", "hello world", "--static", "--out", "json")
        self.assertEqual(text.code, 0, cluster.explain(text))
        self.assertEqual(
            json.loads(text.out), {"minion1": "hello world", "minion2": "hello world"}, str(text)
        )

        number = await cluster.salt("-L", "minion2", "test.echo", "42", "--static", "--out", "json")
        self.assertEqual(number.code, 0, cluster.explain(number))
        self.assertEqual(json.loads(number.out), {"minion2": 42}, str(number))

        args = await cluster.salt(
            "minion1", "test.arg", "one", "2", "key=value", "--static", "--out", "json"
        )
        self.assertEqual(args.code, 0, cluster.explain(args))
        returned = json.loads(args.out)
        self.assertEqual(list(returned), ["minion1"], str(args))
        self.assertEqual(returned["minion1"]["args"], ["one", 2], str(args))
        self.assertEqual(returned["minion1"]["kwargs"].get("key"), "value", str(args))

    async def test_errors(self) -> None:
        """
        A function no minion has is reported by each minion as
        C{'nope.nope' is not available.}, and C{salttwist} exits with 1. A
        target that matches no accepted minion sends nothing: C{salttwist}
        says so on stderr and exits with 2.
        """
        cluster = self.cluster
        unknown = await cluster.salt("*", "nope.nope", "--static", "--out", "json")
        self.assertEqual(unknown.code, 1, cluster.explain(unknown))
        self.assertEqual(
            json.loads(unknown.out),
            {
                "minion1": "'nope.nope' is not available.",
                "minion2": "'nope.nope' is not available.",
            },
            str(unknown),
        )

        nobody = await cluster.salt("nobody*", "test.ping")
        self.assertEqual(nobody.code, 2, cluster.explain(nobody))
        self.assertIn("No minions matched the target", nobody.err, str(nobody))
        self.assertEqual(nobody.out, "", str(nobody))

    async def test_bothClientPaths(self) -> None:
        """
        The command's two paths give the same returns: a plain job goes
        through the direct client (no reactor, C{salttwist.client.direct}),
        a batch through the Twisted client, one minion at a time; and
        C{--async} (direct) prints the jid it published.
        """
        cluster = self.cluster
        direct = await cluster.salt("*", "test.echo", "same", "--static", "--out", "json")
        self.assertEqual(direct.code, 0, cluster.explain(direct))
        batch = await cluster.salt("-b", "1", "*", "test.echo", "same", "--out", "json")
        self.assertEqual(batch.code, 0, cluster.explain(batch))
        self.assertEqual(json.loads(direct.out), {"minion1": "same", "minion2": "same"})
        batchReturns: dict[str, object] = {}
        for line in batch.out.splitlines():
            if line.startswith("{"):
                batchReturns.update(json.loads(line))
        self.assertEqual(batchReturns, json.loads(direct.out), str(batch))
        self.assertIn("Executing run on ['minion1']", batch.out)
        published = await cluster.salt("--async", "*", "test.ping")
        self.assertEqual(published.code, 0, cluster.explain(published))
        self.assertRegex(published.out, r"^Executed command with job ID: \d{20}\n$")


class MinionFailureTests(IntegrationTestCase):
    """
    Minions that go away, violently or when told to.
    """

    async def test_killedMinionDoesNotReturn(self) -> None:
        """
        A minion killed with SIGKILL is still targeted (its key is accepted):
        C{salttwist} reports it as not connected, without waiting for the
        timeout, and exits non-zero, while the other minion answers C{True}.

        The timeout is an hour: a client that waited for it would run into
        the test's own timeout. C{[Not connected]} (not C{[No response]},
        which follows the wait and a C{saltutil.find_job}) says the master
        told the client at once that the minion was not connected.
        """
        cluster = self.cluster
        await cluster.startReady(MINIONS)
        killed = cluster.minions["minion1"]
        killed.sendSignal("KILL")
        await killed.ended
        result = await cluster.salt("*", "test.ping", "-t", "3600", "--static", "--out", "json")
        print(f"\nsalttwist with a killed minion: {result.elapsed:.2f}s")
        self.assertNotEqual(result.code, 0, cluster.explain(result))
        self.assertEqual(
            json.loads(result.out), {"minion1": NOT_CONNECTED, "minion2": True}, str(result)
        )

    async def test_silentMinionDoesNotReturn(self) -> None:
        """
        A minion that stays connected but does not answer (stopped with
        SIGSTOP) is asked with saltutil.find_job after the timeout, does not
        answer that either, and is reported C{[No response]}.
        """
        cluster = self.cluster
        await cluster.startReady(MINIONS)
        silent = cluster.minions["minion1"]
        silent.sendSignal(signal.SIGSTOP)  # type: ignore[arg-type]
        try:
            result = await cluster.salt(
                "*",
                "test.ping",
                "-t",
                "1",
                "--gather-job-timeout",
                "1",
                "--static",
                "--out",
                "json",
            )
        finally:
            silent.sendSignal(signal.SIGCONT)  # type: ignore[arg-type]
        self.assertNotEqual(result.code, 0, cluster.explain(result))
        self.assertEqual(
            json.loads(result.out), {"minion1": NO_RESPONSE, "minion2": True}, str(result)
        )

    async def test_sigtermStopsMinion(self) -> None:
        """
        SIGTERM makes a connected minion without jobs exit with exit code
        0, at once: it has no job to wait for (it logs no wait), and it is
        not killed by the harness's SIGKILL after L{STOP_GRACE}. The time
        it took is printed.
        """
        cluster = self.cluster
        await cluster.startReady(["minion1"])
        minion = cluster.minions["minion1"]
        start = time.monotonic()
        minion.sendSignal("TERM")
        exited = await minion.waitForExit(STOP_GRACE)
        print(f"\nminion stopped {time.monotonic() - start:.2f}s after SIGTERM")
        self.assertTrue(exited, cluster.logs())
        self.assertEqual((minion.exitCode, minion.signal), (0, None), cluster.logs())
        self.assertNotIn("waiting up to", minion.output(), cluster.logs())


class MasterRestartTests(IntegrationTestCase):
    """
    The master goes away and comes back.
    """

    async def setUp(self) -> None:
        super().setUp()
        await self.cluster.startReady(MINIONS)

    async def test_minionsReconnect(self) -> None:
        """
        After the master is stopped (SIGTERM) and started again on the same
        ports, the minions reconnect and authenticate on their own, and the
        next C{test.ping} gets C{True} from both. While the master is down,
        C{salttwist} fails quickly with exit code 2.
        """
        cluster = self.cluster
        assert cluster.ports is not None
        ports = dict(cluster.ports)
        await cluster.stopMaster()
        assert cluster.master is not None
        self.assertEqual(cluster.master.exitCode, 0, cluster.logs())

        down = await cluster.salt("*", "test.ping")
        self.assertEqual(down.code, 2, cluster.explain(down))

        # Port 0 would get new ports, and the minions know only the old one.
        cluster.writeMasterConfig(publish_port=ports["publish_port"], ret_port=ports["ret_port"])
        await cluster.startMaster()
        self.assertEqual(
            (cluster.ports["publish_port"], cluster.ports["ret_port"]),
            (ports["publish_port"], ports["ret_port"]),
        )
        results = []

        async def bothAnswer() -> bool:
            result = await cluster.salt("*", "test.ping", "-t", "1", "--static", "--out", "json")
            results.append(result)
            return result.code == 0 and json.loads(result.out or "{}") == {
                "minion1": True,
                "minion2": True,
            }

        await waitFor(
            bothAnswer,
            "both minions to answer the restarted master",
            context=lambda: cluster.explain(results[-1] if results else None),
        )

    async def test_returnKeptWhileMasterAway(self) -> None:
        """
        A job that finishes while the master is down is not lost: the minion
        keeps its return on disk and delivers it when the master is back,
        which stores it in the job cache once (C{jobs.lookup_jid}).
        """
        cluster = self.cluster
        assert cluster.ports is not None
        ports = dict(cluster.ports)
        published = await cluster.salt("minion1", "test.sleep", "3", "--async")
        self.assertEqual(published.code, 0, cluster.explain(published))
        jid = published.out.strip().rsplit(" ", 1)[1]
        await cluster.stopMaster()
        await deferLater(reactor, 4, lambda: None)
        cluster.writeMasterConfig(publish_port=ports["publish_port"], ret_port=ports["ret_port"])
        await cluster.startMaster()
        results = []

        async def returned() -> bool:
            result = await runCommand(
                ["salttwist-run", "-c", cluster.masterDir, "jobs.lookup_jid", jid, "--out", "json"],
                cwd=cluster.baseDir,
            )
            results.append(result)
            return result.code == 0 and json.loads(result.out or "{}") == {"minion1": True}

        await waitFor(
            returned,
            "the queued return to reach the restarted master",
            context=lambda: cluster.explain(results[-1] if results else None),
        )


class MasterProcessTests(IntegrationTestCase):
    """
    The master process on its own: how it starts, stops and fails, and what
    the CLI does without it.
    """

    async def test_masterNotRunning(self) -> None:
        """
        Without a running master, C{salttwist} exits non-zero at once (it
        waits for no timeout) and says on stderr that the master is not
        running, both when no master ever ran in the config dir and when one
        was killed (SIGKILL), leaving its socket files behind.

        "At once" shows in the reason stderr gives: the event bus's socket
        is missing, or refuses the connection; not a connection timed out.
        The time beyond a bare C{salttwist --version} is printed.
        """
        cluster = self.cluster
        cluster.writeMasterConfig()
        reasons = {"never started": "No such file or directory", "killed": "Connection refused"}
        for situation, reason in reasons.items():
            if situation == "killed":
                master = await cluster.startMaster()
                master.sendSignal("KILL")
                await master.ended
            baseline = await runCommand(["salttwist", "--version"])
            result = await cluster.salt("*", "test.ping")
            context = f"{situation}:\n{result}\nbaseline:\n{baseline}"
            print(f"\nmaster {situation}: {result.elapsed - baseline.elapsed:.2f}s over --version")
            self.assertNotEqual(result.code, 0, f"{context}\n{cluster.logs()}")
            self.assertIn("master is not running", result.err, context)
            self.assertIn(reason, result.err, context)
            self.assertNotIn("timed out", result.err.lower(), context)

    async def test_twistdPlugin(self) -> None:
        """
        C{twistd -n salttwist-master -c DIR} and C{twistd -n
        salttwist-minion -c DIR} run the daemons as the commands do: they
        log at the config's C{log_level} (the master at C{warning} prints
        none of twistd's or its own info lines, the minion at C{info} no
        debug lines), they run jobs, and SIGTERM stops each cleanly with
        exit status 0 (twistd's own handlers would make it 143).
        """
        cluster = self.cluster
        cluster.writeMasterConfig(log_level="warning")
        await cluster.startReady(["minion1"], twistd=True, log_level="info")
        master, minion = cluster.master, cluster.minions["minion1"]
        assert master is not None
        result = await cluster.salt("--out", "json", "minion1", "test.ping")
        self.assertEqual(json.loads(result.out), {"minion1": True}, cluster.explain(result))
        await minion.stop()
        await master.stop()
        portsFile = os.path.join(cluster.sockDir, PORTS_FILE)
        self.assertFalse(os.path.exists(portsFile), cluster.logs())
        for process in (master, minion):
            self.assertEqual((process.exitCode, process.signal), (0, None), cluster.logs())
        for quiet in ("#info]", "#debug]", "starting up", "salttwist master ready", "AMP"):
            self.assertNotIn(quiet, master.output(), cluster.logs())
        self.assertIn("#info]", minion.output(), cluster.logs())
        self.assertNotIn("#debug]", minion.output(), cluster.logs())

    async def test_sigtermStopsMaster(self) -> None:
        """
        SIGTERM makes C{salttwist-master} remove its ports file and exit
        with exit code 0.
        """
        cluster = self.cluster
        master = await cluster.startMaster()
        await master.stop()
        self.assertFalse(os.path.exists(os.path.join(cluster.sockDir, PORTS_FILE)), cluster.logs())
        self.assertEqual((master.exitCode, master.signal), (0, None), cluster.logs())

    async def test_badConfig(self) -> None:
        """
        A config with C{publish_port: abc} makes C{salttwist-master} exit
        non-zero at once, with the file and the option named on stderr.
        """
        cluster = self.cluster
        path = cluster.writeMasterConfig(publish_port="abc")
        result = await runCommand(["salttwist-master", "-c", cluster.masterDir])
        print(f"\nsalttwist-master with a bad config exited after {result.elapsed:.2f}s")
        self.assertNotEqual(result.code, 0, str(result))
        self.assertIn(path, result.err, str(result))
        self.assertIn("publish_port", result.err, str(result))

    async def test_portInUse(self) -> None:
        """
        A master whose port is taken by another master exits non-zero and
        says it cannot listen, instead of running on without its sockets.
        """
        first = self.cluster
        await first.startMaster()
        assert first.ports is not None
        second = Cluster(self)
        second.writeMasterConfig(ret_port=first.ports["ret_port"])
        process = second.spawn("second master", ["salttwist-master", "-c", second.masterDir])
        self.assertTrue(await process.waitForExit(10), process.describe())
        self.assertNotEqual((process.exitCode, process.signal), (0, None), process.describe())
        self.assertIn("cannot listen", process.output(), process.describe())
