# -*- test-case-name: tests.test_runners_pillar -*-
"""
The C{pillar} runners (Salt's C{salt/runners/pillar.py}): a minion's pillar
and pillar top as the master compiles them, for an admin on the master.

The compile is blocking (files, Jinja, YAML, ext_pillar): it runs in one of
the master's worker processes when it has them (the task the master's
pillar room uses, L{salttwist.master.pillartasks}, named by string: a
runner knows no module of the master), else in a thread
(C{context.master.runBlocking}). The grains are the master's cached grains
of the minion (C{{"fqdn": minion}} when it has none, as Salt's).

What is not stored: a runner's compile does not change the master's pillar
cache (pillar targeting reads the pillar the minion itself was given).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from salttwist.runners import RunnerContext

#: The master's worker tasks (L{salttwist.master.pillartasks}).
_COMPILE_TASK = "salttwist.master.pillartasks.compileMinionPillar"
_SHOW_TOP_TASK = "salttwist.master.pillartasks.showMinionTop"


def _grainsOf(context: RunnerContext, minion: str, extra: dict[str, Any]) -> dict[str, Any]:
    """
    @return: a copy of the master's cached grains of C{minion} (or Salt's
        C{{"fqdn": minion}}), with C{extra} over them.
    """
    cache = getattr(context.master, "grainsCache", None)
    cached = cache.grains.get(minion) if cache is not None else None
    grains = dict(cached) if isinstance(cached, dict) else {"fqdn": minion}
    # As the master's own compile: the id is the minion's.
    grains["id"] = minion
    grains.update(extra)
    return grains


async def _offReactor(context: RunnerContext, taskName: str, local: Any, *args: Any) -> Any:
    """
    Run the task C{taskName} in a worker of the master, or C{local} with
    the same arguments through C{runBlocking} when it has none.

    @raise ValueError: with the task's own message when it raised.
    """
    master = context.master
    workers = getattr(master, "workers", None)
    if workers is None:
        return await master.runBlocking(local, *args)
    from salttwist.workers import TaskError

    try:
        return await workers.run(taskName, *args)
    except TaskError as e:
        raise ValueError(e.message) from e


def _compileHere(
    opts: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    saltenv: str | None,
    pillarenv: str | None,
    override: dict[str, Any] | None,
) -> list[Any]:
    from salttwist.pillar import compilePillarWithErrors

    pillar, errors = compilePillarWithErrors(
        opts, minionId, grains, saltenv=saltenv, pillarenv=pillarenv, override=override
    )
    return [pillar, list(errors)]


def _showTopHere(
    opts: dict[str, Any], minionId: str, grains: dict[str, Any], pillarenv: str | None
) -> list[Any]:
    from salttwist.pillar import showTopWithErrors

    top, errors = showTopWithErrors(opts, minionId, grains, pillarenv=pillarenv)
    return [top, list(errors)]


async def show_pillar(
    context: RunnerContext,
    minion: str = "*",
    saltenv: str | None = None,
    pillarenv: str | None = None,
    **grains: Any,
) -> dict[str, Any]:
    """
    Return the pillar the master compiles for C{minion} now, with its
    cached grains (other keyword arguments are grains set over them). The
    default C{*} gives the pillar every minion gets (what C{'*'} targets in
    the top file). Render errors are in C{_errors}.

    CLI Example: C{salttwist-run pillar.show_pillar web1 pillarenv=dev}
    """
    if not isinstance(minion, str) or not minion:
        raise ValueError(f"minion must be a minion id, not {minion!r}")
    master = context.master
    pillar, _errors = await _offReactor(
        context,
        _COMPILE_TASK,
        _compileHere,
        master.config,
        minion,
        _grainsOf(context, minion, grains),
        saltenv,
        pillarenv,
        None,
    )
    return pillar  # type: ignore[no-any-return]


async def show_top(
    context: RunnerContext,
    minion: str = "*",
    saltenv: str | None = None,
    pillarenv: str | None = None,
) -> Any:
    """
    Return the pillar top for C{minion}: C{{saltenv: [sls, ...]}}, the SLS
    files its pillar is compiled from (C{saltenv} is taken as the
    pillarenv when that is not given, as Salt's); if a top file could not
    be read, the list of errors instead, as Salt's.

    CLI Example: C{salttwist-run pillar.show_top web1}
    """
    if not isinstance(minion, str) or not minion:
        raise ValueError(f"minion must be a minion id, not {minion!r}")
    master = context.master
    top, errors = await _offReactor(
        context,
        _SHOW_TOP_TASK,
        _showTopHere,
        master.config,
        minion,
        _grainsOf(context, minion, {}),
        pillarenv if pillarenv is not None else saltenv,
    )
    if errors:
        # As Salt's: the errors instead of the top.
        return errors  # type: ignore[no-any-return]
    return top  # type: ignore[no-any-return]
