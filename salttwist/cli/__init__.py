# -*- test-case-name: tests -*-
"""Command-line front ends for salttwist."""

from __future__ import annotations

import argparse

import salttwist
from salttwist._startup import deferStartupImports

# Every command is a fresh interpreter: put off what Twisted imports and
# the commands never use (see salttwist._startup).
deferStartupImports()

DEFAULT_CONFIG_DIR = "/etc/salttwist"


def addCommonArguments(parser: argparse.ArgumentParser, config: str) -> None:
    """
    Add the arguments every salttwist command has: C{--version} and
    C{-c/--config-dir}.

    @param config: whose config the directory holds (C{"master"},
        C{"minion"}), for the help text.
    """
    parser.add_argument("--version", action="version", version=f"salttwist {salttwist.__version__}")
    parser.add_argument(
        "-c",
        "--config-dir",
        default=DEFAULT_CONFIG_DIR,
        help=f"Directory of the {config} config (default: %(default)s).",
    )
