# -*- test-case-name: tests.test_bench_states -*-
"""
Tests for the state-system benchmark against Salt
(C{benchmarks/vs_salt/states.py}): its pure parts (the SLS tree, reading
the returns, ratios, the table). Nothing here is timed.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import jinja2
import yaml
from twisted.trial.unittest import SynchronousTestCase

from tests._scripts import loadScript


def _bench() -> Any:
    return loadScript("benchmarks", "vs_salt", "states.py")


def _render(text: str, grains: dict[str, Any], pillar: dict[str, Any] | None = None) -> str:
    """
    Render as both systems do by default (Jinja).
    """
    return jinja2.Template(text).render(grains=grains, pillar=pillar or {})


class TreeTests(SynchronousTestCase):
    """
    The SLS tree is what the benchmark says.
    """

    def test_filesSls(self) -> None:
        """
        C{filesSls} gives C{count} C{file.managed} states under the
        minion's own directory, every other one templated, each with its
        C{salt://} source.
        """
        high = yaml.safe_load(_render(_bench().filesSls(4, "/d"), {"id": "m1"}))
        self.assertEqual(list(high), [f"bench_file_{i}" for i in range(4)])
        self.assertEqual(
            high["bench_file_1"]["file.managed"],
            [
                {"name": "/d/m1/files/f00001.txt"},
                {"source": "salt://bench/src/f00001.txt"},
                {"makedirs": True},
                {"template": "jinja"},
            ],
        )
        self.assertNotIn({"template": "jinja"}, high["bench_file_0"]["file.managed"])

    def test_cmdsSls(self) -> None:
        """
        C{cmdsSls} gives C{cmd.run} states that create a marker, unless it
        exists.
        """
        high = yaml.safe_load(_render(_bench().cmdsSls(2, "/d"), {"id": "m1"}))
        self.assertEqual(
            high["bench_cmd_1"]["cmd.run"],
            [
                {"name": "mkdir -p /d/m1/markers && touch /d/m1/markers/m00001"},
                {"unless": "test -e /d/m1/markers/m00001"},
            ],
        )

    def test_sourceText(self) -> None:
        """
        A source is 1 KiB before rendering; a templated one shows the
        grain and the pillar value.
        """
        bench = _bench()
        self.assertEqual(len(bench.sourceText(0, False)), 1024)
        self.assertEqual(len(bench.sourceText(1, True)), 1024)
        rendered = _render(bench.sourceText(1, True), {"id": "m1"}, {"bench_value": "v"})
        self.assertIn("id m1 value v", rendered)

    def test_stateTreeWritten(self) -> None:
        """
        C{writeTree} writes C{stateTree}'s files: the top, the SLS files,
        one source per file state.
        """
        bench = _bench()
        root = self.mktemp()
        bench.writeTree(root, bench.stateTree(3, 2, "/d"))
        self.assertEqual(
            sorted(os.listdir(os.path.join(root, "bench", "src"))),
            [
                "f00000.txt",
                "f00001.txt",
                "f00002.txt",
            ],
        )
        top = yaml.safe_load(open(os.path.join(root, "top.sls")).read())
        self.assertEqual(top, {"base": {"*": ["bench"]}})
        init = yaml.safe_load(open(os.path.join(root, "bench", "init.sls")).read())
        self.assertEqual(init, {"include": ["bench.files", "bench.cmds"]})

    def test_extraFiles(self) -> None:
        """
        C{writeExtraFiles} writes that many files, 100 a folder.
        """
        root = self.mktemp()
        _bench().writeExtraFiles(root, 250)
        counts = sorted(len(files) for _, _, files in os.walk(root) if files)
        self.assertEqual(counts, [50, 100, 100])


def _state(result: Any = True, changes: Any = None, start: str = "10:00:01.500000") -> dict:
    return {"result": result, "changes": changes or {}, "comment": "c", "start_time": start}


class ReturnsTests(SynchronousTestCase):
    """
    Reading the CLI's returns.
    """

    def test_allGood(self) -> None:
        """
        Every minion with the expected states, all True: ok, changes
        counted.
        """
        returns = {
            "a": {"t1": _state(changes={"x": 1}), "t2": _state()},
            "b": {"t1": _state(), "t2": _state()},
        }
        self.assertEqual(
            _bench().checkReturns(returns, ["a", "b"], 2),
            {"ok": True, "changed": 1, "problems": []},
        )

    def test_problems(self) -> None:
        """
        A missing minion, a wrong count, a failed state or an error list
        are named.
        """
        returns = {
            "a": {"t1": _state(result=False)},
            "c": ["Rendering SLS 'base:bench' failed"],
        }
        verdict = _bench().checkReturns(returns, ["a", "b", "c"], 1)
        self.assertFalse(verdict["ok"])
        self.assertEqual(verdict["problems"][0], "a: 1 failed, first: c")
        self.assertEqual(verdict["problems"][1], "b: None")
        self.assertIn("Rendering SLS", verdict["problems"][2])

    def test_firstStateDelay(self) -> None:
        """
        The earliest C{start_time} minus the command's start.
        """
        returns = {"a": {"t1": _state(start="10:00:01.500000"), "t2": _state(start="10:00:03")}}
        started = datetime.datetime(2026, 11, 26, 10, 0, 1)
        self.assertEqual(_bench().firstStateDelay(returns, started), 0.5)
        self.assertIsNone(_bench().firstStateDelay({"a": ["error"]}, started))

    def test_acrossMidnight(self) -> None:
        """
        A state started after midnight, the command before.
        """
        returns = {"a": {"t": _state(start="00:00:00.250000")}}
        started = datetime.datetime(2026, 11, 26, 23, 59, 59, 750000)
        self.assertEqual(_bench().firstStateDelay(returns, started), 0.5)


class TableTests(SynchronousTestCase):
    """
    Ratios and the table.
    """

    def results(self) -> dict[str, Any]:
        return {
            "options": {"files": 500, "cmds": 100, "minions": 20, "extra_files": 10000},
            "systems": {
                "salt": {
                    "apply1": {"cold": {"median_s": 30.0}, "warm": {"median_s": 20.0}},
                    "show": {"median_s": 5.0},
                    "prefirst_without": {"median_s": 1.0, "first_state_after_s": 0.8},
                    "prefirst_with": {"median_s": 2.0, "first_state_after_s": 1.8},
                },
                "salttwist": {
                    "apply1": {"cold": {"median_s": 3.0}, "warm": {"median_s": 4.0}},
                    "show": {"median_s": 0.25},
                    "prefirst_without": {"median_s": 0.5, "first_state_after_s": 0.2},
                    "prefirst_with": {"median_s": 0.5, "first_state_after_s": 0.21},
                    "errors": ["salttwist-m01: 3 states, not 600"],
                },
            },
        }

    def test_ratios(self) -> None:
        """
        salt / salttwist for each row, goals judged by the least ratio.
        """
        results = self.results()
        _bench().addRatios(results)
        self.assertEqual(results["ratios"]["apply1/cold/median_s"], 10.0)
        self.assertEqual(results["ratios"]["apply1/warm/median_s"], 5.0)
        self.assertIsNone(results["ratios"]["apply20/cold/median_s"])
        self.assertEqual(
            results["goals"],
            {
                "apply1/cold/median_s": True,
                "apply1/warm/median_s": False,
                "show/median_s": True,
                "apply20/cold/median_s": None,
                "apply20/warm/median_s": None,
                "prefirst_flat": True,
            },
        )

    def test_table(self) -> None:
        """
        The table has both systems' seconds, the ratio, the goal's
        verdict, and the failures.
        """
        results = self.results()
        bench = _bench()
        bench.addRatios(results)
        text = bench.table(results)
        self.assertIn("500 file.managed + 100 cmd.run, N = 20 minions, 10000 extra files", text)
        line = next(x for x in text.splitlines() if x.startswith("state.apply, 1 minion, warm"))
        self.assertEqual(
            line.split()[-7:], ["20.000", "4.000", "5.000", ">=", "10x:", "NOT", "met"]
        )
        self.assertIn("salttwist's time to first state flat with extra files: met", text)
        self.assertIn("  salttwist: salttwist-m01: 3 states, not 600", text)


class SharedHeadTests(SynchronousTestCase):
    """
    What C{states.py} and C{files_pillar.py} take from C{run.py}:
    C{pickSystems} and C{resultsHead}.
    """

    def options(self, systems: str) -> Any:
        import argparse

        return argparse.Namespace(
            systems=systems,
            salt_venv="/nonexistent-salt-venv",
            no_install_salt=True,
            date="2026-11-26",
            output="o.json",
            no_save=True,
            keep=False,
            files=500,
        )

    def test_unknownSystem(self) -> None:
        """
        An unknown system name is the error, nothing made.
        """
        run = loadScript("benchmarks", "vs_salt", "run.py")
        self.assertEqual(
            run.pickSystems(self.options("salttwist,other"), {"salttwist": object}),
            "unknown system other",
        )

    def test_picked(self) -> None:
        """
        Each named system is made by its maker, in order.
        """
        run = loadScript("benchmarks", "vs_salt", "run.py")
        made = run.pickSystems(self.options("salttwist"), {"salttwist": lambda: "twist"})
        self.assertEqual(made, {"salttwist": "twist"})

    def test_head(self) -> None:
        """
        The head names the date, the machine, the versions and the options
        but C{output}, C{no_save} and C{keep}.
        """
        run = loadScript("benchmarks", "vs_salt", "run.py")

        class Version:
            def version(self) -> str:
                return "salttwist 0.1.0"

        head = run.resultsHead(self.options("salttwist"), {"salttwist": Version()})
        self.assertEqual(head["date"], "2026-11-26")
        self.assertEqual(head["cpus"], os.cpu_count())
        self.assertEqual(head["versions"], {"salttwist": "salttwist 0.1.0"})
        self.assertNotIn("output", head["options"])
        self.assertEqual(head["options"]["files"], 500)
        self.assertIn("salttwist_git", head)
