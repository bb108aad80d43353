"""
Real git repositories for tests: made with the git binary in a clean
environment (no user or system configuration), with commits, branches
and tags.
"""

from __future__ import annotations

import os
import subprocess

#: The environment test repositories are made in: no user or system git
#: configuration, a fixed author, the C locale.
GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "LC_ALL": "C",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: str, *args: str) -> str:
    """
    Run git in C{cwd} with L{GIT_ENV}.

    @return: its standard output, stripped.
    @raise subprocess.CalledProcessError: it failed (its error in the
        exception's C{stderr}).
    """
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr}")
    return proc.stdout.strip()


class Upstream:
    """
    A repository that plays the remote: made with a first commit on
    C{main}.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(path)
        git(path, "init", "-q", "-b", "main")
        self.commit("README", "first\n")

    @property
    def url(self) -> str:
        """
        @return: its C{file://} URL.
        """
        return "file://" + self.path

    def commit(self, filename: str, contents: str, message: str | None = None) -> str:
        """
        Write C{filename} and commit it on the current branch.

        @return: the new commit's id.
        """
        with open(os.path.join(self.path, filename), "w") as f:
            f.write(contents)
        git(self.path, "add", filename)
        git(self.path, "commit", "-q", "-m", message or f"change {filename}")
        return self.head()

    def head(self, rev: str = "HEAD") -> str:
        """
        @return: the commit id C{rev} points to.
        """
        return git(self.path, "rev-parse", f"{rev}^{{commit}}")

    def branch(self, name: str, start: str = "HEAD") -> None:
        """
        Make the branch C{name} at C{start} and check it out.
        """
        git(self.path, "checkout", "-q", "-b", name, start)

    def checkout(self, name: str) -> None:
        """
        Check out the existing branch C{name}.
        """
        git(self.path, "checkout", "-q", name)

    def tag(self, name: str, message: str | None = None) -> None:
        """
        Tag C{HEAD} (annotated with C{message}).
        """
        if message:
            git(self.path, "tag", "-a", "-m", message, name)
        else:
            git(self.path, "tag", name)

    def rewrite(self, filename: str, contents: str) -> str:
        """
        Replace the last commit by another (a history that is no longer a
        fast-forward of the old one).

        @return: the new commit's id.
        """
        with open(os.path.join(self.path, filename), "w") as f:
            f.write(contents)
        git(self.path, "add", filename)
        git(self.path, "commit", "-q", "--amend", "-m", "rewritten")
        return self.head()
