# -*- test-case-name: tests -*-
"""Command-line front ends for salttwist."""

from __future__ import annotations

import argparse
import os

import salttwist
from salttwist._startup import deferStartupImports

# Every command is a fresh interpreter: put off what Twisted imports and
# the commands never use (see salttwist._startup).
deferStartupImports()

DEFAULT_CONFIG_DIR = "/etc/salttwist"
#: The environment variable that overrides L{DEFAULT_CONFIG_DIR} (Salt's
#: C{SALT_CONFIG_DIR}); C{-c} overrides both.
CONFIG_DIR_ENV = "SALTTWIST_CONFIG_DIR"


def defaultConfigDir() -> str:
    """
    @return: the config directory used without C{-c}: C{$SALTTWIST_CONFIG_DIR}
        when set, else L{DEFAULT_CONFIG_DIR}.
    """
    return os.environ.get(CONFIG_DIR_ENV) or DEFAULT_CONFIG_DIR


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
        default=defaultConfigDir(),
        help=f"Directory of the {config} config (default: ${CONFIG_DIR_ENV} or "
        f"{DEFAULT_CONFIG_DIR}; now %(default)s).",
    )
