# -*- test-case-name: tests.test_startup -*-
"""
Running a script in a fresh interpreter, for the tests of what a process
imports and keeps: a module already imported by the test runner would
hide what the script itself imports.
"""

from __future__ import annotations

import os
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase


def runPython(
    script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """
    Run C{script} with this interpreter (C{python -c script args...}).

    @return: the finished process, its output captured as text.
    """
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def pythonOutput(
    testCase: SynchronousTestCase, script: str, *args: str, env: dict[str, str] | None = None
) -> str:
    """
    Run C{script} as L{runPython} does and fail C{testCase} (with the
    script's standard error) unless it exits with 0.

    @return: its standard output.
    """
    done = runPython(script, *args, env=env)
    testCase.assertEqual(done.returncode, 0, done.stderr)
    return done.stdout


def runWorkerChild(
    directory: str, taskModules: list[str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """
    Run a real C{python -m salttwist.workers.child} with C{taskModules},
    the modules of C{directory} importable, fd 3 at end of file (so it
    exits once it has imported them) and fd 4 a pipe nobody reads.

    @return: the finished process, its output captured as text.
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([directory, *sys.path]))
    with open(os.devnull, "rb") as empty:
        read, write = os.pipe()
        try:
            return subprocess.run(
                [sys.executable, "-m", "salttwist.workers.child", *taskModules],
                env=env,
                pass_fds=(3, 4),
                preexec_fn=lambda: (os.dup2(empty.fileno(), 3), os.dup2(write, 4)),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        finally:
            os.close(read)
            os.close(write)
