# -*- test-case-name: tests.test_cli_run,tests.test_cli_state_output -*-
"""
C{salttwist-run}: Salt's C{salt-run}. Run a runner function in the local
master and print what it returns (the return itself, not keyed by minion id).

C{state.event} is the exception: like Salt's, it runs in the command itself.
It subscribes to the master's event bus and prints each event whose tag
matches C{tagmatch} (a glob or a regular expression) as
C{tag<TAB>{json}}, one per line, or pretty-printed with C{pretty=True},
until C{count} events matched or Ctrl-C.

A runner may name the outputter of its return as Salt's do, returning
C{{"data": ..., "outputter": "highstate"}} (C{state.orchestrate},
C{jobs.lookup_jid} of a state run): the data is printed with it unless
C{--out} is given; the C{state.orchestrate} runners print with
C{highstate} in any case. C{--state-output} and C{--state-verbose} shape
that outputter.

Exit codes: 0 when the runner returned (or C{state.event} ended by its
C{count} or by Ctrl-C), or the C{retcode} its return carries (Salt's
C{state.orchestrate}: 1 when a state failed); 1 when the runner failed or
was refused (an unknown runner, invalid arguments, an error in the runner)
or did not answer within C{-t} seconds; 2 when the master is not running or
cannot be reached, or closed the event bus under C{state.event}.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import sys
from typing import Any

from salttwist.args import parseArgs
from salttwist.cli import addCommonArguments
from salttwist.cli.event import followEvents, formatEvent  # noqa: F401 (formatEvent re-exported)
from salttwist.cli.output import OUTPUTTERS, OutChoice, chosenOutputter, render
from salttwist.cli.reactor import runWithReactor
from salttwist.cli.salt import parseCliArgs
from salttwist.cli.stateargs import addStateOutputArguments

EX_OK, EX_GENERIC, EX_UNAVAILABLE = 0, 1, 2
EVENT_FUNCTION = "state.event"
#: Characters after which a glob or regular expression stops being a literal
#: tag prefix.
_PATTERN_CHARACTERS = frozenset("*?[]{}()|.^$+\\")
#: Regular-expression quantifiers, which make the character before them
#: optional.
_QUANTIFIERS = frozenset("*?+{")


def buildParser() -> argparse.ArgumentParser:
    """
    The command line, with Salt's flags.
    """
    parser = argparse.ArgumentParser(
        prog="salttwist-run",
        usage="salttwist-run [options] <function> [arguments]",
        description=(
            "Run a runner function in the master and print its return. "
            "state.event streams the master's events instead."
        ),
    )
    addCommonArguments(parser, "master")
    parser.add_argument(
        "-t",
        "--timeout",
        type=float,
        default=None,
        help="Seconds to wait for the runner's return (default: as long as it takes).",
    )
    parser.add_argument(
        "--out",
        choices=OUTPUTTERS,
        default="nested",
        action=OutChoice,
        help="Outputter (default: the one the runner names, highstate for "
        "state.orchestrate, else nested).",
    )
    parser.set_defaults(out_given=False)
    parser.add_argument(
        "--out-indent",
        type=int,
        default=None,
        help="Indent for json/yaml output; negative for one line.",
    )
    parser.add_argument("--no-color", action="store_true", help="Never colour the output.")
    parser.add_argument(
        "--force-color",
        action="store_true",
        help="Colour the output even when it is not a terminal.",
    )
    addStateOutputArguments(parser, outputDiff=False)
    parser.add_argument("function")
    # A default makes argparse treat the arguments as optional: without it a
    # missing function is reported as "function, arg".
    parser.add_argument("arg", nargs="*", default=[])
    return parser


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def runRunner(reactor: Any, options: argparse.Namespace, config: dict[str, Any]) -> int:
    """
    Call the runner in the master and print its return.

    @return: the exit code.
    """
    from twisted.internet.defer import Deferred, TimeoutError

    from salttwist.client.local import LocalClient, MasterUnavailable
    from salttwist.transport.reqclient import RequestError

    client = LocalClient(config, reactor)
    call = Deferred.fromCoroutine(client.runner(options.function, parseCliArgs(options.arg)))
    if options.timeout is not None:
        call.addTimeout(options.timeout, reactor)
    try:
        reply = await call
    except MasterUnavailable as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    except RequestError as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_GENERIC
    except TimeoutError:
        sys.stderr.write(
            f"Error: {options.function} did not return within {options.timeout:g} seconds\n"
        )
        return EX_GENERIC
    except ConnectionError as e:
        sys.stderr.write(f"Error: lost the connection to the master ({e})\n")
        return EX_UNAVAILABLE
    data, out = runnerOutput(options, reply.get("return"))
    color = options.force_color or (
        not options.no_color and out in ("nested", "highstate") and sys.stdout.isatty()
    )
    stateOptions = None
    if out == "highstate":
        from salttwist.cli.highstate import stateOptionsFrom

        stateOptions = stateOptionsFrom(options, config, parseCliArgs(options.arg))
    _write(render(out, data, color, options.out_indent, stateOptions=stateOptions))
    return runnerRetcode(reply.get("return"))


def runnerOutput(options: argparse.Namespace, ret: Any) -> tuple[Any, str]:
    """
    What to print of a runner's return, and with which outputter, as
    Salt's runner client decides: a return of exactly C{data} and
    C{outputter} is its data, printed with that outputter; any other
    return is printed whole, with the outputter it names if any, else
    L{chosenOutputter}'s (C{highstate} for C{state.orchestrate}). C{--out}
    wins over the runner's choice.

    @param options: the parsed command line.
    @param ret: the runner's return.
    @return: the data to print, and the outputter.
    """
    named = None
    if isinstance(ret, dict) and isinstance(ret.get("outputter"), str):
        named = ret["outputter"]
        if set(ret) == {"data", "outputter"}:
            ret = ret["data"]
    out = chosenOutputter(options, options.function)
    if not options.out_given and named in OUTPUTTERS:
        out = named
    return ret, out


def runnerRetcode(ret: Any) -> int:
    """
    The exit code of a runner that returned, as Salt's C{salt-run}: the
    C{retcode} its return carries (at its top, or in its C{data}), else 0.

    @param ret: the runner's return.
    @return: the exit code.
    """
    if isinstance(ret, dict):
        for holder in (ret, ret.get("data")):
            if isinstance(holder, dict) and "retcode" in holder:
                code = holder["retcode"]
                if isinstance(code, int) and not isinstance(code, bool):
                    return code
                return EX_GENERIC if code else EX_OK
    return EX_OK


# state.event -----------------------------------------------------------------


def _eventArguments(
    tagmatch: Any = "*",
    count: Any = -1,
    quiet: Any = False,
    sock_dir: Any = None,
    pretty: Any = False,
    node: Any = "master",
) -> dict[str, Any]:
    """
    The arguments of Salt's C{state.event} runner, by name.
    """
    return {
        "tagmatch": tagmatch,
        "count": count,
        "quiet": quiet,
        "sock_dir": sock_dir,
        "pretty": pretty,
        "node": node,
    }


def tagMatches(tag: str, tagmatch: str) -> bool:
    """
    Salt's C{expr_match}: whether C{tag} matches C{tagmatch} as a glob, or
    else as a regular expression matching the whole tag.
    """
    if fnmatch.fnmatchcase(tag, tagmatch):
        return True
    try:
        return re.match(rf"\A(?:{tagmatch})\Z", tag) is not None
    except re.error:
        return False


def tagPrefix(tagmatch: str) -> str:
    """
    The literal start every tag matching C{tagmatch} has, whether it is read
    as a glob or as a regular expression, so the bus sends only those
    events. Empty when there is none (an alternation anywhere, say).
    """
    if "|" in tagmatch:
        return ""
    for index, character in enumerate(tagmatch):
        if character in _PATTERN_CHARACTERS:
            # A quantifier makes the character before it optional.
            return tagmatch[: index - 1 if character in _QUANTIFIERS and index else index]
    return tagmatch


async def streamEvents(reactor: Any, options: argparse.Namespace, config: dict[str, Any]) -> int:
    """
    Run C{state.event}: print the matching events of the master's bus.

    @return: the exit code, once C{count} events matched or the master
        closed the bus (Ctrl-C stops the reactor instead; see L{main}).
    """
    from salttwist.events import EVENT_PUB_SOCKET

    args, kwargs = parseArgs(parseCliArgs(options.arg))
    try:
        arguments = _eventArguments(*args, **kwargs)
    except TypeError as e:
        sys.stderr.write(f"Error: Passed invalid arguments to {EVENT_FUNCTION}: {e}\n")
        return EX_GENERIC
    tagmatch = arguments["tagmatch"]
    tagmatch = tagmatch if isinstance(tagmatch, str) else str(tagmatch)
    count = arguments["count"]
    if not isinstance(count, int) or isinstance(count, bool):
        sys.stderr.write(f"Error: count must be a whole number, not {count!r}\n")
        return EX_GENERIC
    if arguments["node"] != "master":
        sys.stderr.write("Error: salttwist-run watches the master's event bus: node=master\n")
        return EX_GENERIC
    quiet, pretty = bool(arguments["quiet"]), bool(arguments["pretty"])
    sockPath = os.path.join(str(arguments["sock_dir"] or config["sock_dir"]), EVENT_PUB_SOCKET)

    # Salt's count: -1 (or any negative) never ends; 0 ends at the first match.
    return await followEvents(
        reactor,
        config,
        sockPath,
        [tagPrefix(tagmatch)],
        [],
        None if count < 0 else max(count, 1),
        pretty,
        quiet=quiet,
        accept=lambda tag: tagMatches(tag, tagmatch),
    )


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-run}.
    """
    options = buildParser().parse_args(argv)
    # Imported once the command line is read: not for --version or --help.
    from salttwist.config import ConfigError, loadMasterConfig
    from salttwist.transport.registry import findTransport

    try:
        config = loadMasterConfig(options.config_dir)
        # Looked up before the reactor starts: it needs pyOpenSSL only if
        # the transport does (an unknown transport is a ConfigError).
        tls = findTransport(config["transport"]).needsTLS
    except ConfigError as e:
        sys.stderr.write(f"Error: {e}\n")
        return EX_UNAVAILABLE
    streaming = options.function == EVENT_FUNCTION
    command = streamEvents if streaming else runRunner
    # Stopped before the command finished: Ctrl-C (or SIGTERM), which is how
    # state.event is meant to end.
    interrupted = EX_OK if streaming else EX_GENERIC
    exitCode, failed = runWithReactor(
        lambda reactor: command(reactor, options, config), interrupted, tls=tls
    )
    return failed if failed is not None else exitCode


if __name__ == "__main__":
    sys.exit(main())
