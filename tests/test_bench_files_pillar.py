# -*- test-case-name: tests.test_bench_files_pillar -*-
"""
Tests for the file-server and pillar benchmark against Salt
(C{benchmarks/vs_salt/files_pillar.py} and C{files_pillar_client.py}) and
the swarm's pillar counting (C{benchmarks/swarmlib.py}): their pure parts
(content, SLS text, parsing, checks, ratios, the table). Nothing here is
timed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from types import SimpleNamespace
from typing import Any

import jinja2
import yaml
from twisted.internet.defer import fail, succeed
from twisted.trial.unittest import SynchronousTestCase

from tests._scripts import ROOT, loadScript


def _client() -> Any:
    return loadScript("benchmarks", "vs_salt", "files_pillar_client.py")


def _bench() -> Any:
    return loadScript("benchmarks", "vs_salt", "files_pillar.py")


def _swarmlib() -> Any:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        return loadScript("benchmarks", "swarmlib.py")
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))


def _render(text: str, grains: dict[str, Any]) -> Any:
    """
    Render an SLS as both masters do by default: Jinja, then YAML.
    """
    return yaml.safe_load(jinja2.Template(text).render(grains=grains))


class SlsTests(SynchronousTestCase):
    """
    The pillar SLS files the benchmark writes are what it says.
    """

    def test_generatedKeys(self) -> None:
        """
        C{pillarSls(200)} renders to 200 keys, each with the minion's id
        from its grains and 3 tags.
        """
        pillar = _render(_client().pillarSls(200), {"id": "web1"})
        self.assertEqual(len(pillar), 200)
        self.assertEqual(
            pillar["bench_key_7"],
            {"index": 7, "minion": "web1", "name": "item-7-web1", "tags": ["t7-0", "t7-1", "t7-2"]},
        )

    def test_top(self) -> None:
        """
        C{topSls} gives every minion the SLS named, in order.
        """
        top = yaml.safe_load(_client().topSls(["bench", "bench_round_3"]))
        self.assertEqual(top, {"base": {"*": ["bench", "bench_round_3"]}})

    def test_round(self) -> None:
        """
        A round's SLS sets the mark to C{round-<k>} and adds a new key.
        """
        client = _client()
        pillar = yaml.safe_load(client.roundSls(4))
        self.assertEqual(pillar[client.MARK_KEY], "round-4")
        self.assertEqual(pillar["bench_new_4"], {"added": 4})

    def test_pillarRoot(self) -> None:
        """
        The pillar a master starts with: the generated keys and round 0, in
        its top file.
        """
        directory = self.mktemp()
        _bench().writePillarRoot(directory, 5)
        self.assertEqual(
            sorted(os.listdir(directory)), ["bench.sls", "bench_round_0.sls", "top.sls"]
        )
        with open(os.path.join(directory, "top.sls")) as f:
            self.assertEqual(yaml.safe_load(f), {"base": {"*": ["bench", "bench_round_0"]}})
        with open(os.path.join(directory, "bench.sls")) as f:
            self.assertEqual(len(_render(f.read(), {"id": "m"})), 5)


class ContentTests(SynchronousTestCase):
    """
    The files both masters serve.
    """

    def test_bigFile(self) -> None:
        """
        C{makeBigFile} writes that many MB (10**6 bytes) of random bytes
        and returns their SHA-256.
        """
        path = self.mktemp()
        digest = _bench().makeBigFile(path, 2, chunk=300000)
        with open(path, "rb") as f:
            data = f.read()
        self.assertEqual(len(data), 2000000)
        self.assertEqual(hashlib.sha256(data).hexdigest(), digest)

    def test_contentInstalled(self) -> None:
        """
        L{Content.install} puts the same files in a master's file root (the
        big file, C{--small-files} small ones) and a pillar root beside it.
        """
        bench = _bench()
        content = bench.Content(self.mktemp(), 1, 12)
        content.make()
        masterRoot = self.mktemp()
        fileRoot, pillarRoot = content.install(masterRoot, 3)
        self.assertEqual((fileRoot, pillarRoot), bench.roots(masterRoot))
        self.assertEqual(os.path.getsize(os.path.join(fileRoot, bench.BIG_PATH)), 1000000)
        many = sorted(os.listdir(os.path.join(fileRoot, bench.MANY_PATH)))
        self.assertEqual(len(many), 12)
        self.assertEqual(many[0], "f00000.txt")
        self.assertTrue(os.path.exists(os.path.join(pillarRoot, "top.sls")))


class ClientCheckTests(SynchronousTestCase):
    """
    The client's checks of what each job returned.
    """

    def setUp(self) -> None:
        self.client = _client()
        self.dest = self.mktemp()
        with open(self.dest, "wb") as f:
            f.write(b"x" * 10)

    def test_getFileGood(self) -> None:
        """
        The minion returned the destination, which has the size and hash.
        """
        digest = hashlib.sha256(b"x" * 10).hexdigest()
        self.assertIsNone(self.client.checkGetFile({"m": self.dest}, "m", self.dest, 10, digest))

    def test_getFileFalse(self) -> None:
        """
        Salt's C{False} (no such file, or no destination folder) is a
        failure that says what was returned.
        """
        problem = self.client.checkGetFile({"m": False}, "m", self.dest, 10, None)
        self.assertIn("m returned False", problem)

    def test_getFileSizeAndHash(self) -> None:
        """
        A copy of the wrong size or content is a failure.
        """
        self.assertIn(
            "10 bytes, not 11", self.client.checkGetFile({"m": self.dest}, "m", self.dest, 11, None)
        )
        self.assertIn(
            "SHA-256", self.client.checkGetFile({"m": self.dest}, "m", self.dest, 10, "00")
        )

    def test_countMarked(self) -> None:
        """
        Only minions answering the expected mark count.
        """
        ret = {"a": "round-2", "b": "round-1", "c": "round-2", "d": False}
        self.assertEqual(self.client.countMarked(ret, "round-2"), 2)
        self.assertEqual(self.client.countMarked(None, "round-2"), 0)

    def test_unmasked(self) -> None:
        """
        Salt 3008.5 masks pillar values unless asked with C{unmask=True};
        salttwist is not given that argument.
        """
        self.assertEqual(self.client.unmasked("salt"), {"unmask": True})
        self.assertIsNone(self.client.unmasked("salttwist"))

    def test_stats(self) -> None:
        """
        Median, min and max of the samples, rounded; none without samples.
        """
        self.assertEqual(
            self.client.stats([0.3, 0.1, 0.2]),
            {"median_s": 0.2, "min_s": 0.1, "max_s": 0.3, "samples_s": [0.3, 0.1, 0.2]},
        )
        self.assertIsNone(self.client.stats([])["median_s"])

    def test_parser(self) -> None:
        """
        The command line names the system, the master's config and the
        phase; C{--clear} may be given several times.
        """
        options = self.client.parser().parse_args(
            ["--system", "salt", "/m", "getfile", "--clear", "/a", "--clear", "/b", "--size", "5"]
        )
        self.assertEqual(
            (options.system, options.config_dir, options.phase), ("salt", "/m", "getfile")
        )
        self.assertEqual(options.clear, ["/a", "/b"])
        self.assertEqual(options.size, 5)


class CopyingClient:
    """
    A C{LocalClient} double for L{phaseGetFile}: its C{cp.get_file} copies
    the master's file to the destination, and C{test.ping} answers; each
    call noted.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.calls: list[tuple[str, str]] = []

    def cmd(self, tgt: str, fun: str, arg: Any = (), timeout: Any = None, kwarg: Any = None) -> Any:
        self.calls.append((tgt, fun))
        if fun == "cp.get_file":
            with open(self.source, "rb") as f, open(arg[1], "wb") as out:
                out.write(f.read())
            return {tgt: arg[1]}
        if fun == "cp.hash_file":
            return {tgt: {"hsum": "x", "hash_type": "sha256"}}
        return {tgt: True}


class PhaseGetFileTests(SynchronousTestCase):
    """
    L{phaseGetFile}'s loop: clear, cold, cached, checked.
    """

    def test_samples(self) -> None:
        """
        Each repeat clears the copy and the cache, makes the destination's
        folder, takes a cold and a cached sample; MB/s from the medians.
        """
        client = _client()
        source = self.mktemp()
        with open(source, "wb") as f:
            f.write(b"y" * 2000)
        cache = self.mktemp()
        os.makedirs(os.path.join(cache, "base"))
        dest = os.path.join(self.mktemp(), "sub", "big.bin")
        options = client.parser().parse_args(
            [
                "--system",
                "salttwist",
                "/m",
                "getfile",
                "--target",
                "m0",
                "--source",
                "salt://big",
                "--dest",
                dest,
                "--clear",
                cache,
                "--size",
                "2000",
                "--sha256",
                hashlib.sha256(b"y" * 2000).hexdigest(),
                "--repeats",
                "2",
                "--pings",
                "3",
            ]
        )
        fake = CopyingClient(source)
        out = client.phaseGetFile(fake, options)
        self.assertEqual(out["errors"], [])
        self.assertEqual(len(out["cold"]["samples_s"]), 2)
        self.assertEqual(len(out["cached"]["samples_s"]), 2)
        self.assertEqual(out["cold"]["failures"], 0)
        self.assertEqual(out["ping_baseline"]["failures"], 0)
        self.assertFalse(os.path.exists(cache))
        functions = [fun for _, fun in fake.calls]
        self.assertEqual(functions[:4], ["cp.hash_file", "test.ping", "test.ping", "test.ping"])
        self.assertEqual(functions[4:], ["cp.get_file"] * 6)
        self.assertEqual(len(out["cached_touched"]["samples_s"]), 2)


class ResultsTests(SynchronousTestCase):
    """
    Ratios, goals and the table.
    """

    def results(self) -> dict[str, Any]:
        quiet = {
            "quiet": True,
            "quiet_wait_s": 5.0,
            "quiet_busy_cores": 0.05,
            "quiet_limit_cores": 0.21,
        }
        return {
            "date": "2026-11-26",
            "cpus": 2,
            "load_at_start": [0.1, 0.1, 0.1],
            "versions": {"salt": "salt 3008.5 (Argon)", "salttwist": "salttwist 0.1"},
            "options": {
                "big_mb": 100,
                "small_files": 1000,
                "pillar_minions": 20,
                "pillar_keys": 200,
            },
            "systems": {
                "salt": {
                    "get_file": {
                        "cold": {"median_s": 5.0, "mb_per_s": 20.0, "failures": 0},
                        "cached": {"median_s": 1.0, "mb_per_s": 100.0, "failures": 0},
                        **quiet,
                    },
                    "cache_dir": {
                        "cached": {"median_s": 8.0, "failures": 0},
                        "fill_s": 20.0,
                        **quiet,
                    },
                    "pillar": {"to_all": {"median_s": 6.0, "failures": 0}, **quiet},
                },
                "salttwist": {
                    "get_file": {
                        "cold": {"median_s": 0.5, "mb_per_s": 200.0, "failures": 0},
                        "cached": {"median_s": 0.5, "mb_per_s": 200.0, "failures": 0},
                        **quiet,
                        "quiet": False,
                        "quiet_busy_cores": 0.9,
                        "quiet_wait_s": 120.0,
                    },
                    "cache_dir": {
                        "cached": {"median_s": 0.4, "failures": 0},
                        "fill_s": 2.0,
                        **quiet,
                    },
                    "pillar": {"to_all": {"median_s": 1.0, "failures": 1}, **quiet},
                },
            },
            "swarm": {
                "minions": 5000,
                "to_all": {"median_s": 9.0, "max_s": 16.0, "failures": 0},
                "master_memory_idle": {"tree_rss_mb": 900.0},
            },
        }

    def test_ratios(self) -> None:
        """
        MB/s as salttwist over Salt, seconds as Salt over salttwist.
        """
        results = _bench().addRatios(self.results())
        self.assertEqual(
            results["ratios"],
            {
                "get_file_cold_mb_per_s": 10.0,
                "get_file_cached_mb_per_s": 2.0,
                "get_file_cached_touched_mb_per_s": None,
                "cache_dir_cached_s": 20.0,
                "pillar_refresh_to_all_s": 6.0,
            },
        )

    def test_goals(self) -> None:
        """
        Each of issue 20's goals is met or not; the swarm's by its slowest
        round.
        """
        goals = _bench().addRatios(self.results())["goals"]
        self.assertEqual(
            goals,
            {
                "get_file_cold_5x": True,
                "get_file_cached_5x": False,
                "cache_dir_under_0_5_s": True,
                "pillar_10x": False,
                "swarm_under_15_s": False,
            },
        )

    def test_noSalt(self) -> None:
        """
        Without Salt's figures there are no ratios, and the goals that need
        one are unknown.
        """
        results = self.results()
        del results["systems"]["salt"]
        results = _bench().addRatios(results)
        self.assertEqual(set(results["ratios"].values()), {None})
        self.assertIsNone(results["goals"]["pillar_10x"])
        self.assertTrue(results["goals"]["cache_dir_under_0_5_s"])

    def test_table(self) -> None:
        """
        The table has a row per figure with both systems and the ratio,
        the goal's verdict, a C{*} on a phase that was not quiet with the
        footnote naming it once, and the failed samples.
        """
        bench = _bench()
        text = bench.table(bench.addRatios(self.results()))
        lines = text.splitlines()
        cold = next(line for line in lines if line.startswith("cp.get_file 100 MB cold"))
        self.assertEqual(cold.split()[-4:], ["20.0", "200.0*", "10.0", "met"])
        pillar = next(line for line in lines if line.startswith("pillar 200 keys"))
        self.assertTrue(pillar.endswith("NOT met"))
        self.assertEqual(text.count("salttwist, get_file: 0.90 cores busy"), 1)
        self.assertIn("salttwist pillar to_all: 1 failed sample(s)", text)
        self.assertIn("goal < 15 s: NOT met", text)

    def test_parseLastJson(self) -> None:
        """
        The client's figures are the last JSON object of its output,
        whatever was printed before.
        """
        parse = _bench().parseLastJson
        self.assertEqual(parse('noise\n{"a": 1}\n{"b": 2}\n'), {"b": 2})
        self.assertIsNone(parse("nothing\n[1]\n"))


class SwarmStatusTests(SynchronousTestCase):
    """
    The swarm's pillar counters, summed over its processes.
    """

    def shard(self, directory: str, index: int, pillar: dict[str, Any] | None) -> None:
        status = {
            "pid": 100 + index,
            "time": 0.0,
            "minions": 2,
            "started_at": None,
            "ready": 2,
            "ever_ready": 2,
            "first_ready_at": None,
            "last_ready_at": None,
            "auths": 2,
            "attempt_failures": 0,
            "returns": 0,
            "kids": {},
            "kid_last_at": {},
            "failure_reasons": {},
        }
        if pillar is not None:
            status["pillar"] = pillar
        with open(os.path.join(directory, f"shard-{index}.json"), "w") as f:
            json.dump(status, f)

    def test_summed(self) -> None:
        """
        Both readers (the benchmark's, standard library only, and
        swarmlib's) add the marks and counters of every shard and keep
        each mark's latest time.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        self.shard(
            directory,
            0,
            {
                "marks": {"round-1": 2},
                "mark_last_at": {"round-1": 5.0},
                "requests": 2,
                "failures": 0,
                "failure_reasons": {},
            },
        )
        self.shard(
            directory,
            1,
            {
                "marks": {"round-1": 1, "round-0": 1},
                "mark_last_at": {"round-1": 7.0},
                "requests": 2,
                "failures": 1,
                "failure_reasons": {"ConnectionError: x": 1},
            },
        )
        mine = _bench().readSwarmStatus(directory)
        self.assertEqual(mine["marks"], {"round-1": 3, "round-0": 1})
        self.assertEqual(mine["mark_last_at"], {"round-1": 7.0})
        self.assertEqual((mine["pillar_requests"], mine["pillar_failures"]), (4, 1))
        self.assertEqual(mine["ever_ready"], 4)
        theirs = _swarmlib().readStatus(directory)
        self.assertEqual(theirs["pillar"]["marks"], {"round-1": 3, "round-0": 1})
        self.assertEqual(theirs["pillar"]["mark_last_at"], {"round-1": 7.0})
        self.assertEqual(theirs["pillar"]["failure_reasons"], {"ConnectionError: x": 1})

    def test_noPillar(self) -> None:
        """
        A swarm run without C{--pillar-mark} has no pillar in its totals.
        """
        directory = self.mktemp()
        os.makedirs(directory)
        self.shard(directory, 0, None)
        self.assertNotIn("pillar", _swarmlib().readStatus(directory))


class FakeReq:
    """
    A session's request side, in memory: answers C{_pillar} with C{pillar}
    (or fails), noting each payload.
    """

    def __init__(self, pillar: Any) -> None:
        self.pillar = pillar
        self.sent: list[dict[str, Any]] = []

    def request(self, payload: dict[str, Any]) -> Any:
        self.sent.append(payload)
        if isinstance(self.pillar, Exception):
            return fail(self.pillar)
        return succeed({"ret": self.pillar})


def _minion(minionId: str, req: Any, refreshPillar: Any = None) -> Any:
    context = SimpleNamespace(grains={"id": minionId}, pillar={}, refreshPillar=refreshPillar)
    return SimpleNamespace(
        id=minionId,
        executor=SimpleNamespace(context=context),
        returns=SimpleNamespace(req=req),
    )


class SwarmPillarTests(SynchronousTestCase):
    """
    L{swarmlib.SwarmPillar}: the simulated minions' pillar refresh.
    """

    def test_wire(self) -> None:
        """
        A minion without a refresh of its own sends Salt's C{_pillar} over
        its session with its grains and keeps the answer.
        """
        swarmlib = _swarmlib()
        req = FakeReq({"bench_mark": "round-1", "k": 1})
        minion = _minion("m1", req)
        counted = swarmlib.SwarmPillar("bench_mark")
        counted.attach(minion)
        result = self.successResultOf(minion.executor.context.refreshPillar())
        self.assertEqual(result, {"bench_mark": "round-1", "k": 1})
        self.assertEqual(
            req.sent,
            [
                {
                    "cmd": "_pillar",
                    "saltenv": None,
                    "pillarenv": None,
                    "pillar_override": None,
                    "grains": {"id": "m1"},
                }
            ],
        )
        self.assertEqual(minion.executor.context.pillar["bench_mark"], "round-1")
        status = counted.status()
        self.assertEqual(status["marks"], {"round-1": 1})
        self.assertEqual(set(status["mark_last_at"]), {"round-1"})
        self.assertEqual((status["requests"], status["failures"]), (1, 0))

    def test_ownRefreshKept(self) -> None:
        """
        A minion whose own code refreshes its pillar keeps that refresh
        (given its arguments), counted.
        """
        swarmlib = _swarmlib()
        calls: list[dict[str, Any]] = []

        def own(**kwargs: Any) -> Any:
            calls.append(kwargs)
            minion.executor.context.pillar = {"bench_mark": "round-2"}
            return succeed(minion.executor.context.pillar)

        minion = _minion("m2", FakeReq({}), refreshPillar=own)
        counted = swarmlib.SwarmPillar("bench_mark")
        counted.attach(minion)
        self.successResultOf(minion.executor.context.refreshPillar(cleanCache=True))
        self.assertEqual(calls, [{"cleanCache": True}])
        self.assertEqual(counted.status()["marks"], {"round-2": 1})

    def test_failures(self) -> None:
        """
        Refreshes that fail (not connected, refused, not a map) are counted
        with their reasons, the minion's id hidden; L{refreshAll} swallows
        them after counting.
        """
        swarmlib = _swarmlib()
        counted = swarmlib.SwarmPillar("bench_mark")
        minions = [
            _minion("m3", None),
            _minion("m4", FakeReq(ValueError("no pillar for m4"))),
            _minion("m5", FakeReq(["not", "a", "map"])),
        ]
        for minion in minions:
            counted.attach(minion)
        counted.refreshAll()
        status = counted.status()
        self.assertEqual((status["requests"], status["failures"]), (3, 3))
        self.assertEqual(
            status["failure_reasons"],
            {
                "ConnectionError: minion <id> is not connected to its master": 1,
                "ValueError: no pillar for <id>": 1,
                "ValueError: _pillar answered list, not a map": 1,
            },
        )
        self.assertEqual(status["marks"], {})


class PillarTriggerTests(SynchronousTestCase):
    """
    L{swarmlib.PillarTrigger}: a file whose change makes every simulated
    minion refresh.
    """

    def test_changes(self) -> None:
        """
        What the file held at the start does not count; each change after
        (a new size or time) does, once.
        """
        swarmlib = _swarmlib()
        path = self.mktemp()
        with open(path, "w") as f:
            f.write("round-0\n")
        fired: list[None] = []
        trigger = swarmlib.PillarTrigger(path, lambda: fired.append(None))
        trigger.check()
        self.assertEqual(fired, [])
        with open(path, "w") as f:
            f.write("round-10\n")
        trigger.check()
        trigger.check()
        self.assertEqual(len(fired), 1)
        os.remove(path)
        trigger.check()
        with open(path, "w") as f:
            f.write("round-11\n")
        trigger.check()
        self.assertEqual(len(fired), 2)
        self.assertEqual(trigger.fired, 2)


class ConfigTests(SynchronousTestCase):
    """
    Both systems serve the same roots, and the benchmark knows where each
    minion caches files.
    """

    def test_roots(self) -> None:
        """
        salttwist's master gets C{file_roots} and C{pillar_roots} where
        C{run.py} puts Salt's (under C{root_dir/srv}).
        """
        bench = _bench()
        salt = bench.FilesSalt("/nonexistent").masterConfig("/r")
        twist = bench.FilesSaltTwist("/nonexistent").masterConfig("/r")
        for config in (salt, twist):
            self.assertEqual(config["file_roots"], {"base": ["/r/srv/salt"]})
            self.assertEqual(config["pillar_roots"], {"base": ["/r/srv/pillar"]})
        self.assertEqual(bench.roots("/r"), ("/r/srv/salt", "/r/srv/pillar"))

    def test_minionCache(self) -> None:
        """
        salttwist's minion is given its C{cachedir} (its default under
        C{root_dir}); Salt's is under its own default path.
        """
        bench = _bench()
        twist = bench.FilesSaltTwist("/nonexistent")
        config = twist.minionConfig("/m", "salttwist-m00", 4506)
        self.assertEqual(config["cachedir"], "/m/var/cache/salttwist/minion")
        self.assertEqual(config["id"], "salttwist-m00")
        salt = bench.FilesSalt("/nonexistent")
        self.assertEqual(
            salt.minionConfig("/m", "salt-m00", 4506)["cachedir"], salt.minionCacheDir("/m")
        )


class SwarmTableTests(SynchronousTestCase):
    """
    The swarm's rows: one per trigger, the goal on the first.
    """

    def test_byTrigger(self) -> None:
        """
        A swarm-only run shows no Salt rows; each trigger has its row, and
        the goal's verdict is on the first trigger's.
        """
        bench = _bench()
        results = {
            "date": "2026-11-26",
            "cpus": 2,
            "load_at_start": [0.0, 0.0, 0.0],
            "versions": {"salttwist": "salttwist 0.1"},
            "options": {},
            "systems": {},
            "swarm": {
                "minions": 5000,
                "to_all_by_trigger": {
                    "job": {"median_s": 12.0, "max_s": 14.0, "failures": 0},
                    "file": {"median_s": 20.0, "max_s": 21.0, "failures": 0},
                },
                "to_all": {"median_s": 12.0, "max_s": 14.0, "failures": 0},
                "master_memory_idle": {"tree_rss_mb": 900.0},
            },
        }
        text = bench.table(bench.addRatios(results))
        self.assertNotIn("cp.get_file", text)
        job = next(line for line in text.splitlines() if ", job (s" in line)
        self.assertTrue(job.endswith("goal < 15 s: met"))
        fileRow = next(line for line in text.splitlines() if ", file (s" in line)
        self.assertNotIn("goal", fileRow)
        self.assertIn("all 5000 connected (MB)", text)
