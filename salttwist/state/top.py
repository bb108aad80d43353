# -*- test-case-name: tests.test_state_top -*-
"""
The state system's top files, as Salt's C{BaseHighState}: which SLS files
of which saltenv a minion's highstate applies (Salt's C{state.show_top}).

  1. L{gatherTops}: the top file (C{state_top}, C{top.sls} by default) of
     each saltenv, in the order of Salt's C{_get_envs}: C{env_order} when
     set (only the saltenvs the file server serves), else C{base}, the
     saltenvs of C{file_roots}, then the others the file server serves.
     Only C{state_top_saltenv}'s top file when that is set; only the
     requested C{saltenv}'s when one is asked for (or pinned by the
     C{saltenv} option). Each is rendered through its C{#!} pipeline
     (C{renderer}, C{jinja|yaml} by default) with C{opts}, C{grains},
     C{pillar} and C{saltenv} in the context; its C{include:} names (and
     globs) SLS files of the same saltenv that are rendered as more top
     files of that saltenv.
  2. L{mergeTops}: C{top_file_merging_strategy}:

       - C{merge} (the default): the C{base} top files first, every section
         of them; then each other saltenv's top files, only the section
         for their own saltenv, and only if C{base}'s top did not define
         that saltenv;
       - C{same}: each saltenv's top files give only their own section; a
         saltenv with no top file takes its section from the top file of
         C{default_top} (C{base} by default);
       - C{merge_all}: every section of every top file; a target met again
         gets the later C{match:} (if any) and the SLS names of both,
         without repeats.

  3. L{topMatches}: each target with its C{match:} type (C{compound} when
     none, as Salt's C{confirm_top}) through L{salttwist.targeting}: C{glob},
     C{pcre}, C{list}, C{grain}, C{grain_pcre}, C{pillar}, C{pillar_pcre},
     C{pillar_exact}, C{ipcidr}, C{compound}, C{nodegroup}; Salt's
     C{subfilter:} and C{- saltenv: sls} items are understood.

L{showTop} does the three and returns C{({saltenv: [sls, ...]}, errors)}.

Errors never raise out of L{showTop}: each names the top file (its path
on the master), the line when the renderer knows it, the saltenv and the
cause, and the other top files are still read and matched. Salt drops the
whole top when one top file fails to render; here the matches of the top
files that did render are returned beside the errors, and a caller that
applies states (the highstate) must apply nothing when there are errors,
as Salt's C{state.show_top} and C{state.highstate} return the errors alone.

Other deliberate differences from Salt, each where Salt silently does
something unintended:
  - top file C{include:}s are followed to any depth (each file once);
    Salt reads the includes of the first top files only;
  - under C{merge}, a saltenv's later top files (its includes) add to its
    section, as Salt's documentation says; Salt's code ignores them once
    the first one defined the section;
  - a top file's C{include:} of a plain name (no glob) that no SLS file
    of the saltenv has is an error; Salt ignores it;
  - structural problems (a target that is not a list, a saltenv that is
    not a mapping ...) are errors naming the top file, and only that part
    is left out; Salt's C{verify_tops} checks the merged top, without the
    file, and C{"Unable to render top file. No targets found."} drops
    everything;
  - each saltenv's SLS names are listed once, without repeats.

Everything here blocks (reading files through the file server, git,
rendering Jinja and YAML): the master runs it in a worker process or a
thread (C{runBlocking}), C{salttwist-call --local} in a thread, never on
the reactor.

Ground: imports no wing.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from salttwist.fileserver.interfaces import FileServerError, FoundFile
from salttwist.fileserver.paths import checkRelativePath, parseSaltUrl
from salttwist.render import RenderError, readSource, renderText
from salttwist.targeting import compileTarget

if TYPE_CHECKING:
    from salttwist.fileserver.server import FileServer

log = logging.getLogger(__name__)

#: The top file's name when C{state_top} is not set.
DEFAULT_STATE_TOP = "top.sls"
#: The values of C{top_file_merging_strategy}.
STRATEGIES = ("merge", "same", "merge_all")
#: The keys of a dictionary item of a target's list that are options, not
#: C{saltenv: sls}.
_OPTION_KEYS = frozenset(("match", "subfilter", "order", "ignore_missing"))
_GLOB_CHARS = frozenset("*?[")
#: The most top files (with their includes) read for one saltenv.
MAX_TOP_FILES = 1000
#: The deepest nesting of C{subfilter:}.
MAX_SUBFILTER_DEPTH = 16


class TopError(ValueError):
    """
    A top file that cannot be used as it is: it does not render, or is not
    shaped as a top file, or the options do not allow reading any. The
    message names the top file, the line when known, the saltenv and the
    cause.
    """


class TopFile(dict):
    """
    One rendered top file: its data (C{{saltenv: {target: [item, ...]}}},
    and C{"include": [sls, ...]}), checked.

    @ivar path: the file on the master's disk, or L{None} when the saltenv
        has no top file.
    @ivar saltenv: the saltenv it was read from.
    @ivar found: whether there is such a file (a file that failed to render
        is found, and empty): C{same} falls back on C{default_top} only for
        a saltenv without a top file.
    """

    path: str | None = None
    saltenv: str = "base"
    found: bool = False


class MergedTop(dict):
    """
    The merged top: C{{saltenv: {target: [item, ...]}}}.

    @ivar origins: C{{(saltenv, target): path of the top file}} of the
        entries that came from a L{TopFile}, to name it in errors.
    """

    def __init__(self) -> None:
        super().__init__()
        self.origins: dict[tuple[str, str], str] = {}


class _Problems:
    """
    Where errors go: appended to a list, or raised as L{TopError} when
    there is no list.
    """

    def __init__(self, sink: list[str] | None) -> None:
        self.sink = sink

    def add(self, message: str) -> None:
        if self.sink is None:
            raise TopError(message)
        log.debug("state top: %s", message)
        self.sink.append(message)


def topFileName(opts: Mapping[str, Any]) -> str:
    """
    @return: the top file's path relative to a saltenv's root, from
        C{state_top} (C{top.sls}, C{salt://top.sls} or C{/top.sls}, as
        Salt accepts).
    @raise TopError: if it is a path trick (C{..}, NUL ...) or names a
        saltenv (C{?saltenv=}: that is C{state_top_saltenv}'s job).
    """
    name = opts.get("state_top") or DEFAULT_STATE_TOP
    if not isinstance(name, str):
        raise TopError(f"state_top must be a string, not {type(name).__name__}")
    try:
        path, saltenv = parseSaltUrl(name)
        if saltenv is not None:
            raise TopError(f"state_top {name!r} names a saltenv; set state_top_saltenv instead")
        return checkRelativePath(path.lstrip("/"))
    except FileServerError as e:
        raise TopError(f"state_top {name!r}: {e}") from None


def topEnvs(opts: Mapping[str, Any], fileServer: FileServer) -> list[str]:
    """
    The saltenvs whose top files are read, in order (Salt's C{_get_envs}):
    C{env_order} without repeats, keeping only the saltenvs the file server
    serves (all of it when it serves none); else C{base}, the saltenvs of
    C{file_roots}, then the other saltenvs the file server serves.
    """
    served = list(fileServer.envs())
    envOrder: list[str] = []
    for env in opts.get("env_order") or []:
        env = str(env)
        if env not in envOrder:
            envOrder.append(env)
    if envOrder:
        if served:
            return [env for env in envOrder if env in served]
        return envOrder
    envs = ["base"]
    for env in opts.get("file_roots") or {}:
        if str(env) not in envs:
            envs.append(str(env))
    envs.extend(env for env in served if env not in envs)
    return envs


def listStates(fileServer: FileServer, saltenv: str) -> list[str]:
    """
    @return: the SLS names of C{saltenv} (C{web/nginx.sls} is
        C{web.nginx}, C{web/init.sls} is C{web}), sorted, as Salt's
        C{cp.list_states}; C{[]} for a saltenv that is not served.
    """
    try:
        files = fileServer.fileList(saltenv)
    except FileServerError:
        return []
    states: set[str] = set()
    for path in files:
        if not path.endswith(".sls"):
            continue
        if path.endswith("/init.sls"):
            states.add(path[: -len("/init.sls")].replace("/", "."))
        else:
            states.add(path[: -len(".sls")].replace("/", "."))
    return sorted(states)


def _findSls(fileServer: FileServer, sls: str, saltenv: str) -> FoundFile | None:
    base = sls.replace(".", "/")
    for path in (base + ".sls", base + "/init.sls"):
        try:
            found = fileServer.findFile(path, saltenv)
        except FileServerError:
            return None
        if found is not None:
            return found
    return None


def _loaderFor(fileServer: FileServer, saltenv: str) -> Callable[[str], tuple[str, str]]:
    """
    @return: the Jinja loader of C{saltenv}: C{{% include %}} and
        C{{% import %}} read through the file server (confined to the
        saltenv's roots by it).
    """

    def load(name: str) -> tuple[str, str]:
        try:
            found = fileServer.findFile(name, saltenv)
        except FileServerError as e:
            raise LookupError(str(e)) from None
        if found is None:
            raise LookupError(f"'{name}' is not in saltenv '{saltenv}'")
        return readSource(found.realPath), found.realPath

    return load


def _where(error: RenderError) -> str:
    return error.path if error.line is None else f"{error.path}, line {error.line}"


def _checkTop(data: Any, path: str, saltenv: str, problems: _Problems) -> TopFile:
    """
    Check the shape of a rendered top file (Salt's C{verify_tops}, per
    file) and keep what is well formed.

    @return: the usable part of C{data}: saltenv names and targets as
        strings, each target's items a list of non-empty SLS names and
        option mappings.
    """
    top = TopFile()
    top.path = path
    top.saltenv = saltenv
    top.found = True
    where = f"Top file {path} (saltenv '{saltenv}')"
    if data is None:
        return top
    if not isinstance(data, dict):
        problems.add(
            f"{where} does not render to a mapping of saltenvs (got {type(data).__name__})"
        )
        return top
    for env, targets in data.items():
        if env == "include":
            if isinstance(targets, str):
                targets = [targets]
            if not isinstance(targets, list) or not all(
                isinstance(sls, str) and sls for sls in targets
            ):
                problems.add(f"{where}: include must be a list of SLS names")
                continue
            top["include"] = list(targets)
            continue
        if not isinstance(env, str):
            problems.add(f"{where}: environment {env!r} in top file is not formed as a string")
            continue
        if not env:
            problems.add(f"{where}: empty saltenv statement in top file")
            continue
        if targets is None:
            problems.add(f"{where}: saltenv '{env}' has no targets")
            continue
        if not isinstance(targets, dict):
            problems.add(
                f"{where}: the top file matches for saltenv '{env}' are not formatted as a dict"
            )
            continue
        section: dict[str, list] = {}
        for tgt, items in targets.items():
            tgt = tgt if isinstance(tgt, str) else str(tgt)
            checked = _checkItems(items, f"{where}, saltenv '{env}', target '{tgt}'", problems)
            if checked is not None:
                section[tgt] = checked
        top[env] = section
    return top


def _checkItems(items: Any, where: str, problems: _Problems, depth: int = 0) -> list | None:
    """
    @return: the well-formed items of one target, or L{None} when there are
        none to keep.
    """
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list):
        problems.add(f"{where}: malformed topfile (state declarations not formed as a list)")
        return None
    checked: list = []
    for item in items:
        if isinstance(item, str):
            if not item:
                problems.add(f"{where}: empty SLS name")
                continue
            checked.append(item)
        elif isinstance(item, dict):
            good: dict[str, Any] = {}
            for key, value in item.items():
                if not isinstance(key, str) or not value:
                    problems.add(f"{where}: improperly formatted top file matcher {item!r}")
                    continue
                if key == "subfilter":
                    if depth >= MAX_SUBFILTER_DEPTH or not isinstance(value, dict):
                        problems.add(f"{where}: subfilter must be a mapping of targets")
                        continue
                    sub: dict[str, list] = {}
                    for subTgt, subItems in value.items():
                        subTgt = subTgt if isinstance(subTgt, str) else str(subTgt)
                        subChecked = _checkItems(
                            subItems, f"{where}, subfilter target '{subTgt}'", problems, depth + 1
                        )
                        if subChecked is not None:
                            sub[subTgt] = subChecked
                    good[key] = sub
                elif key == "match" or key not in _OPTION_KEYS:
                    if not isinstance(value, str):
                        problems.add(f"{where}: {key}: {value!r} is not a string")
                        continue
                    good[key] = value
                else:
                    good[key] = value
            if good:
                checked.append(good)
        else:
            problems.add(f"{where}: {item!r} is neither an SLS name nor a mapping")
    return checked


def _empty(saltenv: str) -> TopFile:
    top = TopFile()
    top.saltenv = saltenv
    return top


def _renderTop(
    fileServer: FileServer,
    found: FoundFile,
    name: str,
    saltenv: str,
    opts: Mapping[str, Any],
    context: Mapping[str, Any] | None,
    problems: _Problems,
) -> TopFile:
    """
    Render and check one top file.
    """
    variables: dict[str, Any] = {"opts": opts, "grains": {}, "pillar": {}}
    if context:
        variables.update(context)
    variables["saltenv"] = saltenv
    try:
        data = renderText(
            readSource(found.realPath),
            variables,
            path=found.realPath,
            saltenv=saltenv,
            defaultPipeline=str(opts.get("renderer") or "jinja|yaml"),
            loader=_loaderFor(fileServer, saltenv),
            name=name,
            cacheData=True,
        )
    except RenderError as e:
        problems.add(f"Unable to render top file of saltenv '{saltenv}': {_where(e)}: {e.cause}")
        top = _empty(saltenv)
        top.path = found.realPath
        top.found = True
        return top
    return _checkTop(data, found.realPath, saltenv, problems)


def gatherTops(
    opts: Mapping[str, Any],
    fileServer: FileServer,
    *,
    saltenv: str | None = None,
    context: Mapping[str, Any] | None = None,
    errors: list[str] | None = None,
) -> dict[str, list[dict]]:
    """
    Read and render the top files (Salt's C{get_tops}).

    Blocking (file server, rendering): run it in a thread or a worker.

    @param opts: the master's (or a masterless minion's) options:
        C{state_top}, C{state_top_saltenv}, C{env_order}, C{file_roots},
        C{top_file_merging_strategy}, C{default_top}, C{renderer}, and
        C{saltenv} when C{saltenv} is not given.
    @param fileServer: a L{salttwist.fileserver.server.FileServer}.
    @param saltenv: read only this saltenv's top file.
    @param context: the render context: C{grains}, C{pillar} and whatever
        else the templates see (C{opts} and C{saltenv} are added).
    @param errors: where the problems go; without it, the first one raises.
    @return: C{{saltenv: [top file, ...]}} in the order read, each a
        L{TopFile} (C{{}} with C{found} false for a saltenv without one),
        C{include:}d top files after the saltenv's own.
    @raise TopError: on the first problem when C{errors} is L{None}.
    """
    problems = _Problems(errors)
    tops: dict[str, list[dict]] = {}
    try:
        name = topFileName(opts)
    except TopError as e:
        problems.add(str(e))
        return tops
    strategy = opts.get("top_file_merging_strategy") or "merge"
    if saltenv is None:
        saltenv = opts.get("saltenv") or None
    served = list(fileServer.envs())
    if saltenv is not None:
        saltenv = str(saltenv)
        if saltenv not in served:
            problems.add(f"saltenv '{saltenv}' is not configured on the file server")
            return tops
        envs = [saltenv]
    else:
        if strategy == "same" and not opts.get("default_top", "base"):
            problems.add(
                "top_file_merging_strategy set to 'same', but no default_top"
                " configuration option was set"
            )
            return tops
        stateTopSaltenv = opts.get("state_top_saltenv")
        if stateTopSaltenv:
            stateTopSaltenv = str(stateTopSaltenv)
            if stateTopSaltenv not in served:
                problems.add(
                    f"state_top_saltenv '{stateTopSaltenv}' is not configured on the file server"
                )
                return tops
            envs = [stateTopSaltenv]
        else:
            envs = topEnvs(opts, fileServer)
    found = 0
    for env in envs:
        top: TopFile | None = None
        if env in served:
            try:
                file = fileServer.findFile(name, env)
            except FileServerError as e:
                problems.add(f"Top file {name!r} of saltenv '{env}': {e}")
                file = None
            if file is not None:
                found += 1
                top = _renderTop(fileServer, file, name, env, opts, context, problems)
        else:
            log.debug("saltenv %r is not served: no top file", env)
        tops.setdefault(env, []).append(top if top is not None else _empty(env))
    if found > 1 and strategy == "merge" and not opts.get("env_order"):
        log.debug(
            "top_file_merging_strategy is 'merge' and %d top files were found:"
            " base first, then the others in the order of file_roots",
            found,
        )
    for env, envTops in tops.items():
        _readIncludes(fileServer, env, envTops, name, opts, context, problems)
    return tops


def _readIncludes(
    fileServer: FileServer,
    env: str,
    envTops: list[dict],
    topName: str,
    opts: Mapping[str, Any],
    context: Mapping[str, Any] | None,
    problems: _Problems,
) -> None:
    """
    Append to C{envTops} the top files its C{include:}s name (SLS names or
    globs of the same saltenv), and theirs, each file once.
    """
    avail: list[str] | None = None
    # The top file itself is not read again when an include names it.
    done: set[str] = set()
    if topName.endswith(".sls"):
        done.add(topName[: -len(".sls")].replace("/", "."))
    index = 0
    while index < len(envTops):
        top = envTops[index]
        index += 1
        includes = top.get("include") or []
        if not isinstance(includes, list):
            continue
        origin = getattr(top, "path", None) or topName
        for pattern in includes:
            if not isinstance(pattern, str):
                continue
            if avail is None:
                avail = listStates(fileServer, env)
            names = fnmatch.filter(avail, pattern)
            if not names and _GLOB_CHARS.isdisjoint(pattern):
                problems.add(
                    f"Top file {origin} (saltenv '{env}'): include '{pattern}' names no SLS"
                    f" file of saltenv '{env}'"
                )
            for sls in names:
                if sls in done:
                    continue
                done.add(sls)
                if len(envTops) >= MAX_TOP_FILES:
                    problems.add(f"saltenv '{env}': more than {MAX_TOP_FILES} top files included")
                    return
                file = _findSls(fileServer, sls, env)
                if file is None:
                    continue
                envTops.append(
                    _renderTop(fileServer, file, file.path, env, opts, context, problems)
                )


def _sections(top: Mapping[str, Any]) -> Iterator[tuple[str, dict]]:
    """
    @return: C{(saltenv, targets)} of a top file's sections (not
        C{include}), the well-formed ones.
    """
    for env, targets in top.items():
        if env == "include" or not isinstance(targets, dict):
            continue
        yield str(env), targets


def _put(merged: MergedTop, top: Mapping[str, Any], env: str, tgt: str, items: Any) -> None:
    merged.setdefault(env, {})[tgt] = list(items) if isinstance(items, list) else [items]
    path = getattr(top, "path", None)
    if path is not None:
        merged.origins[(env, tgt)] = path


def _mergeMerge(tops: Mapping[str, list[dict]], opts: Mapping[str, Any]) -> MergedTop:
    merged = MergedTop()
    for top in tops.get("base", []):
        for env, targets in _sections(top):
            for tgt, items in targets.items():
                _put(merged, top, env, str(tgt), items)
    fromBase = set(merged)
    for fileEnv, envTops in tops.items():
        if fileEnv == "base":
            continue
        for top in envTops:
            for env, targets in _sections(top):
                if env != fileEnv:
                    log.debug(
                        "section for saltenv %r in saltenv %r's top file ignored"
                        " (top_file_merging_strategy 'merge')",
                        env,
                        fileEnv,
                    )
                    continue
                if env in fromBase:
                    log.debug("section for saltenv %r ignored: the base top file defines it", env)
                    continue
                for tgt, items in targets.items():
                    _put(merged, top, env, str(tgt), items)
    return merged


def _mergeSame(tops: Mapping[str, list[dict]], opts: Mapping[str, Any]) -> MergedTop:
    merged = MergedTop()
    defaultTop = str(opts.get("default_top") or "base")
    for fileEnv, envTops in tops.items():
        if not any(getattr(top, "found", bool(top)) for top in envTops):
            # No top file in this saltenv: its section of default_top's.
            for top in tops.get(defaultTop, []):
                for env, targets in _sections(top):
                    if env != fileEnv:
                        continue
                    for tgt, items in targets.items():
                        _put(merged, top, env, str(tgt), items)
            continue
        for top in envTops:
            for env, targets in _sections(top):
                if env != fileEnv:
                    log.debug(
                        "section for saltenv %r in saltenv %r's top file ignored"
                        " (top_file_merging_strategy 'same')",
                        env,
                        fileEnv,
                    )
                    continue
                for tgt, items in targets.items():
                    _put(merged, top, env, str(tgt), items)
    return merged


def _splitItems(items: list) -> tuple[dict | None, list]:
    """
    @return: C{(the last C{match:} mapping or None, the other items)}.
    """
    match = None
    rest = []
    for item in items:
        if isinstance(item, dict) and "match" in item:
            match = item
        else:
            rest.append(item)
    return match, rest


def _mergeAll(tops: Mapping[str, list[dict]], opts: Mapping[str, Any]) -> MergedTop:
    merged = MergedTop()
    for envTops in tops.values():
        for top in envTops:
            for env, targets in _sections(top):
                for tgt, items in targets.items():
                    tgt = str(tgt)
                    if tgt not in merged.get(env, {}):
                        _put(merged, top, env, tgt, items)
                        continue
                    match1, rest1 = _splitItems(merged[env][tgt])
                    match2, rest2 = _splitItems(items if isinstance(items, list) else [items])
                    combined: list = []
                    match = match2 or match1
                    if match is not None:
                        combined.append(match)
                    combined.extend(rest1)
                    combined.extend(item for item in rest2 if item not in combined)
                    merged[env][tgt] = combined
    return merged


_MERGERS = {"merge": _mergeMerge, "same": _mergeSame, "merge_all": _mergeAll}


def mergeTops(
    tops: Mapping[str, list[dict]], opts: Mapping[str, Any]
) -> dict[str, dict[str, list]]:
    """
    Merge the top files L{gatherTops} read, as C{top_file_merging_strategy}
    says (see the module's docstring; an unknown strategy is C{merge}, as
    Salt falls back).

    @param tops: C{{saltenv: [top file, ...]}}.
    @param opts: C{top_file_merging_strategy}, C{default_top}.
    @return: a L{MergedTop}: C{{saltenv: {target: [item, ...]}}}.
    """
    strategy = opts.get("top_file_merging_strategy") or "merge"
    merger = _MERGERS.get(strategy)
    if merger is None:
        log.warning("Invalid top_file_merging_strategy %r, falling back to 'merge'", strategy)
        merger = _mergeMerge
    return merger(tops, opts)


def topMatches(
    mergedTop: Mapping[str, Mapping[str, Any]],
    minionId: str,
    grains: Mapping[str, Any] | None,
    pillar: Mapping[str, Any] | None = None,
    nodegroups: Mapping[str, Any] | None = None,
    *,
    saltenv: str | None = None,
    envs: list[str] | None = None,
    errors: list[str] | None = None,
) -> dict[str, list[str]]:
    """
    The SLS names the merged top gives C{minionId} (Salt's C{top_matches}).

    @param grains: the minion's grains.
    @param pillar: its pillar (C{pillar} targets and C{I@} words).
    @param nodegroups: the master's C{nodegroups}.
    @param saltenv: only this saltenv's section.
    @param envs: the saltenvs the file server serves: a C{- dev: sls} item
        naming another saltenv counts only if it is one (any name but the
        option words when L{None}).
    @param errors: where the problems (a target that does not compile)
        go; without it, the first one raises L{TopError}.
    @return: C{{saltenv: [sls, ...]}} in the top's order, each name once.
    """
    problems = _Problems(errors)
    origins = getattr(mergedTop, "origins", {})
    matches: dict[str, list[str]] = {}

    def add(env: str, sls: str) -> None:
        names = matches.setdefault(env, [])
        if sls not in names:
            names.append(sls)

    def visit(env: str, tgt: str, items: Any, depth: int) -> None:
        if isinstance(items, str):
            items = [items]
        if not isinstance(items, list):
            return
        matchType = "compound"
        for item in items:
            if isinstance(item, dict) and "match" in item:
                matchType = item["match"]
        try:
            found = compileTarget(tgt, matchType, nodegroups or {}).matches(
                minionId, grains, pillar=pillar
            )
        except Exception as e:  # TargetError, or data of a shape it cannot use
            origin = origins.get((env, tgt))
            where = f"Top file {origin} (saltenv '{env}')" if origin else f"saltenv '{env}'"
            problems.add(f"{where}: target '{tgt}' (match: {matchType}): {e}")
            return
        if not found:
            return
        matches.setdefault(env, [])
        for item in items:
            if isinstance(item, str):
                add(env, item)
            elif isinstance(item, dict):
                for key, value in item.items():
                    if key == "subfilter":
                        if isinstance(value, dict) and depth < MAX_SUBFILTER_DEPTH:
                            for subTgt, subItems in value.items():
                                visit(env, str(subTgt), subItems, depth + 1)
                    elif key in _OPTION_KEYS:
                        continue
                    elif isinstance(value, str) and (envs is None or key in envs):
                        add(str(key), value)

    for env, body in mergedTop.items():
        if saltenv and env != saltenv:
            continue
        if not isinstance(body, Mapping):
            continue
        for tgt, items in body.items():
            visit(str(env), str(tgt), items, 0)
    return matches


def showTop(
    opts: Mapping[str, Any],
    fileServer: FileServer,
    minionId: str,
    grains: Mapping[str, Any] | None,
    pillar: Mapping[str, Any] | None = None,
    *,
    saltenv: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> tuple[dict[str, list[str]], list[str]]:
    """
    Salt's C{state.show_top}: the SLS names of each saltenv the top files
    give C{minionId}.

    Blocking (file server, rendering): run it in a thread or a worker.
    Never raises for bad top files or options: they are errors.

    @param opts: as for L{gatherTops}, and C{nodegroups}.
    @param grains: the minion's grains (in the render context and for
        matching).
    @param pillar: its pillar (likewise).
    @param saltenv: only this saltenv's top file and section.
    @param context: more render variables, over C{opts} (whose C{id} is
        C{minionId}), C{grains}, C{pillar} and C{saltenv}.
    @return: C{(matches, errors)}: C{{saltenv: [sls, ...]}} in order, each
        name once; and each problem, naming the top file, the line when
        known and the cause. A highstate applies nothing when there are
        errors.
    """
    errors: list[str] = []
    try:
        minionOpts = dict(opts)
        minionOpts["id"] = minionId
        variables: dict[str, Any] = {
            "opts": minionOpts,
            "grains": dict(grains or {}),
            "pillar": dict(pillar or {}),
        }
        if context:
            variables.update(context)
        if saltenv is None:
            saltenv = opts.get("saltenv") or None
        tops = gatherTops(minionOpts, fileServer, saltenv=saltenv, context=variables, errors=errors)
        merged = mergeTops(tops, opts)
        matches = topMatches(
            merged,
            minionId,
            grains,
            pillar,
            opts.get("nodegroups") or {},
            saltenv=saltenv,
            envs=list(fileServer.envs()),
            errors=errors,
        )
        return matches, errors
    except Exception as e:
        # A bug of ours or options of a shape nobody checked: still an
        # answer, never an exception in the caller's worker.
        log.debug("state top failed for %s", minionId, exc_info=True)
        errors.append(f"State top failed: {type(e).__name__}: {e}")
        return {}, errors
