"""
Tests for L{salttwist.states.cmd}: real commands and scripts, run in a
thread as a state run does.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from twisted.trial.unittest import TestCase

from salttwist.blocking import runSynchronously
from salttwist.fileserver.client import LocalFileClient
from salttwist.fileserver.server import FileServer
from salttwist.modules.extmods import SaltFunctions
from salttwist.states import StateContext, loadStates
from salttwist.states.cmd import _reinterpreted
from tests._statectx import makeLoaderContext, makeStateContext, runState


class RunTests(TestCase):
    """
    C{cmd.run}.
    """

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    async def test_success(self) -> None:
        """
        A command that exits 0 succeeds; changes are C{cmd.run_all}'s
        return.
        """
        ret = await runState("cmd.run", "echo hello; echo oops >&2", cwd=self.dir)
        self.assertIs(ret["result"], True)
        self.assertEqual(ret["comment"], 'Command "echo hello; echo oops >&2" run')
        self.assertEqual(set(ret["changes"]), {"pid", "retcode", "stdout", "stderr"})
        self.assertEqual(ret["changes"]["stdout"], "hello")
        self.assertEqual(ret["changes"]["stderr"], "oops")
        self.assertEqual(ret["changes"]["retcode"], 0)
        self.assertIsInstance(ret["changes"]["pid"], int)

    async def test_failure(self) -> None:
        """
        A non-zero exit fails the state, with the changes shown.
        """
        ret = await runState("cmd.run", "exit 3")
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["changes"]["retcode"], 3)

    async def test_successRetcodes(self) -> None:
        """
        C{success_retcodes} counts other exit codes as success.
        """
        ret = await runState("cmd.run", "exit 3", success_retcodes=[3])
        self.assertIs(ret["result"], True)

    async def test_successOutput(self) -> None:
        """
        C{success_stdout}/C{success_stderr}: a string in the output makes
        a failing command a success.
        """
        ret = await runState("cmd.run", "echo all good; exit 2", success_stdout="good")
        self.assertEqual((ret["result"], ret["changes"]["retcode"]), (True, 0))
        ret = await runState("cmd.run", "echo meh >&2; exit 2", success_stderr=["x", "meh"])
        self.assertIs(ret["result"], True)
        ret = await runState("cmd.run", "echo meh; exit 2", success_stdout="nope, other")
        self.assertIs(ret["result"], False)

    async def test_testMode(self) -> None:
        """
        In test mode nothing runs: C{None} and Salt's words.
        """
        target = os.path.join(self.dir, "made")
        ret = await runState("cmd.run", f"touch {target}", test=True)
        self.assertEqual(
            ret,
            {
                "name": f"touch {target}",
                "result": None,
                "changes": {"cmd": f"touch {target}"},
                "comment": f'Command "touch {target}" would have been executed',
            },
        )
        self.assertFalse(os.path.exists(target))

    async def test_cwdEnvUmask(self) -> None:
        """
        C{cwd}, C{env} (a list of maps) and C{umask} reach the command.
        """
        ret = await runState(
            "cmd.run",
            'pwd; echo "$A$B"; touch f; stat -c %a f',
            cwd=self.dir,
            env=[{"A": "x"}, {"B": "y"}],
            umask="077",
        )
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(
            ret["changes"]["stdout"].splitlines(), [os.path.realpath(self.dir), "xy", "600"]
        )

    async def test_runas(self) -> None:
        """
        C{runas} runs the command as that user (here C{nobody}), also from
        C{mod_watch}.
        """
        if os.geteuid() != 0:
            raise self.skipTest("runas needs root")
        ret = await runState("cmd.run", "id -un", runas="nobody", cwd="/")
        self.assertEqual(ret["changes"]["stdout"], "nobody", ret)
        ret = await runState("cmd.mod_watch", "id -un", sfun="wait", runas="nobody", cwd="/")
        self.assertEqual(ret["changes"]["stdout"], "nobody", ret)

    async def test_badUmask(self) -> None:
        """
        A umask that is not octal fails, naming it.
        """
        ret = await runState("cmd.run", "true", umask="999")
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["comment"], "Invalid umask: '999'")

    async def test_missingCwd(self) -> None:
        """
        A missing C{cwd}: Salt's words.
        """
        ret = await runState("cmd.run", "true", cwd="/nonexistent/dir")
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"], 'Desired working directory "/nonexistent/dir" is not available'
        )

    async def test_badEnv(self) -> None:
        """
        C{env} must be a map or a list.
        """
        ret = await runState("cmd.run", "true", env="A=b")
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["comment"], "Invalidly-formatted 'env' parameter. See documentation.")

    async def test_hideOutput(self) -> None:
        """
        C{hide_output} blanks the output in the return.
        """
        ret = await runState("cmd.run", "echo secret", hide_output=True)
        self.assertIs(ret["result"], True)
        self.assertEqual(ret["changes"]["stdout"], "")

    async def test_timeout(self) -> None:
        """
        A command past its timeout is killed and fails; C{ignore_timeout}
        makes that a success.
        """
        ret = await runState("cmd.run", "sleep 30", timeout=0.5)
        self.assertIs(ret["result"], False)
        self.assertIn("Timed out after 0.5 seconds", ret["changes"]["stdout"])
        ret = await runState("cmd.run", "sleep 30", timeout=0.5, ignore_timeout=True)
        self.assertIs(ret["result"], True)

    async def test_creates(self) -> None:
        """
        A C{creates} that reaches the state is honoured as the runner does.
        """
        existing = os.path.join(self.dir, "there")
        open(existing, "w").close()
        ret = await runState("cmd.run", "exit 1", creates=existing)
        self.assertEqual((ret["result"], ret["comment"]), (True, f"{existing} exists"))
        ret = await runState("cmd.run", "exit 1", creates=[existing, existing])
        self.assertEqual(ret["comment"], "All files in creates exist")
        ret = await runState("cmd.run", "exit 1", creates=[existing, existing + "x"])
        self.assertIs(ret["result"], False)

    async def test_ignoresRunnerKeys(self) -> None:
        """
        Requisites and other state-system keys are not passed to the
        command.
        """
        ret = await runState(
            "cmd.run", "true", require=[{"file": "x"}], order=3, __id__="x", unknown_option=1
        )
        self.assertIs(ret["result"], True, ret)

    async def test_statefulPairs(self) -> None:
        """
        C{stateful}: the last line's C{changed=yes comment=...} is the
        report; the other pairs join the changes, the line leaves stdout.
        """
        ret = await runState(
            "cmd.run",
            "echo work; echo 'changed=yes comment=\"did it\" thing=1'",
            stateful=True,
        )
        self.assertIs(ret["result"], True)
        self.assertEqual(ret["comment"], "did it")
        self.assertEqual(ret["changes"]["thing"], "1")
        self.assertEqual(ret["changes"]["stdout"], "work")
        ret = await runState("cmd.run", "echo 'changed=no comment=\"all fine\"'", stateful=True)
        self.assertEqual((ret["result"], ret["comment"], ret["changes"]), (True, "all fine", {}))

    async def test_statefulJson(self) -> None:
        """
        C{stateful}: a JSON object as the whole output.
        """
        ret = await runState(
            "cmd.run", """echo '{"changed": true, "comment": "json", "n": 2}'""", stateful=True
        )
        self.assertEqual(ret["comment"], "json")
        self.assertEqual(ret["changes"]["n"], 2)
        self.assertEqual(ret["changes"]["stdout"], "")
        ret = await runState("cmd.run", "echo '[1]'", stateful=True)
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["comment"], "script JSON output must be a JSON object (e.g., {})!")

    async def test_statefulGarbage(self) -> None:
        """
        A stateful command whose last line is not pairs fails with Salt's
        words.
        """
        ret = await runState("cmd.run", "echo not pairs", stateful=True)
        self.assertIs(ret["result"], False)
        self.assertTrue(ret["comment"].startswith("Failed parsing script output!"))

    async def test_statefulTestName(self) -> None:
        """
        C{stateful: [{test_name: ...}]} runs that command in test mode; no
        change reported is C{True}, a change C{None}.
        """
        ret = await runState(
            "cmd.run",
            "exit 1",
            stateful=[{"test_name": "echo 'changed=no comment=\"nothing to do\"'"}],
            test=True,
        )
        self.assertEqual((ret["result"], ret["comment"]), (True, "nothing to do"))
        ret = await runState(
            "cmd.run",
            "exit 1",
            stateful=[{"test_name": "echo 'changed=yes comment=\"would\"'"}],
            test=True,
        )
        self.assertEqual((ret["result"], ret["comment"]), (None, "would"))

    def test_reinterpretedStderr(self) -> None:
        """
        No stdout: stderr is the comment, no changes.
        """
        ret = _reinterpreted(
            {
                "name": "x",
                "result": True,
                "comment": "",
                "changes": {"stdout": "", "stderr": "e", "retcode": 0, "pid": 1},
            }
        )
        self.assertEqual((ret["comment"], ret["changes"]), ("e", {}))


class WaitTests(TestCase):
    """
    C{cmd.wait} and C{cmd.mod_watch}.
    """

    async def test_wait(self) -> None:
        """
        C{cmd.wait} does nothing by itself.
        """
        target = os.path.abspath(self.mktemp())
        ret = await runState("cmd.wait", f"touch {target}")
        self.assertEqual(
            ret, {"name": f"touch {target}", "result": True, "changes": {}, "comment": ""}
        )
        self.assertFalse(os.path.exists(target))

    async def test_modWatch(self) -> None:
        """
        C{mod_watch} runs the command for C{wait} and C{run}, the script
        for C{wait_script}, and refuses other functions (C{call} and
        C{wait_call}: L{tests.test_states_cmd_call}).
        """
        target = os.path.abspath(self.mktemp())
        ret = await runState("cmd.mod_watch", f"touch {target}", sfun="wait")
        self.assertIs(ret["result"], True)
        self.assertTrue(os.path.exists(target))
        script = os.path.abspath(self.mktemp())
        with open(script, "w") as f:
            f.write('#!/bin/sh\necho script "$@"\n')
        ret = await runState("cmd.mod_watch", f"{script} a b", sfun="wait_script")
        self.assertEqual(ret["changes"]["stdout"], "script a b")
        ret = await runState("cmd.mod_watch", "true", sfun="nop")
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"],
            "cmd.nop does not work with the watch requisite, "
            "please use cmd.wait or cmd.wait_script",
        )


def stateContextWithRoots(roots: str, cachedir: str, test: bool = False) -> StateContext:
    """
    @return: a L{StateContext} whose C{salt://} files come from C{roots}
        (a L{LocalFileClient}, as C{file_client: local}).
    """
    loader = makeLoaderContext({"file_roots": {"base": [roots]}, "cachedir": cachedir})
    loader.fileClient = LocalFileClient(
        FileServer.fromConfig(loader.opts), cachedir, runSynchronously
    )
    return StateContext(
        salt=SaltFunctions(loader),
        opts=loader.opts,
        grains=loader.grains,
        pillar=loader.pillar,
        test=test,
        states=loadStates(),
        reactor=loader.reactor,
    )


class ScriptTests(TestCase):
    """
    C{cmd.script}.
    """

    def setUp(self) -> None:
        self.roots = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(self.roots, "scripts"))
        self.cachedir = os.path.abspath(self.mktemp())
        os.makedirs(self.cachedir)
        self.write("scripts/hello.sh", '#!/bin/sh\necho "hello $1"\n')
        self.write("scripts/tpl.sh", '#!/bin/sh\necho "{{ greeting }} {{ grains.id }}"\n')

    def write(self, relative: str, text: str) -> str:
        path = os.path.join(self.roots, relative)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, stat.S_IRWXU)
        return path

    async def callScript(self, *args: Any, test: bool = False, **kwargs: Any) -> dict[str, Any]:
        ctx = stateContextWithRoots(self.roots, self.cachedir, test)
        return await runState("cmd.script", *args, ctx=ctx, **kwargs)

    async def test_saltSource(self) -> None:
        """
        A C{salt://} script is cached and run with its arguments.
        """
        ret = await self.callScript("hello", source="salt://scripts/hello.sh", args="world")
        self.assertIs(ret["result"], True, ret)
        self.assertEqual(ret["comment"], "Command 'hello' run")
        self.assertEqual(ret["changes"]["stdout"], "hello world")

    async def test_nameIsSource(self) -> None:
        """
        Without C{source}, the name is the script and its arguments.
        """
        ret = await self.callScript("salt://scripts/hello.sh there")
        self.assertEqual(ret["changes"]["stdout"], "hello there")
        local = os.path.join(self.roots, "scripts/hello.sh")
        ret = await self.callScript(f"{local} local")
        self.assertEqual(ret["changes"]["stdout"], "hello local")

    async def test_missing(self) -> None:
        """
        A C{salt://} script that is not there fails, naming it.
        """
        ret = await self.callScript("x", source="salt://scripts/nothere.sh")
        self.assertIs(ret["result"], False)
        self.assertEqual(
            ret["comment"], "Unable to cache script salt://scripts/nothere.sh from saltenv 'base'"
        )

    async def test_template(self) -> None:
        """
        C{template: jinja} renders the script with C{context} and the
        grains, from the file server or a local file.
        """
        ret = await self.callScript(
            "t", source="salt://scripts/tpl.sh", template="jinja", context={"greeting": "hi"}
        )
        self.assertEqual(ret["changes"]["stdout"], "hi statetest", ret)
        local = os.path.join(self.roots, "scripts/tpl.sh")
        ret = await self.callScript(
            "t", source=local, template="jinja", defaults={"greeting": "yo"}
        )
        self.assertEqual(ret["changes"]["stdout"], "yo statetest", ret)

    async def test_testMode(self) -> None:
        """
        Test mode runs nothing.
        """
        ret = await self.callScript("hello", source="salt://scripts/hello.sh", test=True)
        self.assertEqual(
            (ret["result"], ret["comment"]), (None, "Command 'hello' would have been executed")
        )

    async def test_failure(self) -> None:
        """
        A script's non-zero exit fails the state.
        """
        local = self.write("scripts/fail.sh", "#!/bin/sh\nexit 4\n")
        ret = await runState("cmd.script", local, ctx=makeStateContext())
        self.assertIs(ret["result"], False)
        self.assertEqual(ret["changes"]["retcode"], 4)


class RunnerTests(TestCase):
    """
    The states through the compiler and the state runner, as a state run
    uses them.
    """

    async def test_watch(self) -> None:
        """
        A C{cmd.wait} and a C{module.wait} watching a command that ran are
        run (through their C{mod_watch}); one watching a command that did
        not run stays idle. The runner's C{creates} check and C{umask}
        reach C{cmd.run}.
        """
        from twisted.internet.threads import deferToThread

        from salttwist.state.compiler import compileLow
        from salttwist.state.runner import StateRunner

        target = os.path.abspath(self.mktemp())

        def entry(state: str, *args: Any) -> dict[str, Any]:
            return {"__sls__": "t", "__env__": "base", state: list(args)}

        high = {
            "trigger": entry("cmd", "run", {"name": "echo changed"}),
            "skipped": entry("cmd", "run", {"name": "exit 1"}, {"creates": "/"}),
            "runs": entry(
                "cmd",
                "wait",
                {"name": f"touch {target}; stat -c %a {target}"},
                {"umask": "077"},
                {"watch": [{"cmd": "trigger"}]},
            ),
            "idle": entry(
                "cmd", "wait", {"name": f"touch {target}.idle"}, {"watch": [{"cmd": "skipped"}]}
            ),
            "mod": entry(
                "module", "wait", {"test.echo": ["fromwatch"]}, {"watch": [{"cmd": "trigger"}]}
            ),
        }
        states = loadStates()
        chunks, errors = compileLow(high, {}, lambda s: f"{s}.mod_watch" in states)
        self.assertEqual(errors, [])
        base = makeStateContext()

        def contextFor(low: dict[str, Any]) -> StateContext:
            import dataclasses

            return dataclasses.replace(base, low=low)

        ret = await deferToThread(StateRunner(states, contextFor).run, chunks)
        byId = {entry["__id__"]: entry for entry in ret.values()}
        self.assertEqual(byId["skipped"]["comment"], "/ exists")
        self.assertEqual(byId["runs"]["changes"]["stdout"], "600", byId["runs"])
        self.assertEqual(byId["idle"]["changes"], {})
        self.assertFalse(os.path.exists(f"{target}.idle"))
        self.assertEqual(byId["mod"]["changes"], {"test.echo": "fromwatch"})
        self.assertTrue(all(entry["result"] for entry in ret.values()), ret)
