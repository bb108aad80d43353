# -*- test-case-name: tests.integration.test_end_to_end,tests.test_startup -*-
"""
C{salttwist-master}, C{salttwist-minion} and C{salttwist-api}: run a daemon through twistd,
in the foreground by default, with C{-d} as a daemon with a pidfile.

In the foreground the daemon logs to standard output (and, with
C{--log-file}, to that file too); as a daemon, to the config's C{log_file}
(or C{--log-file}). C{log_fmt_json: True} logs JSON lines. SIGHUP reopens
the log file (see L{salttwist.logs}).

C{-u USER} (or the config's C{user}) runs the daemon as that user: it binds
its sockets as root, gives the user its directories, log file and pidfile,
then switches to the user's uid, gid and groups before any job or worker
process starts (see L{salttwist.daemon.dropPrivileges}).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from salttwist._startup import (
    MASTER_GC_THRESHOLDS,
    exitNow,
    holdGarbageCollection,
    importDeferWithoutAsyncio,
    withoutTLS,
)
from salttwist.cli import addCommonArguments
from salttwist.config import ConfigError, loadMasterConfig, loadMinionConfig
from salttwist.daemon import StartupError, resolveUser
from salttwist.logs import SALT_LEVELS, logEnvironment
from salttwist.tapoptions import OBSERVER_FACTORY

#: The garbage collector's thresholds of each daemon, where Python's
#: defaults are not kept (a minion holds few objects: it keeps them).
GC_THRESHOLDS = {"salttwist-master": MASTER_GC_THRESHOLDS}


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=f"Run the {prog} daemon.")
    # salttwist-api reads the master's config.
    addCommonArguments(
        parser, "master" if prog == "salttwist-api" else prog.removeprefix("salttwist-")
    )
    parser.add_argument(
        "-d",
        "--daemon",
        action="store_true",
        help="Run in the background, with the pidfile of the config.",
    )
    parser.add_argument(
        "-l",
        "--log-level",
        choices=sorted(SALT_LEVELS),
        default=None,
        help="Console log level (default: the config's log_level).",
    )
    parser.add_argument(
        "--log-file-level",
        choices=sorted(SALT_LEVELS),
        default=None,
        help=(
            "Log file level (default: the config's log_level_logfile, else the console log level)."
        ),
    )
    parser.add_argument(
        "-u",
        "--user",
        default=None,
        help=(
            "Run as this user once the sockets are bound (overrides the config's user; "
            "only root can switch users)."
        ),
    )
    parser.add_argument(
        "--log-file",
        default=None,
        help=(
            "Log to this file: as a daemon instead of the config's log_file, in the "
            "foreground as well as to the console."
        ),
    )
    return parser


def twistdArgs(plugin: str, options: argparse.Namespace, config: dict[str, Any]) -> list[str]:
    """
    @return: the twistd command line that runs C{plugin} as asked.
    """
    args = ["twistd", "--logger", OBSERVER_FACTORY]
    if options.daemon:
        args += ["--pidfile", config["pidfile"]]
    else:
        args += ["--nodaemon", "--pidfile", ""]
    args += [plugin, "-c", options.config_dir]
    if options.user:
        args += ["-u", options.user]
    return args


def _run(
    plugin: str,
    load: Callable[[str], dict[str, Any]],
    argv: list[str] | None,
    needsTLS: Callable[[dict[str, Any]], bool],
) -> int:
    """
    Run C{plugin} through twistd as the command line C{argv} asks. Called
    from the console script (C{argv} is L{None}), the process ends at once
    after a clean stop (see L{salttwist._startup.exitNow}), and the
    garbage collector waits until the reactor runs (see
    L{salttwist._startup.holdGarbageCollection}); otherwise the exit code
    is returned.
    """
    exitProcess = argv is None
    if exitProcess:
        holdGarbageCollection()
    options = _parser(plugin).parse_args(argv)
    try:
        config = load(options.config_dir)
        # Checked here too (the plugin checks again) for a plain message.
        resolveUser(options.user or config["user"])
    except (ConfigError, StartupError) as e:
        sys.stderr.write(f"{plugin}: {e}\n")
        return 2
    _setLogEnvironment(options, config)
    if not needsTLS(config):
        # Less memory and a faster start: see salttwist._startup.withoutTLS.
        withoutTLS()
    # Less memory (no asyncio): see salttwist._startup.importDeferWithoutAsyncio.
    importDeferWithoutAsyncio()
    if options.daemon:
        os.makedirs(os.path.dirname(config["pidfile"]) or ".", mode=0o755, exist_ok=True)
    # Twisted's epoll reactor with a leaner dispatch (before twistd
    # installs the default; after withoutTLS and the defer import above,
    # as it imports the reactor's modules): see salttwist.leanreactor.
    from salttwist.leanreactor import installLeanReactor

    installLeanReactor()
    from twisted.application import app

    sys.argv = twistdArgs(plugin, options, config)
    try:
        app.run(
            functools.partial(_runApp, gcThresholds=GC_THRESHOLDS.get(plugin)),
            serverOptions(plugin),
        )
    except StartupError as e:
        sys.stderr.write(f"{plugin}: {e}\n")
        return 1
    if exitProcess:
        exitNow(0)
    return 0


def serverOptions(plugin: str) -> type:
    """
    twistd's C{ServerOptions} offering only C{plugin}'s service maker.

    twistd looks its sub-command up among every plugin of every
    C{twisted/plugins} directory, which imports Twisted's own (conch, web,
    words, trial...) and loads their caches: tens of milliseconds of every
    daemon's start and a few MB it keeps. The wrappers run one known plugin,
    so it is the only one offered; other plugin interfaces are looked up as
    usual.
    """
    import importlib

    from twisted.application.service import IServiceMaker
    from twisted.plugin import getPlugins
    from twisted.scripts.twistd import ServerOptions

    module = importlib.import_module(f"twisted.plugins.{plugin.replace('-', '_')}")
    makers = [
        maker
        for maker in vars(module).values()
        if IServiceMaker.providedBy(maker) and maker.tapname == plugin
    ]

    def plugins(interface: Any, package: Any = None) -> Any:
        if interface is IServiceMaker:
            return iter(makers)
        return getPlugins(interface, package)

    return type("ServerOptions", (ServerOptions,), {"_getPlugins": staticmethod(plugins)})


def _setLogEnvironment(options: argparse.Namespace, config: dict[str, Any]) -> None:
    """
    Tell L{salttwist.logs.observerFactory}, through the environment, where
    and how to log (see the module's docstring); create the log file's
    directory.
    """
    os.environ.update(
        logEnvironment(
            config,
            level=options.log_level,
            fileLevel=options.log_file_level,
            logFile=options.log_file or (config["log_file"] if options.daemon else None),
            daemon=options.daemon,
        )
    )


def _runApp(config: Any, gcThresholds: tuple[int, int, int] | None = None) -> None:
    """
    twistd's C{runApp} without its last step: after a stop by SIGTERM or
    SIGINT, twistd kills its own process again with that signal, so that the
    exit status shows it. Salt's daemons exit 0 after such a clean stop, and
    so do these.

    @param gcThresholds: the garbage collector's thresholds once the
        reactor runs (see L{salttwist._startup.releaseGarbageCollection}).
    """
    from twisted.internet import reactor
    from twisted.scripts._twistd_unix import UnixApplicationRunner

    from salttwist._startup import releaseGarbageCollection

    reactor.callWhenRunning(releaseGarbageCollection, gcThresholds)
    UnixApplicationRunner(config).run()


def minionNeedsTLS(config: dict[str, Any]) -> bool:
    """
    Whether a minion with C{config} may need pyOpenSSL: unless its
    transport is the built-in C{tcp} (a third-party one may use TLS).
    """
    return config["transport"] != "tcp"


def masterNeedsTLS(config: dict[str, Any]) -> bool:
    """
    Whether a master with C{config} may need pyOpenSSL: a transport other
    than C{tcp}, an C{https} C{autosign_url}, or a C{tls://}
    C{cluster_broker}.
    """
    url = config.get("autosign_url") or ""
    broker = config.get("cluster_broker") or ""
    return (
        config["transport"] != "tcp"
        or url.lower().startswith("https:")
        or broker.lower().startswith("tls:")
    )


def masterMain(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-master}.
    """
    return _run("salttwist-master", loadMasterConfig, argv, masterNeedsTLS)


def apiNeedsTLS(config: dict[str, Any]) -> bool:
    """
    Whether salttwist-api with C{config} may need pyOpenSSL: unless its
    C{rest_cherrypy} block sets C{disable_ssl} and the transport is C{tcp}.
    """
    block = config.get("rest_cherrypy") or {}
    return not block.get("disable_ssl", False) or config["transport"] != "tcp"


def apiMain(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-api}: it reads the master's config (see
    L{salttwist.config.loadApiConfig}).
    """
    from salttwist.config import loadApiConfig

    return _run("salttwist-api", loadApiConfig, argv, apiNeedsTLS)


def minionMain(argv: list[str] | None = None) -> int:
    """
    Entry point of C{salttwist-minion}.
    """
    return _run("salttwist-minion", loadMinionConfig, argv, minionNeedsTLS)
