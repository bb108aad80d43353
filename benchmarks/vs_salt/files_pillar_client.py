# -*- test-case-name: tests.test_bench_files_pillar -*-
"""
The timed part of C{files_pillar.py}, in one client process: run with the
Python of the system measured (Salt's virtualenv or salttwist's), the same
code for both, through each system's C{LocalClient().cmd} (Salt's
C{salt.client.LocalClient}; salttwist's synchronous facade
C{salttwist.client.LocalClient}, which takes the same arguments).

    PYTHON files_pillar_client.py --system salt MASTER_DIR getfile --target ID ...
    PYTHON files_pillar_client.py --system salttwist MASTER_DIR cachedir ...
    PYTHON files_pillar_client.py --system salt MASTER_DIR pillar --expect 20 ...

One phase per run; it prints one JSON object on standard output:

  - C{getfile}: C{--repeats} times, the minion's copy removed first
    (C{--clear}: the destination and the minion's file cache), a timed
    C{cp.get_file SOURCE DEST} to C{--target} (cold), checked (the return
    is DEST, the file has C{--size} bytes and the SHA-256 C{--sha256}),
    then the same call again (cached: the minion compares its copy's hash
    with the master's and transfers nothing), then once more after the
    copies' modification times were changed (cached_touched: a minion that
    keeps the hash it recorded with a file's size and time must hash the
    file again, as Salt's always does); before them, untimed, a
    C{cp.hash_file} (so both masters have hashed the file once, as a
    master serving it would have) and C{--pings} C{test.ping} to the same
    minion, whose median is the job's own cost (the baseline);
  - C{cachedir}: one untimed C{cp.cache_dir SOURCE} (it fills the cache:
    its time is reported as C{fill_s}), then C{--repeats} timed ones while
    every file is cached, each checked to list C{--expect} files;
  - C{pillar}: C{--repeats} rounds; each writes a new SLS
    (C{bench_round_<k>.sls}: C{bench_mark: round-<k>} and a key
    C{bench_new_<k>}) in C{--pillar-root}, then (the clock starts) a new
    C{top.sls} that adds it, then C{'*' saltutil.refresh_pillar wait=True}
    and C{'*' pillar.get bench_mark} again and again until all C{--expect}
    minions answer C{round-<k>} (the clock stops): seconds to all, the
    refresh job's own seconds and the C{pillar.get} polls needed. Before
    the rounds, untimed: every minion is asked for C{pillar.items} and must
    hold the C{--keys} generated keys.

Only the standard library and the measured system are imported: this runs
in either virtualenv.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

#: The pillar key whose value says which round a minion's pillar is from.
MARK_KEY = "bench_mark"


def makeClient(system: str, configDir: str) -> Any:
    """
    @return: C{system}'s C{LocalClient} for the master configured in
        C{configDir} (its file C{master}).
    """
    if system == "salt":
        import salt.client
        import salt.config

        opts = salt.config.client_config(os.path.join(configDir, "master"))
        return salt.client.LocalClient(mopts=opts)
    import salttwist.client

    return salttwist.client.LocalClient(c_path=configDir)


def closeClient(client: Any) -> None:
    """
    Release the client's connections (both have C{destroy}).
    """
    destroy = getattr(client, "destroy", None)
    if callable(destroy):
        destroy()


def sha256File(path: str) -> str:
    """
    @return: the hex SHA-256 of the file C{path}.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def clearPaths(paths: list[str]) -> None:
    """
    Remove each of C{paths} (a file or a directory) if it exists.
    """
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


def touchFiles(paths: list[str]) -> int:
    """
    Set the modification time of each file of C{paths} (a file, or every
    file under a directory) to now, leaving its bytes alone.

    @return: how many files were touched.
    """
    now = time.time_ns()
    files = []
    for path in paths:
        if os.path.isdir(path):
            for folder, _, names in os.walk(path):
                files += [os.path.join(folder, name) for name in names]
        elif os.path.isfile(path):
            files.append(path)
    for path in files:
        os.utime(path, ns=(now, now))
    return len(files)


def stats(samples: list[float]) -> dict[str, Any]:
    """
    @return: the median, min and max of C{samples} (seconds) and the
        samples themselves.
    """
    return {
        "median_s": round(statistics.median(samples), 4) if samples else None,
        "min_s": round(min(samples), 4) if samples else None,
        "max_s": round(max(samples), 4) if samples else None,
        "samples_s": [round(s, 4) for s in samples],
    }


def brief(value: Any, limit: int = 300) -> str:
    """
    @return: C{value} as text of at most C{limit} characters, for errors.
    """
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def timedCall(call: Callable[[], Any]) -> tuple[float, Any]:
    """
    @return: the wall seconds C{call} took, and what it returned.
    """
    started = time.perf_counter()
    value = call()
    return time.perf_counter() - started, value


def pingBaseline(client: Any, target: str, count: int, timeout: float) -> dict[str, Any]:
    """
    C{count} C{test.ping} jobs to C{target}, one after the other.

    @return: their median and samples: what a job costs by itself.
    """
    samples = []
    failures = 0
    for _ in range(count):
        elapsed, ret = timedCall(lambda: client.cmd(target, "test.ping", timeout=timeout))
        samples.append(elapsed)
        failures += ret.get(target) is not True
    return {**stats(samples), "failures": failures}


def checkGetFile(ret: Any, target: str, dest: str, size: int, sha256: str | None) -> str | None:
    """
    @return: why a C{cp.get_file} to C{dest} did not give the file, or
        L{None} if it did.
    """
    value = ret.get(target) if isinstance(ret, dict) else None
    if value != dest:
        return f"{target} returned {brief(value)}, not {dest}"
    if not os.path.isfile(dest):
        return f"{dest} does not exist"
    actual = os.path.getsize(dest)
    if actual != size:
        return f"{dest} has {actual} bytes, not {size}"
    if sha256 is not None and sha256File(dest) != sha256:
        return f"{dest}: SHA-256 differs from the master's file"
    return None


def phaseGetFile(client: Any, options: argparse.Namespace) -> dict[str, Any]:
    """
    Cold and cached C{cp.get_file} samples (see the module docstring).
    """
    target, source, dest = options.target, options.source, options.dest
    warm = client.cmd(target, "cp.hash_file", [source], timeout=options.timeout)
    baseline = pingBaseline(client, target, options.pings, options.timeout)
    cold: list[float] = []
    cached: list[float] = []
    touched: list[float] = []
    errors: list[str] = []
    args = [source, dest]
    for _ in range(options.repeats):
        clearPaths([dest, *options.clear])
        # Both systems' cp.get_file fail without the destination's folder
        # (makedirs=False, Salt's default).
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        elapsed, ret = timedCall(
            lambda: client.cmd(target, "cp.get_file", args, timeout=options.timeout)
        )
        problem = checkGetFile(ret, target, dest, options.size, options.sha256)
        if problem is None:
            cold.append(elapsed)
        else:
            errors.append(f"cold: {problem}")
            continue
        elapsed, ret = timedCall(
            lambda: client.cmd(target, "cp.get_file", args, timeout=options.timeout)
        )
        # The cached copy is checked by size only: hashing it here again
        # would not tell more than the cold check did.
        problem = checkGetFile(ret, target, dest, options.size, None)
        if problem is None:
            cached.append(elapsed)
        else:
            errors.append(f"cached: {problem}")
        # Cached again, the copies' modification times changed (same
        # bytes): a minion that trusts a hash it recorded with the file's
        # size and time must hash it again, as Salt's always does.
        touchFiles([dest, *options.clear])
        elapsed, ret = timedCall(
            lambda: client.cmd(target, "cp.get_file", args, timeout=options.timeout)
        )
        problem = checkGetFile(ret, target, dest, options.size, None)
        if problem is None:
            touched.append(elapsed)
        else:
            errors.append(f"touched: {problem}")
    megabytes = options.size / 1e6
    out: dict[str, Any] = {
        "source": source,
        "size_bytes": options.size,
        "hash_file_warmup": brief(warm.get(target) if isinstance(warm, dict) else warm, 200),
        "ping_baseline": baseline,
        "cold": {**stats(cold), "failures": options.repeats - len(cold)},
        "cached": {**stats(cached), "failures": options.repeats - len(cached)},
        "cached_touched": {**stats(touched), "failures": options.repeats - len(touched)},
        "errors": errors[:10],
    }
    for name in ("cold", "cached", "cached_touched"):
        median = out[name]["median_s"]
        out[name]["mb_per_s"] = round(megabytes / median, 2) if median else None
    return out


def phaseCacheDir(client: Any, options: argparse.Namespace) -> dict[str, Any]:
    """
    C{cp.cache_dir} once to fill the cache, then timed while all is cached.
    """
    target, source = options.target, options.source
    errors: list[str] = []

    def once() -> tuple[float, str | None]:
        elapsed, ret = timedCall(
            lambda: client.cmd(target, "cp.cache_dir", [source], timeout=options.timeout)
        )
        value = ret.get(target) if isinstance(ret, dict) else None
        if not isinstance(value, list) or len(value) != options.expect:
            count = len(value) if isinstance(value, list) else None
            return elapsed, f"{target} returned {count} paths, not {options.expect}: {brief(value)}"
        missing = [p for p in value if not os.path.isfile(p)]
        if missing:
            return elapsed, f"{len(missing)} returned paths are not files, e.g. {missing[0]}"
        return elapsed, None

    clearPaths(options.clear)
    fill, problem = once()
    if problem is not None:
        errors.append(f"fill: {problem}")
    samples = []
    for _ in range(options.repeats):
        elapsed, problem = once()
        if problem is None:
            samples.append(elapsed)
        else:
            errors.append(f"cached: {problem}")
    return {
        "source": source,
        "files": options.expect,
        "fill_s": round(fill, 4),
        "fill_ok": not errors or not errors[0].startswith("fill"),
        "cached": {**stats(samples), "failures": options.repeats - len(samples)},
        "errors": errors[:10],
    }


def topSls(sls: list[str]) -> str:
    """
    @return: a pillar C{top.sls} giving every minion the SLS C{sls}.
    """
    lines = ["base:", "  '*':"]
    lines += [f"    - {name}" for name in sls]
    return "\n".join(lines) + "\n"


def pillarSls(keys: int) -> str:
    """
    @return: the SLS of C{keys} keys generated by Jinja loops (each a map
        with the minion's id from its grains and a list), rendered by the
        master for each minion.
    """
    return (
        f"{{% for i in range({keys}) %}}\n"
        "bench_key_{{ i }}:\n"
        "  index: {{ i }}\n"
        "  minion: {{ grains['id'] }}\n"
        "  name: item-{{ i }}-{{ grains['id'] }}\n"
        "  tags:\n"
        "{% for j in range(3) %}"
        "    - t{{ i }}-{{ j }}\n"
        "{% endfor %}"
        "{% endfor %}\n"
    )


def roundSls(round_: int) -> str:
    """
    @return: the SLS that round C{round_} adds: the mark and a new key.
    """
    return f"{MARK_KEY}: round-{round_}\nbench_new_{round_}:\n  added: {round_}\n"


def writeAtomically(path: str, text: str) -> None:
    """
    Replace the file C{path} by C{text} at once (a reader sees the old or
    the new file, never half of one).
    """
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def countMarked(ret: Any, expected: str) -> int:
    """
    @return: how many minions of C{ret} answered C{expected}.
    """
    if not isinstance(ret, dict):
        return 0
    return sum(1 for value in ret.values() if value == expected)


def unmasked(system: str) -> dict[str, Any] | None:
    """
    @return: the keyword arguments that make C{pillar.get} and
        C{pillar.items} return the values themselves: Salt 3008.5 shows
        C{**********} for every pillar value unless given C{unmask=True};
        salttwist's show them.
    """
    return {"unmask": True} if system == "salt" else None


def phasePillar(client: Any, options: argparse.Namespace) -> dict[str, Any]:
    """
    Rounds of top change, refresh on all and polling until all hold the
    new pillar (see the module docstring).
    """
    errors: list[str] = []
    timeout = options.timeout
    kwarg = unmasked(options.system)
    items = client.cmd("*", "pillar.items", timeout=timeout, kwarg=kwarg)
    itemsOk = 0
    for minionId, pillar in (items or {}).items():
        keys = (
            [k for k in pillar if str(k).startswith("bench_key_")]
            if isinstance(pillar, dict)
            else []
        )
        if len(keys) >= options.keys:
            itemsOk += 1
        elif len(errors) < 3:
            errors.append(f"pillar.items on {minionId}: {len(keys)} bench keys: {brief(pillar)}")
    rounds: list[dict[str, Any]] = []
    totals: list[float] = []
    base = options.base_sls
    for k in range(options.first_round, options.first_round + options.repeats):
        name = f"bench_round_{k}"
        writeAtomically(os.path.join(options.pillar_root, f"{name}.sls"), roundSls(k))
        expected = f"round-{k}"
        started = time.perf_counter()
        writeAtomically(os.path.join(options.pillar_root, "top.sls"), topSls([base, name]))
        refreshS, refreshRet = timedCall(
            lambda: client.cmd(
                "*",
                "saltutil.refresh_pillar",
                kwarg={"wait": True, "timeout": options.refresh_wait},
                timeout=timeout,
            )
        )
        polls = 0
        marked = 0
        while True:
            polls += 1
            ret = client.cmd("*", "pillar.get", [MARK_KEY], timeout=timeout, kwarg=kwarg)
            marked = countMarked(ret, expected)
            if marked >= options.expect:
                break
            if time.perf_counter() - started > options.round_seconds:
                errors.append(
                    f"round {k}: {marked} of {options.expect} minions had {expected} "
                    f"after {options.round_seconds:g} s: {brief(ret)}"
                )
                break
        elapsed = time.perf_counter() - started
        done = marked >= options.expect
        if done:
            totals.append(elapsed)
        refreshed = sum(1 for v in (refreshRet or {}).values() if v is True)
        rounds.append(
            {
                "round": k,
                "to_all_s": round(elapsed, 4),
                "refresh_job_s": round(refreshS, 4),
                "refresh_returned_true": refreshed,
                "polls": polls,
                "minions_with_new": marked,
                "ok": done,
            }
        )
    return {
        "minions": options.expect,
        "keys": options.keys,
        "pillar_items_ok": itemsOk,
        "to_all": {**stats(totals), "failures": options.repeats - len(totals)},
        "refresh_job_median_s": (
            round(statistics.median(r["refresh_job_s"] for r in rounds), 4) if rounds else None
        ),
        "rounds": rounds,
        "errors": errors[:10],
    }


PHASES = {"getfile": phaseGetFile, "cachedir": phaseCacheDir, "pillar": phasePillar}


def parser() -> argparse.ArgumentParser:
    """
    The command line.
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--system", choices=("salt", "salttwist"), required=True)
    p.add_argument("config_dir", help="the master's config directory")
    p.add_argument("phase", choices=sorted(PHASES))
    p.add_argument("--target", help="the minion id (getfile, cachedir)")
    p.add_argument("--source", help="the salt:// URL (getfile, cachedir)")
    p.add_argument("--dest", help="where cp.get_file writes (getfile)")
    p.add_argument(
        "--clear", action="append", default=[], help="a path removed before each cold sample"
    )
    p.add_argument("--size", type=int, default=0, help="the file's bytes (getfile)")
    p.add_argument("--sha256", default=None, help="the file's SHA-256 (getfile)")
    p.add_argument("--pings", type=int, default=5, help="baseline test.ping jobs (getfile)")
    p.add_argument("--expect", type=int, default=0, help="files (cachedir) or minions (pillar)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0, help="each job's timeout")
    p.add_argument("--pillar-root", help="the master's pillar_roots base directory (pillar)")
    p.add_argument("--base-sls", default="bench", help="the generated SLS's name (pillar)")
    p.add_argument("--keys", type=int, default=200, help="its generated keys (pillar)")
    p.add_argument("--first-round", type=int, default=1)
    p.add_argument(
        "--refresh-wait", type=float, default=60.0, help="saltutil.refresh_pillar timeout="
    )
    p.add_argument(
        "--round-seconds", type=float, default=120.0, help="give up a pillar round after this"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """
    Run one phase and print its figures as JSON.
    """
    options = parser().parse_args(argv)
    started = time.perf_counter()
    client = makeClient(options.system, options.config_dir)
    setup = time.perf_counter() - started
    try:
        figures = PHASES[options.phase](client, options)
    finally:
        closeClient(client)
    figures["system"] = options.system
    figures["client_setup_s"] = round(setup, 4)
    json.dump(figures, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
