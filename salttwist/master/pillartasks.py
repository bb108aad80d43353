# -*- test-case-name: tests.test_master_pillarserving -*-
"""
Pillar compiled in the master's worker processes (a render can be slow:
Jinja loops, ext_pillar commands), so the master's reactor never waits for
one.

Each task receives the master's config (as the runner tasks do): a worker
holds no state of its own between calls, so a replacement worker or a
master whose config changed needs no init step. Results are plain msgpack
values (the pillars of L{compileManyPillars} their own msgpack bytes); the
pool carries them as L{salttwist.workers.commands.BigBytes}, so a pillar
over AMP's 64 KiB value limit crosses whole.

Nothing here logs pillar values: a worker's log is not the master's, and the
error texts go back to the master, which logs them.
"""

from __future__ import annotations

from typing import Any

from salttwist.workers.batch import runEach
from salttwist.workers.tasks import task

#: The task names the master and the runners call (strings: a runner knows
#: no module of the master).
COMPILE_TASK = "salttwist.master.pillartasks.compileMinionPillar"
COMPILE_MANY_TASK = "salttwist.master.pillartasks.compileManyPillars"
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
def compileManyPillars(items: list[list[Any]], opts: dict[str, Any]) -> list[dict[str, Any]]:
    """
    Compile several minions' pillars, each item C{[minionId, grains,
    saltenv, pillarenv, override]}: what a
    L{salttwist.workers.batch.TaskBatcher} sends when requests wait for a
    worker, so they cost one task call (and the config crosses once).

    Each pillar is encoded here (msgpack, L{salttwist.serial.dumps}), so a
    pillar that cannot be sent fails its own minion only, not the whole
    batch; and the master keeps and sends those bytes as they are, never
    decoding the pillar (L{salttwist.master.pillarserving}).

    @return: one answer per item (L{salttwist.workers.batch.runEach}):
        C{{"result": [pillar's msgpack bytes, errors]}}, or that item's
        error.
    """
    from salttwist import serial

    def one(
        minionId: str,
        grains: dict[str, Any],
        saltenv: str | None,
        pillarenv: str | None,
        override: dict[str, Any] | None,
    ) -> list[Any]:
        pillar, errors = compileMinionPillar(opts, minionId, grains, saltenv, pillarenv, override)
        return [serial.dumps(pillar), errors]

    return runEach(one, items)


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
