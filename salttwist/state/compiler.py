# -*- test-case-name: tests.test_state_compile -*-
"""
The state compiler: SLS files to high data (L{compileHigh}, Salt's
C{state.show_sls} / C{state.show_highstate} after C{extend}, C{_in}
requisites and C{exclude} are applied), and high data to ordered low
chunks (L{compileLow}, Salt's C{state.show_lowstate}).

  - rendering and includes: L{salttwist.state.sls};
  - declarations, C{extend:}, C{exclude:}, checks: L{salttwist.state.high};
  - C{require_in} and the other C{_in} forms, C{use}: L{salttwist.state.reqin};
  - chunks, requisite checks and order: L{salttwist.state.low}.

Errors never raise: they are returned as strings (Salt's words, naming the
SLS, the saltenv and, when known, the file and the line), and a caller
runs nothing when there are any.

Everything here blocks (file server, rendering): run it in a thread or a
worker process, never on the reactor.

Ground: imports no wing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from salttwist.state.high import applyExclude, reconcileExtend, verifyHigh
from salttwist.state.low import highToChunks, orderChunks, stateTag
from salttwist.state.reqin import requisiteIn
from salttwist.state.sls import HighBuilder, IStateFiles, findSls, listSls

log = logging.getLogger(__name__)

__all__ = [
    "HighData",
    "IStateFiles",
    "compileHigh",
    "compileHighData",
    "compileLow",
    "findSls",
    "listSls",
    "renderHigh",
    "resolveHigh",
    "stateTag",
]


def _disabled(opts: Mapping[str, Any]) -> list[str]:
    disabled = opts.get("disabled_requisites") or []
    if not isinstance(disabled, (list, tuple)):
        disabled = [disabled]
    return [str(kind) for kind in disabled]


def renderHigh(
    files: IStateFiles,
    matches: Mapping[str, Sequence[str]],
    variables: Mapping[str, Any],
    opts: Mapping[str, Any],
    *,
    builder: HighBuilder | None = None,
) -> tuple[dict, list[str], Callable[[Any, Any], str]]:
    """
    Render the SLS files of C{matches} and their includes, as Salt's
    C{render_highstate} (what Salt's C{state.show_sls} returns: C{extend}
    and C{_in} requisites not applied yet, C{__extend__} and
    C{__exclude__} kept).

    @param builder: the L{HighBuilder} to use (a new one by default).
    @return: C{(high, errors, where)}: C{where(sls, saltenv)} names the
        file of an SLS rendered, for messages.
    """
    if builder is None:
        builder = HighBuilder(files, variables, opts)
    try:
        high, errors = builder.render(matches)
    except Exception as e:  # a bug of ours: still an answer
        log.debug("state compile failed", exc_info=True)
        return {}, [f"State compile failed: {type(e).__name__}: {e}"], builder.where
    return high, errors, builder.where


def resolveHigh(
    high: dict,
    opts: Mapping[str, Any],
    where: Callable[[Any, Any], str] | None = None,
) -> tuple[dict, list[str]]:
    """
    Salt's C{call_high} before compiling: C{extend} applied, the whole
    checked (C{verify_high}), the C{_in} requisites and C{use} applied,
    C{exclude} applied. Changes C{high} in place.

    @return: C{(high, errors)}.
    """
    errors: list[str] = []
    try:
        high, extendErrors = reconcileExtend(high)
        errors.extend(extendErrors)
        errors.extend(verifyHigh(high, where) if where else verifyHigh(high))
        if errors:
            return high, errors
        high, inErrors = requisiteIn(high, _disabled(opts))
        errors.extend(inErrors)
        high = applyExclude(high)
    except Exception as e:
        log.debug("state compile failed", exc_info=True)
        errors.append(f"State compile failed: {type(e).__name__}: {e}")
    return high, errors


def compileHigh(
    files: IStateFiles,
    matches: Mapping[str, Sequence[str]],
    variables: Mapping[str, Any],
    opts: Mapping[str, Any],
    *,
    exclude: Sequence[Any] | str | None = None,
) -> tuple[HighData, list[str]]:
    """
    Compile the SLS files C{matches} names into high data.

    Blocking: run it in a thread.

    @param files: the state tree (L{IStateFiles}).
    @param matches: C{{saltenv: [sls, ...]}} (L{salttwist.state.top.showTop}'s
        answer for a highstate; C{{saltenv: mods}} for C{state.sls});
        globs allowed.
    @param variables: the render variables: C{salt} (the execution
        functions by name), C{grains}, C{pillar}, C{opts}; per file
        C{saltenv}, C{sls}, C{slspath}, C{tpldir} ... are added.
    @param opts: C{renderer}, C{state_auto_order}, C{disabled_requisites}.
    @param exclude: more C{exclude:} entries, as C{state.sls exclude=...}
        gives them (SLS names, C{{"sls": x}}, C{{"id": y}}; a string is
        split on commas).
    @return: C{(high, errors)}: a L{HighData}, C{{id: {"__sls__",
        "__env__", module: [args..., fun, {"order": n}]}}} with C{extend},
        C{exclude} and the C{_in} requisites applied; errors as strings
        (run nothing if any).
    """
    builder = HighBuilder(files, variables, opts)
    high, errors, where = renderHigh(files, matches, variables, opts, builder=builder)
    if errors:
        return _withoutInternals(high, builder.paths), errors
    if exclude:
        if isinstance(exclude, str):
            exclude = [part.strip() for part in exclude.split(",") if part.strip()]
        high.setdefault("__exclude__", []).extend(exclude)
    high, moreErrors = resolveHigh(high, opts, where)
    return _withoutInternals(high, builder.paths), errors + moreErrors


class HighData(dict):
    """
    High data as L{compileHigh} returns it: a plain mapping of ids, which
    also knows the files its SLS came from (plain data: it pickles and
    serialises as the mapping it is).

    @ivar paths: C{{(saltenv, sls): file on disk}}; L{compileLow} names
        these files in its errors. (A copy of the mapping loses them: pass
        C{where=high.where} to L{compileLow}.)
    """

    paths: dict[tuple[str, str], str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.paths = {}

    def where(self, sls: Any, saltenv: Any) -> str:
        """
        @return: C{" (file <path>)"} for an SLS of this compile, else C{""}.
        """
        path = self.paths.get((str(saltenv), str(sls)))
        return f" (file {path})" if path else ""


def _withoutInternals(high: dict, paths: Mapping[tuple[str, str], str]) -> HighData:
    result = HighData(
        (key, value) for key, value in high.items() if key not in ("__extend__", "__exclude__")
    )
    result.paths = dict(paths)
    return result


def compileLow(
    high: Mapping[str, Any],
    opts: Mapping[str, Any],
    hasModWatch: Callable[[str], bool] | None = None,
    *,
    where: Callable[[Any, Any], str] | None = None,
) -> tuple[list[dict], list[str]]:
    """
    Compile high data (as L{compileHigh} gives it) into low chunks in
    execution order (Salt's C{compile_high_data}).

    @param opts: C{disabled_requisites}.
    @param hasModWatch: see L{salttwist.state.low.orderChunks}.
    @param where: names the file of an SLS in errors; by default the
        C{where} of a L{HighData}.
    @return: C{(chunks, errors)}: errors name unknown requisite targets
        and requisite cycles (with the chain); no chunks when a cycle is
        found.
    """
    try:
        chunks = highToChunks(high)
        return orderChunks(chunks, opts, hasModWatch, where or getattr(high, "where", None))
    except Exception as e:
        log.debug("state compile failed", exc_info=True)
        return [], [f"State compile failed: {type(e).__name__}: {e}"]


def compileHighData(
    files: IStateFiles,
    matches: Mapping[str, Sequence[str]],
    variables: Mapping[str, Any],
    opts: Mapping[str, Any],
    hasModWatch: Callable[[str], bool] | None = None,
) -> tuple[dict, list[dict], list[str]]:
    """
    L{compileHigh} then L{compileLow}.

    @return: C{(high, chunks, errors)}; no chunks when there are errors.
    """
    high, errors = compileHigh(files, matches, variables, opts)
    if errors:
        return high, [], errors
    chunks, errors = compileLow(high, opts, hasModWatch)
    if errors:
        return high, [], errors
    return high, chunks, []
