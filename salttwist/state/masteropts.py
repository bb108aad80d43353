# -*- test-case-name: tests.test_state_masteropts -*-
"""
The master's state options in a minion's state run (Salt's
C{HighState.__gen_opts} and the master's C{_master_opts}): a minion with a
master (C{file_client: remote}) runs its states with some options of the
master's config, so that one master config sets them for every minion.

  - the master answers C{_master_opts} with L{masterStateOptions};
  - the minion's run merges them into its own options
    (L{mergeMasterOptions}): C{renderer}, C{failhard}, C{state_top},
    C{state_top_saltenv}, C{nodegroups} (a top's C{- match: nodegroup}),
    C{state_auto_order}, C{top_file_merging_strategy}, C{env_order} and
    C{default_top} are the master's; C{state_events} and
    C{state_aggregate} are on when either config turns them on.

A masterless run (C{file_client: local}, C{salttwist-call --local}) or
C{local_state: True} keeps the minion's own options, as in Salt.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

#: The master's options that replace the minion's in its state runs.
REPLACED = (
    "renderer",
    "failhard",
    "state_top",
    "state_top_saltenv",
    "nodegroups",
    "state_auto_order",
    "top_file_merging_strategy",
    "env_order",
    "default_top",
)

#: The options a state run takes on when the minion's or the master's
#: config turns them on.
EITHER = ("state_events", "state_aggregate")

#: The request a minion sends for them.
MASTER_OPTS_CMD = "_master_opts"

#: The most seconds a state run waits for them: past it, the run goes on
#: with the minion's own options.
MASTER_OPTS_TIMEOUT = 60.0


def masterStateOptions(config: Mapping[str, Any]) -> dict[str, Any]:
    """
    @param config: the master's options.
    @return: what the master tells a minion for its state runs
        (C{_master_opts}): the options of L{REPLACED} and L{EITHER} the
        master's config has.
    """
    return {key: config[key] for key in (*REPLACED, *EITHER) if key in config}


def usesMasterOptions(opts: Mapping[str, Any]) -> bool:
    """
    @return: whether a minion's state run takes the master's options: it
        has a master (not C{file_client: local}) and no C{local_state}.
    """
    return opts.get("file_client", "remote") != "local" and not opts.get("local_state")


def mergeMasterOptions(opts: Mapping[str, Any], master: Any) -> dict[str, Any]:
    """
    Salt's C{__gen_opts}: a state run's options from the minion's and the
    master's.

    @param opts: the minion's options.
    @param master: the master's answer (L{masterStateOptions}); anything
        but a mapping (an error) leaves C{opts} as they are.
    @return: a new mapping.
    """
    merged = dict(opts)
    if not isinstance(master, Mapping):
        return merged
    for key in REPLACED:
        if key in master:
            merged[key] = master[key]
    for key in EITHER:
        if key in master or key in merged:
            merged[key] = merged.get(key) or master.get(key) or False
    return merged


def fetchMasterOptions(request: Any, reactor: Any) -> Any:
    """
    Ask the master for its state options, from a state run's thread.

    @param request: sends one session request (a minion's
        C{RemoteFileClient.request}), C{payload -> Deferred[dict]}.
    @return: the master's options, or L{None} if they could not be had
        (a master that does not know the request: the run keeps the
        minion's options; logged).
    """
    from twisted.internet.defer import maybeDeferred
    from twisted.internet.threads import blockingCallFromThread

    from salttwist.modules._process import offReactorThread

    payload = {"cmd": MASTER_OPTS_CMD}

    def ask() -> Any:
        return maybeDeferred(request, payload).addTimeout(MASTER_OPTS_TIMEOUT, reactor)

    try:
        if offReactorThread(reactor):
            reply = blockingCallFromThread(reactor, ask)
        else:
            results: list[Any] = []
            maybeDeferred(request, payload).addBoth(results.append)
            if not results:
                log.warning("The master's state options cannot be waited for on the reactor")
                return None
            reply = results[0]
            if hasattr(reply, "raiseException"):
                reply.raiseException()
    except Exception as e:
        log.warning("The master's state options were not had, the minion's are used: %s", e)
        return None
    ret = reply.get("ret") if isinstance(reply, Mapping) else None
    return ret if isinstance(ret, Mapping) else None


def withMasterOptions(opts: Mapping[str, Any], fileClient: Any, reactor: Any) -> dict[str, Any]:
    """
    A minion state run's options: its own merged with its master's
    (L{mergeMasterOptions}) when it has one (L{usesMasterOptions}) and
    its file client talks to it (a C{request}).
    """
    request = getattr(fileClient, "request", None)
    if not usesMasterOptions(opts) or request is None or not callable(request):
        return dict(opts)
    return mergeMasterOptions(opts, fetchMasterOptions(request, reactor))
