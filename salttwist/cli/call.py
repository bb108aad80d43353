# -*- test-case-name: tests.test_cli_call -*-
"""
C{salttwist-call}: Salt's C{salt-call}. Run one execution-module function on
this machine, with the minion's configuration, grains and modules, and print
its return under the key C{local}.

Without C{--local}, the return is also sent to the master of the minion
config, as Salt's C{salt-call} does: the command authenticates with the
minion's own key in a transient session (which does not disturb the running
minion daemon) and sends the return with jid C{req}; the master records it
in its job cache under a jid of its own. If that
fails (no key, key not accepted, master down) a warning goes to standard
error and the local result is printed all the same. C{event.send} uses the
same session. With C{--local} no master is contacted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from salttwist.cli import addCommonArguments
from salttwist.cli.output import OUTPUTTERS, render
from salttwist.cli.reactor import runWithReactor
from salttwist.cli.salt import parseCliArgs
from salttwist.config import ConfigError, loadMinionConfig
from salttwist.transport.registry import findTransport


def buildParser() -> argparse.ArgumentParser:
    """
    The command line, with Salt's flags.
    """
    parser = argparse.ArgumentParser(
        prog="salttwist-call",
        usage="salttwist-call [options] <function> [arguments]",
        description="Run an execution-module function on this machine.",
    )
    addCommonArguments(parser, "minion")
    parser.add_argument(
        "--local",
        action="store_true",
        help="Run without a master: nothing is sent to it.",
    )
    parser.add_argument(
        "--retcode-passthrough",
        action="store_true",
        help="Exit with the function's retcode.",
    )
    parser.add_argument("--out", choices=OUTPUTTERS, default="nested", help="Outputter.")
    parser.add_argument("--out-indent", type=int, default=None, help="Indent for json/yaml.")
    parser.add_argument("--no-color", action="store_true", help="Never colour the output.")
    parser.add_argument("function")
    # A default makes argparse treat the arguments as optional: without it a
    # missing function is reported as "function, arg".
    parser.add_argument("arg", nargs="*", default=[])
    return parser


async def callFunction(
    reactor: Any,
    config: dict[str, Any],
    fun: str,
    arg: list[Any],
    fireMaster: Callable[[str, Any], Any] | None = None,
) -> dict[str, Any]:
    """
    Run C{fun} with C{arg} as a minion would, on C{reactor}.

    @param fireMaster: how C{event.send} reaches the master (L{None} with
        C{--local}).
    @return: C{{"return", "retcode", "success"}}.
    """
    from salttwist.blocking import threadRunner
    from salttwist.grains import coreGrains, grainsFilePath
    from salttwist.modules import LoaderContext, loadFunctions
    from salttwist.modules.executor import Executor
    from salttwist.pki.ids import configuredMinionId

    minionId = configuredMinionId(config)
    grains = coreGrains(minionId, config["grains"], grainsFilePath(config))
    context = LoaderContext(config, grains, reactor, fireMaster=fireMaster)
    executor = Executor(loadFunctions(), context, threadRunner(reactor))
    context.functions = executor.functions
    return await executor.run(fun, arg)


async def callAndReturn(
    reactor: Any, config: dict[str, Any], fun: str, arg: list[Any], local: bool
) -> dict[str, Any]:
    """
    Run C{fun} here; unless C{local}, send its return to the master (jid
    C{req}) over a transient session, which C{event.send} shares. A failure
    to reach the master is a warning on standard error, not an error.

    @return: C{{"return", "retcode", "success"}}.
    """
    from salttwist.blocking import threadRunner
    from salttwist.client.transient import CallerError, MasterCaller
    from salttwist.pki.ids import configuredMinionId

    if local:
        return await callFunction(reactor, config, fun, arg)
    caller = MasterCaller(config, configuredMinionId(config), reactor, threadRunner(reactor))
    try:
        result = await callFunction(reactor, config, fun, arg, caller.fireMaster)
        try:
            await caller.sendReturn(fun, arg, result)
        except CallerError as e:
            sys.stderr.write(f"Warning: the result was not sent to the master: {e}\n")
        except Exception as e:
            # Whatever went wrong with the master, the local result is shown.
            sys.stderr.write(
                f"Warning: the result was not sent to the master: {type(e).__name__}: {e}\n"
            )
    finally:
        caller.close()
    return result


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-call}.
    """
    options = buildParser().parse_args(argv)
    try:
        config = loadMinionConfig(options.config_dir)
        # Before the reactor starts: it needs pyOpenSSL only if the call
        # talks to the master over a transport that does.
        tls = not options.local and findTransport(config["transport"]).needsTLS
    except ConfigError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    result, failed = runWithReactor(
        lambda reactor: callAndReturn(
            reactor, config, options.function, parseCliArgs(options.arg), options.local
        ),
        tls=tls,
    )
    if failed is not None:
        return failed
    color = not options.no_color and options.out == "nested" and sys.stdout.isatty()
    sys.stdout.write(
        render(
            options.out,
            {"local": result["return"]},
            color,
            options.out_indent,
            retcode=result["retcode"],
        )
    )
    if options.retcode_passthrough:
        return int(result["retcode"])
    return 0 if result["success"] else 1


if __name__ == "__main__":
    sys.exit(main())
