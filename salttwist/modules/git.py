# -*- test-case-name: tests.test_modules_git -*-
"""
Salt's C{git} module: the git binary run on the minion, with Salt's names,
arguments and return values (C{git.clone}, C{git.fetch}, C{git.revision},
...). Every function runs in a thread.

A git command that fails raises L{CommandExecutionError} with Salt's words,
C{Command 'git ...' failed: <its standard error>} (passwords of URLs
redacted), whatever C{ignore_retcode} says (which, as in Salt, only spares
the log).

git runs in a cleaned environment: the minion's, without any C{GIT_*}
variable that would point git at another repository or configuration
(C{GIT_DIR}, C{GIT_WORK_TREE}, C{GIT_INDEX_FILE}, ...), with the C locale,
no terminal prompt (C{GIT_TERMINAL_PROMPT=0}) and SSH in batch mode, so a
command never waits for a password. With C{user}, git runs as that user
(the minion must be root) with that user's C{HOME}. C{identity} names SSH
private keys, tried in order.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from twisted.logger import Logger

from salttwist.modules import CommandExecutionError, SaltInvocationError

log = Logger(namespace="salttwist.modules.git")

#: Environment variables kept although they start with C{GIT_}: none
#: redirects git elsewhere.
_KEPT_GIT_VARIABLES = frozenset({"GIT_SSL_NO_VERIFY", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH"})


def _gitBinary() -> str:
    """
    @return: the git executable: C{/usr/bin/git} when present, else the
        first on C{PATH}.
    @raise CommandExecutionError: there is none.
    """
    if os.access("/usr/bin/git", os.X_OK):
        return "/usr/bin/git"
    found = shutil.which("git")
    if found is None:
        raise CommandExecutionError("git is not installed on the minion (no git on PATH)")
    return found


def _redactAuth(text: str) -> str:
    """
    @return: C{text} with the password of every C{scheme://user:password@}
        URL replaced by C{<redacted>}, as Salt's
        C{salt.utils.url.redact_http_basic_auth}.
    """
    return re.sub(r"(https?://[^:/@\s]+):[^@\s/]*@", r"\1:<redacted>@", str(text))


def _addHttpBasicAuth(url: str, user: str | None = None, password: str | None = None) -> str:
    """
    @return: C{url} with C{user} (and C{password}) as its user information,
        for C{https_user}/C{https_pass}; C{url} as it is without a user.
    @raise SaltInvocationError: a user was given for a URL that is not
        C{https://} (Salt sends basic authentication over HTTPS only).
    """
    if user is None and password is None:
        return url
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise SaltInvocationError("Basic Auth only supported for HTTPS")
    if password is None:
        netloc = f"{quote(str(user), safe='')}@{parts.hostname}"
    else:
        netloc = f"{quote(str(user), safe='')}:{quote(str(password), safe='')}@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _environment(user: str | None, identity: str | None) -> dict[str, str]:
    """
    @return: the environment git runs with (see the module's docstring).
    """
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARIABLES
    }
    env.pop("NOTIFY_SOCKET", None)
    env.update({"LC_ALL": "C", "LANG": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0"})
    ssh = ["ssh", "-o", "BatchMode=yes"]
    if identity:
        ssh += ["-i", identity, "-o", "IdentitiesOnly=yes"]
    env["GIT_SSH_COMMAND"] = shlex.join(ssh)
    if user:
        entry = pwd.getpwnam(user)
        env.update({"HOME": entry.pw_dir, "USER": entry.pw_name, "LOGNAME": entry.pw_name})
    return env


def _formatOpts(opts: Any) -> list[str]:
    """
    @return: Salt's C{opts}/C{git_opts} (a string split as a shell would,
        or a list) as a list of arguments.
    """
    if opts is None or opts == "":
        return []
    if isinstance(opts, list | tuple):
        return [str(o) for o in opts]
    return shlex.split(str(opts))


def _expandPath(cwd: Any, user: str | None) -> str:
    """
    @return: C{cwd} with C{~} expanded (for C{user} when given).
    @raise SaltInvocationError: the result is not absolute.
    """
    path = str(cwd)
    if user and (path == "~" or path.startswith("~/")):
        path = f"~{user}{path[1:]}"
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        raise SaltInvocationError(f"cwd '{cwd}' is not an absolute path")
    return path


def _identities(identity: Any) -> list[str | None]:
    """
    @return: the SSH keys to try in order (C{[None]}: the default ones).
    @raise SaltInvocationError: a key is not a local absolute path.
    """
    if not identity:
        return [None]
    keys = [identity] if isinstance(identity, str) else list(identity)
    for key in keys:
        if "://" in str(key):
            raise SaltInvocationError(
                f"identity '{key}' must be a local path on the minion "
                "(the git state caches salt:// identities first)"
            )
        if not os.path.isabs(os.path.expanduser(str(key))):
            raise SaltInvocationError(f"identity '{key}' is not an absolute path")
    return [os.path.expanduser(str(k)) for k in keys]


def _run(
    args: Sequence[str],
    cwd: str | None = None,
    user: str | None = None,
    identity: Any = None,
    ignore_retcode: bool = False,
    failhard: bool = True,
    redirect_stderr: bool = False,
    output_encoding: str | None = None,
) -> dict[str, Any]:
    """
    Run C{git <args>} (Salt's C{_git_run}).

    @return: C{{"retcode", "stdout", "stderr"}}, the outputs stripped of
        their trailing newline (C{stderr} is empty and C{stdout} has both
        with C{redirect_stderr}).
    @raise CommandExecutionError: git failed and C{failhard}, or git cannot
        start (bad C{cwd} or C{user}).
    """
    if user and os.geteuid() != 0:
        if pwd.getpwuid(os.geteuid()).pw_name != user:
            raise CommandExecutionError(
                f"user={user!r} needs the minion to run as root; it runs as uid {os.geteuid()}"
            )
        user = None
    if user:
        try:
            pwd.getpwnam(user)
        except KeyError:
            raise CommandExecutionError(f"User '{user}' is not available") from None
    if cwd is not None and not os.path.isdir(cwd):
        raise CommandExecutionError(f"Specified cwd '{cwd}' either not absolute or does not exist")
    command = [_gitBinary(), *args]
    shown = _redactAuth(shlex.join(["git", *args]))
    encoding = output_encoding or "utf-8"
    errors: list[str] = []
    result: dict[str, Any] = {}
    for key in _identities(identity):
        try:
            proc = subprocess.run(  # noqa: S603 (an argument list, no shell)
                command,
                cwd=cwd,
                env=_environment(user, key),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if redirect_stderr else subprocess.PIPE,
                user=user,
                start_new_session=True,
                check=False,
            )
        except OSError as e:
            raise CommandExecutionError(f"Unable to run {shown}: {e.strerror}") from None
        result = {
            "retcode": proc.returncode,
            "stdout": proc.stdout.decode(encoding, "replace").rstrip("\n"),
            "stderr": (proc.stderr or b"").decode(encoding, "replace").rstrip("\n"),
        }
        if proc.returncode == 0:
            return result
        err = result["stdout" if redirect_stderr else "stderr"]
        if err:
            errors.append(_redactAuth(err))
    if not ignore_retcode:
        log.error(
            "Command {command} failed with exit code {retcode}",
            command=shown,
            retcode=result["retcode"],
        )
    if failhard:
        if identity:
            raise CommandExecutionError(
                "Unable to authenticate using identity file:\n\n" + "\n".join(errors)
            )
        msg = f"Command '{shown}' failed"
        if errors:
            msg += f": {errors[-1]}"
        raise CommandExecutionError(msg)
    return result


def _git(cwd: Any, user: str | None, git_opts: Any, *args: str, **kwargs: Any) -> dict[str, Any]:
    """
    L{_run} with C{git_opts} before the subcommand, in C{cwd} (expanded).
    """
    where = None if cwd is None else _expandPath(cwd, user)
    return _run([*_formatOpts(git_opts), *args], cwd=where, user=user, **kwargs)


def _gitAllowing(
    cwd: Any,
    user: str | None,
    allowed: tuple[int, ...],
    *args: str,
    output_encoding: str | None = None,
) -> dict[str, Any]:
    """
    L{_git} for a command whose other exit codes than 0 are answers, not
    failures (C{git config --get-all} exits 1 for a key not set, C{git
    merge-base --is-ancestor} 1 for "no"): an exit code in C{allowed} is
    returned, any other raises with Salt's words.

    @return: L{_run}'s result.
    @raise CommandExecutionError: C{Command 'git ...' failed: <stderr>}.
    """
    result = _git(
        cwd, user, "", *args, ignore_retcode=True, failhard=False, output_encoding=output_encoding
    )
    if result["retcode"] not in allowed:
        raise CommandExecutionError(f"Command 'git {shlex.join(args)}' failed: {result['stderr']}")
    return result


def version(versioninfo: bool = False) -> str | list[int]:
    """
    Return git's version (C{"2.39.5"}), or with C{versioninfo=True} its
    numbers as a list (C{[2, 39, 5]}).

    CLI Example:

        salttwist '*' git.version
    """
    out = _run(["--version"])["stdout"]
    match = re.search(r"(\d+(?:\.\d+)+)", out)
    text = match.group(1) if match else out
    if versioninfo:
        return [int(x) for x in text.split(".") if x.isdigit()]
    return text


def clone(
    cwd: str,
    url: str | None = None,
    name: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    https_user: str | None = None,
    https_pass: str | None = None,
    ignore_retcode: bool = False,
    saltenv: str = "base",
    output_encoding: str | None = None,
) -> bool:
    """
    Clone C{url} into C{cwd} (or into C{cwd}/C{name}); return C{True}.
    C{opts} are C{git clone}'s options (C{--depth 1}, C{--branch x},
    C{--bare}); C{identity}: SSH private key(s) to use; C{https_user} and
    C{https_pass}: HTTP basic authentication (HTTPS only).

    CLI Example:

        salttwist '*' git.clone /path/to/repo_parent_dir https://github.com/saltstack/salt.git
        salttwist '*' git.clone /path/to/repo https://example.com/r.git opts='--depth 1'
    """
    if not url:
        raise SaltInvocationError("git.clone: url is required")
    path = _expandPath(cwd, user)
    fullUrl = _addHttpBasicAuth(str(url), https_user, https_pass)
    if name is not None:
        parent, target = path, str(name)
    else:
        parent, target = os.path.dirname(path), os.path.basename(path)
    os.makedirs(parent, exist_ok=True)
    _run(
        [*_formatOpts(git_opts), "clone", *_formatOpts(opts), "--", fullUrl, target],
        cwd=parent,
        user=user,
        identity=identity,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )
    return True


def init(
    cwd: str,
    bare: bool = False,
    template: str | None = None,
    separate_git_dir: str | None = None,
    shared: Any = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Create a repository in C{cwd} (made when missing); return git's output.

    CLI Example:

        salttwist '*' git.init /path/to/repo
        salttwist '*' git.init /path/to/bare/repo.git bare=True
    """
    path = _expandPath(cwd, user)
    os.makedirs(path, exist_ok=True)
    args = ["init"]
    if bare:
        args.append("--bare")
    if template is not None:
        args.append(f"--template={template}")
    if separate_git_dir is not None:
        args.append(f"--separate-git-dir={separate_git_dir}")
    if shared is not None:
        args.append(f"--shared={shared}")
    args += _formatOpts(opts)
    return _git(
        path,
        user,
        git_opts,
        *args,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]


_FETCH_LINE = re.compile(
    r"[\s*+!-]*(?:([0-9a-f]+)\.\.\.?([0-9a-f]+)|\[(?:new (tag|branch|ref)|tag update)\])\s+(.+)->"
)


def fetch(
    cwd: str,
    remote: str | None = None,
    force: bool = False,
    refspecs: Any = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    ignore_retcode: bool = False,
    saltenv: str = "base",
    output_encoding: str | None = None,
) -> dict[str, Any]:
    """
    Fetch from C{remote} (default: the branch's, else C{origin}) and return
    what changed, as Salt does: C{{"new branches": [...], "new tags":
    [...], "updated branches": {ref: {"old", "new"}}, "updated tags":
    [...]}} (only the keys that apply; C{{}} when nothing changed).

    CLI Example:

        salttwist '*' git.fetch /path/to/repo upstream
        salttwist '*' git.fetch /path/to/repo refspecs='refs/heads/*:refs/remotes/origin/*'
    """
    args = ["fetch"]
    if force:
        args.append("--force")
    args += [o for o in _formatOpts(opts) if o not in ("-f", "--force")]
    if remote:
        args.append(str(remote))
    if refspecs is not None:
        if not isinstance(refspecs, list | tuple):
            refspecs = str(refspecs).split(",")
        args += [str(r) for r in refspecs]
    output = _git(
        cwd,
        user,
        git_opts,
        *args,
        identity=identity,
        ignore_retcode=ignore_retcode,
        redirect_stderr=True,
        output_encoding=output_encoding,
    )["stdout"]
    ret: dict[str, Any] = {}
    for line in output.splitlines():
        match = _FETCH_LINE.match(line)
        if not match:
            continue
        old, new, newType, ref = match.groups()
        ref = ref.rstrip()
        if newType is not None:
            ret.setdefault("new tags" if newType == "tag" else "new branches", []).append(ref)
        elif old is not None:
            ret.setdefault("updated branches", {})[ref] = {"old": old, "new": new}
        else:
            ret.setdefault("updated tags", []).append(ref)
    return ret


def pull(
    cwd: str,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    ignore_retcode: bool = False,
    saltenv: str = "base",
    output_encoding: str | None = None,
) -> str:
    """
    Run C{git pull} (with C{opts}) and return its output.

    CLI Example:

        salttwist '*' git.pull /path/to/repo opts='--rebase origin master'
    """
    return _git(
        cwd,
        user,
        git_opts,
        "pull",
        *_formatOpts(opts),
        identity=identity,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]


def checkout(
    cwd: str,
    rev: str | None = None,
    force: bool = False,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Check out C{rev} (C{opts='-b newbranch'} makes a branch); return git's
    output (it writes to standard error, which is returned).

    CLI Example:

        salttwist '*' git.checkout /path/to/repo somebranch
        salttwist '*' git.checkout /path/to/repo opts='-b newbranch'
    """
    args = ["checkout"]
    if force:
        args.append("--force")
    more = _formatOpts(opts)
    if rev is None and not any(o in ("-b", "-B") for o in more):
        raise SaltInvocationError("'rev' argument is required unless -b or -B in opts")
    args += more
    if rev is not None:
        args.append(str(rev))
    return _git(
        cwd,
        user,
        git_opts,
        *args,
        ignore_retcode=ignore_retcode,
        redirect_stderr=True,
        output_encoding=output_encoding,
    )["stdout"]


def rev_parse(
    cwd: str,
    rev: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Return C{git rev-parse}'s output for C{rev} (C{opts='--abbrev-ref'}).

    CLI Example:

        salttwist '*' git.rev_parse /path/to/repo HEAD
        salttwist '*' git.rev_parse /path/to/repo 'v1.0^{commit}'
        salttwist '*' git.rev_parse /path/to/repo HEAD opts='--abbrev-ref'
    """
    args = ["rev-parse", *_formatOpts(opts)]
    if rev is not None:
        args.append(str(rev))
    return _git(
        cwd,
        user,
        git_opts,
        *args,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]


def revision(
    cwd: str,
    rev: str = "HEAD",
    short: bool = False,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Return the commit id C{rev} (default C{HEAD}) points to; C{short=True}
    for the abbreviated one.

    CLI Example:

        salttwist '*' git.revision /path/to/repo mybranch
    """
    args = ["rev-parse", *(["--short"] if short else []), str(rev)]
    return _git(
        cwd, user, "", *args, ignore_retcode=ignore_retcode, output_encoding=output_encoding
    )["stdout"]


def current_branch(
    cwd: str,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Return the checked-out branch's name (C{HEAD} when detached).

    CLI Example:

        salttwist '*' git.current_branch /path/to/repo
    """
    return _git(
        cwd,
        user,
        "",
        "rev-parse",
        "--abbrev-ref",
        "HEAD",
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]


def _parseRefs(output: str) -> dict[str, str]:
    refs: dict[str, str] = {}
    for line in output.splitlines():
        try:
            sha, ref = line.split(None, 1)
        except ValueError:
            continue
        refs[ref] = sha
    return refs


def remote_refs(
    url: str,
    heads: bool = False,
    tags: bool = False,
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    https_user: str | None = None,
    https_pass: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    saltenv: str = "base",
    **kwargs: Any,
) -> dict[str, str]:
    """
    Return the refs of the remote repository C{url} without a local
    checkout: C{{ref name: commit id}} (C{HEAD}, C{refs/heads/...},
    C{refs/tags/...}, annotated tags also as C{refs/tags/x^{}}).
    C{heads}/C{tags} restrict to branches/tags; C{filter} to refs matching
    a pattern.

    CLI Example:

        salttwist '*' git.remote_refs https://github.com/saltstack/salt.git
        salttwist '*' git.remote_refs https://github.com/saltstack/salt.git filter=develop
    """
    filter_ = kwargs.pop("filter", None)
    unknown = [k for k in kwargs if not k.startswith("__")]
    if unknown:
        raise SaltInvocationError(
            f"The following keyword arguments are not valid: {', '.join(unknown)}"
        )
    args = ["ls-remote"]
    if heads:
        args.append("--heads")
    if tags:
        args.append("--tags")
    args += ["--", _addHttpBasicAuth(str(url), https_user, https_pass)]
    if filter_:
        args.append(str(filter_))
    out = _run(
        args,
        user=user,
        identity=identity,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
    return _parseRefs(out)


def ls_remote(
    cwd: str | None = None,
    remote: str = "origin",
    ref: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    https_user: str | None = None,
    https_pass: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    saltenv: str = "base",
) -> dict[str, str]:
    """
    Return the refs of C{remote} (a remote's name, with C{cwd} a
    repository; or a URL): C{{ref name: commit id}}, only those matching
    C{ref} when given.

    CLI Example:

        salttwist '*' git.ls_remote /path/to/repo origin master
        salttwist '*' git.ls_remote remote=https://mydomain.tld/repo.git ref=mytag opts='--tags'
    """
    target = str(remote)
    if "://" in target:
        target = _addHttpBasicAuth(target, https_user, https_pass)
    args = ["ls-remote", *_formatOpts(opts), target]
    if ref:
        args.append(str(ref))
    out = _git(
        cwd,
        user,
        git_opts,
        *args,
        identity=identity,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
    return _parseRefs(out)


def status(
    cwd: str,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> dict[str, list[str]]:
    """
    Return the files with changes, by kind as Salt does:
    C{{"modified": [...], "new": [...], "deleted": [...], "untracked":
    [...]}} (only kinds present; other status letters as they are).

    CLI Example:

        salttwist '*' git.status /path/to/repo
    """
    kinds = {"M": "modified", "A": "new", "D": "deleted", "??": "untracked"}
    out = _git(
        cwd,
        user,
        "",
        "status",
        "-z",
        "--porcelain",
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
    ret: dict[str, list[str]] = {}
    for entry in out.split("\0"):
        try:
            state, filename = entry.split(None, 1)
        except ValueError:
            continue
        ret.setdefault(kinds.get(state, state), []).append(filename)
    return ret


def reset(
    cwd: str,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Run C{git reset} with C{opts} (C{'--hard origin/master'}); return its
    output.

    CLI Example:

        salttwist '*' git.reset /path/to/repo master
        salttwist '*' git.reset /path/to/repo opts='--hard origin/master'
    """
    return _git(
        cwd,
        user,
        git_opts,
        "reset",
        *_formatOpts(opts),
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]


def merge(
    cwd: str,
    rev: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> str:
    """
    Merge C{rev} (default: the upstream branch) into the current branch;
    return git's output.

    CLI Example:

        salttwist '*' git.merge /path/to/repo rev=upstream/foo opts='--ff-only'
    """
    args = ["merge", *_formatOpts(opts)]
    if rev:
        args.append(str(rev))
    return _git(
        cwd,
        user,
        git_opts,
        *args,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]


def merge_base(
    cwd: str,
    refs: Any = None,
    octopus: bool = False,
    is_ancestor: bool = False,
    independent: bool = False,
    fork_point: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> Any:
    """
    Run C{git merge-base}: the best common ancestor of C{refs} (a list or
    comma-separated); with C{is_ancestor=True} (two refs), whether the
    first is an ancestor of the second (C{True}/C{False}).

    CLI Example:

        salttwist '*' git.merge_base /path/to/repo refs=8f2e542,4ad8cab is_ancestor=True
    """
    if isinstance(refs, str):
        refs = refs.split(",")
    refs = [str(r) for r in (refs or [])]
    args = ["merge-base", *_formatOpts(opts)]
    if is_ancestor:
        if len(refs) != 2:
            raise SaltInvocationError("Two refs must be specified when 'is_ancestor' is True")
        result = _gitAllowing(
            cwd,
            user,
            (0, 1),
            *_formatOpts(git_opts),
            *args,
            "--is-ancestor",
            *refs,
            output_encoding=output_encoding,
        )
        return result["retcode"] == 0
    if octopus:
        args.append("--octopus")
    if independent:
        args.append("--independent")
    if fork_point:
        args += ["--fork-point", str(fork_point)]
    out = _git(
        cwd,
        user,
        git_opts,
        *args,
        *refs,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
    return out.splitlines() if (octopus or independent) else out


def diff(
    cwd: str,
    item1: str | None = None,
    item2: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    no_index: bool = False,
    cached: bool = False,
    paths: Any = None,
    output_encoding: str | None = None,
) -> str:
    """
    Return C{git diff}'s output between C{item1} and C{item2} (or the work
    tree; C{cached=True}: the index).

    CLI Example:

        salttwist '*' git.diff /path/to/repo HEAD
    """
    args = ["diff", *_formatOpts(opts)]
    if cached:
        args.append("--cached")
    if no_index:
        args.append("--no-index")
    args += [str(i) for i in (item1, item2) if i is not None]
    if paths:
        args += ["--", *([paths] if isinstance(paths, str) else [str(p) for p in paths])]
    return _git(cwd, user, git_opts, *args, output_encoding=output_encoding)["stdout"]


def discard_local_changes(
    cwd: str,
    path: str = ".",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Discard uncommitted changes to tracked files under C{path}
    (C{git checkout -- path}).

    CLI Example:

        salttwist '*' git.discard_local_changes /path/to/repo
    """
    return _git(
        cwd,
        user,
        "",
        "checkout",
        "--",
        str(path),
        ignore_retcode=ignore_retcode,
        redirect_stderr=True,
        output_encoding=output_encoding,
    )["stdout"]


def list_branches(
    cwd: str,
    remote: bool = False,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> list[str]:
    """
    Return the local branches (C{remote=True}: the remote-tracking ones,
    as C{origin/main}), sorted.

    CLI Example:

        salttwist '*' git.list_branches /path/to/repo remote=True
    """
    where = "refs/remotes/" if remote else "refs/heads/"
    out = _git(
        cwd,
        user,
        "",
        "for-each-ref",
        "--format=%(refname:short)",
        where,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
    return sorted(line for line in out.splitlines() if line and not line.endswith("/HEAD"))


def list_tags(
    cwd: str,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> list[str]:
    """
    Return the repository's tags, sorted.

    CLI Example:

        salttwist '*' git.list_tags /path/to/repo
    """
    out = _git(
        cwd,
        user,
        "",
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/tags/",
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
    return sorted(line for line in out.splitlines() if line)


def remotes(
    cwd: str,
    user: str | None = None,
    password: str | None = None,
    redact_auth: bool = True,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> dict[str, dict[str, str]]:
    """
    Return the repository's remotes: C{{name: {"fetch": url, "push":
    url}}}, passwords in URLs redacted unless C{redact_auth=False}.

    CLI Example:

        salttwist '*' git.remotes /path/to/repo
    """
    out = _git(
        cwd,
        user,
        "",
        "remote",
        "--verbose",
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
    ret: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        match = re.match(r"(\S+)\s+(.*)\s+\((fetch|push)\)$", line)
        if not match:
            continue
        name, url, kind = match.groups()
        ret.setdefault(name, {})[kind] = _redactAuth(url) if redact_auth else url
    return ret


def remote_set(
    cwd: str,
    url: str,
    remote: str = "origin",
    user: str | None = None,
    password: str | None = None,
    https_user: str | None = None,
    https_pass: str | None = None,
    push_url: str | None = None,
    push_https_user: str | None = None,
    push_https_pass: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> dict[str, str]:
    """
    Set (add or change) the URL of C{remote}; return the remote's new
    C{{"fetch", "push"}} as C{git.remotes} shows it.

    CLI Example:

        salttwist '*' git.remote_set /path/to/repo git@github.com:user/repo.git remote=upstream
    """
    fullUrl = _addHttpBasicAuth(str(url), https_user, https_pass)
    if remote in remotes(cwd, user=user, output_encoding=output_encoding):
        _git(cwd, user, "", "remote", "rm", str(remote), output_encoding=output_encoding)
    _git(cwd, user, "", "remote", "add", str(remote), fullUrl, output_encoding=output_encoding)
    if push_url:
        pushUrl = _addHttpBasicAuth(str(push_url), push_https_user, push_https_pass)
        _git(
            cwd,
            user,
            "",
            "remote",
            "set-url",
            "--push",
            str(remote),
            pushUrl,
            output_encoding=output_encoding,
        )
    return remotes(cwd, user=user, output_encoding=output_encoding).get(str(remote), {})


def branch(
    cwd: str,
    name: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> bool:
    """
    Run C{git branch} with C{opts} (and C{name}); return C{True}.

    CLI Example:

        salttwist '*' git.branch /path/to/repo mybranch opts='--set-upstream-to origin/mybranch'
    """
    args = ["branch", *_formatOpts(opts)]
    if name is not None:
        args.append(str(name))
    _git(
        cwd,
        user,
        git_opts,
        *args,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )
    return True


def submodule(
    cwd: str,
    command: str,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    ignore_retcode: bool = False,
    saltenv: str = "base",
    output_encoding: str | None = None,
    **kwargs: Any,
) -> str:
    """
    Run C{git submodule <command>} (C{update}, C{init}, C{sync}, ...) with
    C{opts}; return its output.

    CLI Example:

        salttwist '*' git.submodule /path/to/repo update opts='--init --recursive'
    """
    if not command:
        raise SaltInvocationError("'command' argument is required")
    return _git(
        cwd,
        user,
        git_opts,
        "submodule",
        str(command),
        *_formatOpts(opts),
        identity=identity,
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]


def _configArgs(cwd: Any, kwargs: dict[str, Any]) -> list[str]:
    """
    @return: C{--global} (with C{global=True}) or C{--local} for a
        repository's configuration.
    @raise SaltInvocationError: neither C{cwd} nor C{global=True}.
    """
    globalConfig = bool(kwargs.pop("global", False))
    unknown = [k for k in kwargs if not k.startswith("__")]
    if unknown:
        raise SaltInvocationError(
            f"The following keyword arguments are not valid: {', '.join(unknown)}"
        )
    if globalConfig:
        return ["--global"]
    if cwd is None:
        raise SaltInvocationError("'cwd' argument required unless global=True")
    return ["--local"]


def config_get(
    key: str,
    cwd: str | None = None,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> Any:
    """
    Return the value of the configuration C{key} (of the repository at
    C{cwd}, or with C{global=True} the user's); C{None} when unset. With
    C{all=True}, every value as a list.

    CLI Example:

        salttwist '*' git.config_get user.name cwd=/path/to/repo
        salttwist '*' git.config_get user.email global=True
    """
    allValues = bool(kwargs.pop("all", False))
    scope = _configArgs(cwd, kwargs)
    result = _gitAllowing(
        cwd if scope == ["--local"] else None,
        user,
        (0, 1),
        "config",
        *scope,
        "--get-all",
        str(key),
        output_encoding=output_encoding,
    )
    if result["retcode"] == 1:
        return None
    values = result["stdout"].splitlines()
    return values if allValues else (values[-1] if values else "")


def config_set(
    key: str,
    value: Any = None,
    multivar: Any = None,
    cwd: str | None = None,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> list[str]:
    """
    Set the configuration C{key} to C{value} (or to each of C{multivar}),
    in the repository at C{cwd} or, with C{global=True}, the user's; return
    its values afterwards, as Salt does.

    CLI Example:

        salttwist '*' git.config_set user.email me@example.com cwd=/path/to/repo
        salttwist '*' git.config_set user.name 'My Name' global=True
    """
    if (value is None) == (multivar is None):
        raise SaltInvocationError("Exactly one of 'value' or 'multivar' must be specified")
    scope = _configArgs(cwd, kwargs)
    where = cwd if scope == ["--local"] else None
    if value is not None:
        _git(
            where, user, "", "config", *scope, str(key), str(value), output_encoding=output_encoding
        )
    else:
        values = multivar.split(",") if isinstance(multivar, str) else list(multivar)
        _git(
            where,
            user,
            "",
            "config",
            *scope,
            "--replace-all",
            str(key),
            str(values[0]),
            output_encoding=output_encoding,
        )
        for extra in values[1:]:
            _git(where, user, "", "config", *scope, "--add", str(key), str(extra))
    return config_get(
        key, cwd=where, user=user, all=True, **({"global": True} if where is None else {})
    )


def tag(
    cwd: str,
    name: str,
    ref: str = "HEAD",
    message: str | None = None,
    opts: Any = "",
    git_opts: Any = "",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Make the tag C{name} at C{ref} (annotated with C{message}), or with
    C{opts='-d'} delete it; return git's output.

    CLI Example:

        salttwist '*' git.tag /path/to/repo v1.2 message='Version 1.2'
        salttwist '*' git.tag /path/to/repo v1.2 opts='-d'
    """
    more = [o for o in _formatOpts(opts) if o not in ("-a", "--annotate")]
    if any(o == "-m" or "--message" in o for o in more):
        raise SaltInvocationError('Tag messages must be passed in the "message" argument')
    args = ["tag"]
    if message is not None:
        args += ["-a", "-m", str(message)]
    args += [*more, str(name)]
    if "-d" not in more and "--delete" not in more:
        args.append(str(ref))
    return _git(
        cwd,
        user,
        git_opts,
        *args,
        ignore_retcode=ignore_retcode,
        redirect_stderr=True,
        output_encoding=output_encoding,
    )["stdout"]


def config_get_regexp(
    key: str,
    value_regex: str | None = None,
    cwd: str | None = None,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> dict[str, list[str]]:
    """
    Return the configuration keys matching the regular expression C{key}
    (and whose values match C{value_regex}), each with its values:
    C{{key: [value, ...]}} (C{{}} when none), in the repository at C{cwd}
    or, with C{global=True}, the user's.

    CLI Example:

        salttwist '*' git.config_get_regexp '^user\\.' cwd=/path/to/repo
    """
    scope = _configArgs(cwd, kwargs)
    args = ["config", *scope, "--get-regexp", str(key)]
    if value_regex is not None:
        args.append(str(value_regex))
    result = _gitAllowing(
        cwd if scope == ["--local"] else None,
        user,
        (0, 1),
        *args,
        output_encoding=output_encoding,
    )
    ret: dict[str, list[str]] = {}
    for line in result["stdout"].splitlines():
        name, _, value = line.partition(" ")
        if name:
            ret.setdefault(name, []).append(value)
    return ret


#: Salt's other name for L{config_get_regexp}.
config_get_regex = config_get_regexp


def config_unset(
    key: str,
    value_regex: str | None = None,
    cwd: str | None = None,
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> bool:
    """
    Unset the configuration C{key} (only its values matching
    C{value_regex}; with C{all=True}, every value of a multivar), in the
    repository at C{cwd} or, with C{global=True}, the user's; return
    C{True}.

    @raise CommandExecutionError: with Salt's words for git's exit codes
        (the key does not exist, several values match, a bad regex).

    CLI Example:

        salttwist '*' git.config_unset user.name cwd=/path/to/repo
        salttwist '*' git.config_unset remote.origin.fetch all=True cwd=/path/to/repo
    """
    unsetAll = bool(kwargs.pop("all", False))
    scope = _configArgs(cwd, kwargs)
    where = cwd if scope == ["--local"] else None
    args = ["config", "--unset-all" if unsetAll else "--unset", *scope, str(key)]
    if value_regex is not None:
        args.append(str(value_regex))
    result = _gitAllowing(where, user, (0, 1, 5, 6), *args, output_encoding=output_encoding)
    retcode = result["retcode"]
    if retcode == 1:
        raise CommandExecutionError("Section or key is invalid")
    if retcode == 5:
        extra = {} if where is not None else {"global": True}
        if config_get(key, cwd=where, user=user, **extra) is None:
            raise CommandExecutionError(f"Key '{key}' does not exist")
        message = f"Multiple values exist for key '{key}'"
        if value_regex is not None:
            message += " and value_regex matches multiple values"
        raise CommandExecutionError(message)
    if retcode == 6:
        raise CommandExecutionError("The value_regex is invalid")
    return True


def is_worktree(
    cwd: str,
    user: str | None = None,
    password: str | None = None,
    output_encoding: str | None = None,
) -> bool:
    """
    Whether C{cwd} is in a worktree made by C{git worktree add} (its
    top level's C{.git} is a file naming its git directory), not the main
    one.

    CLI Example:

        salttwist '*' git.is_worktree /path/to/repo
    """
    try:
        top = _git(
            cwd,
            user,
            "",
            "rev-parse",
            "--show-toplevel",
            ignore_retcode=True,
            output_encoding=output_encoding,
        )["stdout"]
    except CommandExecutionError:
        return False
    try:
        with open(os.path.join(top, ".git")) as f:
            label, _, path = f.readline().strip().partition(" ")
    except OSError:
        return False
    return label == "gitdir:" and os.path.isabs(path)


def describe(
    cwd: str,
    rev: str = "HEAD",
    user: str | None = None,
    password: str | None = None,
    ignore_retcode: bool = False,
    output_encoding: str | None = None,
) -> str:
    """
    Return C{git describe --always} of C{rev}: the nearest tag (with the
    commits since and the commit's short id), else the short id.

    @raise CommandExecutionError: C{rev} names no commit.

    CLI Example:

        salttwist '*' git.describe /path/to/repo
        salttwist '*' git.describe /path/to/repo develop
    """
    return _git(
        cwd,
        user,
        "",
        "describe",
        "--always",
        str(rev),
        ignore_retcode=ignore_retcode,
        output_encoding=output_encoding,
    )["stdout"]
