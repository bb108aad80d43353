# -*- test-case-name: tests.test_modules_cmd -*-
"""
Salt's C{cmd} module: run shell commands. Processes are spawned by the
reactor, so a long command never blocks the minion.

The options of C{run}, C{run_all}, C{run_stdout}, C{run_stderr},
C{retcode}, C{shell} and C{script} are Salt's; C{cmd.run}'s documentation
(C{sys.doc cmd.run}) describes them.

The job's retcode is the command's exit code for every one of them, as in
Salt.
"""

from __future__ import annotations

import inspect
import os
import pwd
import shlex
import shutil
import stat
import tempfile
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.threads import blockingCallFromThread

from salttwist.modules import (
    CommandExecutionError,
    LoaderContext,
    Retcode,
    SaltInvocationError,
    needsContext,
    needsJid,
    onReactor,
)
from salttwist.modules._process import commandOptions, inThread, runCommand, runCommandHere


def _withRetcode(key: str | None) -> Any:
    def shape(result: dict[str, Any]) -> Retcode:
        code = result.pop("jobRetcode")
        output = result.pop("output")
        if key is None:
            return Retcode(result, code)
        if key == "output":
            return Retcode(output, code)
        return Retcode(result[key], code)

    return shape


#: The options every C{cmd} function takes, in order, with their defaults
#: and types: L{commandOptions}, the one place they are written out.
_OPTIONS = commandOptions()


def _withOptions(omit: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Any]:
    """
    Give a C{cmd} function the options of L{runCommand} as parameters.

    The decorated function is written C{f(context, <its own parameters>, *,
    options)}. The function returned is a plain C{def} of the same name
    taking C{f}'s own parameters, then every option but those in C{omit},
    as keywords or by position, with L{runCommand}'s defaults; it calls
    C{f} with the options' values in the dict C{options}. Being a real
    C{def} (generated, as L{dataclasses} generates C{__init__}), it accepts
    exactly what a C{def} written out would: Python checks each call and
    words a bad one's L{TypeError} (C{"run() got an unexpected keyword
    argument 'x'"}, as the job's return shows it), and C{sys.argspec} and
    L{inspect.signature} see every parameter.

    @param omit: options C{f} does not take (C{cmd.shell} has no
        C{python_shell}).
    """

    def decorate(f: Callable[..., Any]) -> Any:
        own = [p for p in inspect.signature(f).parameters.values() if p.name != "options"]
        options = [p for p in _OPTIONS if p.name not in omit]
        parameters = [*own, *options]
        for p in parameters:
            if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
                raise TypeError(f"{f.__name__}: {p.name} must be positional or keyword")
        namespace: dict[str, Any] = {
            "_f": f,
            "_defaults": {p.name: p.default for p in parameters},
        }
        spelled = [
            p.name if p.default is inspect.Parameter.empty else f"{p.name}=_defaults[{p.name!r}]"
            for p in parameters
        ]
        passed = ", ".join(f"{p.name!r}: {p.name}" for p in options)
        source = (
            f"def {f.__name__}({', '.join(spelled)}):\n"
            f"    return _f({', '.join(p.name for p in own)}, options={{{passed}}})\n"
        )
        # Only names and reprs of names from the signatures above go in.
        exec(compile(source, f"<cmd.{f.__name__} with its options>", "exec"), namespace)
        made = namespace[f.__name__]
        made.__module__ = f.__module__
        made.__qualname__ = f.__qualname__
        made.__doc__ = f.__doc__
        made.__annotations__ = {
            **{p.name: p.annotation for p in parameters},
            "return": f.__annotations__["return"],
        }
        return made

    return decorate


@onReactor
@needsJid
@_withOptions()
def run(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Deferred:
    """
    Run C{cmd} and return its output: standard output and standard error
    together, in the order they came, as Salt's C{cmd.run} does. The job's
    retcode is the command's exit code. Options (the other C{cmd} functions
    take them too):

    - C{cwd}: the working directory (absolute); default the home directory
      of the user the command runs as, or C{/}.
    - C{stdin}: text written to the command's standard input (a typed
      C{\\n} becomes a newline unless C{stdin_raw_newlines=True}).
    - C{runas}: a user to run the command as; needs a minion running as root.
    - C{shell}: the shell for C{python_shell=True} (default C{/bin/sh}).
    - C{python_shell}: C{True} runs the command through the shell (pipes,
      globs, variables work); C{False} splits it with shell-like quoting and
      runs the program directly. The default (unset) is C{True}, as Salt
      does for jobs sent from the CLI; a list as C{cmd} never uses a shell.
    - C{env}: a map of extra environment variables; C{clean_env=True} starts
      from an empty environment; C{prepend_path} is put before C{PATH}.
    - C{timeout}: seconds after which the command and everything it started
      are killed; the result is then Salt's
      C{"<cmd> : Timed out after <n> seconds"} with retcode 1.
    - C{output_loglevel}: the minion log level for the command's output
      (C{debug} by default; C{quiet} logs nothing, not even the command).
      A failed command is logged whole at C{error}, with its return code
      and output: use C{quiet} for a command that holds a secret.
    - C{reset_system_locale}: C{True} (default) sets the C{LC_*} variables to
      C{C} so commands answer in English.
    - C{ignore_retcode}: the job succeeds whatever the command's exit code.
    - C{success_retcodes}: exit codes (a list or C{"2,3"}) counted as success.
    - C{rstrip}: strip trailing whitespace from the output (default C{True}).

    CLI Example:

        salttwist '*' cmd.run 'ls -l | grep foo'
        salttwist '*' cmd.run 'cat' stdin='hello'
        salttwist '*' cmd.run 'sleep 100' timeout=5
    """
    return runCommand(context, cmd, **options).addCallback(_withRetcode("output"))


@onReactor
@needsJid
@_withOptions()
def run_all(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Deferred:
    """
    Run C{cmd} and return C{{"pid", "retcode", "stdout", "stderr"}}, as
    Salt does; the job's retcode is the command's exit code. Options as
    for C{cmd.run}.

    CLI Example:

        salttwist '*' cmd.run_all 'ls -l /tmp'
    """
    return runCommand(context, cmd, **options).addCallback(_withRetcode(None))


@onReactor
@needsJid
@_withOptions()
def run_stdout(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Deferred:
    """
    Run C{cmd} and return its standard output only. Options as for
    C{cmd.run}.

    CLI Example:

        salttwist '*' cmd.run_stdout 'ls -l /tmp'
    """
    return runCommand(context, cmd, **options).addCallback(_withRetcode("stdout"))


@onReactor
@needsJid
@_withOptions()
def run_stderr(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Deferred:
    """
    Run C{cmd} and return its standard error only. Options as for
    C{cmd.run}.

    CLI Example:

        salttwist '*' cmd.run_stderr 'ls -l /nonexistent'
    """
    return runCommand(context, cmd, **options).addCallback(_withRetcode("stderr"))


@onReactor
@needsJid
@_withOptions()
def retcode(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Deferred:
    """
    Run C{cmd} and return its exit code (also the job's retcode, as in
    Salt). Options as for C{cmd.run}.

    CLI Example:

        salttwist '*' cmd.retcode 'test -f /etc/hosts'
    """
    return runCommand(context, cmd, **options).addCallback(_withRetcode("retcode"))


def _runInThread(context: LoaderContext, cmd: Any, options: dict[str, Any]) -> dict[str, Any]:
    """
    L{runCommand}'s result for a call from a thread (a state run's): the
    command runs in that thread (L{runCommandHere}), or through the
    reactor, waited for, where it cannot.
    """
    result = runCommandHere(context, cmd, **options)
    if result is None:
        result = blockingCallFromThread(context.reactor, runCommand, context, cmd, **options)
    return result


@needsContext
@_withOptions()
def _retcodeHere(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Retcode:
    """
    L{retcode} from a thread (a state run's C{onlyif}/C{unless}).
    """
    return _withRetcode("retcode")(_runInThread(context, cmd, options))


@needsContext
@_withOptions()
def _runAllHere(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Retcode:
    """
    L{run_all} from a thread (a C{cmd.run} state's command).
    """
    return _withRetcode(None)(_runInThread(context, cmd, options))


retcode.offReactor = _retcodeHere  # type: ignore[attr-defined]
run_all.offReactor = _runAllHere  # type: ignore[attr-defined]


@onReactor
@needsJid
@_withOptions(omit=("python_shell",))
def shell(context: LoaderContext, cmd: Any, *, options: dict[str, Any]) -> Deferred:
    """
    Like C{cmd.run}, always through the shell (C{python_shell=True}).

    CLI Example:

        salttwist '*' cmd.shell 'echo $HOME; ls /tmp | wc -l'
    """
    return runCommand(context, cmd, python_shell=True, **options).addCallback(
        _withRetcode("output")
    )


def _stageScript(source: str, runas: str | None) -> tuple[str, str]:
    """
    Copy the script (a local path, or the text itself when C{source}
    starts with C{#!}) into a new private directory; blocking.

    @return: the directory and the script's path in it.
    """
    if source.startswith("#!"):
        contents = source.encode("utf-8")
    else:
        path = source[len("file://") :] if source.startswith("file://") else source
        if "://" in path:
            raise CommandExecutionError(
                f"cmd.script cannot fetch {source!r}: salttwist has no file server; "
                "give a local path on the minion or the script's text (starting with #!)"
            )
        if not os.path.isabs(path) or not os.path.isfile(path):
            raise CommandExecutionError(f"Script {source!r} not found on the minion")
        with open(path, "rb") as f:
            contents = f.read()
    directory = tempfile.mkdtemp(prefix="salttwist-script-")
    script = os.path.join(directory, "script")
    with open(script, "wb") as f:
        f.write(contents)
    os.chmod(script, stat.S_IRUSR | stat.S_IXUSR)
    if runas:
        try:
            user = pwd.getpwnam(runas)
        except KeyError:
            shutil.rmtree(directory, ignore_errors=True)
            raise CommandExecutionError(f"User '{runas}' is not available") from None
        os.chown(directory, user.pw_uid, user.pw_gid)
        os.chown(script, user.pw_uid, user.pw_gid)
    return directory, script


@onReactor
@needsJid
@_withOptions()
def script(
    context: LoaderContext, source: str, args: str | None = None, *, options: dict[str, Any]
) -> Deferred:
    """
    Run a script on the minion with the arguments C{args} (a string, split
    as a shell would) and return C{{"pid", "retcode", "stdout", "stderr"}}
    like C{cmd.run_all}.

    salttwist has no file server, so C{source} is a local path on the
    minion (or C{file:///path}), or the script's own text when it starts
    with C{#!}; a C{salt://} source is refused. The script is copied to a
    private temporary directory, run from there (its C{#!} line picks the
    interpreter) and removed afterwards.

    CLI Example:

        salttwist '*' cmd.script /srv/scripts/runme.sh 'arg1 "arg two"'
        salttwist '*' cmd.script '#!/bin/sh
        echo hello'
    """
    if not isinstance(source, str) or not source:
        raise SaltInvocationError("source must be a path or a script")

    def run(staged: tuple[str, str]) -> Deferred:
        directory, path = staged
        command = shlex.quote(path) + (f" {args}" if args else "")
        if options["python_shell"] is False:
            command = [path, *shlex.split(str(args or ""))]
        try:
            d = runCommand(context, command, **options)
        except Exception:
            shutil.rmtree(directory, ignore_errors=True)
            raise

        def cleanUp(result: Any) -> Any:
            inThread(context.reactor, shutil.rmtree, directory, True)
            return result

        return d.addBoth(cleanUp)

    d = inThread(context.reactor, _stageScript, source, options["runas"])
    return d.addCallback(run).addCallback(_withRetcode(None))


def which(cmd: str) -> str | None:
    """
    Return the full path of the executable C{cmd} found on the minion's
    C{PATH}, or C{None}.

    CLI Example:

        salttwist '*' cmd.which cat
    """
    return shutil.which(str(cmd))


def has_exec(cmd: str) -> bool:
    """
    Return C{True} if C{cmd} is an executable on the minion's C{PATH} (or,
    for a path, if that file is executable).

    CLI Example:

        salttwist '*' cmd.has_exec cat
    """
    return which(cmd) is not None
