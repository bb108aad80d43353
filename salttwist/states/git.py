# -*- test-case-name: tests.test_states_git -*-
"""
Salt's C{git} states (Salt's arguments, changes and comments), through
the C{git} execution module (L{salttwist.modules.git}): C{git.latest}
keeps a clone of a remote repository at a revision; C{git.cloned} makes a
clone once (and switches its branch); C{git.present} makes a repository
(bare by default); C{git.config_set} and C{git.config_unset} keep
configuration keys set or unset.

Not supported (refused with a comment naming them when set): C{password}
(Windows only in Salt) and LFS-specific handling; C{sync_tags} deletes
local tags the remote no longer has, as Salt does.
"""

from __future__ import annotations

import os
import shutil
import string
from typing import Any

from salttwist.modules import CommandExecutionError, SaltInvocationError
from salttwist.modules.git import _addHttpBasicAuth, _redactAuth
from salttwist.states import StateContext, stateReturn
from salttwist.states._keywords import stateArguments


def _invalidKwargs(kwargs: dict[str, Any]) -> str | None:
    """
    @return: Salt's comment for keyword arguments the state does not take,
        or L{None}.
    """
    bad = stateArguments(kwargs)
    bad.pop("saltenv", None)
    if not bad:
        return None
    listed = ", ".join(f"{k}={v}" for k, v in bad.items())
    return f"The following keyword arguments are not valid: {listed}"


def _short(sha: str | None) -> str | None:
    return sha[:7] if sha is not None else None


def _revsEqual(rev1: str | None, rev2: str | None, revType: str | None) -> bool:
    """
    Salt's C{_revs_equal}: a short C{rev2} of type C{sha1} matches the
    start of C{rev1}.
    """
    if rev1 is None or rev2 is None:
        return rev1 is rev2
    if revType == "sha1":
        return rev1.startswith(rev2)
    return rev1 == rev2


def _formatComments(comments: list[str]) -> str:
    text = ". ".join(comments)
    if len(comments) > 1:
        text += "."
    return text


def _stripExc(exc: Exception) -> str:
    """
    @return: an execution error's message without Salt's C{Command '...'
        failed: } prefix.
    """
    text = str(exc)
    if text.startswith("Command '") and "' failed" in text:
        rest = text.split("' failed", 1)[1]
        return rest[2:] if rest.startswith(": ") else rest
    return text


def _identityKeys(ctx: StateContext, identity: Any) -> tuple[Any, str | None]:
    """
    The SSH keys of C{identity} (a path or a list), C{salt://} ones cached
    first.

    @return: the local paths (or L{None}), and the error making them
        unusable, or L{None}.
    """
    if identity is None:
        return None, None
    if isinstance(identity, str):
        identity = [identity]
    elif not isinstance(identity, list):
        return None, "identity must be either a list or a string"
    keys = []
    for key in identity:
        key = os.path.expanduser(str(key))
        if key.startswith("salt://"):
            cached = ctx.salt["cp.cache_file"](key, ctx.saltenv)
            if not cached:
                return None, f"identity '{key}' does not exist."
            key = cached
        if not os.path.isabs(key):
            return None, f"identity '{key}' is not an absolute path"
        keys.append(key)
    return keys, None


class _Latest:
    """
    One run of C{git.latest}: its arguments and the comments made so far.
    """

    def __init__(self, ctx: StateContext, name: str, ret: dict[str, Any]) -> None:
        self.ctx = ctx
        self.name = name
        self.ret = ret
        self.comments: list[str] = []

    def git(self, fun: str, *args: Any, **kwargs: Any) -> Any:
        return self.ctx.salt[f"git.{fun}"](*args, **kwargs)

    def fail(self, msg: str, withComments: bool = True) -> dict[str, Any]:
        self.ret["result"] = False
        if withComments and self.comments:
            msg += "\n\nChanges already made: " + _formatComments(self.comments)
        self.ret["comment"] = msg
        return self.ret

    def neutral(self, comment: str) -> dict[str, Any]:
        self.ret["result"] = None
        self.ret["comment"] = comment
        return self.ret

    def uptodate(self, target: str, localChanges: bool = False) -> dict[str, Any]:
        comment = f"Repository {target} is up-to-date"
        if localChanges:
            comment += (
                ", but with uncommitted changes. Set 'force_reset' to True to "
                "purge uncommitted changes."
            )
        if self.comments:
            comment += "\n\nChanges {}made: {}".format(
                "that would be " if self.ctx.test else "", _formatComments(self.comments)
            )
        self.ret["comment"] = comment
        return self.ret


def _notFastForward(
    run: _Latest,
    rev: str,
    pre: str | None,
    post: str | None,
    branch: str | None,
    localBranch: str | None,
    defaultBranch: str | None,
    localChanges: bool,
) -> dict[str, Any]:
    """
    Salt's failure for an update that would lose commits or local changes.
    """
    branchMsg = ""
    if branch is None:
        if rev != "HEAD":
            if localBranch != rev:
                branchMsg = (
                    f" The desired rev ({rev}) differs from the name of the "
                    f"local branch ({localBranch}), if the desired rev is a branch name "
                    "then a forced update could possibly be avoided by "
                    f"setting the 'branch' argument to '{rev}' instead."
                )
        elif defaultBranch is not None and localBranch != defaultBranch:
            branchMsg = (
                f" The default remote branch ({defaultBranch}) differs from the "
                f"local branch ({localBranch}). This could be caused by changing the "
                "default remote branch, or if the local branch was "
                "manually changed. Rather than forcing an update, it "
                "may be advisable to set the 'branch' argument to "
                f"'{defaultBranch}' instead. To ensure that this state follows the "
                f"'{defaultBranch}' branch instead of the remote HEAD, set the "
                f"'rev' argument to '{defaultBranch}'."
            )
    shortPre, shortPost = _short(pre), _short(post)
    where = (
        f"from {shortPre} to {shortPost}"
        if localChanges and shortPre != shortPost
        else f"to {shortPost}"
    )
    checkout = (
        f" (after checking out local branch '{branch}')"
        if branch is not None and branch != localBranch
        else ""
    )
    why = "there are uncommitted changes" if localChanges else "this is not a fast-forward merge"
    return run.fail(
        f"Repository would be updated {where}{checkout}, but {why}. Set 'force_reset' to "
        f"True{' (or ' + repr('remote-changes') + ')' if localChanges else ''} to force this "
        f"update{' and discard these changes' if localChanges else ''}.{branchMsg}"
    )


def latest(
    ctx: StateContext,
    name: str,
    target: str | None = None,
    rev: Any = "HEAD",
    branch: Any = None,
    user: str | None = None,
    password: str | None = None,
    update_head: bool = True,
    force_checkout: bool = False,
    force_clone: bool = False,
    force_fetch: bool = False,
    force_reset: Any = False,
    submodules: bool = False,
    bare: bool = False,
    mirror: bool = False,
    remote: str = "origin",
    fetch_tags: bool = True,
    sync_tags: bool = True,
    depth: int | None = None,
    identity: Any = None,
    https_user: str | None = None,
    https_pass: str | None = None,
    refspec_branch: str = "*",
    refspec_tag: str = "*",
    output_encoding: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Make sure the repository C{name} (its URL) is cloned to C{target} and
    checked out at C{rev} (a branch, tag or commit; C{HEAD}: the remote's
    default branch), as Salt's C{git.latest}.

    C{branch}: the local branch to use (made from C{rev} if missing);
    C{force_reset}: C{True} hard-resets when the update is not a
    fast-forward or there are uncommitted changes (C{"remote-changes"}:
    only when the remote changed); C{force_clone}: empty a non-empty
    C{target} that is not a repository and clone there; C{force_checkout},
    C{force_fetch}; C{depth} (a branch or tag C{rev}); C{remote} (its
    name); C{submodules}: update them; C{bare}/C{mirror}; C{identity}: SSH
    key(s) (C{salt://} ones cached first); C{https_user}/C{https_pass};
    C{user}: run git as that user.

    Changes: C{{"new": "<url> => <target>", "revision": {"old", "new"}}}
    for a clone, C{{"revision": {"old", "new"}}} for an update (plus
    C{"forced update"}, C{"forced clone"}, C{"new_tags"},
    C{"deleted_tags"} where they apply).
    """
    ret = stateReturn(name, True, "", {})
    run = _Latest(ctx, name, ret)
    invalid = _invalidKwargs(kwargs)
    if invalid:
        return run.fail(invalid)
    if not remote:
        return run.fail("'remote' argument is required")
    if not target:
        return run.fail("'target' argument is required")
    if not rev:
        return run.fail(f"'{rev}' is not a valid value for the 'rev' argument")
    if force_reset not in (True, False, "remote-changes"):
        return run.fail("'force_reset' must be one of True, False, or 'remote-changes'")
    rev = str(rev)
    target = str(target)
    if not os.path.isabs(target):
        return run.fail(f"target '{target}' is not an absolute path")
    branch = None if branch is None else str(branch)
    remote = str(remote)
    identity, error = _identityKeys(ctx, identity)
    if error is not None:
        return run.fail(error)
    if os.path.isfile(target):
        return run.fail(f"Target '{target}' exists and is a regular file, cannot proceed")
    if mirror:
        bare = True
    if rev != "HEAD" and bare:
        return run.fail("'rev' is not compatible with the 'mirror' and 'bare' arguments")
    git = run.git
    common = {"user": user, "output_encoding": output_encoding}
    auth = {"identity": identity, **common}
    try:
        desiredUrl = _addHttpBasicAuth(name, https_user, https_pass)
    except SaltInvocationError as e:
        return run.fail(str(e))
    redactedUrl = _redactAuth(desiredUrl)
    refspecs = (
        [
            f"refs/heads/{refspec_branch}:refs/remotes/{remote}/{refspec_branch}",
            f"+refs/tags/{refspec_tag}:refs/tags/{refspec_tag}",
        ]
        if fetch_tags
        else []
    )

    try:
        allRemoteRefs = git(
            "remote_refs",
            name,
            https_user=https_user,
            https_pass=https_pass,
            saltenv=ctx.saltenv,
            **auth,
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        return run.fail(f"Failed to check remote refs: {_stripExc(e)}")

    headRev = allRemoteRefs.get("HEAD")
    defaultBranch = None
    if headRev is not None:
        for refName, sha in allRemoteRefs.items():
            if refName.startswith("refs/heads/") and sha == headRev:
                defaultBranch = refName[len("refs/heads/") :]
                break

    desiredUpstream: str | None | bool = False
    remoteRev: str | None = None
    remoteRevType: str | None = None
    remoteLoc: str | None = None
    if not bare:
        if rev == "HEAD":
            if headRev is not None:
                remoteRev, desiredUpstream, remoteRevType = headRev, None, "sha1"
        elif f"refs/heads/{rev}" in allRemoteRefs:
            remoteRev = allRemoteRefs[f"refs/heads/{rev}"]
            desiredUpstream = f"{remote}/{rev}"
            remoteRevType = "branch"
        elif f"refs/tags/{rev}^{{}}" in allRemoteRefs:
            remoteRev, remoteRevType = allRemoteRefs[f"refs/tags/{rev}^{{}}"], "tag"
        elif f"refs/tags/{rev}" in allRemoteRefs:
            remoteRev, remoteRevType = allRemoteRefs[f"refs/tags/{rev}"], "tag"
        elif len(rev) <= 40 and all(c in string.hexdigits for c in rev):
            rev = rev.lower()
            remoteRev, remoteRevType = rev, "sha1"
        if remoteRevType == "sha1" and remoteRev is not None:
            remoteLoc = f"remote HEAD ({remoteRev[:7]})" if rev == "HEAD" else remoteRev[:7]
        elif remoteRev is not None:
            shown = desiredUpstream if remoteRevType == "branch" else rev
            remoteLoc = f"{shown} ({remoteRev[:7]})"

    if depth is not None and remoteRevType not in ("branch", "tag"):
        return run.fail(
            "When 'depth' is used, 'rev' must be set to the name of a "
            "branch or tag on the remote repository"
        )
    if remoteRev is None and not bare and rev != "HEAD":
        return run.fail(f"No revision matching '{rev}' exists in the remote repository")

    gitdir = os.path.join(target, "refs" if bare else ".git")
    if os.path.isdir(gitdir):
        try:
            return _update(
                run,
                target=target,
                rev=rev,
                branch=branch,
                remote=remote,
                bare=bare,
                update_head=update_head,
                force_checkout=force_checkout,
                force_fetch=force_fetch,
                force_reset=force_reset,
                submodules=submodules,
                sync_tags=sync_tags,
                refspecs=refspecs,
                remoteRev=remoteRev,
                remoteRevType=remoteRevType,
                remoteLoc=remoteLoc,
                desiredUpstream=desiredUpstream,
                defaultBranch=defaultBranch,
                desiredUrl=desiredUrl,
                redactedUrl=redactedUrl,
                https=(https_user, https_pass),
                auth=auth,
                common=common,
            )
        except (CommandExecutionError, SaltInvocationError) as e:
            return run.fail(_stripExc(e))
    return _clone(
        run,
        target=target,
        rev=rev,
        branch=branch,
        remote=remote,
        bare=bare,
        mirror=mirror,
        depth=depth,
        force_clone=force_clone,
        submodules=submodules,
        remoteRev=remoteRev,
        remoteRevType=remoteRevType,
        remoteLoc=remoteLoc,
        desiredUpstream=desiredUpstream,
        headKnown="HEAD" in allRemoteRefs,
        desiredUrl=desiredUrl,
        auth=auth,
        common=common,
    )


def _localRevAndBranch(run: _Latest, target: str, common: dict[str, Any]) -> tuple[Any, Any]:
    """
    @return: the checkout's commit and branch (each L{None} when there is
        none: an empty repository, a detached C{HEAD}).
    """
    try:
        localRev = run.git("revision", target, ignore_retcode=True, **common)
    except CommandExecutionError:
        localRev = None
    try:
        localBranch = run.git("current_branch", target, ignore_retcode=True, **common)
    except CommandExecutionError:
        localBranch = None
    if localBranch == "HEAD":
        localBranch = None
    return localRev, localBranch


def _upstream(run: _Latest, target: str, branch: str | None, common: dict[str, Any]) -> Any:
    """
    @return: C{branch}'s upstream (C{origin/main}), C{False} when it has
        none, L{None} without a branch.
    """
    if branch is None:
        return None
    try:
        return run.git(
            "rev_parse", target, f"{branch}@{{upstream}}", opts=["--abbrev-ref"],
            ignore_retcode=True, **common,
        )  # fmt: skip
    except CommandExecutionError:
        return False


def _branchOpts(
    upstream: Any, desiredUpstream: Any, branch: str | None, localBranches: list[str]
) -> tuple[list[str] | None, str]:
    """
    @return: the C{git branch} options that set, update or unset the
        upstream, and Salt's comment for it (C{None}: nothing to do).
    """
    if branch is not None and branch not in localBranches:
        # A new branch checked out from the remote one tracks it already.
        return None, ""
    if not upstream and desiredUpstream:
        return [
            "--set-upstream-to",
            desiredUpstream,
        ], f"Tracking branch was set to {desiredUpstream}"
    if upstream and desiredUpstream is False:
        return ["--unset-upstream"], "Tracking branch was unset"
    if desiredUpstream and upstream != desiredUpstream:
        return (
            ["--set-upstream-to", desiredUpstream],
            f"Tracking branch was updated to {desiredUpstream}",
        )
    return None, ""


def _update(
    run: _Latest,
    *,
    target: str,
    rev: str,
    branch: str | None,
    remote: str,
    bare: bool,
    update_head: bool,
    force_checkout: bool,
    force_fetch: bool,
    force_reset: Any,
    submodules: bool,
    sync_tags: bool,
    refspecs: list[str],
    remoteRev: str | None,
    remoteRevType: str | None,
    remoteLoc: str | None,
    desiredUpstream: Any,
    defaultBranch: str | None,
    desiredUrl: str,
    redactedUrl: str,
    https: tuple[str | None, str | None],
    auth: dict[str, Any],
    common: dict[str, Any],
) -> dict[str, Any]:
    """
    C{git.latest} on an existing checkout: fetch, then fast-forward or
    reset to the remote revision (Salt's order and words).
    """
    ctx, ret, git, comments = run.ctx, run.ret, run.git, run.comments
    test = ctx.test
    localBranches = git("list_branches", target, **common)
    localTags = set(git("list_tags", target, **common))
    localRev, localBranch = _localRevAndBranch(run, target, common)
    if not bare and remoteRev is None and localRev is not None:
        return run.fail(
            "Remote repository is empty, cannot update from a non-empty to an empty repository"
        )
    needBranchChange = branch is not None and branch != localBranch
    baseRev, baseBranch = localRev, localBranch
    if needBranchChange:
        if branch not in localBranches:
            baseRev = remoteRev
        else:
            baseBranch = branch
            try:
                baseRev = git(
                    "rev_parse", target, f"{branch}^{{commit}}", ignore_retcode=True, **common
                )
            except CommandExecutionError as e:
                return run.fail(
                    f"Unable to get position of local branch '{branch}': {_stripExc(e)}"
                )
    remotes = git("remotes", target, redact_auth=False, **common)
    revsMatch = _revsEqual(localRev, remoteRev, remoteRevType)
    try:
        localChanges = bool(not bare and git("diff", target, "HEAD", **common))
    except CommandExecutionError:
        localChanges = False

    if localChanges and revsMatch:
        if force_reset is True:
            msg = (
                f"{target} is up-to-date, but with uncommitted changes. "
                "Since 'force_reset' is set to True, these local "
                "changes would be reset. To only reset when there are "
                "changes in the remote repository, set "
                "'force_reset' to 'remote-changes'."
            )
            if test:
                ret["changes"]["forced update"] = True
                return run.neutral(msg)
        else:
            return run.uptodate(target, localChanges=True)

    hasRemoteRev = False
    if (
        remoteRevType == "sha1"
        and baseRev is not None
        and remoteRev
        and baseRev.startswith(remoteRev)
    ):
        hasRemoteRev = True
    elif remoteRev is not None:
        try:
            git("rev_parse", target, f"{remoteRev}^{{commit}}", ignore_retcode=True, **common)
        except CommandExecutionError:
            pass
        else:
            if remoteRevType == "branch":
                if remote in remotes:
                    try:
                        localCopy = git(
                            "rev_parse", target, desiredUpstream, ignore_retcode=True, **common
                        )
                    except CommandExecutionError:
                        localCopy = None
                    hasRemoteRev = localCopy == remoteRev
            elif remoteRevType == "tag":
                if rev in localTags:
                    try:
                        localTagSha = git(
                            "rev_parse", target, f"{rev}^{{commit}}", ignore_retcode=True, **common
                        )
                    except CommandExecutionError:
                        localTagSha = None
                    if localTagSha == remoteRev:
                        hasRemoteRev = True
                    elif not force_reset:
                        return run.fail(
                            f"'{rev}' is a tag, but the remote SHA1 for this tag "
                            f"({_short(remoteRev)}) doesn't match the local SHA1 "
                            f"({_short(localTagSha)}). Set 'force_reset' to True to "
                            "force this update."
                        )
            else:
                hasRemoteRev = True

    fastForward: bool | None = False if (localChanges and force_reset != "remote-changes") else None
    if hasRemoteRev:
        if not revsMatch and not update_head and (branch is None or branch == localBranch):
            loc = remoteLoc.capitalize() if rev == "HEAD" and remoteLoc else remoteLoc
            ret["comment"] = (
                f"{loc} is already present and local HEAD ({(localRev or '')[:7]}) does not "
                "match, but update_head=False. HEAD has not been updated locally."
            )
            return ret
        if fastForward is not False:
            fastForward = (
                True
                if baseRev is None
                else git(
                    "merge_base", target, refs=[baseRev, remoteRev], is_ancestor=True, **common
                )
            )
    if fastForward is False:
        if force_reset is False:
            return _notFastForward(
                run, rev, baseRev, remoteRev, branch, localBranch, defaultBranch, localChanges
            )
        mergeAction = "hard-reset"
    elif fastForward is True:
        mergeAction = "fast-forwarded"
    else:
        mergeAction = "updated"

    upstream = _upstream(run, target, baseBranch, common)
    fetchUrl = remotes.get(remote, {}).get("fetch")
    if remoteRev is not None and desiredUrl != fetchUrl:
        if test:
            actions = [
                f"Remote '{remote}' would be changed from "
                f"{_redactAuth(fetchUrl) if fetchUrl else None} to {redactedUrl}"
            ]
            if not hasRemoteRev:
                actions.append("Remote would be fetched")
            if not revsMatch and update_head:
                ret["changes"]["revision"] = {"old": localRev, "new": remoteRev}
                if fastForward is False:
                    ret["changes"]["forced update"] = True
                actions.append(f"Repository would be {mergeAction} to {_short(remoteRev)}")
            if ret["changes"]:
                return run.neutral(_formatComments(actions))
            if not revsMatch and not update_head:
                ret["comment"] = _formatComments(actions)
                return ret
            run.comments.extend(actions)
            return run.uptodate(target)
        git(
            "remote_set",
            target,
            url=run.name,
            remote=remote,
            https_user=https[0],
            https_pass=https[1],
            **common,
        )
        if fetchUrl is None:
            comments.append(f"Remote '{remote}' set to {redactedUrl}")
            ret["changes"]["new"] = f"{run.name} => {remote}"
        else:
            comments.append(
                f"Remote '{remote}' changed from {_redactAuth(fetchUrl)} to {redactedUrl}"
            )

    if remoteRev is not None:
        if test:
            return _predictUpdate(
                run, target, rev, branch, localRev, localBranch, localBranches, remoteRev,
                remoteLoc, remote, desiredUpstream, upstream, revsMatch, hasRemoteRev,
                fastForward, force_reset, update_head,
            )  # fmt: skip
        branchOpts, upstreamAction = _branchOpts(upstream, desiredUpstream, branch, localBranches)
        if branchOpts is not None and localBranch is None and not needBranchChange:
            return run.fail(
                "Cannot set/unset upstream tracking branch, local "
                "HEAD refers to nonexistent branch. This may have "
                "been caused by cloning a remote repository for which "
                "the default branch was renamed or deleted. If you "
                "are unable to fix the remote repository, you can "
                "work around this by setting the 'branch' argument "
                "(which will ensure that the named branch is created "
                "if it does not already exist)."
            )
        remoteTags = {
            ref[len("refs/tags/") :]
            for ref in git(
                "ls_remote", target, remote=remote, opts="--tags", ignore_retcode=True, **auth
            )
            if "^{}" not in ref
        }
        if localTags != remoteTags:
            hasRemoteRev = False
            newTags = remoteTags - localTags
            if newTags:
                ret["changes"]["new_tags"] = sorted(newTags)
            if sync_tags:
                for tag in sorted(localTags - remoteTags):
                    try:
                        git("tag", target, tag, opts="-d", **common)
                    except CommandExecutionError as e:
                        ret.setdefault("warnings", []).append(
                            f"Failed to remove local tag '{tag}':\n\n{e}\n\n"
                        )
                    else:
                        ret["changes"].setdefault("deleted_tags", []).append(tag)
                if ret["changes"].get("deleted_tags"):
                    comments.append(
                        "The following tags were removed from the local checkout: "
                        + ", ".join(ret["changes"]["deleted_tags"])
                    )
        if not hasRemoteRev:
            try:
                fetched = git(
                    "fetch", target, remote=remote, force=force_fetch, refspecs=refspecs, **auth
                )
            except CommandExecutionError as e:
                return run.fail(
                    "Fetch failed. Set 'force_fetch' to True to force the fetch if the "
                    "failure was due to not being able to fast-forward. Output of the fetch "
                    f"command follows:\n\n{_stripExc(e)}"
                )
            if fetched:
                comments.append(f"{run.name} was fetched, resulting in updated refs")
            try:
                git("rev_parse", target, f"{remoteRev}^{{commit}}", ignore_retcode=True, **common)
            except CommandExecutionError as e:
                return run.fail(
                    f"Fetch did not successfully retrieve rev '{rev}' from {run.name}: {e}"
                )
            if not revsMatch and not update_head and (branch is None or branch == localBranch):
                loc = remoteLoc.capitalize() if rev == "HEAD" and remoteLoc else remoteLoc
                ret["comment"] = (
                    f"{loc} is already present and local HEAD ({(localRev or '')[:7]}) does "
                    "not match, but update_head=False. HEAD has not been updated locally."
                )
                return ret
            fastForward = (
                True
                if baseRev is None
                else git(
                    "merge_base", target, refs=[baseRev, remoteRev], is_ancestor=True, **common
                )
            )
            if (fastForward is False and force_reset is False) or (
                fastForward is True and localChanges and force_reset is False
            ):
                return _notFastForward(
                    run, rev, baseRev, remoteRev, branch, localBranch, defaultBranch, localChanges
                )
            if localChanges and force_reset is True:
                fastForward = False
        if needBranchChange:
            if localChanges and not force_checkout:
                return run.fail(
                    f"Local branch '{localBranch}' has uncommitted changes. Set "
                    "'force_checkout' to True to discard them and proceed."
                )
            if branch not in localBranches:
                checkoutRev = remoteRev if rev == "HEAD" else (desiredUpstream or rev)
                git(
                    "checkout",
                    target,
                    checkoutRev,
                    force=force_checkout,
                    opts=["-b", branch],
                    **common,
                )
                comments.append(
                    f"New branch '{branch}' was checked out, with {remoteLoc} as a starting point"
                )
            else:
                git("checkout", target, branch, force=force_checkout, **common)
                comments.append(f"'{branch}' was checked out")
        if fastForward is False:
            git("reset", target, opts=["--hard", remoteRev], **common)
            ret["changes"]["forced update"] = True
            if localChanges:
                comments.append("Uncommitted changes were discarded")
            comments.append(f"Repository was hard-reset to {remoteLoc}")
        elif fastForward is True and localChanges and force_reset is not False:
            git("discard_local_changes", target, **common)
            comments.append("Uncommitted changes were discarded")
        if branchOpts is not None:
            git("branch", target, opts=branchOpts, **common)
            comments.append(upstreamAction)
        if fastForward is True and not _revsEqual(baseRev, remoteRev, remoteRevType):
            if desiredUpstream or rev == "HEAD":
                if _currentBranchOrNone(run, target, common) is None:
                    return run.fail("Unable to fast-forward, HEAD is detached")
                git("merge", target, rev=remoteRev, opts=["--ff-only"], **common)
                comments.append(f"Repository was fast-forwarded to {remoteLoc}")
            else:
                git("reset", target, opts=["--hard", remoteRev if rev == "HEAD" else rev], **common)
                comments.append(f"Repository was reset to {rev} (fast-forward)")
        if submodules:
            try:
                git("submodule", target, "update", opts=["--init", "--recursive"], **auth)
            except CommandExecutionError as e:
                return run.fail(f"Failed to update submodules: {_stripExc(e)}")
    elif bare:
        if test:
            msg = f"Bare repository at {target} would be fetched"
            if ret["changes"]:
                return run.neutral(msg)
            run.comments.append(msg)
            return run.uptodate(target)
        try:
            fetched = git(
                "fetch", target, remote=remote, force=force_fetch, refspecs=refspecs, **auth
            )
        except CommandExecutionError as e:
            return run.fail(
                "Fetch failed. Set 'force_fetch' to True to force the fetch if the "
                "failure was due to not being able to fast-forward. Output of the fetch "
                f"command follows:\n\n{_stripExc(e)}"
            )
        comments.append(
            f"Bare repository at {target} was fetched"
            + (", resulting in updated refs" if fetched else "")
        )

    try:
        newRev = git("revision", target, ignore_retcode=True, **common)
    except CommandExecutionError:
        newRev = None
    if not bare and not _revsEqual(newRev, remoteRev, remoteRevType):
        return run.fail("Failed to update repository")
    if localRev != newRev:
        ret["comment"] = _formatComments(comments)
        ret["changes"]["revision"] = {"old": localRev, "new": newRev}
        return ret
    return run.uptodate(target)


def _currentBranchOrNone(run: _Latest, target: str, common: dict[str, Any]) -> str | None:
    """
    @return: the checked-out branch, or L{None} when C{HEAD} is detached.
    """
    _, localBranch = _localRevAndBranch(run, target, common)
    return localBranch


def _predictUpdate(
    run: _Latest,
    target: str,
    rev: str,
    branch: str | None,
    localRev: str | None,
    localBranch: str | None,
    localBranches: list[str],
    remoteRev: str,
    remoteLoc: str | None,
    remote: str,
    desiredUpstream: Any,
    upstream: Any,
    revsMatch: bool,
    hasRemoteRev: bool,
    fastForward: bool | None,
    force_reset: Any,
    update_head: bool,
) -> dict[str, Any]:
    """
    C{git.latest} with C{test=True} on an existing checkout: what would be
    done, changing nothing.
    """
    ret = run.ret
    actions: list[str] = []
    if not hasRemoteRev:
        actions.append(f"Remote '{remote}' would be fetched")
    if not revsMatch and (update_head or (branch is not None and branch != localBranch)):
        ret["changes"]["revision"] = {"old": localRev, "new": remoteRev}
    if branch is not None and branch != localBranch:
        if branch not in localBranches:
            actions.append(
                f"New branch '{branch}' would be checked out, with {remoteLoc} as a starting point"
            )
            if desiredUpstream:
                actions.append(f"Tracking branch would be set to {desiredUpstream}")
        else:
            mergeAction = (
                "hard-reset"
                if fastForward is False
                else "fast-forwarded"
                if fastForward is True
                else "updated"
            )
            actions.append(
                f"Branch '{branch}' would be checked out and {mergeAction} to {_short(remoteRev)}"
            )
    elif not revsMatch:
        if update_head:
            if fastForward is True:
                actions.append(
                    f"Repository would be fast-forwarded from {_short(localRev)} "
                    f"to {_short(remoteRev)}"
                )
            else:
                action = "hard-reset" if force_reset and hasRemoteRev else "updated"
                actions.append(
                    f"Repository would be {action} from {_short(localRev)} to {_short(remoteRev)}"
                )
        else:
            actions.append(
                f"Local HEAD ({(localRev or '')[:7]}) does not match {remoteLoc} but "
                "update_head=False, HEAD would not be updated locally"
            )
    if not (branch is not None and branch not in localBranches):
        if not upstream and desiredUpstream:
            actions.append(f"Tracking branch would be set to {desiredUpstream}")
        elif upstream and desiredUpstream is False:
            actions.append("Tracking branch would be unset")
        elif desiredUpstream and upstream != desiredUpstream:
            actions.append(f"Tracking branch would be updated to {desiredUpstream}")
    if ret["changes"]:
        return run.neutral(_formatComments(actions))
    if not revsMatch and not update_head and actions:
        ret["comment"] = _formatComments(actions)
        return ret
    run.comments.extend(actions)
    return run.uptodate(target)


def _clone(
    run: _Latest,
    *,
    target: str,
    rev: str,
    branch: str | None,
    remote: str,
    bare: bool,
    mirror: bool,
    depth: int | None,
    force_clone: bool,
    submodules: bool,
    remoteRev: str | None,
    remoteRevType: str | None,
    remoteLoc: str | None,
    desiredUpstream: Any,
    headKnown: bool,
    desiredUrl: str,
    auth: dict[str, Any],
    common: dict[str, Any],
) -> dict[str, Any]:
    """
    C{git.latest} where C{target} is no repository: clone it there.
    """
    ctx, ret, git, comments, name = run.ctx, run.ret, run.git, run.comments, run.name
    if os.path.isdir(target):
        contents = os.listdir(target)
        if force_clone:
            if ctx.test:
                ret["changes"]["forced clone"] = True
                ret["changes"]["new"] = f"{name} => {target}"
                return run.neutral(
                    f"Target directory {target} exists. Since force_clone=True, "
                    f"the contents of {target} would be deleted, and {name} would "
                    "be cloned into this directory."
                )
            errors = {}
            for entry in contents:
                path = os.path.join(target, entry)
                try:
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    errors[path] = e
            if errors:
                listed = "\n".join(f"  {k}\n    {v}" for k, v in errors.items())
                return run.fail(f"Unable to remove\n{listed}")
            ret["changes"]["forced clone"] = True
        elif contents:
            return run.fail(
                f"Target '{target}' exists, is non-empty and is not a git "
                "repository. Set the 'force_clone' option to True to "
                "remove this directory's contents and proceed with "
                "cloning the remote repository"
            )
    if ctx.test:
        ret["changes"]["new"] = f"{name} => {target}"
        return run.neutral(f"Repository {name} would be cloned to {target}")
    try:
        opts = ["--mirror"] if mirror else ["--bare"] if bare else []
        if remote != "origin":
            opts += ["--origin", remote]
        if depth is not None:
            opts += ["--depth", str(depth), "--branch", rev]
        try:
            git("clone", target, desiredUrl, opts=opts, saltenv=ctx.saltenv, **auth)
        except CommandExecutionError as e:
            return run.fail(f"Clone failed: {_stripExc(e)}")
        ret["changes"]["new"] = f"{name} => {target}"
        comments.append(
            f"{name} cloned to {target}"
            + (" as mirror" if mirror else " as bare repository" if bare else "")
        )
        if not bare:
            if not remoteRev:
                if rev != "HEAD":
                    return run.fail(
                        f"Repository was cloned but is empty, so {remote}/{rev} "
                        "cannot be checked out"
                    )
            else:
                if remoteRevType == "tag" and rev not in git("list_tags", target, **common):
                    return run.fail(f"Revision '{rev}' does not exist in clone")
                if branch is not None and branch not in git("list_branches", target, **common):
                    checkoutRev = remoteRev if rev == "HEAD" else (desiredUpstream or rev)
                    git("checkout", target, checkoutRev, opts=["-b", branch], **common)
                    comments.append(
                        f"Branch '{branch}' checked out, with {remoteLoc} as a starting point"
                    )
                localRev, localBranch = _localRevAndBranch(run, target, common)
                if localBranch is None and not headKnown:
                    return run.fail(
                        "Remote HEAD refers to a ref that does not exist. "
                        "This can happen when the default branch on the "
                        "remote repository is renamed or deleted. If you "
                        "are unable to fix the remote repository, you can "
                        "work around this by setting the 'branch' argument "
                        "(which will ensure that the named branch is created "
                        "if it does not already exist)."
                    )
                if not _revsEqual(localRev, remoteRev, remoteRevType):
                    git("reset", target, opts=["--hard", remoteRev], **common)
                    comments.append(f"Repository was reset to {remoteLoc}")
                if localBranch is not None:
                    upstream = _upstream(run, target, localBranch, common)
                    branchOpts, action = _branchOpts(
                        upstream, desiredUpstream, None, git("list_branches", target, **common)
                    )
                    if branchOpts is not None:
                        git("branch", target, opts=branchOpts, **common)
                        comments.append(action)
        if submodules and remoteRev:
            try:
                git("submodule", target, "update", opts=["--init", "--recursive"], **auth)
            except CommandExecutionError as e:
                return run.fail(f"Failed to update submodules: {_stripExc(e)}")
        try:
            newRev = git("revision", target, ignore_retcode=True, **common)
        except CommandExecutionError:
            newRev = None
    except (CommandExecutionError, SaltInvocationError) as e:
        return run.fail(_stripExc(e))
    ret["comment"] = _formatComments(comments)
    if newRev is not None:
        ret["changes"]["revision"] = {"old": None, "new": newRev}
    return ret


def _fail(ret: dict[str, Any], comment: str, comments: list[str] | None = None) -> dict[str, Any]:
    """
    Salt's C{_fail}: the state failed with C{comment} (after the comments
    of what was done).
    """
    ret["result"] = False
    if comments:
        comment += "\n\nChanges already made: " + _formatComments(comments)
    ret["comment"] = comment
    return ret


def _neutral(ret: dict[str, Any], comment: str) -> dict[str, Any]:
    """
    Salt's C{_neutral_test}: test mode found something to do.
    """
    ret["result"] = None
    ret["comment"] = comment
    return ret


def present(
    ctx: StateContext,
    name: str,
    force: bool = False,
    bare: bool = True,
    template: str | None = None,
    separate_git_dir: str | None = None,
    shared: Any = None,
    user: str | None = None,
    password: str | None = None,
    output_encoding: str | None = None,
) -> dict[str, Any]:
    """
    Make sure a repository exists at C{name} (bare by default): an existing
    repository (or worktree) is left alone; an empty or missing directory
    gets C{git init}; a non-empty directory that is not a repository fails
    unless C{force=True}, which deletes its contents first.
    """
    ret = stateReturn(name, True, "")
    kind = "bare " if bare else ""
    if os.path.isdir(name):
        if bare and os.path.isfile(os.path.join(name, "HEAD")):
            return ret
        if not bare and (
            os.path.isdir(os.path.join(name, ".git"))
            or ctx.salt["git.is_worktree"](name, user=user, output_encoding=output_encoding)
        ):
            return ret
        if force:
            if ctx.test:
                ret["changes"] = {"new": name, "forced init": True}
                return _neutral(
                    ret,
                    f"Target directory {name} exists. Since force=True, the contents of "
                    f"{name} would be deleted, and a {kind}repository would be initialized "
                    "in its place.",
                )
            try:
                if os.path.islink(name):
                    os.unlink(name)
                else:
                    shutil.rmtree(name)
            except OSError as e:
                return _fail(ret, f"Unable to remove {name}: {e}")
            ret["changes"]["forced init"] = True
        elif os.listdir(name):
            return _fail(
                ret,
                f"Target '{name}' exists, is non-empty, and is not a git repository. Set the "
                "'force' option to True to remove this directory's contents and proceed with "
                "initializing a repository",
            )
    if ctx.test:
        ret["changes"]["new"] = name
        return _neutral(ret, f"New {kind}repository would be created")
    try:
        ctx.salt["git.init"](
            cwd=name,
            bare=bare,
            template=template,
            separate_git_dir=separate_git_dir,
            shared=shared,
            user=user,
            output_encoding=output_encoding,
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        return _fail(ret, f"Failed to initialize {kind}repository in {name}: {_stripExc(e)}")
    actions = [f"Initialized {kind}repository in {name}"]
    if template:
        actions.append(f"Template directory set to {template}")
    if separate_git_dir:
        actions.append(f"Gitdir set to {separate_git_dir}")
    ret["changes"]["new"] = name
    ret["comment"] = _formatComments(actions)
    return ret


def cloned(
    ctx: StateContext,
    name: str,
    target: str | None = None,
    branch: Any = None,
    user: str | None = None,
    password: str | None = None,
    identity: Any = None,
    https_user: str | None = None,
    https_pass: str | None = None,
    output_encoding: str | None = None,
) -> dict[str, Any]:
    """
    Make sure the repository C{name} is cloned into C{target} (checked
    out at C{branch}, when given); unlike C{git.latest}, an existing clone
    is never updated, only switched to C{branch}.
    """
    ret = stateReturn(name, False, "")
    if target is None:
        ret["comment"] = "'target' argument is required"
        return ret
    target = str(target)
    if not os.path.isabs(target):
        ret["comment"] = "'target' path must be absolute"
        return ret
    if branch is not None:
        branch = str(branch)
        if not branch:
            ret["comment"] = "Invalid 'branch' argument"
            return ret
    common = {"user": user, "output_encoding": output_encoding}
    needClone = not os.path.exists(target)
    if not needClone:
        try:
            ctx.salt["git.status"](target, **common)
        except (CommandExecutionError, SaltInvocationError) as e:
            ret["comment"] = str(e)
            return ret
    withBranch = f" with branch '{branch}'" if branch is not None else ""
    if needClone:
        if ctx.test:
            ret["changes"]["new"] = f"{name} => {target}"
            return _neutral(ret, f"{name} would be cloned to {target}{withBranch}")
        try:
            ctx.salt["git.clone"](
                target,
                name,
                opts=["--branch", branch] if branch is not None else "",
                identity=identity,
                https_user=https_user,
                https_pass=https_pass,
                **common,
            )
        except (CommandExecutionError, SaltInvocationError) as e:
            return _fail(ret, f"Clone failed: {_redactAuth(_stripExc(e))}")
        ret["changes"]["new"] = f"{name} => {target}"
        ret["comment"] = f"{name} cloned to {target}{withBranch}"
        ret["result"] = True
        return ret
    already = f"Repository already exists at {target}"
    current = None if branch is None else ctx.salt["git.current_branch"](target, **common)
    if branch is None or current == branch:
        ret["result"] = True
        ret["comment"] = already + (f" and is checked out to branch '{branch}'" if branch else "")
        return ret
    if ctx.test:
        ret["changes"]["branch"] = {"old": current, "new": branch}
        return _neutral(ret, f"Branch would be changed to '{branch}'")
    try:
        ctx.salt["git.rev_parse"](target, rev=branch, ignore_retcode=True, **common)
    except CommandExecutionError:
        checkoutRev, checkoutOpts = f"origin/{branch}", ["-b", branch]
    else:
        checkoutRev, checkoutOpts = branch, ""
    try:
        ctx.salt["git.checkout"](target, rev=checkoutRev, opts=checkoutOpts, **common)
    except (CommandExecutionError, SaltInvocationError) as e:
        return _fail(ret, f"Failed to change branch to '{branch}': {e}")
    ret["changes"]["branch"] = {"old": current, "new": branch}
    ret["comment"] = f"Branch changed to '{branch}'"
    ret["result"] = True
    return ret


def _configScope(repo: Any, kwargs: dict[str, Any]) -> tuple[bool, str | None]:
    """
    @return: C{global} and the error for arguments the config states do
        not take or a missing C{repo}, or L{None}.
    """
    globalConfig = bool(kwargs.pop("global", False))
    bad = _invalidKwargs(kwargs)
    if bad is not None:
        return globalConfig, bad
    if not globalConfig and not repo:
        return globalConfig, "Non-global config options require the 'repo' argument to be set"
    return globalConfig, None


def config_set(
    ctx: StateContext,
    name: str,
    value: Any = None,
    multivar: Any = None,
    repo: str | None = None,
    user: str | None = None,
    password: str | None = None,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Make sure the git configuration key C{name} has C{value} (or exactly
    the values of C{multivar}, a list or comma-separated), in the
    repository C{repo} or, with C{global=True}, in the user's
    configuration.
    """
    ret = stateReturn(name, True, "")
    if value is not None and multivar is not None:
        return _fail(ret, "Only one of 'value' and 'multivar' is permitted")
    globalConfig, error = _configScope(repo, kwargs)
    if error is not None:
        return _fail(ret, error)
    name = str(name)
    if value is None and multivar is None:
        return _fail(ret, "One of 'value' and 'multivar' is required")
    if value is not None:
        value = str(value)
        shown: Any = f"'{value}'"
        desired = [value]
    else:
        if isinstance(multivar, list):
            multivar = [str(item) for item in multivar]
        else:
            multivar = str(multivar).split(",")
        shown = desired = multivar
    scope = {"global": True} if globalConfig else {}
    where = None if globalConfig else repo
    common = {"user": user, "output_encoding": output_encoding}
    prefix = "Global key " if globalConfig else ""
    try:
        before = ctx.salt["git.config_get"](
            name, cwd=where, ignore_retcode=True, all=True, **common, **scope
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        return _fail(ret, f"Failed to read {prefix.lower()}'{name}': {_stripExc(e)}")
    if before == desired:
        ret["comment"] = f"{prefix}'{name}' is already set to {shown}"
        return ret
    verb = "added as" if before is None else "set to"
    if ctx.test:
        ret["changes"] = {"old": before, "new": desired}
        return _neutral(ret, f"{prefix}'{name}' would be {verb} {shown}")
    try:
        after = ctx.salt["git.config_set"](
            name, value=value, multivar=multivar, cwd=where, **common, **scope
        )
    except (CommandExecutionError, SaltInvocationError) as e:
        return _fail(ret, f"Failed to set {prefix.lower()}'{name}' to {shown}: {_stripExc(e)}")
    if before != after:
        ret["changes"][name] = {"old": before, "new": after}
    if after != desired:
        return _fail(ret, f"Failed to set {prefix.lower()}'{name}' to {shown}")
    ret["comment"] = f"{prefix}'{name}' was {verb} {shown}"
    return ret


def config_unset(
    ctx: StateContext,
    name: str,
    value_regex: Any = None,
    repo: str | None = None,
    user: str | None = None,
    password: str | None = None,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Make sure no git configuration key matches C{name} (a regular
    expression, anchored) with a value matching C{value_regex}, in the
    repository C{repo} or, with C{global=True}, the user's configuration.
    A key with several matching values needs C{all=True}.
    """
    ret = stateReturn(name, True, "No matching keys are set")
    unsetAll = bool(kwargs.pop("all", False))
    globalConfig, error = _configScope(repo, kwargs)
    if error is not None:
        return _fail(ret, error)
    name = str(name)
    if value_regex is not None:
        value_regex = str(value_regex)
    key = "^" + name.lstrip("^").rstrip("$") + "$"
    scope = {"global": True} if globalConfig else {}
    where = None if globalConfig else repo
    common = {"user": user, "output_encoding": output_encoding, **scope}

    def matching(regex: str | None) -> dict[str, list[str]]:
        return ctx.salt["git.config_get_regexp"](
            key, value_regex=regex, cwd=where, ignore_retcode=True, **common
        )

    try:
        preMatches = matching(value_regex)
    except (CommandExecutionError, SaltInvocationError) as e:
        return _fail(ret, _stripExc(e))
    if not preMatches:
        return ret
    if not unsetAll:
        greedy = [f"{k} ({', '.join(v)})" for k, v in preMatches.items() if len(v) > 1]
        if greedy:
            if value_regex is not None:
                return _fail(
                    ret,
                    "Multiple values are matched by value_regex for the following keys (set "
                    f"'all' to True to force removal): {'; '.join(greedy)}",
                )
            return _fail(
                ret,
                "Multivar(s) matched by the key expression (set 'all' to True to force "
                f"removal): {'; '.join(greedy)}",
            )
    if ctx.test:
        ret["changes"] = preMatches
        return _neutral(ret, f"{len(preMatches)} key(s) would have value(s) unset")
    before = preMatches if value_regex is None else matching(None)
    failed = []
    for keyName in preMatches:
        try:
            ctx.salt["git.config_unset"](
                keyName, value_regex=value_regex, cwd=where, all=unsetAll, **common
            )
        except (CommandExecutionError, SaltInvocationError):
            failed.append(keyName)
    if failed:
        return _fail(
            ret,
            "Error(s) occurred unsetting values for the following keys (see the minion log "
            f"for details): {', '.join(failed)}",
        )
    after = matching(None)
    for keyName, values in before.items():
        if keyName not in after:
            ret["changes"][keyName] = values
            continue
        gone = [v for v in values if v not in after[keyName]]
        if gone:
            ret["changes"][keyName] = gone
    left = after if value_regex is None else matching(value_regex)
    if left:
        listed = "; ".join(f"{k} ({', '.join(v)})" for k, v in left.items())
        return _fail(ret, f"Failed to unset value(s): {listed}")
    ret["comment"] = "Value(s) successfully unset"
    return ret


def detached(
    ctx: StateContext,
    name: str,
    rev: Any = None,
    target: Any = None,
    remote: str = "origin",
    user: str | None = None,
    password: str | None = None,
    force_clone: bool = False,
    force_checkout: bool = False,
    fetch_remote: bool = True,
    hard_reset: bool = False,
    submodules: bool = False,
    identity: Any = None,
    https_user: str | None = None,
    https_pass: str | None = None,
    output_encoding: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """
    Make sure a clone of C{name} at C{target} has the commit C{rev} (a
    branch or tag of C{remote}, or a commit id) checked out with a
    detached C{HEAD}: cloned (C{--no-checkout}) when missing, C{remote}'s
    URL set to C{name}, fetched unless C{fetch_remote=False} or the commit
    is already there; C{hard_reset} resets to C{HEAD} first,
    C{force_checkout} discards local changes, C{submodules} updates them.
    """
    ret = stateReturn(name, True, "")
    bad = _invalidKwargs(kwargs)
    if bad is not None:
        return _fail(ret, bad)
    if not rev:
        return _fail(ret, f"'{rev}' is not a valid value for the 'rev' argument")
    if not target:
        return _fail(ret, f"'{target}' is not a valid value for the 'target' argument")
    rev, target, remote = str(rev), str(target), str(remote)
    if not os.path.isabs(target):
        return _fail(ret, f"Target '{target}' is not an absolute path")
    identity, error = _identityKeys(ctx, identity)
    if error is not None:
        return _fail(ret, error)
    if os.path.isfile(target):
        return _fail(ret, f"Target '{target}' exists and is a regular file, cannot proceed")
    try:
        _addHttpBasicAuth(name, https_user, https_pass)
    except (ValueError, SaltInvocationError) as e:
        return _fail(ret, str(e))
    isHash = len(rev) <= 40 and all(c in string.hexdigits for c in rev)
    if isHash:
        rev = rev.lower()
    common = {"user": user, "output_encoding": output_encoding}
    comments: list[str] = []
    hashHere = False
    localCommit = None
    if os.path.isdir(os.path.join(target, ".git")) or ctx.salt["git.is_worktree"](target, **common):
        try:
            localCommit = ctx.salt["git.revision"](target, ignore_retcode=True, **common)
        except CommandExecutionError:
            localCommit = None
        if isHash:
            try:
                ctx.salt["git.describe"](target, rev, ignore_retcode=True, **common)
                hashHere = True
            except CommandExecutionError:
                hashHere = False
        else:
            remotes = ctx.salt["git.remotes"](target, redact_auth=False, **common)
            if remote not in remotes or name not in remotes[remote]["fetch"]:
                old = remotes[remote]["fetch"] if remote in remotes else None
                if ctx.test:
                    return _neutral(ret, f"Remote {remote} would be set to {name}")
                ctx.salt["git.remote_set"](
                    target,
                    url=name,
                    remote=remote,
                    https_user=https_user,
                    https_pass=https_pass,
                    **common,
                )
                comments.append(
                    f"Remote {remote} updated from '{_redactAuth(str(old))}' to "
                    f"'{_redactAuth(name)}'"
                )
    else:
        if os.path.isdir(target):
            contents = os.listdir(target)
            if force_clone:
                if ctx.test:
                    return _neutral(
                        ret,
                        f"Target directory {target} exists. Since force_clone=True, the "
                        f"contents of {target} would be deleted, and {name} would be cloned "
                        "into this directory.",
                    )
                for entry in contents:
                    path = os.path.join(target, entry)
                    try:
                        if os.path.isdir(path) and not os.path.islink(path):
                            shutil.rmtree(path)
                        else:
                            os.unlink(path)
                    except OSError as e:
                        return _fail(ret, f"Unable to remove\n  {path}\n    {e}", comments)
                ret["changes"]["forced clone"] = True
            elif contents:
                return _fail(
                    ret,
                    f"Target '{target}' exists, is non-empty and is not a git repository. Set "
                    "the 'force_clone' option to True to remove this directory's contents and "
                    "proceed with cloning the remote repository",
                )
        if ctx.test:
            return _neutral(ret, f"Repository {name} would be cloned to {target}")
        opts = ["--no-checkout"] + (["--origin", remote] if remote != "origin" else [])
        try:
            ctx.salt["git.clone"](
                target,
                name,
                opts=opts,
                identity=identity,
                https_user=https_user,
                https_pass=https_pass,
                **common,
            )
        except (CommandExecutionError, SaltInvocationError) as e:
            return _fail(ret, _redactAuth(_stripExc(e)), comments)
        comments.append(f"{_redactAuth(name)} cloned to {target}")
    if not hashHere and fetch_remote is not False:
        if ctx.test:
            return _neutral(ret, f"Repository remote {remote} would be fetched")
        try:
            fetched = ctx.salt["git.fetch"](
                target,
                remote=remote,
                force=True,
                refspecs=[f"refs/heads/*:refs/remotes/{remote}/*", "+refs/tags/*:refs/tags/*"],
                identity=identity,
                **common,
            )
        except CommandExecutionError as e:
            return _fail(ret, f"Fetch failed:\n\n{e}", comments)
        if fetched:
            comments.append(f"Remote {remote} was fetched, resulting in updated refs")
    if isHash:
        try:
            ctx.salt["git.describe"](target, rev, ignore_retcode=True, **common)
        except CommandExecutionError:
            return _fail(ret, f"Revision '{rev}' does not exist", comments)
        commit = ctx.salt["git.revision"](target, rev=rev, **common)
    else:
        try:
            refs = ctx.salt["git.remote_refs"](target, identity=identity, **common)
        except CommandExecutionError as e:
            return _fail(ret, f"Failed to list refs for {remote}: {_stripExc(e)}", comments)
        # An annotated tag's commit is its peeled ref.
        for ref in (f"refs/remotes/{remote}/{rev}", f"refs/tags/{rev}^{{}}", f"refs/tags/{rev}"):
            if ref in refs:
                commit = refs[ref]
                break
        else:
            return _fail(ret, f"Revision '{rev}' does not exist", comments)
    if hard_reset:
        if ctx.test:
            return _neutral(ret, f"Hard reset to HEAD would be performed on {target}")
        ctx.salt["git.reset"](target, opts=["--hard", "HEAD"], **common)
        comments.append("Repository was reset to HEAD before checking out revision")
    newRev = None
    if commit != localCommit:
        if ctx.test:
            ret["changes"]["HEAD"] = {"old": localCommit, "new": commit}
            return _neutral(ret, f"Commit ID {commit} would be checked out at {target}")
        try:
            ctx.salt["git.checkout"](target, commit, force=force_checkout, **common)
        except CommandExecutionError as e:
            return _fail(ret, f"Failed to check out {commit}: {_stripExc(e)}", comments)
        comments.append(f"Commit ID {commit} was checked out at {target}")
        try:
            newRev = ctx.salt["git.revision"](target, ignore_retcode=True, **common)
        except CommandExecutionError:
            newRev = None
    if submodules:
        ctx.salt["git.submodule"](
            target, "update", opts=["--init", "--recursive"], identity=identity, **common
        )
        comments.append("Submodules were updated")
    if newRev is not None:
        ret["changes"]["HEAD"] = {"old": localCommit, "new": newRev}
    else:
        comments.append("Already checked out at correct revision")
    ret["comment"] = _formatComments(comments)
    return ret
