# -*- test-case-name: tests.test_bench_states -*-
"""
The state system of salttwist beside Salt's, on this machine, in one run
(issue 21's figures), measured the same way for both: real master and
minion daemons on 127.0.0.1 under a temporary C{root_dir}, one system's
cluster at a time, every timed phase started once the machine is quiet
(L{run.QuietWait}, the rule of C{run.py}), processes stopped by pid.

The SLS tree (written into each master's C{file_roots}, C{base}):
C{bench/init.sls} includes C{bench.files} (C{--files} C{file.managed}
states with C{salt://} sources of 1 KiB, every other one with
C{template: jinja} using a grain and a pillar value) and C{bench.cmds}
(C{--cmds} C{cmd.run} states, each creating a marker file, with
C{unless: test -e <marker>}: run when cold, skipped when warm). Every
minion's destinations are under its own directory,
C{<dest root>/<grains id>}. C{top.sls} gives C{bench} to every minion;
C{bench_one.sls} holds one state (C{test.succeed_without_changes}).

Phases, each timed as the wall time of the system's CLI command
(C{salt '*' ...} / C{salttwist '*' ...}, C{--out json --static}):

  1. C{apply1}: one minion, C{state.apply}: cold (every destination and
     the minions' file caches removed first), then warm (the same call
     again: nothing changes), C{--repeats} pairs;
  2. C{show}: C{state.show_highstate} on that minion (render only);
  3. C{prefirst}: C{state.apply bench_one} on that minion, without and
     then with C{--extra-files} unrelated files in the file server
     (one untimed call first each time), and the seconds from the
     command's start to the state's C{start_time};
  4. C{apply20}: C{--minions} minions in all (the others started now),
     cold and warm C{state.apply} as in 1.

Ratios: C{salt / salttwist} seconds (above 1, salttwist is faster).
Results: a table on standard output and JSON in
C{benchmarks/results/<date>-states-vs-salt.json}. Standard library only
(and C{run.py}'s and C{files_pillar.py}'s pieces).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import run  # noqa: E402
from files_pillar import (  # noqa: E402
    FilesCluster,
    FilesSalt,
    FilesSaltTwist,
    clearPathsQuietly,
    failureText,
    roots,
)

PHASES = ("apply1", "show", "prefirst", "apply20")
#: The pillar value the templated sources show.
PILLAR_VALUE = "bench-pillar-value"


# -- the SLS tree --------------------------------------------------------------


def sourceText(index: int, templated: bool, size: int = 1024) -> str:
    """
    @return: the text of source file C{index}: C{size} characters (before
        rendering), with a grain and a pillar value when C{templated}.
    """
    head = f"file {index}\n"
    if templated:
        head += "id {{ grains['id'] }} value {{ pillar.get('bench_value', '') }}\n"
    filler = size - len(head) - 1
    line = (f"{index:05d}" * ((filler // 5) + 1))[:filler]
    return head + line + "\n"


def filesSls(count: int, destRoot: str) -> str:
    """
    @return: C{bench/files.sls}: C{count} C{file.managed} states, every
        other one templated, under C{destRoot/<grains id>}.
    """
    lines = [f"{{% set d = '{destRoot}/' ~ grains['id'] %}}"]
    for i in range(count):
        lines += [
            f"bench_file_{i}:",
            "  file.managed:",
            f"    - name: {{{{ d }}}}/files/f{i:05d}.txt",
            f"    - source: salt://bench/src/f{i:05d}.txt",
            "    - makedirs: True",
        ]
        if i % 2 == 1:
            lines.append("    - template: jinja")
    return "\n".join(lines) + "\n"


def cmdsSls(count: int, destRoot: str) -> str:
    """
    @return: C{bench/cmds.sls}: C{count} C{cmd.run} states creating a
        marker, each with C{unless} testing for it.
    """
    lines = [f"{{% set d = '{destRoot}/' ~ grains['id'] %}}"]
    for i in range(count):
        marker = f"{{{{ d }}}}/markers/m{i:05d}"
        lines += [
            f"bench_cmd_{i}:",
            "  cmd.run:",
            f"    - name: mkdir -p {{{{ d }}}}/markers && touch {marker}",
            f"    - unless: test -e {marker}",
        ]
    return "\n".join(lines) + "\n"


def stateTree(files: int, cmds: int, destRoot: str) -> dict[str, str]:
    """
    @return: the state tree's files (path under the file root: text).
    """
    tree = {
        "top.sls": "base:\n  '*':\n    - bench\n",
        "bench/init.sls": "include:\n  - bench.files\n  - bench.cmds\n",
        "bench/files.sls": filesSls(files, destRoot),
        "bench/cmds.sls": cmdsSls(cmds, destRoot),
        "bench_one.sls": "bench_one:\n  test.succeed_without_changes: []\n",
    }
    for i in range(files):
        tree[f"bench/src/f{i:05d}.txt"] = sourceText(i, i % 2 == 1)
    return tree


def writeTree(root: str, tree: dict[str, str]) -> None:
    """
    Write C{tree} (see L{stateTree}) under C{root}.
    """
    for path, text in tree.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def writeExtraFiles(directory: str, count: int) -> None:
    """
    Write C{count} small unrelated files under C{directory}, 100 a folder.
    """
    for i in range(count):
        folder = os.path.join(directory, f"d{i // 100:03d}")
        if i % 100 == 0:
            os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"x{i:05d}.txt"), "w") as f:
            f.write(f"unrelated {i}\n")


# -- reading the returns -------------------------------------------------------


def checkReturns(returns: Any, ids: list[str], expected: int) -> dict[str, Any]:
    """
    Judge a C{state.*} call's returns (C{--out json --static}).

    @param returns: C{{minion: {tag: state return}}}.
    @param expected: the states each minion should have run.
    @return: C{ok} (every minion answered with C{expected} states all
        C{result: True}), C{changed} (states with changes, all minions),
        and C{problems} (strings naming what was wrong).
    """
    problems: list[str] = []
    changed = 0
    if not isinstance(returns, dict):
        returns = {}
    for minionId in ids:
        ret = returns.get(minionId)
        if not isinstance(ret, dict):
            problems.append(f"{minionId}: {str(ret)[:300]}")
            continue
        states = [v for v in ret.values() if isinstance(v, dict) and "result" in v]
        if len(states) != expected:
            problems.append(f"{minionId}: {len(states)} states, not {expected}")
        bad = [v for v in states if v.get("result") is not True]
        if bad:
            problems.append(
                f"{minionId}: {len(bad)} failed, first: {str(bad[0].get('comment'))[:300]}"
            )
        changed += sum(1 for v in states if v.get("changes"))
    return {"ok": not problems, "changed": changed, "problems": problems[:5]}


def secondsOfDay(stamp: str) -> float | None:
    """
    @return: the seconds since midnight of C{"HH:MM:SS.ffffff"} (a state's
        C{start_time}), or L{None}.
    """
    try:
        hours, minutes, seconds = stamp.split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    except (AttributeError, ValueError):
        return None


def firstStateDelay(returns: Any, startedAt: datetime.datetime) -> float | None:
    """
    @return: the seconds from C{startedAt} (local time, when the command
        started) to the earliest C{start_time} of any state in C{returns}.
    """
    if not isinstance(returns, dict):
        return None
    starts = [
        secondsOfDay(state.get("start_time"))
        for ret in returns.values()
        if isinstance(ret, dict)
        for state in ret.values()
        if isinstance(state, dict)
    ]
    starts = [s for s in starts if s is not None]
    if not starts:
        return None
    started = (
        startedAt.hour * 3600
        + startedAt.minute * 60
        + startedAt.second
        + startedAt.microsecond / 1e6
    )
    delay = min(starts) - started
    if delay < -43200:  # across midnight
        delay += 86400
    return round(delay, 4)


def summary(samples: list[float], failures: int, extra: dict[str, Any]) -> dict[str, Any]:
    """
    @return: median/min/max of C{samples}, the samples, the failures, and
        C{extra}.
    """
    return {
        "median_s": round(statistics.median(samples), 4) if samples else None,
        "min_s": round(min(samples), 4) if samples else None,
        "max_s": round(max(samples), 4) if samples else None,
        "samples_s": [round(s, 4) for s in samples],
        "failures": failures,
        **extra,
    }


# -- measuring -----------------------------------------------------------------


class StateBench:
    """
    One system's cluster and its CLI calls.
    """

    def __init__(
        self, cluster: FilesCluster, options: argparse.Namespace, destRoot: str, expected: int
    ) -> None:
        self.cluster = cluster
        self.system = cluster.system
        self.options = options
        self.destRoot = destRoot
        self.expected = expected
        self.errors: list[str] = []

    def call(self, fun: str, *args: str) -> dict[str, Any]:
        """
        Run C{CLI -c masterDir '*' fun args --out json --static}.

        @return: C{elapsed}, C{code}, C{returns}, C{started} (local time),
            C{err}.
        """
        argv = [
            self.system.bin(self.system.cli),
            "-c",
            self.cluster.masterDir,
            "*",
            fun,
            *args,
            "-t",
            f"{self.options.job_timeout:g}",
            "--out",
            "json",
            "--static",
        ]
        started = datetime.datetime.now()
        result = run.timed(argv, self.system.env, self.options.job_timeout + 60)
        return {
            "elapsed": result["elapsed"],
            "code": result["code"],
            "returns": run.parseReturns(result["out"]),
            "started": started,
            "err": result["err"][-1000:],
            "out": result["out"][-1000:],
        }

    def clearCold(self) -> None:
        """
        Remove every minion's destinations and file cache.
        """
        paths = [os.path.join(self.destRoot, m) for m in self.cluster.ids]
        for minionId in self.cluster.ids:
            cache = self.system.minionCacheDir(self.cluster.minionRoot(minionId))
            paths.append(os.path.join(cache, "files"))
        clearPathsQuietly(paths)

    def judged(self, result: dict[str, Any], expected: int) -> dict[str, Any]:
        """
        @return: L{checkReturns} of C{result}; a problem is noted in
            C{errors} with its command's output.
        """
        verdict = checkReturns(result["returns"], self.cluster.ids, expected)
        if not verdict["ok"]:
            self.errors.append(
                f"{'; '.join(verdict['problems'])} (exit {result['code']}; "
                f"stderr {result['err'][-300:]!r}; stdout {result['out'][-300:]!r})"
            )
        return verdict

    def applyColdWarm(self, quiet: run.QuietWait) -> dict[str, Any]:
        """
        C{--repeats} pairs of a cold and a warm C{state.apply}.
        """
        phase = run.Phase.whenQuiet(quiet, self.cluster.n)
        cold: list[float] = []
        warm: list[float] = []
        failures = {"cold": 0, "warm": 0}
        changed: dict[str, list[int]] = {"cold": [], "warm": []}
        for _ in range(self.options.repeats):
            self.clearCold()
            for label, samples in (("cold", cold), ("warm", warm)):
                result = self.call("state.apply")
                verdict = self.judged(result, self.expected)
                changed[label].append(verdict["changed"])
                if verdict["ok"]:
                    samples.append(result["elapsed"])
                else:
                    failures[label] += 1
        end = phase.end()
        return {
            "minions": self.cluster.n,
            "cold": summary(cold, failures["cold"], {"changed": changed["cold"]}),
            "warm": summary(warm, failures["warm"], {"changed": changed["warm"]}),
            **end,
        }

    def showHighstate(self, quiet: run.QuietWait) -> dict[str, Any]:
        """
        C{--repeats} calls of C{state.show_highstate}.
        """
        phase = run.Phase.whenQuiet(quiet, self.cluster.n)
        samples: list[float] = []
        failures = 0
        for _ in range(self.options.repeats):
            result = self.call("state.show_highstate")
            ret = result["returns"].get(self.cluster.ids[0])
            ids = len(ret) if isinstance(ret, dict) else 0
            if ids == self.expected:
                samples.append(result["elapsed"])
            else:
                failures += 1
                self.errors.append(
                    f"show_highstate: {ids} ids, not {self.expected}: {str(ret)[:300]} "
                    f"(stderr {result['err'][-300:]!r})"
                )
        return summary(samples, failures, phase.end())

    def beforeFirst(self, quiet: run.QuietWait, label: str) -> dict[str, Any]:
        """
        One untimed C{state.apply bench_one}, then C{--repeats} timed.
        """
        self.call("state.apply", "bench_one")
        phase = run.Phase.whenQuiet(quiet, self.cluster.n)
        samples: list[float] = []
        delays: list[float] = []
        failures = 0
        for _ in range(self.options.repeats):
            result = self.call("state.apply", "bench_one")
            if self.judged(result, 1)["ok"]:
                samples.append(result["elapsed"])
                delay = firstStateDelay(result["returns"], result["started"])
                if delay is not None:
                    delays.append(delay)
            else:
                failures += 1
        return summary(
            samples,
            failures,
            {
                "label": label,
                "first_state_after_s": round(statistics.median(delays), 4) if delays else None,
                **phase.end(),
            },
        )


def measureSystem(
    system: FilesSalt | FilesSaltTwist,
    options: argparse.Namespace,
    root: str,
    processes: run.Processes,
    quiet: run.QuietWait,
    out: dict[str, Any],
) -> dict[str, Any]:
    """
    The state figures of one system (see the module docstring), into C{out}
    phase by phase.
    """
    name = system.name
    cluster = FilesCluster(system, os.path.join(root, name), 1, processes)
    destRoot = os.path.join(root, name, "dest")
    fileRoot, pillarRoot = roots(cluster.masterRoot)
    writeTree(fileRoot, stateTree(options.files, options.cmds, destRoot))
    writeTree(
        pillarRoot,
        {
            "top.sls": "base:\n  '*':\n    - bench\n",
            "bench.sls": f"bench_value: {PILLAR_VALUE}\n",
        },
    )
    bench = StateBench(cluster, options, destRoot, options.files + options.cmds)
    try:
        print(f"  starting {name}: master and 1 minion", flush=True)
        out["ready_quiet"] = run.waitQuiet(quiet)
        cluster.start(options.ready_timeout)
        out["ready_s"] = round(cluster.readySeconds or 0.0, 2)
        if "apply1" in options.phases:
            print(f"  {name}: state.apply on 1 minion, cold and warm", flush=True)
            out["apply1"] = bench.applyColdWarm(quiet)
        if "show" in options.phases:
            print(f"  {name}: state.show_highstate", flush=True)
            out["show"] = bench.showHighstate(quiet)
        if "prefirst" in options.phases:
            print(f"  {name}: state.apply bench_one without extra files", flush=True)
            out["prefirst_without"] = bench.beforeFirst(quiet, "without")
            extra = os.path.join(fileRoot, "extra")
            writeExtraFiles(extra, options.extra_files)
            print(f"  {name}: state.apply bench_one with {options.extra_files} more", flush=True)
            out["prefirst_with"] = bench.beforeFirst(quiet, "with")
            shutil.rmtree(extra, ignore_errors=True)
        if "apply20" in options.phases:
            n = options.minions
            print(f"  {name}: {n} minions", flush=True)
            out["grow_quiet"] = run.waitQuiet(quiet, cluster.n)
            out["grow_s"] = round(cluster.grow(n, options.ready_timeout), 2)
            print(f"  {name}: state.apply on {n} minions, cold and warm", flush=True)
            out["apply20"] = bench.applyColdWarm(quiet)
            out["memory"] = cluster.memory()
    finally:
        out["errors"] = bench.errors[:20]
        cluster.stop()
    return out


# -- results -------------------------------------------------------------------

#: (label, path in a system's figures, goal: the least ratio, or None).
ROWS: tuple[tuple[str, tuple[str, ...], float | None], ...] = (
    ("state.apply, 1 minion, cold (s)", ("apply1", "cold", "median_s"), 5.0),
    ("state.apply, 1 minion, warm (s)", ("apply1", "warm", "median_s"), 10.0),
    ("state.show_highstate, 1 minion (s)", ("show", "median_s"), 10.0),
    ("state.apply bench_one (s)", ("prefirst_without", "median_s"), None),
    ("    + extra files (s)", ("prefirst_with", "median_s"), None),
    ("    to first state (s)", ("prefirst_without", "first_state_after_s"), None),
    ("    to first state, + extra files (s)", ("prefirst_with", "first_state_after_s"), None),
    ("state.apply, N minions, cold (s)", ("apply20", "cold", "median_s"), 5.0),
    ("state.apply, N minions, warm (s)", ("apply20", "warm", "median_s"), 10.0),
)


def addRatios(results: dict[str, Any]) -> None:
    """
    Add C{ratios} (salt / salttwist for every row) and C{goals} (whether
    each goal ratio is met; for the extra files, whether salttwist's time
    to its first state grew by at most 10% + 0.05 s, the noise of one CLI
    start).
    """
    salt = results.get("systems", {}).get("salt", {})
    twist = results.get("systems", {}).get("salttwist", {})
    ratios: dict[str, float | None] = {}
    goals: dict[str, bool | None] = {}
    for _label, path, goal in ROWS:
        key = "/".join(path)
        ratios[key] = run.ratio(run._get(salt, *path), run._get(twist, *path))
        if goal is not None:
            goals[key] = None if ratios[key] is None else ratios[key] >= goal
    without = run._get(twist, "prefirst_without", "first_state_after_s")
    withExtra = run._get(twist, "prefirst_with", "first_state_after_s")
    goals["prefirst_flat"] = (
        None if without is None or withExtra is None else withExtra <= without * 1.1 + 0.05
    )
    results["ratios"] = ratios
    results["goals"] = goals


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 100 else f"{value:.0f}"
    return str(value)


def table(results: dict[str, Any]) -> str:
    """
    @return: the figures as a text table: both systems' seconds, the ratio
        and the goal, then any failures.
    """
    systems = results.get("systems", {})
    salt, twist = systems.get("salt", {}), systems.get("salttwist", {})
    options = results.get("options", {})
    ratios, goals = results.get("ratios", {}), results.get("goals", {})
    lines = [
        f"states: {options.get('files')} file.managed + {options.get('cmds')} cmd.run, "
        f"N = {options.get('minions')} minions, {options.get('extra_files')} extra files",
        f"{'':44} {'salt':>9} {'salttwist':>9} {'ratio':>7}  goal",
    ]
    for label, path, goal in ROWS:
        key = "/".join(path)
        verdict = ""
        if goal is not None:
            met = {True: "met", False: "NOT met", None: "-"}[goals.get(key)]
            verdict = f">= {goal:g}x: {met}"
        lines.append(
            f"{label:44} {_cell(run._get(salt, *path)):>9} {_cell(run._get(twist, *path)):>9} "
            f"{_cell(ratios.get(key)):>7}  {verdict}"
        )
    flat = {True: "met", False: "NOT met", None: "-"}[goals.get("prefirst_flat")]
    lines.append(f"salttwist's time to first state flat with extra files: {flat}")
    lines.append("ratio: salt / salttwist; above 1, salttwist is faster.")
    failures = []
    for name, node in (("salt", salt), ("salttwist", twist)):
        if node.get("error"):
            failures.append(f"  {name}: {node['error']}")
        for error in node.get("errors") or []:
            failures.append(f"  {name}: {error}")
    if failures:
        lines.append("failures:")
        lines += failures
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    """
    The command line.
    """
    p = argparse.ArgumentParser(description="The state system beside Salt's (see README.md).")
    run.addSystemArguments(p)
    p.add_argument("--systems", default="salt,salttwist")
    p.add_argument("--phases", default=",".join(PHASES), help=f"default {','.join(PHASES)}")
    p.add_argument("--files", type=int, default=500, help="file.managed states")
    p.add_argument("--cmds", type=int, default=100, help="cmd.run states")
    p.add_argument("--minions", type=int, default=20, help="minions of apply20")
    p.add_argument("--extra-files", type=int, default=10000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--job-timeout", type=float, default=600.0)
    run.addRunArguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """
    Run the benchmark.
    """
    options = parser().parse_args(argv)
    options.phases = [p for p in options.phases.split(",") if p]
    unknown = set(options.phases) - set(PHASES)
    if unknown:
        sys.stderr.write(f"unknown phases: {', '.join(sorted(unknown))}\n")
        return 2
    picked = run.pickSystems(
        options,
        {
            "salt": lambda: FilesSalt(options.salt_venv),
            "salttwist": lambda: FilesSaltTwist(options.salttwist_venv),
        },
    )
    if isinstance(picked, str):
        sys.stderr.write(f"{picked}\n")
        return 2
    systems: dict[str, Any] = picked
    results: dict[str, Any] = {
        **run.resultsHead(options, systems),
        "notes": [
            "Both systems: one master and its minion daemons (-l error) on 127.0.0.1, temp "
            "root_dir, auto_accept for the benchmark only, every option at the system's "
            "defaults; one system's cluster at a time.",
            "Times are wall seconds of the CLI command ('*' state.apply --out json --static), "
            "its start-up included; a sample counts only if every minion returned every "
            "state with result True.",
            "cold: every minion's destinations and cachedir/files removed before the call; "
            "warm: the same call again at once (the cmd.run states are skipped by unless).",
            "prefirst: state.apply bench_one (one test state), one untimed call first; "
            "first_state_after_s = the state's start_time minus the command's start.",
            "quiet: each timed phase waits until all CPUs together were busy less than "
            "quiet_cores + quiet_per_minion x minions over quiet_window s (run.py's rule).",
        ],
        "systems": {},
    }
    root = tempfile.mkdtemp(prefix="states-bench-")
    if not options.no_bytecode_cache:
        for system in systems.values():
            system.useBytecodeCache(os.path.join(root, "pycache"))
    processes = run.Processes()
    quiet = run.QuietWait.fromOptions(options)
    print(f"root {root}; {', '.join(results['versions'].values())}", flush=True)
    try:
        for name, system in systems.items():
            print(name, flush=True)
            out = results["systems"][name] = {}
            try:
                measureSystem(system, options, root, processes, quiet, out)
            except Exception as e:
                out["error"] = failureText(e)
                sys.stderr.write(f"{name}: {out['error']}\n")
    finally:
        processes.stopAll()
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    addRatios(results)
    print()
    print(table(results))
    if not options.no_save:
        path = options.output or os.path.join(run.RESULTS, f"{options.date}-states-vs-salt.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(results, f, indent=2, default=str)
            f.write("\n")
        print(f"\nwritten {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
