# -*- test-case-name: tests.test_config -*-
"""
Where the config lives: the directory the daemons and commands read without
C{-c}. Kept apart from L{salttwist.config} (which re-exports it), so that a
command builds its command line without importing the config module and
PyYAML: C{--version} and C{--help} read no config.
"""

from __future__ import annotations

import os

__all__ = ["CONFIG_DIR_ENV", "DEFAULT_CONFIG_DIR", "defaultConfigDir"]

#: The config directory of the daemons and commands without C{-c}.
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
