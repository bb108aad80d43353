# -*- test-case-name: tests.test_cli_call,tests.test_cli_state_output -*-
"""
C{salttwist-call}: Salt's C{salt-call}. Run one execution-module function on
this machine, with the minion's configuration, grains and modules, and print
its return under the key C{local}.

Without C{--local}, the return is also sent to the master of the minion
config, as Salt's C{salt-call} does: the command authenticates with the
minion's own key in a transient session (which does not disturb the running
minion daemon) and sends the return with jid C{req}; the master records it
in its job cache under a jid of its own. With a
list of masters (C{master: [...]}, plain or C{master_type: failover}) the
first master that takes the session is used, in the daemon's order
(C{random_master} shuffles it), each master's key checked against its pin
(L{salttwist.client.transient}). If that fails (no key, key not accepted,
every master down) a warning goes to standard error, naming each master
tried and why, and the local result is printed all the same. C{event.send} uses the
same session, and so do the minion's pillar (C{_pillar}, fetched before the
function runs, as Salt's C{salt-call} compiles it) and its C{salt://} files.
With C{--local} (or C{file_client: local} in the minion config) no master is
contacted: the pillar is compiled here, in a thread, from the config's
C{pillar_roots}, and files come from its C{file_roots}, as masterless Salt
users run C{salt-call --local state.apply}.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from salttwist.cli import addCommonArguments
from salttwist.cli.highstate import addStateOutputArguments, stateOptionsFrom
from salttwist.cli.output import OUTPUTTERS, OutChoice, chosenOutputter, render
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
    parser.add_argument(
        "--out",
        choices=OUTPUTTERS,
        default="nested",
        action=OutChoice,
        help="Outputter (default: highstate for the state functions that run states, else nested).",
    )
    parser.set_defaults(out_given=False)
    parser.add_argument("--out-indent", type=int, default=None, help="Indent for json/yaml.")
    parser.add_argument("--no-color", action="store_true", help="Never colour the output.")
    parser.add_argument(
        "--force-color",
        action="store_true",
        help="Colour the output even when it is not a terminal.",
    )
    addStateOutputArguments(parser)
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
    caller: Any = None,
    local: bool = False,
) -> dict[str, Any]:
    """
    Run C{fun} with C{arg} as a minion would, on C{reactor}, with the
    minion's pillar and file client (see L{_prepareLocal} and
    L{_prepareRemote}).

    @param fireMaster: how C{event.send} reaches the master (L{None} with
        C{--local}).
    @param caller: the L{salttwist.client.transient.MasterCaller} whose
        session brings the pillar and C{salt://} files, or L{None}.
    @param local: masterless (C{--local} or C{file_client: local}): pillar
        compiled here from the minion config's C{pillar_roots}, files read
        from its C{file_roots}.
    @return: C{{"return", "retcode", "success"}}.
    """
    from salttwist.blocking import threadRunner
    from salttwist.grains import coreGrains, grainsFilePath
    from salttwist.modules import LoaderContext, loadFunctions
    from salttwist.modules.executor import Executor
    from salttwist.pki.ids import configuredMinionId

    if local:
        # Salt's salt-call --local sets opts["local"]: what asks the master
        # for nothing (a state's fire_event) reads it.
        config = dict(config, local=True)
    minionId = configuredMinionId(config)
    grains = coreGrains(minionId, config["grains"], grainsFilePath(config))
    context = LoaderContext(config, grains, reactor, fireMaster=fireMaster)
    runBlocking = threadRunner(reactor)
    executor = Executor(loadFunctions(), context, runBlocking)
    context.functions = executor.functions
    if config["autoload_dynamic_modules"]:
        from salttwist.modules.extmods import autoloadExtensions

        # The custom modules and grains the minion synced (blocking, as the
        # grains above: a one-shot command).
        autoloadExtensions(context)
    if local:
        await _prepareLocal(context, minionId, runBlocking)
    elif caller is not None:
        await _prepareRemote(context, minionId, runBlocking, caller)
    return await executor.run(fun, arg)


def _compileLocally(
    config: dict[str, Any],
    minionId: str,
    grains: dict[str, Any],
    saltenv: str | None = None,
    pillarenv: str | None = None,
    override: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """
    Compile the pillar from the minion config's C{pillar_roots} (blocking:
    run in a thread). The full texts of render errors go to standard
    error; the pillar carries Salt's C{_errors}.
    """
    from salttwist.pillar import compilePillarWithErrors

    pillar, errors = compilePillarWithErrors(
        config, minionId, grains, saltenv=saltenv, pillarenv=pillarenv, override=override
    )
    for text in errors:
        sys.stderr.write(f"Error: pillar: {text}\n")
    return pillar


async def _prepareLocal(context: Any, minionId: str, runBlocking: Any) -> None:
    """
    Masterless: the file client reads the minion config's C{file_roots}
    (L{salttwist.fileserver.client.LocalFileClient}); the pillar is
    compiled in a thread from its C{pillar_roots}, and compiled again for
    a refresh or other inputs. A file server or pillar that cannot be set
    up is reported on standard error; the function runs without it.
    """
    from twisted.internet.defer import Deferred

    from salttwist.fileserver.client import LocalFileClient
    from salttwist.fileserver.server import FileServer

    config = context.opts
    try:
        context.fileClient = LocalFileClient(
            FileServer.fromConfig(config), config["cachedir"], runBlocking
        )
    except ValueError as e:
        sys.stderr.write(f"Error: file_roots: {e}\n")

    def fetch(
        saltenv: str | None = None,
        pillarenv: str | None = None,
        override: dict[str, Any] | None = None,
    ) -> Deferred[dict[str, Any]]:
        return runBlocking(
            _compileLocally,
            config,
            minionId,
            dict(context.grains),
            saltenv,
            pillarenv,
            override,
        )

    def refresh() -> Deferred[dict[str, Any]]:
        def keep(pillar: dict[str, Any]) -> dict[str, Any]:
            context.pillar = pillar
            return pillar

        return fetch().addCallback(keep)

    context.fetchPillar = fetch
    context.refreshPillar = refresh
    try:
        await refresh()
    except Exception as e:
        sys.stderr.write(f"Error: the pillar could not be compiled: {type(e).__name__}: {e}\n")


async def _prepareRemote(context: Any, minionId: str, runBlocking: Any, caller: Any) -> None:
    """
    With a master: the file client and the pillar go over the caller's
    transient session (C{_file_*}, C{_pillar}). A session that cannot be
    opened is said once, by the return's warning; a pillar the master
    refuses is a warning here; the function runs with an empty pillar then.
    """
    from twisted.internet.defer import Deferred

    from salttwist.client.transient import CallerError
    from salttwist.fileserver.client import RemoteFileClient

    config = context.opts

    def request(payload: dict[str, Any]) -> Deferred[dict[str, Any]]:
        return Deferred.fromCoroutine(caller.request(payload))

    context.fileClient = RemoteFileClient(request, config["cachedir"], runBlocking, minionId)

    async def ask(
        saltenv: str | None, pillarenv: str | None, override: dict[str, Any] | None, clean: bool
    ) -> dict[str, Any]:
        reply = await caller.request(
            {
                "cmd": "_pillar",
                "id": minionId,
                "grains": context.grains,
                "saltenv": saltenv if saltenv is not None else config.get("saltenv"),
                "pillarenv": pillarenv if pillarenv is not None else config.get("pillarenv"),
                "pillar_override": override or {},
                "clean_cache": clean,
            }
        )
        pillar = reply.get("ret")
        if not isinstance(pillar, dict):
            raise CallerError("the master's answer holds no pillar")
        return pillar

    def fetch(
        saltenv: str | None = None,
        pillarenv: str | None = None,
        override: dict[str, Any] | None = None,
    ) -> Deferred[dict[str, Any]]:
        return Deferred.fromCoroutine(ask(saltenv, pillarenv, override, False))

    def refresh() -> Deferred[dict[str, Any]]:
        def keep(pillar: dict[str, Any]) -> dict[str, Any]:
            context.pillar = pillar
            return pillar

        return Deferred.fromCoroutine(ask(None, None, None, True)).addCallback(keep)

    context.fetchPillar = fetch
    context.refreshPillar = refresh
    try:
        context.pillar = await ask(None, None, None, False)
    except CallerError:
        # The session could not be opened: the return's warning says why.
        pass
    except Exception as e:
        sys.stderr.write(f"Warning: the pillar was not fetched from the master: {e}\n")


async def callAndReturn(
    reactor: Any, config: dict[str, Any], fun: str, arg: list[Any], local: bool
) -> dict[str, Any]:
    """
    Run C{fun} here; unless C{local} (or C{file_client: local} in the
    minion config), with the pillar and files of the master over a
    transient session, to which its return is then sent (jid C{req}) and
    which C{event.send} shares. A failure to reach the master is a warning
    on standard error, not an error.

    @return: C{{"return", "retcode", "success"}}.
    """
    from salttwist.blocking import threadRunner
    from salttwist.client.transient import CallerError, MasterCaller
    from salttwist.pki.ids import configuredMinionId

    if local or config.get("file_client") == "local":
        return await callFunction(reactor, config, fun, arg, local=True)
    caller = MasterCaller(config, configuredMinionId(config), reactor, threadRunner(reactor))
    try:
        result = await callFunction(reactor, config, fun, arg, caller.fireMaster, caller=caller)
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
    out = chosenOutputter(options, options.function)
    color = options.force_color or (
        not options.no_color and out in ("nested", "highstate") and sys.stdout.isatty()
    )
    sys.stdout.write(
        render(
            out,
            {"local": result["return"]},
            color,
            options.out_indent,
            retcode=result["retcode"],
            stateOptions=stateOptionsFrom(options, config, parseCliArgs(options.arg)),
        )
    )
    if options.retcode_passthrough:
        return int(result["retcode"])
    return 0 if result["success"] else 1


if __name__ == "__main__":
    sys.exit(main())
