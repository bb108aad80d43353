# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Pillar compiled in the master's worker processes (a render can be slow:
Jinja loops, ext_pillar commands), so the master's reactor never waits for
one.

Each task receives the master's config (as the runner tasks do): a worker
holds no state of its own between calls, so a replacement worker or a
master whose config changed needs no init step. Results are plain msgpack
values; the pool carries them as L{salttwist.workers.commands.BigBytes}, so
a pillar over AMP's 64 KiB value limit crosses whole.

Nothing here logs pillar values: a worker's log is not the master's, and the
error texts go back to the master, which logs them.
"""

from __future__ import annotations

from typing import Any

from salttwist.workers.tasks import task

#: The task names the master and the runners call (strings: a runner knows
#: no module of the master).
COMPILE_TASK = "salttwist.master.pillartasks.compileMinionPillar"
SHOW_TOP_TASK = "salttwist.master.pillartasks.showMinionTop"


@task(idempotent=True)
def compileMinionPillar(
    opts: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    saltenv: str | None = None,
    pillarenv: str | None = None,
    override: dict[str, Any] | None = None,
) -> list[Any]:
    """
    Compile C{minionId}'s pillar (L{salttwist.pillar.compilePillarWithErrors}).
    Idempotent: compiling twice renders the same files twice.

    @return: C{[pillar, errors]}: the pillar for the minion (with Salt's
        C{_errors} if some source failed) and the full error texts (file,
        line, cause) for the master's log.
    """
    from salttwist.pillar import compilePillarWithErrors

    pillar, errors = compilePillarWithErrors(
        opts, minionId, grains, saltenv=saltenv, pillarenv=pillarenv, override=override
    )
    return [pillar, list(errors)]


@task(idempotent=True)
def showMinionTop(
    opts: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    pillarenv: str | None = None,
) -> list[Any]:
    """
    @return: C{[top, errors]}: the pillar top for C{minionId}, C{{saltenv:
        [sls, ...]}}, and the full texts of the errors met reading it
        (L{salttwist.pillar.showTopWithErrors}).
    """
    from salttwist.pillar import showTopWithErrors

    top, errors = showTopWithErrors(opts, minionId, grains, pillarenv=pillarenv)
    return [top, list(errors)]
