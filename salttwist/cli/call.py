# -*- test-case-name: tests.test_cli_call -*-
"""
C{salttwist-call}: Salt's C{salt-call}. Run one execution-module function on
this machine, with the minion's configuration, grains and modules, and print
its return under the key C{local}.

Only C{--local} behaviour exists so far: the function runs here and nothing
is sent to a master (C{--local} is accepted and is the default).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from salttwist.cli import addCommonArguments
from salttwist.cli.output import OUTPUTTERS, render
from salttwist.cli.reactor import runWithReactor
from salttwist.cli.salt import parseCliArgs
from salttwist.config import ConfigError, loadMinionConfig


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
        help="Run without a master (the only mode so far, so the default).",
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
    parser.add_argument("arg", nargs="*")
    return parser


async def callFunction(
    reactor: Any, config: dict[str, Any], fun: str, arg: list[Any]
) -> dict[str, Any]:
    """
    Run C{fun} with C{arg} as a minion would, on C{reactor}.

    @return: C{{"return", "retcode", "success"}}.
    """
    import socket

    from salttwist.blocking import threadRunner
    from salttwist.minion.executor import Executor
    from salttwist.minion.grains import coreGrains, grainsFilePath
    from salttwist.modules import LoaderContext, loadFunctions

    minionId = config["id"] or socket.getfqdn()
    grains = coreGrains(minionId, config["grains"], grainsFilePath(config))
    context = LoaderContext(config, grains, reactor)
    executor = Executor(loadFunctions(), context, threadRunner(reactor))
    context.functions = executor.functions
    return await executor.run(fun, arg)


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-call}.
    """
    options = buildParser().parse_args(argv)
    try:
        config = loadMinionConfig(options.config_dir)
    except ConfigError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    result, failed = runWithReactor(
        lambda reactor: callFunction(reactor, config, options.function, parseCliArgs(options.arg))
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
