# -*- test-case-name: tests.test_runners -*-
"""
The C{salt} runners (Salt's C{salt/runners/salt.py}): run an execution
module function in the master itself, as Salt's C{salt-run salt.cmd} does.

The function gets the master's config as its C{opts} and the master host's
grains, with the id C{<fqdn>_master} (Salt's default master id). Like on a
minion, a blocking function runs in the master's thread pool, one marked
L{salttwist.modules.onReactor} on the reactor. When the master has worker
processes, a call of a blocking function that does not take the loader
context runs in a worker instead (not retried: it may have side effects);
the others need the master's reactor and stay in the master.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.defer import maybeDeferred
from twisted.logger import Logger

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
    loadFunctions,
)
from salttwist.runners import inWorker

if TYPE_CHECKING:
    from salttwist.runners import RunnerContext

__virtualname__ = "salt"

_log = Logger()


def _masterGrains(opts: dict[str, Any]) -> dict[str, Any]:
    """
    The grains of the master's host (blocking: it reads files and may ask
    DNS), with Salt's master id C{<fqdn>_master} unless C{opts} names one.
    """
    from salttwist.grains import coreGrains, getFqdn

    minionId = opts.get("id") or f"{getFqdn()}_master"
    return coreGrains(minionId, {})


def _blockingWithoutContext(fun: Any, *args: Any, **kwargs: Any) -> bool:
    """
    Whether C{salt.cmd fun ...} may run in a worker process: C{fun} is a
    known execution function that blocks (so needs no reactor) and does not
    take the loader context (whose C{reactor} a worker does not have).
    """
    function = loadFunctions().get(fun) if isinstance(fun, str) else None
    return (
        function is not None
        and not getattr(function, "runsOnReactor", False)
        and not getattr(function, "needsContext", False)
    )


@inWorker(idempotent=False, accepts=_blockingWithoutContext)
async def cmd(context: RunnerContext, fun: str, *args: Any, **kwargs: Any) -> Any:
    """
    Execute C{fun} with the given C{args} and C{kwargs} in the master.
    C{fun} is the name of an execution module function. An unknown function
    returns C{'<fun>' is not available.}, as in Salt; a function that raises
    makes the runner fail with the error (Salt's words, as from a minion).

    CLI Example:

    .. code-block:: bash

        salttwist-run salt.cmd test.ping
        # call functions with arguments and keyword arguments
        salttwist-run salt.cmd test.arg 1 2 3 a=1
    """
    master = context.master
    # Salt's clean_kwargs: the __pub_* and similar keys are not the caller's.
    kwargs = {k: v for k, v in kwargs.items() if not k.startswith("__")}
    kwargs.pop("with_pillar", None)
    functions = loadFunctions()
    function = functions.get(fun) if isinstance(fun, str) else None
    if function is None:
        return f"'{fun}' is not available."
    grains = await master.runBlocking(_masterGrains, master.config)
    opts = dict(master.config, id=grains["id"])
    loaderContext = LoaderContext(opts, grains, master.clock, functions)
    if getattr(function, "needsContext", False):
        args = (loaderContext, *args)
    try:
        if getattr(function, "runsOnReactor", False):
            value = await maybeDeferred(function, *args, **kwargs)
        else:
            value = await master.runBlocking(function, *args, **kwargs)
    except CommandExecutionError as e:
        raise ValueError(f"ERROR: {e}") from e
    except SaltInvocationError as e:
        raise ValueError(f"ERROR executing '{fun}': {e}") from e
    except TypeError as e:
        raise ValueError(f"Passed invalid arguments to {fun}: {e}") from e
    except Exception as e:
        _log.failure("salt.cmd {fun} raised", fun=fun)
        raise ValueError(f"The minion function caused an exception: {type(e).__name__}: {e}") from e
    if isinstance(value, Retcode):
        return value.value
    return value
