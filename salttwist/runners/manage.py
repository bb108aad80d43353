# -*- test-case-name: tests.test_runners_manage -*-
"""
The C{manage} runners (Salt's C{salt/runners/manage.py}): which minions are
up, which are down, and removing the keys of the ones that are gone.

The returns have Salt's shapes: C{manage.status} gives
C{{"up": [...], "down": [...]}}, the others a sorted list of ids (or, with
C{show_ip=True}, C{{id: address}}).

Difference from Salt: C{manage.status}, C{manage.up} and C{manage.down} do
not ping the minions. A minion is up when it holds a live subscription to
the master's pub channel, which is exactly the set of minions a job can
reach now; the master drops a subscription as soon as its connection closes
(and within C{publish_session} of a host vanishing without a word, when TCP
gives up). Their C{timeout} and C{gather_job_timeout} arguments are therefore
taken and ignored. C{manage.present} and friends use the same knowledge;
Salt's come from its minion data cache and the connections to the publish
port, which is the same idea.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from salttwist.pki.keystore import ACCEPTED, STATES
from salttwist.targeting import TargetError, checkMinions
from salttwist.workers.stats import poolStats

if TYPE_CHECKING:
    from salttwist.runners import RunnerContext


def _subset(subset: object) -> set[str] | None:
    """
    Read a C{subset} argument: a list of ids, or ids separated by commas.
    """
    if subset is None or subset == "" or subset == []:
        return None
    if isinstance(subset, str):
        return {part.strip() for part in subset.split(",") if part.strip()}
    if isinstance(subset, list) and all(isinstance(part, str) for part in subset):
        return set(subset)
    raise ValueError(f"subset must be a list of minion ids, not {subset!r}")


async def _accepted(context: RunnerContext) -> list[str]:
    """
    @return: the ids of the accepted keys (read off the reactor thread).
    """
    master = context.master
    return await master.runBlocking(master.keyStore.listKeys, ACCEPTED)


async def _targeted(context: RunnerContext, tgt: Any, tgtType: str) -> list[str]:
    """
    @return: the accepted minions C{tgt} targets, as the master works out
        the minions a job expects (cached grains and pillar for grain and
        pillar targets, the master's nodegroups).
    @raise ValueError: if the target is invalid.
    """
    master = context.master
    # The grains are copied here, on the reactor thread that changes them.
    grains = dict(master.grainsCache.grains)
    pillarCache = getattr(master, "pillarCache", None)
    pillars = pillarCache.byId() if pillarCache is not None else {}
    nodegroups = master.config.get("nodegroups") or {}

    def select() -> list[str]:
        keys = master.keyStore.listKeys(ACCEPTED)
        return checkMinions(
            keys, tgt, tgtType, grainsById=grains, nodegroups=nodegroups, pillarById=pillars
        )

    try:
        return await master.runBlocking(select)
    except TargetError as e:
        raise ValueError(f"invalid target: {e}") from e


async def status(
    context: RunnerContext,
    output: bool = True,
    tgt: Any = "*",
    tgt_type: str = "glob",
    timeout: float | None = None,
    gather_job_timeout: float | None = None,
) -> dict[str, list[str]]:
    """
    Print the status of all known minions: the accepted minions the target
    matches, split into those connected to the master (C{up}) and the others
    (C{down}). No job is sent: C{timeout} and C{gather_job_timeout} are
    taken for Salt's sake and not used.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.status
        salttwist-run manage.status tgt="webservers" tgt_type="nodegroup"
    """
    targeted = await _targeted(context, tgt, tgt_type)
    connected = context.master.subscribers
    return {
        "up": [m for m in targeted if m in connected],
        "down": [m for m in targeted if m not in connected],
    }


async def up(
    context: RunnerContext,
    tgt: Any = "*",
    tgt_type: str = "glob",
    timeout: float | None = None,
    gather_job_timeout: float | None = None,
) -> list[str]:
    """
    Print a list of all of the minions that are up (connected to the
    master).

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.up
        salttwist-run manage.up tgt="webservers" tgt_type="nodegroup"
    """
    return (await status(context, False, tgt, tgt_type, timeout, gather_job_timeout))["up"]


async def down(
    context: RunnerContext,
    removekeys: bool = False,
    tgt: Any = "*",
    tgt_type: str = "glob",
    timeout: float | None = None,
    gather_job_timeout: float | None = None,
) -> list[str]:
    """
    Print a list of all the down or unresponsive minions. Optionally remove
    the keys of down minions (in every key state, as C{salttwist-key -d}
    does), which the master acts on at once: the publication key rotates and
    their cached grains are dropped. A minion that connected meanwhile keeps
    its key.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.down
        salttwist-run manage.down removekeys=True
        salttwist-run manage.down tgt="webservers" tgt_type="nodegroup"
    """
    gone = (await status(context, False, tgt, tgt_type, timeout, gather_job_timeout))["down"]
    if removekeys:
        master = context.master
        for minionId in gone:
            if minionId in master.subscribers:
                continue
            deleted = await master.runBlocking(_deleteKeys, master.keyStore, minionId)
            if deleted:
                master.bus.fire("salt/key", {"act": "delete", "id": minionId})
    return gone


def _deleteKeys(keyStore: Any, minionId: str) -> bool:
    """
    Delete every key of C{minionId} (blocking).

    @return: whether one was deleted.
    """
    deleted = False
    for state in STATES:
        if keyStore.deleteKey(state, minionId):
            deleted = True
    return deleted


def _peerHost(protocol: Any) -> str | None:
    """
    @return: the address a minion's pub connection comes from.
    """
    try:
        return protocol.transport.getPeer().host
    except AttributeError:
        return None


async def list_state(
    context: RunnerContext, subset: Any = None, show_ip: bool = False
) -> list[str] | dict[str, str | None]:
    """
    Print a list of all minions that are up according to the master's
    presence knowledge (no commands will be sent to minions).

    subset : None
        A list of minion ids (or ids separated by commas) to restrict the
        answer to.

    show_ip : False
        Also show the IP address each minion is connecting from.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.list_state
        salttwist-run manage.list_state show_ip=True
    """
    wanted = _subset(subset)
    connected = {
        minionId: protocol
        for minionId, protocol in context.master.subscribers.items()
        if wanted is None or minionId in wanted
    }
    if show_ip:
        return {minionId: _peerHost(connected[minionId]) for minionId in sorted(connected)}
    return sorted(connected)


async def list_not_state(
    context: RunnerContext, subset: Any = None, show_ip: bool = False
) -> list[str]:
    """
    Print a list of all accepted minions that are NOT up according to the
    master's presence knowledge (no commands will be sent).

    subset : None
        A list of minion ids (or ids separated by commas) to restrict the
        answer to.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.list_not_state
    """
    wanted = _subset(subset)
    connected = context.master.subscribers
    return sorted(
        minionId
        for minionId in await _accepted(context)
        if minionId not in connected and (wanted is None or minionId in wanted)
    )


async def present(
    context: RunnerContext, subset: Any = None, show_ip: bool = False
) -> list[str] | dict[str, str | None]:
    """
    Print a list of all minions that are up (connected to the master); the
    same as C{manage.list_state}.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.present
    """
    return await list_state(context, subset, show_ip)


async def not_present(
    context: RunnerContext, subset: Any = None, show_ip: bool = False
) -> list[str]:
    """
    Print a list of all accepted minions that are NOT up; the same as
    C{manage.list_not_state}.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.not_present
    """
    return await list_not_state(context, subset, show_ip)


async def joined(
    context: RunnerContext, subset: Any = None, show_ip: bool = False
) -> list[str] | dict[str, str | None]:
    """
    Print a list of all minions that are up (connected to the master); the
    same as C{manage.list_state}.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.joined
    """
    return await list_state(context, subset, show_ip)


async def not_joined(
    context: RunnerContext, subset: Any = None, show_ip: bool = False
) -> list[str]:
    """
    Print a list of all accepted minions that are NOT up; the same as
    C{manage.list_not_state}.

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.not_joined
    """
    return await list_not_state(context, subset, show_ip)


async def workers(context: RunnerContext) -> dict[str, Any]:
    """
    Print the figures of the master's worker processes (no Salt
    equivalent; the same figures as the C{workers} of a
    C{salt/master/stats} event): C{running} (whether the pool checks
    authentication; until it is up, or if it cannot start, authentication
    runs in threads and every figure is 0), C{size} (configured), C{busy},
    C{idle}, C{queued} (requests waiting for a worker), C{restarts}
    (replacement workers spawned), C{completed} and C{failed} (tasks).

    CLI Example:

    .. code-block:: bash

        salttwist-run manage.workers
    """
    return poolStats(context.master.workers)
