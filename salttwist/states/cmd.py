# -*- test-case-name: tests.test_states_cmd -*-
"""
Salt's C{cmd} states: run a command (C{cmd.run}), a script (C{cmd.script}),
call a Python function given by a C{py}-rendered SLS (C{cmd.call}), or any
of them only when a watched state changed (C{cmd.wait}, C{cmd.wait_script},
C{cmd.wait_call}, through L{mod_watch}).

C{unless}, C{onlyif} and C{creates} are the state runner's (as in Salt
3008); a C{creates} that reaches a function here anyway is honoured the
same way.

A C{stateful} command reports its own changes: its last line of standard
output is C{changed=yes comment="..." name=value...}, or its whole output
is a JSON object with C{changed} and C{comment} (Salt's protocol).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import tempfile
from typing import Any

from twisted.logger import Logger

from salttwist.modules._process import runCommand
from salttwist.states import StateContext, stateReturn
from salttwist.states._keywords import stateArguments

log = Logger()

#: The options C{cmd.run_all} takes, besides the command.
_RUN_OPTIONS = frozenset(tuple(inspect.signature(runCommand).parameters)[2:])

_UMASK = re.compile(r"^0?[0-7]{1,3}$")


def _isTrue(value: Any) -> bool:
    """
    Salt's C{changed=} value: C{yes}/C{true}/C{1} or C{no}/C{false}/C{0}.

    @raise ValueError: anything else.
    """
    text = str(value).lower()
    if value and text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"Failed parsing boolean value: {value}")


def _reinterpreted(ret: dict[str, Any]) -> dict[str, Any]:
    """
    Read a stateful command's report from its output (Salt's
    C{_reinterpreted_state}): the last line as C{name=value} pairs, or the
    whole standard output as a JSON object. C{changed=yes} keeps the
    command's return (with that line taken off C{stdout}) plus the pairs
    as C{changes}; C{comment=} becomes the comment.
    """
    run = ret["changes"]
    ret["changes"] = {}
    ret["comment"] = ""
    out = run.get("stdout")
    if not out:
        if run.get("stderr"):
            ret["comment"] = run["stderr"]
        return ret
    isJson = False
    cut = -1
    try:
        data = json.loads(out)
        if not isinstance(data, dict):
            ret["comment"] = "script JSON output must be a JSON object (e.g., {})!"
            ret["result"] = False
            return ret
        isJson = True
    except ValueError:
        cut = out.rstrip().rfind("\n")
        last = out[cut + 1 :] if cut != -1 else out
        data = {}
        try:
            for item in shlex.split(last):
                key, value = item.split("=")
                data[key] = value
        except ValueError:
            ret["comment"] = (
                "Failed parsing script output! Stdout must be JSON or a line of name=value pairs."
            )
            ret["result"] = False
            ret["changes"].update(run)
            return ret
    try:
        changed = _isTrue(data.get("changed", "no"))
    except ValueError as e:
        ret["comment"] = str(e)
        ret["result"] = False
        return ret
    if "comment" in data:
        ret["comment"] = data.pop("comment")
    if changed:
        for key, value in run.items():
            data.setdefault(key, value)
        if isJson:
            data["stdout"] = ""
        else:
            data["stdout"] = data.get("stdout", "")[:cut] if cut != -1 else ""
        ret["changes"] = data
    return ret


def _statefulTestName(stateful: Any) -> tuple[bool, str | None]:
    """
    Salt's C{stateful}: a boolean, or C{[{"test_name": cmd}]}, a command
    run instead in test mode (it must report what would change).
    """
    if isinstance(stateful, list):
        if stateful and isinstance(stateful[0], dict) and "test_name" in stateful[0]:
            return True, str(stateful[0]["test_name"])
        return bool(stateful), None
    return stateful is True, None


def _creates(name: str, creates: Any) -> dict[str, Any] | None:
    """
    The runner's C{creates} check, should a C{creates} reach the state.
    """
    if isinstance(creates, str) and os.path.exists(creates):
        return stateReturn(name, True, f"{creates} exists")
    if isinstance(creates, list) and creates and all(os.path.exists(str(path)) for path in creates):
        return stateReturn(name, True, "All files in creates exist")
    return None


def _options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """
    The options of C{cmd.run_all} among a state's extra arguments; the
    rest (requisites, the runner's own keys, Salt options salttwist does
    not have) are left out, as Salt's C{cmd.run_all} ignores unknown
    keywords.
    """
    options = {}
    for key, value in stateArguments(kwargs).items():
        if key in ("name", "saltenv"):
            continue
        if key in _RUN_OPTIONS:
            options[key] = value
        else:
            log.debug("cmd state: ignoring the argument {key!r}", key=key)
    return options


def _splitInput(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",")]


def _successOutput(run: dict[str, Any], successStdout: Any, successStderr: Any) -> None:
    """
    Salt's C{success_stdout}/C{success_stderr}: the command succeeded if
    its output contains one of those strings, whatever its exit code.
    """
    if any(s in run.get("stdout", "") for s in _splitInput(successStdout)) or any(
        s in run.get("stderr", "") for s in _splitInput(successStderr)
    ):
        run["retcode"] = 0


def _withUmask(command: str, umask: Any) -> str:
    """
    Run C{command} under C{umask} (through the shell, as every C{cmd}
    state command runs).

    @raise ValueError: C{umask} is not an octal mask.
    """
    text = str(umask)
    if not _UMASK.match(text):
        raise ValueError(f"Invalid umask: '{umask}'")
    return f"umask {text}\n{command}"


def _run(
    ctx: StateContext,
    name: str,
    command: str,
    *,
    cwd: Any,
    env: Any,
    stateful: bool,
    hide_output: bool,
    ignore_timeout: bool,
    umask: Any,
    options: dict[str, Any],
    success: tuple[Any, Any] = (None, None),
) -> dict[str, Any]:
    ret = stateReturn(name, False)
    if env is not None and not isinstance(env, list | dict):
        ret["comment"] = "Invalidly-formatted 'env' parameter. See documentation."
        return ret
    if cwd and not os.path.isdir(str(cwd)):
        ret["comment"] = f'Desired working directory "{cwd}" is not available'
        return ret
    try:
        if umask is not None:
            command = _withUmask(command, umask)
        options.pop("python_shell", None)
        run = ctx.salt["cmd.run_all"](command, cwd=cwd, env=env, python_shell=True, **options)
    except Exception as e:
        ret["comment"] = str(e)
        return ret
    run = {key: run[key] for key in ("pid", "retcode", "stdout", "stderr") if key in run}
    _successOutput(run, *success)
    ret["changes"] = run
    ret["result"] = not run["retcode"]
    ret["comment"] = f'Command "{name}" run'
    if ignore_timeout and run["retcode"] == 1 and "Timed out after" in run.get("stdout", ""):
        run["retcode"] = 0
        ret["result"] = True
    if stateful:
        ret = _reinterpreted(ret)
    if hide_output:
        for key in ("stdout", "stderr"):
            if key in ret["changes"]:
                ret["changes"][key] = ""
    if ctx.test and run["retcode"] == 0 and ret["changes"]:
        ret["result"] = None
    return ret


def run(
    ctx: StateContext,
    name: str,
    cwd: str | None = None,
    runas: str | None = None,
    shell: str | None = None,
    env: Any = None,
    prepend_path: str | None = None,
    stateful: Any = False,
    umask: Any = None,
    output_loglevel: str = "debug",
    hide_output: bool = False,
    timeout: Any = None,
    ignore_timeout: bool = False,
    success_retcodes: Any = None,
    success_stdout: Any = None,
    success_stderr: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Run a command (through the shell) when the state is applied; the
    result is C{True} when it exits 0 (or with one of
    C{success_retcodes}), and C{changes} is C{cmd.run_all}'s return
    (C{pid}, C{retcode}, C{stdout}, C{stderr}).

    @param name: the command.
    @param cwd: its working directory (which must exist).
    @param runas: the user it runs as.
    @param shell: the shell (default C{/bin/sh}).
    @param env: extra environment variables: a map, or a list of one-key
        maps.
    @param stateful: the command reports its changes (see the module's
        docstring); C{[{"test_name": cmd}]} gives a command run in test
        mode instead of skipping.
    @param umask: the command's umask (octal, C{"077"}).
    @param hide_output: blank C{stdout} and C{stderr} in the return.
    @param timeout: seconds before the command is killed (then it failed,
        unless C{ignore_timeout}).
    @param success_stdout: strings whose presence in the standard output
        makes the command a success (a list, or comma-separated).
    @param success_stderr: likewise for the standard error.
    @param kwargs: further C{cmd.run_all} options (C{stdin},
        C{clean_env}, C{reset_system_locale}, C{ignore_retcode} ...).
    """
    stateful, testName = _statefulTestName(stateful)
    if ctx.test and testName:
        name = testName
    if "creates" in kwargs:
        done = _creates(name, kwargs["creates"])
        if done is not None:
            return done
    if ctx.test and not testName:
        if env is not None and not isinstance(env, list | dict):
            return stateReturn(
                name, False, "Invalidly-formatted 'env' parameter. See documentation."
            )
        ret = stateReturn(name, None, f'Command "{name}" would have been executed', {"cmd": name})
        return _reinterpreted(ret) if stateful else ret
    options = _options(kwargs)
    options.update(
        runas=runas,
        prepend_path=prepend_path,
        output_loglevel=output_loglevel,
        timeout=timeout,
        success_retcodes=success_retcodes,
    )
    if shell:
        options["shell"] = shell
    return _run(
        ctx,
        name,
        name,
        cwd=cwd,
        env=env,
        stateful=stateful,
        hide_output=hide_output,
        ignore_timeout=ignore_timeout,
        umask=umask,
        options=options,
        success=(success_stdout, success_stderr),
    )


def _stageScript(ctx: StateContext, source: str, template: str | None, variables: dict) -> str:
    """
    The local path of the script C{source}: a C{salt://} (or http) file is
    cached (a C{salt://} one rendered with C{template} into a temporary
    file), a local file is used as it is (or rendered into a temporary
    file).

    @raise ValueError: it cannot be found or rendered.
    """
    if template:
        if source.startswith("salt://"):
            fd, dest = tempfile.mkstemp(prefix="salttwist-script-")
            os.close(fd)
            try:
                rendered = ctx.salt["cp.get_template"](
                    source, dest, template=template, saltenv=ctx.saltenv, **variables
                )
            except BaseException:
                _unlinkQuietly(dest)
                raise
            if not rendered:
                _unlinkQuietly(dest)
                raise ValueError(f"Unable to cache script {source} from saltenv '{ctx.saltenv}'")
            return rendered
        if template != "jinja":
            raise ValueError(f"Attempted to render template with unavailable engine {template}")
        from salttwist.render.jinja import renderJinja

        path = source[len("file://") :] if source.startswith("file://") else source
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ValueError(f"Script {source!r} cannot be read: {e.strerror}") from None
        context = {
            "salt": ctx.salt,
            "grains": ctx.grains,
            "pillar": ctx.pillar,
            "opts": ctx.opts,
            "saltenv": ctx.saltenv,
            **variables,
        }
        rendered = renderJinja(text, context, path=path)
        fd, dest = tempfile.mkstemp(prefix="salttwist-script-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(rendered)
        return dest
    if "://" in source and not source.startswith("file://"):
        cached = ctx.salt["cp.cache_file"](source, ctx.saltenv)
        if not cached:
            raise ValueError(f"Unable to cache script {source} from saltenv '{ctx.saltenv}'")
        return cached
    return source


def script(
    ctx: StateContext,
    name: str,
    source: str | None = None,
    template: str | None = None,
    cwd: str | None = None,
    runas: str | None = None,
    shell: str | None = None,
    env: Any = None,
    stateful: Any = False,
    timeout: Any = None,
    output_loglevel: str = "debug",
    hide_output: bool = False,
    defaults: Any = None,
    context: Any = None,
    success_retcodes: Any = None,
    success_stdout: Any = None,
    success_stderr: Any = None,
    args: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Fetch a script (C{salt://}, a local path, or C{name} itself when there
    is no C{source}), optionally render it with C{template} (C{jinja};
    C{defaults} and C{context} are its variables), and run it with
    C{args} as C{cmd.script} does. Result and changes as L{run}.

    @param name: the script's source when C{source} is not given, and its
        arguments after the first space when C{args} is not given.
    """
    stateful, testName = _statefulTestName(stateful)
    if ctx.test and testName:
        name = testName
    ret = stateReturn(name, False)
    if env is not None and not isinstance(env, list | dict):
        ret["comment"] = "Invalidly-formatted 'env' parameter. See documentation."
        return ret
    if context and not isinstance(context, dict):
        ret["comment"] = "Invalidly-formatted 'context' parameter. Must be formed as a dict."
        return ret
    if defaults and not isinstance(defaults, dict):
        ret["comment"] = "Invalidly-formatted 'defaults' parameter. Must be formed as a dict."
        return ret
    if "creates" in kwargs:
        done = _creates(name, kwargs["creates"])
        if done is not None:
            return done
    variables = dict(defaults or {})
    variables.update(context or {})
    if source is None:
        source = name.split(" ", 1)[0] if " " in name else name
    if not args and len(name.split()) > 1:
        args = name.split(" ", 1)[1]
    if ctx.test and not testName:
        ret["result"] = None
        ret["comment"] = f"Command '{name}' would have been executed"
        return _reinterpreted(ret) if stateful else ret
    if cwd and not os.path.isdir(str(cwd)):
        ret["comment"] = f'Desired working directory "{cwd}" is not available'
        return ret
    try:
        staged = _stageScript(ctx, str(source), template, variables)
    except Exception as e:
        ret["comment"] = str(e)
        return ret
    options = _options(kwargs)
    options.update(
        cwd=cwd,
        runas=runas,
        env=env,
        output_loglevel=output_loglevel,
        timeout=timeout,
        success_retcodes=success_retcodes,
    )
    if shell:
        options["shell"] = shell
    try:
        run = ctx.salt["cmd.script"](staged, args, **options)
    except Exception as e:
        ret["comment"] = str(e)
        return ret
    finally:
        if template:
            _unlinkQuietly(staged)
    run = {key: run[key] for key in ("pid", "retcode", "stdout", "stderr") if key in run}
    _successOutput(run, success_stdout, success_stderr)
    ret["changes"] = run
    ret["result"] = not run["retcode"]
    ret["comment"] = f"Command '{name}' run"
    if stateful:
        ret = _reinterpreted(ret)
    if hide_output:
        for key in ("stdout", "stderr"):
            if key in ret["changes"]:
                ret["changes"][key] = ""
    if ctx.test and run["retcode"] == 0 and ret["changes"]:
        ret["result"] = None
    return ret


def _unlinkQuietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def wait(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Do nothing: the command runs (as L{run}) only when a state this one
    watches changed, through L{mod_watch}.
    """
    return stateReturn(name, True, "")


#: Salt's alias for a common mistake.
watch = wait


def wait_script(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Do nothing: the script runs (as L{script}) only when a state this one
    watches changed, through L{mod_watch}.
    """
    return stateReturn(name, True, "")


def call(
    ctx: StateContext,
    name: str,
    func: Any = None,
    args: Any = (),
    kws: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Call a Python function given in the state's data (Salt's C{cmd.call},
    for SLS files written in Python, the C{py} renderer): C{func(*args,
    **kws)}.

    A mapping returned is the state's return (over C{name}, C{changes}
    C{{}}, C{result} C{False}, C{comment} C{""}); anything else becomes
    C{changes={"retval": value}}, C{result} C{True} for L{None} else its
    truth, and C{comment} the value if a string. As in Salt, the function
    is called in test mode too (it is the SLS author's own code, and
    C{stateful} and the C{cmd.run} options are accepted and ignored).

    @param func: the callable.
    @param args: its positional arguments (a list or tuple).
    @param kws: its keyword arguments (a mapping).
    """
    ret = stateReturn(name, False)
    if not callable(func):
        ret["comment"] = (
            f"cmd.call needs a Python callable as func, not {type(func).__name__} "
            "(it is for SLS files rendered by the py renderer)"
        )
        return ret
    if isinstance(args, str) or not isinstance(args, list | tuple):
        ret["comment"] = f"cmd.call's args must be a list, not {type(args).__name__}"
        return ret
    if kws is not None and not isinstance(kws, dict):
        ret["comment"] = f"cmd.call's kws must be a mapping, not {type(kws).__name__}"
        return ret
    result = func(*args, **(kws or {}))
    if isinstance(result, dict):
        ret.update(result)
        return ret
    ret["changes"] = {"retval": result}
    ret["result"] = True if result is None else bool(result)
    if isinstance(result, str):
        ret["comment"] = result
    return ret


def wait_call(ctx: StateContext, name: str, **kwargs: Any) -> dict[str, Any]:
    """
    Do nothing: the function is called (as L{call}) only when a state this
    one watches changed, through L{mod_watch}.
    """
    return stateReturn(name, True, "")


def mod_watch(
    ctx: StateContext,
    name: str,
    sfun: str | None = None,
    runas: str | None = None,
    umask: Any = None,
    **kwargs: Any,
) -> dict:
    """
    A watched state changed: run the command (C{cmd.run}, C{cmd.wait},
    C{cmd.watch}), the script (C{cmd.script}, C{cmd.wait_script}) or the
    function (C{cmd.call}, C{cmd.wait_call}).

    @param sfun: the function of the watching state.
    @param runas: named here as the runner passes its own keys only to
        functions naming them.
    @param umask: likewise (a script ignores it).
    """
    if sfun in ("wait", "run", "watch"):
        return run(ctx, name, runas=runas, umask=umask, **kwargs)
    if sfun in ("wait_script", "script"):
        return script(ctx, name, runas=runas, **kwargs)
    if sfun in ("wait_call", "call"):
        if not kwargs.get("func"):
            return stateReturn(name, False, f"cmd.{sfun} needs a named parameter func")
        return call(ctx, name, **kwargs)
    return stateReturn(
        name,
        False,
        f"cmd.{sfun} does not work with the watch requisite, "
        "please use cmd.wait or cmd.wait_script",
    )
