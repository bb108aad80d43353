# -*- test-case-name: tests.integration.test_installed -*-
"""
salttwist as users get it: built with C{python -m build} (the source
distribution, then the wheel from that source distribution) and installed
with pip into a fresh virtualenv outside the checkout.

The integration tests run the daemons and commands of that virtualenv, not
the checkout's: an editable install puts the checkout on C{sys.path}, which
once hid a wheel without its twistd plugins.

It is made once per test run, on first use, in a temporary directory that
is removed when the run ends. C{SALTTWIST_INSTALLED_VENV} names an existing
virtualenv to use instead (it is left alone). It is made with an
interpreter every user can run, where there is one, since some tests run
the commands as C{nobody}.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass

#: The environment variable naming a virtualenv with salttwist installed.
INSTALLED_VENV_ENV = "SALTTWIST_INSTALLED_VENV"

#: The checkout's top folder.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The twistd plugins every installed copy must carry.
PLUGIN_FILES = (
    "twisted/plugins/salttwist_master.py",
    "twisted/plugins/salttwist_minion.py",
    "twisted/plugins/salttwist_transports.py",
)


class InstallError(Exception):
    """
    Building or installing the package failed; the message has the
    command and its output.
    """


@dataclass(frozen=True)
class InstalledCopy:
    """
    A virtualenv with salttwist installed.

    @ivar venv: its directory.
    @ivar wheel: the wheel installed into it, if it was made here.
    """

    venv: str
    wheel: str | None = None

    @property
    def bin(self) -> str:
        """
        Its C{bin} directory, where the console scripts are.
        """
        return os.path.join(self.venv, "bin")

    @property
    def python(self) -> str:
        """
        Its interpreter.
        """
        return os.path.join(self.bin, "python")

    def sitePackages(self) -> str:
        """
        @return: its C{site-packages} directory, asked of its interpreter.
        """
        return run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=tempfile.gettempdir(),
        ).strip()


def run(argv: list[str], cwd: str | None = None, timeout: float = 600) -> str:
    """
    Run C{argv} to completion, without the checkout on C{PYTHONPATH}.

    @return: its standard output.
    @raise InstallError: if it fails.
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise InstallError(
            f"$ {' '.join(argv)}\nexit code {done.returncode}\n"
            f"--- stdout ---\n{done.stdout}--- stderr ---\n{done.stderr}"
        )
    return done.stdout


def buildWheel(source: str, outdir: str) -> str:
    """
    Build C{source}'s source distribution and, from it, the wheel, with
    C{python -m build} (each in an isolated build environment).

    @return: the wheel's path.
    """
    run([sys.executable, "-m", "build", "--outdir", outdir, source], cwd=outdir)
    wheels = [name for name in os.listdir(outdir) if name.endswith(".whl")]
    if len(wheels) != 1:
        raise InstallError(f"python -m build left {sorted(os.listdir(outdir))} in {outdir}")
    return os.path.join(outdir, wheels[0])


def makeVirtualenv(
    venv: str, *requirements: str, editable: str | None = None, python: str | None = None
) -> InstalledCopy:
    """
    Create a fresh virtualenv at C{venv} and pip install C{requirements}
    into it (and C{-e editable}, if given).

    @param python: the interpreter it is made with; by default
        L{baseInterpreter}.
    """
    run([python or baseInterpreter(), "-m", "venv", venv])
    copy = InstalledCopy(venv)
    pip = [copy.python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if requirements:
        run([*pip, *requirements], cwd=tempfile.gettempdir())
    if editable is not None:
        run([*pip, "-e", editable], cwd=tempfile.gettempdir())
    return copy


def baseInterpreter() -> str:
    """
    @return: the interpreter this process's virtualenv was made with.
    """
    return getattr(sys, "_base_executable", sys.executable)


def everyoneCanRun(path: str) -> bool:
    """
    @return: whether every user can reach and run C{path} (the tests run
        the installed copy as C{nobody} too).
    """
    path = os.path.realpath(path)
    directory = os.path.dirname(path)
    while True:
        if not os.stat(directory).st_mode & stat.S_IXOTH:
            return False
        if directory == os.path.dirname(directory):
            break
        directory = os.path.dirname(directory)
    return os.path.isfile(path) and bool(os.stat(path).st_mode & stat.S_IXOTH)


def publicInterpreter() -> str | None:
    """
    @return: an interpreter of this Python version that every user can
        run: L{baseInterpreter}, or else the system's C{python3} (an
        interpreter under C{/root}, as pyenv's, is not); L{None} if none.
    """
    candidates = [baseInterpreter(), f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"]
    for candidate in candidates:
        if os.path.exists(candidate) and everyoneCanRun(candidate):
            return candidate
    return None


def cleanCopyOfCheckout(destination: str) -> str:
    """
    Copy the files git tracks in the checkout (as they are in the working
    tree) to C{destination}, as a fresh clone with the current changes
    would have them.

    @return: C{destination}.
    """
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], CHECKOUT)
    for name in filter(None, listed.split("\0")):
        source = os.path.join(CHECKOUT, name)
        if not os.path.isfile(source):
            continue
        target = os.path.join(destination, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)
    return destination


@functools.cache
def installedCopy() -> InstalledCopy:
    """
    The virtualenv the integration tests run: C{SALTTWIST_INSTALLED_VENV}
    if set, else one made now (once per process) from a wheel built from a
    clean copy of the checkout, removed when the process exits.
    """
    named = os.environ.get(INSTALLED_VENV_ENV)
    if named:
        return InstalledCopy(os.path.abspath(named))
    where = tempfile.mkdtemp(prefix="salttwist-installed-")
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    # Other users run it too (publisher_acl, privilege drop tests).
    os.chmod(where, 0o755)
    source = cleanCopyOfCheckout(os.path.join(where, "source"))
    outdir = os.path.join(where, "dist")
    os.makedirs(outdir)
    wheel = buildWheel(source, outdir)
    # With the postgres extra's driver: the PostgreSQL job cache's test
    # (tests.integration.test_jobcache_pg) runs a master on it.
    copy = makeVirtualenv(
        os.path.join(where, "venv"),
        wheel,
        "psycopg[binary] >= 3.1, < 4",
        python=publicInterpreter(),
    )
    return InstalledCopy(copy.venv, wheel)
