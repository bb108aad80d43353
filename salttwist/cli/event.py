# -*- test-case-name: tests.test_cli_event -*-
"""
C{salttwist-event}: watch the master's event bus, as Salt's C{eventlisten.py}
and C{salt-run state.event} do, or with C{--node minion} the minion's own bus
(C{minion_event_<hash>_pub.ipc} in the minion config's C{sock_dir}; C{-c}
then names the minion's config directory).

Each event prints as C{salt-run state.event} prints it: the tag, a tab and
the data as JSON on one line, or with C{--pretty} indented by 4 with sorted
keys (Salt's C{pretty=True}). C{--tag} chooses the tags (repeatable): a
value holding C{*}, C{?} or C{[} is a glob matching the whole tag (C{*}
also matches C{/}), any other a prefix. The master sends the command only
the events it chose. C{--count N} exits after N events; otherwise the
command runs until Ctrl-C.

Exit codes: 0 after C{--count} events or Ctrl-C; 2 when the daemon is not
running, its event bus cannot be reached, or it closed the connection (and
for a usage error).

The streaming itself (L{followEvents}) and the format (L{formatEvent}) are
shared with C{salttwist-run state.event} (L{salttwist.cli.run}).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from salttwist.cli import addCommonArguments
from salttwist.cli.reactor import runWithReactor
from salttwist.config import ConfigError, loadMasterConfig, loadMinionConfig
from salttwist.events import jsonPlain

EX_OK, EX_UNAVAILABLE = 0, 2
#: Characters that make a C{--tag} a glob rather than a prefix.
GLOB_CHARACTERS = frozenset("*?[")


def writeOut(text: str) -> None:
    """
    Write C{text} to standard output at once (a pipe must see each event as
    it comes).
    """
    sys.stdout.write(text)
    sys.stdout.flush()


def formatEvent(tag: str, data: dict[str, Any], pretty: bool) -> str:
    """
    One event as Salt's C{state.event} prints it: the tag, a tab and the
    data as JSON, on one line, or indented by 4 with sorted keys when
    C{pretty}.
    """
    text = json.dumps(
        jsonPlain(data), sort_keys=bool(pretty), indent=4 if pretty else None, default=str
    )
    return f"{tag}\t{text}\n"


def splitTags(tags: list[str]) -> tuple[list[str], list[str]]:
    """
    Sort C{--tag} values into prefixes and globs.

    @return: C{(prefixes, globs)}; both empty (every event) when C{tags} is.
    """
    prefixes = [tag for tag in tags if not GLOB_CHARACTERS.intersection(tag)]
    globs = [tag for tag in tags if GLOB_CHARACTERS.intersection(tag)]
    return prefixes, globs


async def followEvents(
    reactor: Any,
    config: dict[str, Any],
    sockPath: str,
    prefixes: list[str],
    globs: list[str],
    count: int | None,
    pretty: bool,
    quiet: bool = False,
    accept: Callable[[str], bool] | None = None,
    daemon: str = "master",
) -> int:
    """
    Subscribe to the master's bus at C{sockPath} and print each event the
    master sends (the tags starting with one of C{prefixes} or matching one
    of C{globs}) with L{formatEvent}.

    @param count: end after this many events (at least 1); L{None}: never.
    @param quiet: count the events without printing them.
    @param accept: a further test of each tag, in the command (for what the
        master cannot check: C{state.event}'s regular expressions); events
        it refuses are neither printed nor counted.
    @param daemon: whose bus it is (C{"master"} or C{"minion"}), for the
        error messages.
    @return: the exit code, once C{count} events came or the master closed
        the bus (Ctrl-C stops the reactor instead, and this never returns).
    """
    from twisted.internet.defer import Deferred

    from salttwist.client.local import CONNECT_TIMEOUT
    from salttwist.events.client import listenEvents

    ended: Deferred[int] = Deferred()
    remaining = count

    def onEvent(tag: str, data: dict[str, Any]) -> None:
        nonlocal remaining
        if ended.called or (accept is not None and not accept(tag)):
            return
        if not quiet:
            writeOut(formatEvent(tag, data, pretty))
        if remaining is not None:
            remaining -= 1
            if remaining <= 0:
                ended.callback(EX_OK)

    try:
        listener = await listenEvents(
            reactor,
            sockPath,
            prefixes,
            onEvent,
            timeout=CONNECT_TIMEOUT,
            maxFrame=config["max_frame_bytes"],
            globs=globs or None,
        )
    except Exception as e:
        sys.stderr.write(
            f"Error: the salttwist {daemon} is not running, or this user cannot reach its "
            f"event bus at {sockPath} ({e})\n"
        )
        return EX_UNAVAILABLE

    stopping = False

    def shuttingDown() -> None:
        # Ctrl-C stops the reactor, which then closes the connection: that
        # is the end the user asked for, not the master going away.
        nonlocal stopping
        stopping = True

    def lost(_: object) -> None:
        if not ended.called and not stopping:
            sys.stderr.write(f"Error: the {daemon} closed the event bus connection\n")
            ended.callback(EX_UNAVAILABLE)

    # The command is the whole process, so the trigger is never removed.
    reactor.addSystemEventTrigger("before", "shutdown", shuttingDown)
    listener.lost.addCallback(lost)
    try:
        return await ended
    finally:
        listener.transport.loseConnection()


def _positive(text: str) -> int:
    """
    Read C{--count}: a whole number of at least 1.
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def buildParser() -> argparse.ArgumentParser:
    """
    The command line, with the flags of Salt's C{eventlisten.py} where they
    apply.
    """
    parser = argparse.ArgumentParser(
        prog="salttwist-event",
        description=(
            "Print the master's events as they happen: the tag, a tab and the data as JSON, "
            "one event per line."
        ),
    )
    addCommonArguments(parser, "master or, with --node minion, minion")
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="GLOB_OR_PREFIX",
        help=(
            "Only the events whose tag matches this glob (if it holds *, ? or [) or starts "
            "with this prefix; repeat for more (default: every event)."
        ),
    )
    parser.add_argument(
        "--count",
        type=_positive,
        default=None,
        metavar="N",
        help="Exit after N events (default: run until Ctrl-C).",
    )
    parser.add_argument(
        "--pretty",
        action="store_true",
        help="Indent the JSON and sort its keys, as Salt's pretty=True.",
    )
    parser.add_argument(
        "-n",
        "--node",
        choices=["master", "minion"],
        default="master",
        help="Whose bus to watch: the master's or this machine's minion's (default: master).",
    )
    parser.add_argument(
        "-s",
        "--sock-dir",
        default=None,
        help="The daemon's sock_dir (default: the config's).",
    )
    return parser


async def streamEvents(reactor: Any, options: argparse.Namespace, config: dict[str, Any]) -> int:
    """
    Run C{salttwist-event} as C{options} ask.

    @return: the exit code (see the module's docstring).
    """
    from salttwist.events import EVENT_PUB_SOCKET, minionEventSockets

    prefixes, globs = splitTags(options.tag)
    sockDir = options.sock_dir or config["sock_dir"]
    if getattr(options, "node", "master") == "minion":
        from salttwist.pki.ids import configuredMinionId

        sockPath = minionEventSockets(sockDir, configuredMinionId(config))[0]
    else:
        sockPath = os.path.join(sockDir, EVENT_PUB_SOCKET)
    return await followEvents(
        reactor,
        config,
        sockPath,
        prefixes,
        globs,
        options.count,
        options.pretty,
        daemon=getattr(options, "node", "master"),
    )


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-event}.
    """
    options = buildParser().parse_args(argv)
    try:
        load = loadMinionConfig if options.node == "minion" else loadMasterConfig
        config = load(options.config_dir)
    except ConfigError as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    # Stopped before the command finished: Ctrl-C (or SIGTERM), which is how
    # the command is meant to end when no --count is given.
    exitCode, failed = runWithReactor(lambda reactor: streamEvents(reactor, options, config), EX_OK)
    return failed if failed is not None else exitCode


if __name__ == "__main__":
    sys.exit(main())
