# -*- test-case-name: tests.test_state_apply -*-
"""
One state run, from the top file to the last state's return: Salt's
C{HighState} and C{State.call_high}, independent of where it runs (a
minion's job, C{salttwist-call --local}, the master's orchestration).

  1. the top (L{showTop}): which SLS of which saltenv the minion gets
     (L{salttwist.state.top.showTop});
  2. the high data (L{showHighstate}, L{showSls}): the SLS files rendered
     and resolved (C{include}, C{extend}, C{exclude}, the C{_in}
     requisites) by L{salttwist.state.compiler.compileHigh};
  3. the low chunks (L{showLowstate}, L{showLowSls}): in execution order,
     by L{salttwist.state.compiler.compileLow};
  4. the run (L{highstate}, L{sls}, L{single}, L{slsId}): the chunks given
     to a L{salttwist.state.runner.StateRunner}, each state function called
     with the L{StateContext} L{StateRun.contextFor} builds.

Each step that finds errors stops there: the run returns the list of error
strings (Salt's words, naming files and lines) and runs nothing. A run
returns C{{tag: state return}} in Salt's shape. L{checkResult} is Salt's
C{check_result}: whether a run succeeded, for the retcode.

Everything here blocks (reading and rendering files, running states): run
it in a thread, never on the reactor. What the run reads files through is
the caller's: a minion gives a L{salttwist.state.clientview.ClientFiles}
over its file client, the master its L{FileServer
<salttwist.fileserver.server.FileServer>}.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from salttwist.states import StateContext, loadStates

__all__ = [
    "NO_STATES_TAG",
    "StateRun",
    "applyExclude",
    "checkResult",
    "highstate",
    "showHighstate",
    "showLowSls",
    "showLowstate",
    "showSls",
    "showTop",
    "single",
    "sls",
    "slsId",
    "splitMods",
]

#: The tag of Salt's return for a highstate with nothing to run.
NO_STATES_TAG = "no_|-states_|-states_|-None"
#: Salt's comment when the top gives the minion no SLS.
NO_TOP_MATCHES = "No Top file or master_tops data matches found. Please see master log for details."
#: Salt's comment when the matched SLS hold no state.
NO_STATES_FOUND = "No states found for this minion"


@dataclass
class StateRun:
    """
    The inputs of one state run.

    @ivar files: the state tree (C{envs}, C{fileList}, C{findFile}).
    @ivar opts: the options (the minion's, with a job's C{saltenv} and
        C{pillarenv}); C{failhard}, C{state_auto_order}, C{state_top} ...
        are read here.
    @ivar minionId: whose top matches are looked for.
    @ivar grains: C{__grains__}.
    @ivar pillar: C{__pillar__} (with a job's override already merged).
    @ivar salt: the execution functions (C{__salt__}), callable from the
        run's thread.
    @ivar test: a dry run.
    @ivar saltenv: the saltenv asked for (C{None}: every saltenv for a
        highstate, C{base} for C{sls}).
    @ivar states: the state functions by C{module.function}.
    @ivar onStateDone: called from the run's thread with C{(tag, return,
        done, total)} after each state.
    @ivar cancelled: polled by the runner between states: true once the
        run must stop.
    @ivar context: C{__context__}, shared by every state of the run.
    @ivar chunks: the low chunks last given to the runner (for
        L{checkResult}'s C{onfail} handlers).
    @ivar loadDynamic: called by L{highstate} with the run and the top's
        matches before the SLS are compiled (Salt's C{load_dynamic}: a
        minion syncs its custom modules of those saltenvs there).
    @ivar prefetch: called by L{runChunks} from the run's thread with the
        low chunks before the first state runs (a minion fetches the
        run's C{salt://} sources in a few requests there:
        L{salttwist.state.runfiles}); L{None}: nothing is fetched ahead.
    @ivar sources: what fetched them (the states' C{StateContext.sources}),
        or L{None}.
    """

    files: Any
    opts: Mapping[str, Any]
    minionId: str
    grains: Mapping[str, Any] = field(default_factory=dict)
    pillar: Mapping[str, Any] = field(default_factory=dict)
    salt: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    test: bool = False
    saltenv: str | None = None
    reactor: Any = None
    jid: str | None = None
    master: Any = None
    user: str = "root"
    states: Mapping[str, Callable[..., Any]] | None = None
    onStateDone: Callable[[str, dict, int, int], None] | None = None
    cancelled: Callable[[], bool] | None = None
    context: dict[str, Any] = field(default_factory=dict)
    chunks: list[dict] = field(default_factory=list)
    loadDynamic: Callable[[StateRun, dict[str, list[str]]], None] | None = None
    prefetch: Callable[[list[dict]], None] | None = None
    sources: Any = None

    def stateFunctions(self) -> Mapping[str, Callable[..., Any]]:
        """
        @return: L{states}, loaded on first use.
        """
        if self.states is None:
            self.states = loadStates()
        return self.states

    def variables(self) -> dict[str, Any]:
        """
        @return: what SLS templates see: C{salt}, C{grains}, C{pillar},
            C{opts} (the compiler adds C{saltenv}, C{sls} ... per file).
        """
        opts = dict(self.opts)
        opts.setdefault("id", self.minionId)
        return {"salt": self.salt, "grains": self.grains, "pillar": self.pillar, "opts": opts}

    def contextFor(self, chunk: Mapping[str, Any]) -> StateContext:
        """
        @return: the L{StateContext} the state function of C{chunk} gets:
            the run's, with C{saltenv} the chunk's C{__env__} and C{low}
            the chunk.
        """
        return StateContext(
            salt=self.salt,
            opts=self.opts,
            grains=self.grains,
            pillar=self.pillar,
            test=self.test,
            saltenv=str(chunk.get("__env__") or self.saltenv or "base"),
            low=chunk,
            states=self.stateFunctions(),
            context=self.context,
            reactor=self.reactor,
            jid=self.jid,
            master=self.master,
            user=self.user,
            sources=self.sources,
        )


def splitMods(mods: Any) -> list[str]:
    """
    The SLS names of an argument as Salt's C{split_input}: C{"a,b"} or
    C{["a", "b"]} (a number is a name too); blanks dropped.

    @raise ValueError: for something else.
    """
    if mods is None:
        return []
    if isinstance(mods, (int, float)) and not isinstance(mods, bool):
        mods = str(mods)
    if isinstance(mods, str):
        items: Iterable[Any] = mods.split(",")
    elif isinstance(mods, (list, tuple)):
        items = mods
    else:
        raise ValueError(f"SLS names must be a string or a list, not {type(mods).__name__}")
    names = []
    for item in items:
        name = str(item).strip()
        if name and name not in names:
            names.append(name)
    return names


def _excludeList(exclude: Any) -> list[Any]:
    """
    C{exclude} as Salt takes it: C{"a,b"} (SLS names), or a list of SLS
    names and C{{"sls": ...}} / C{{"id": ...}} mappings.
    """
    if not exclude:
        return []
    if isinstance(exclude, str):
        return [part.strip() for part in exclude.split(",") if part.strip()]
    if isinstance(exclude, Mapping):
        return [dict(exclude)]
    if isinstance(exclude, (list, tuple)):
        return list(exclude)
    return [str(exclude)]


def applyExclude(high: Mapping[str, Any], exclude: Any) -> dict[str, Any]:
    """
    Salt's C{apply_exclude}: drop from the high data the ids of the SLS
    (globs allowed) and the ids an C{exclude} names.

    @return: C{high} itself when nothing is excluded, else a new high
        data mapping of the same type (a L{HighData
        <salttwist.state.compiler.HighData>} keeps the files its SLS came
        from).
    """
    exSls: set[str] = set()
    exIds: set[str] = set()
    for item in _excludeList(exclude):
        if isinstance(item, str):
            exSls.add(item)
        elif isinstance(item, Mapping) and len(item) == 1:
            key, value = next(iter(item.items()))
            if key == "sls":
                exSls.add(str(value))
            elif key == "id":
                exIds.add(str(value))
    if not exSls and not exIds:
        return high if isinstance(high, dict) else dict(high)
    # A copy that keeps the files the SLS came from, for compileLow's errors.
    kept: dict[str, Any] = type(high)() if isinstance(high, dict) else {}
    if hasattr(high, "paths"):
        kept.paths = dict(high.paths)  # type: ignore[attr-defined]
    for name, body in high.items():
        if name in exIds:
            continue
        sls = body.get("__sls__", "") if isinstance(body, Mapping) else ""
        if sls and any(fnmatch.fnmatchcase(str(sls), pattern) for pattern in exSls):
            continue
        kept[name] = body
    return kept


def _noStates(comment: str) -> dict[str, dict[str, Any]]:
    return {
        NO_STATES_TAG: {
            "result": False,
            "comment": comment,
            "name": "No States",
            "changes": {},
            "__run_num__": 0,
        }
    }


# -- the steps -----------------------------------------------------------------


def showTop(run: StateRun) -> tuple[dict[str, list[str]], list[str]]:
    """
    Salt's C{state.show_top}.

    @return: C{({saltenv: [sls, ...]}, errors)}.
    """
    from salttwist.state.top import showTop as topMatches

    return topMatches(
        run.opts,
        run.files,
        run.minionId,
        run.grains,
        run.pillar,
        saltenv=run.saltenv,
        context={"salt": run.salt},
    )


def _compileHigh(
    run: StateRun, matches: Mapping[str, Sequence[str]]
) -> tuple[dict[str, Any], list[str]]:
    from salttwist.state.compiler import compileHigh

    return compileHigh(run.files, matches, run.variables(), run.opts)


def _compileLow(run: StateRun, high: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    from salttwist.state.compiler import compileLow

    states = run.stateFunctions()
    where = getattr(high, "where", None)
    return compileLow(high, run.opts, lambda state: f"{state}.mod_watch" in states, where=where)


def _slsMatches(run: StateRun, mods: Any) -> dict[str, list[str]]:
    return {run.saltenv or "base": splitMods(mods)}


def showHighstate(run: StateRun) -> tuple[dict[str, Any], list[str]]:
    """
    Salt's C{state.show_highstate}: the high data of the SLS the top gives
    the minion.

    @return: C{(high data, errors)}.
    """
    matches, errors = showTop(run)
    if errors:
        return {}, errors
    return _compileHigh(run, matches)


def showSls(run: StateRun, mods: Any) -> tuple[dict[str, Any], list[str]]:
    """
    Salt's C{state.show_sls}: the high data of C{mods} (in C{run.saltenv},
    C{base} by default).

    @return: C{(high data, errors)}.
    """
    return _compileHigh(run, _slsMatches(run, mods))


def _lowOf(
    run: StateRun, high: dict[str, Any], errors: list[str], exclude: Any = None
) -> tuple[list[dict], list[str]]:
    if errors:
        return [], errors
    return _compileLow(run, applyExclude(high, exclude))


def showLowstate(run: StateRun, exclude: Any = None) -> tuple[list[dict], list[str]]:
    """
    Salt's C{state.show_lowstate}: the highstate's low chunks, in
    execution order.

    @return: C{(chunks, errors)}.
    """
    return _lowOf(run, *showHighstate(run), exclude=exclude)


def showLowSls(run: StateRun, mods: Any, exclude: Any = None) -> tuple[list[dict], list[str]]:
    """
    Salt's C{state.show_low_sls}: the low chunks of C{mods}.

    @return: C{(chunks, errors)}.
    """
    return _lowOf(run, *showSls(run, mods), exclude=exclude)


def runChunks(run: StateRun, chunks: list[dict]) -> dict[str, dict[str, Any]]:
    """
    Run low chunks with a L{StateRunner <salttwist.state.runner.StateRunner>}.

    @return: C{{tag: state return}}.
    """
    from salttwist.state.runner import StateRunner

    runner = StateRunner(
        run.stateFunctions(),
        run.contextFor,
        failhard=bool(run.opts.get("failhard")),
        test=run.test,
        onStateDone=run.onStateDone,
        cancelled=run.cancelled,
        disabledRequisites=run.opts.get("disabled_requisites"),
    )
    run.chunks = chunks
    # Salt's __lowstate__ in __context__: file.directory's clean keeps the
    # files other states of the run manage.
    run.context["__lowstate__"] = chunks
    if run.prefetch is not None:
        run.prefetch(chunks)
    return runner.run(chunks)


def highstate(run: StateRun, exclude: Any = None) -> dict[str, Any] | list[str]:
    """
    Salt's C{state.highstate}: run what the top gives the minion.

    @return: the run's returns, or the errors (nothing ran).
    """
    matches, errors = showTop(run)
    if errors:
        return errors
    if not any(matches.values()):
        return _noStates(NO_TOP_MATCHES)
    if run.loadDynamic is not None:
        run.loadDynamic(run, matches)
    high, errors = _compileHigh(run, matches)
    if errors:
        return errors
    high = applyExclude(high, exclude)
    if not high:
        return _noStates(NO_STATES_FOUND)
    chunks, errors = _compileLow(run, high)
    if errors:
        return errors
    return runChunks(run, chunks)


def sls(run: StateRun, mods: Any, exclude: Any = None) -> dict[str, Any] | list[str]:
    """
    Salt's C{state.sls}: run the SLS C{mods} of C{run.saltenv} (C{base}
    by default).

    @return: the run's returns, or the errors (nothing ran).
    """
    chunks, errors = showLowSls(run, mods, exclude)
    if errors:
        return errors
    return runChunks(run, chunks)


def single(run: StateRun, fun: str, name: str, **kwargs: Any) -> dict[str, Any] | list[str]:
    """
    Salt's C{state.single}: run one state function, C{fun} (C{"file.managed"})
    with C{name} and C{kwargs}, as a chunk of its own.

    @return: its return by tag, or the errors.
    """
    from salttwist.state.runner import singleChunk

    try:
        chunk = singleChunk(str(fun), str(name), run.saltenv or "base", **kwargs)
    except ValueError as e:
        return [str(e)]
    return runChunks(run, [chunk])


def _targets(requisites: Any) -> list[tuple[str, str]]:
    """
    @return: C{(kind, target)} of each item of a chunk's requisite list
        (C{kind} C{""} for a bare id).
    """
    found: list[tuple[str, str]] = []
    if not isinstance(requisites, list):
        requisites = [requisites]
    for item in requisites:
        if isinstance(item, Mapping):
            for kind, target in item.items():
                found.append((str(kind), str(target)))
        elif item is not None:
            found.append(("", str(item)))
    return found


#: The chunk keys naming other chunks that must be looked at first.
_REQUISITES = (
    "require",
    "watch",
    "onchanges",
    "onfail",
    "prereq",
    "listen",
    "require_any",
    "watch_any",
    "onchanges_any",
    "onfail_any",
    "onfail_all",
)


def _matchesTarget(chunk: Mapping[str, Any], kind: str, target: str) -> bool:
    if kind == "sls":
        return fnmatch.fnmatchcase(str(chunk.get("__sls__", "")), target)
    if kind not in ("", "id") and chunk.get("state") != kind:
        return False
    return any(fnmatch.fnmatchcase(str(chunk.get(key, "")), target) for key in ("__id__", "name"))


def withRequisites(chunks: list[dict], wanted: list[dict]) -> list[dict]:
    """
    @return: the chunks of C{wanted} and every chunk they require, watch
        ... (transitively), in C{chunks}' order (what C{state.sls_id} runs:
        Salt's C{call_chunk} runs a state's requisites first).
    """
    keep = {id(chunk) for chunk in wanted}
    pending = list(wanted)
    while pending:
        chunk = pending.pop()
        for key in _REQUISITES:
            for kind, target in _targets(chunk.get(key, [])):
                for other in chunks:
                    if id(other) not in keep and _matchesTarget(other, kind, target):
                        keep.add(id(other))
                        pending.append(other)
    return [chunk for chunk in chunks if id(chunk) in keep]


def slsId(run: StateRun, id_: str, mods: Any) -> dict[str, Any] | list[str]:
    """
    Salt's C{state.sls_id}: run the state(s) with id C{id_} of the SLS
    C{mods} (and what they require).

    @return: the run's returns (C{{}} when no chunk has that id), or the
        errors.
    """
    chunks, errors = showLowSls(run, mods)
    if errors:
        return errors
    wanted = [chunk for chunk in chunks if chunk.get("__id__") == id_]
    if not wanted:
        return {}
    return runChunks(run, withRequisites(chunks, wanted))


def checkResult(returns: Any, chunks: Sequence[Mapping[str, Any]] | None = None) -> bool:
    """
    Salt's C{check_result}: whether a run succeeded (a return dict, not
    empty, no state with C{result: False} but those whose failure C{onfail}
    states handled).

    @param chunks: the run's low chunks, to find the C{onfail} handlers.
    """
    if not isinstance(returns, Mapping) or not returns:
        return False
    for tag, ret in returns.items():
        if not isinstance(ret, Mapping):
            return False
        if ret.get("result") is not False:
            continue
        if not chunks:
            return False
        if not _handledByChunks(tag, ret, returns, chunks):
            return False
    return True


def _handledByChunks(
    tag: str,
    ret: Mapping[str, Any],
    returns: Mapping[str, Any],
    chunks: Sequence[Mapping[str, Any]],
) -> bool:
    """
    Whether the failure of C{tag} is handled by C{onfail} states that ran
    and did not fail (Salt's C{check_onfail_requisites}).
    """
    from salttwist.state.runner import stateTag

    failedState = tag.split("_|-", 1)[0]
    failedId = ret.get("__id__")
    result: bool | None = None
    for chunk in chunks:
        for key in ("onfail", "onfail_any", "onfail_all"):
            if not any(
                kind in ("", failedState) and target == failedId
                for kind, target in _targets(chunk.get(key, []))
            ):
                continue
            handlerRet = returns.get(stateTag(chunk))
            handlerResult = handlerRet.get("result") if isinstance(handlerRet, Mapping) else None
            if handlerResult is False:
                return False
            if handlerResult is True:
                result = True
    return bool(result)
