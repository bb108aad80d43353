# -*- test-case-name: tests -*-
"""Command-line front ends for salttwist."""

from __future__ import annotations

import argparse
import sys

import salttwist
from salttwist._startup import deferStartupImports
from salttwist.configdir import CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR, defaultConfigDir

__all__ = ["CONFIG_DIR_ENV", "DEFAULT_CONFIG_DIR", "addCommonArguments", "defaultConfigDir"]

# Every command is a fresh interpreter: put off what Twisted imports and
# the commands never use (see salttwist._startup).
deferStartupImports()


class _VersionsReport(argparse.Action):
    """
    C{-V/--versions-report}: print the versions report
    (L{salttwist.version.versionsReport}) and exit 0, as C{--version} does.
    """

    def __init__(
        self,
        option_strings: list[str],
        dest: str = argparse.SUPPRESS,
        default: str = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(
            option_strings=option_strings, dest=dest, default=default, nargs=0, help=help
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """
        Print the report on standard output and exit.
        """
        from salttwist.version import versionsReport

        sys.stdout.write(versionsReport() + "\n")
        parser.exit()


def addCommonArguments(parser: argparse.ArgumentParser, config: str) -> None:
    """
    Add the arguments every salttwist command has: C{--version},
    C{-V/--versions-report} and C{-c/--config-dir}.

    @param config: whose config the directory holds (C{"master"},
        C{"minion"}), for the help text.
    """
    parser.add_argument("--version", action="version", version=f"salttwist {salttwist.__version__}")
    parser.add_argument(
        "-V",
        "--versions-report",
        action=_VersionsReport,
        help="Print the versions of salttwist, Python, its libraries and the system, and exit.",
    )
    parser.add_argument(
        "-c",
        "--config-dir",
        default=defaultConfigDir(),
        help=f"Directory of the {config} config (default: ${CONFIG_DIR_ENV} or "
        f"{DEFAULT_CONFIG_DIR}; now %(default)s).",
    )
