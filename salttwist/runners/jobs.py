# -*- test-case-name: tests.test_runners_jobs,tests.test_cli_state_output -*-
"""
The C{jobs} runners (Salt's C{salt/runners/jobs.py}): jobs still running and
jobs already run, read from the master's job cache.

Every return has Salt's shape, so scripts written against C{salt-run jobs.*}
work unchanged:

    - C{jobs.list_jobs}: C{{jid: {"Function", "Arguments", "Target",
      "Target-type", "User", "StartTime"}}};
    - C{jobs.list_job}: C{{"jid": jid, ...the same..., "Minions": [...],
      "Result": {id: {"return", "retcode", "success"}}}};
    - C{jobs.print_job}: C{{jid: {...the same..., "Result": {...}}}};
    - C{jobs.lookup_jid}: C{{id: return}}; for a job of a state function
      that runs states (C{state.apply}, C{state.sls}, ...), Salt's
      envelope C{{"outputter": "highstate", "data": {id: return}}}, so that
      C{salttwist-run} prints it as the job's command did;
    - C{jobs.exit_success}: C{{id: bool}};
    - C{jobs.active}: C{{jid: {...as list_jobs..., "Running": [{id: pid}],
      "Returned": [id, ...]}}}.

C{StartTime} is derived from the jid, in Salt's format
(C{2026, Nov 22 01:02:03.456789}), as Salt's C{jid_to_time} does.

C{jobs.active} asks the minions, as Salt's does: it publishes
C{saltutil.running} to every minion (C{*}), waits up to the master's
C{timeout} for the connected ones to answer, and lists each job some minion
reports running, however long ago it was published. A minion that is gone
does not answer, so the jobs it was running are not listed.

Differences from Salt:

    - C{jobs.active} waits only for the minions connected to the master
      (Salt's client waits C{timeout} for every accepted minion), so it
      answers as soon as they have. Each C{Running} pid is the minion's own
      process: jobs run inside it. A job's C{Function}, C{Arguments},
      C{Target} and C{User} are the master's record of it when the master
      has one (Salt takes them from the minion's answer, which it also uses
      here for a job the master does not remember).
    - C{start_time} and C{end_time} are parsed without C{dateutil}: ISO 8601
      (C{2026-03-16 19:00}, with or without a time zone), Salt's own
      C{StartTime} format (C{2026, Mar 16 19:00}, seconds optional), a jid,
      or POSIX seconds. A time without a zone is local time, like jids.
    - There is one job cache, so C{ext_source} is not taken.

All but C{jobs.active} (which publishes a job and waits for the minions to
answer) run in a worker process when the master has them (see
L{salttwist.runners.inWorker}); being reads, they are retried once if that
worker dies.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred

from salttwist.jid import isJid
from salttwist.runners import inWorker

if TYPE_CHECKING:
    from salttwist.interfaces import IJobCache
    from salttwist.runners import RunnerContext

#: Month abbreviations as Salt's C{jid_to_time} prints them (English, whatever
#: the locale).
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH_NUMBERS = {name.lower(): number for number, name in enumerate(_MONTHS, 1)}

#: Salt's C{StartTime} format, as C{jobs.list_jobs}'s examples write it:
#: C{2015, Mar 16 19:00}, with optional seconds and microseconds.
_SALT_TIME = re.compile(
    r"\A(\d{4}),\s*([A-Za-z]{3})\s+(\d{1,2})"
    r"(?:\s+(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?\Z"
)

_NO_JOB = "Cannot contact returner or no job with this jid"

#: The functions whose returns Salt prints with the highstate outputter (the
#: C{__outputter__} of its C{state} module); the same names as
#: L{salttwist.cli.highstate.HIGHSTATE_FUNCTIONS}, not imported from the
#: command line's package in the master.
_HIGHSTATE_FUNCTIONS = frozenset(
    "state." + name
    for name in (
        "apply",
        "sls",
        "sls_id",
        "highstate",
        "single",
        "top",
        "test",
        "pkg",
        "template",
        "template_str",
        "request",
        "check_request",
        "run_request",
    )
)
_NO_RETURN = "Minion did not return"

#: What C{jobs.active} asks every minion.
RUNNING = "saltutil.running"


# Formatting ----------------------------------------------------------------


def _jidToTime(jid: str) -> str:
    """
    Salt's C{salt.utils.jid.jid_to_time}: the time a jid was made, as
    C{YYYY, Mon DD HH:MM:SS.ffffff}; empty for a value that is not a jid.
    """
    if not isJid(jid) or not 1 <= int(jid[4:6]) <= 12:
        return ""
    month = _MONTHS[int(jid[4:6]) - 1]
    return f"{jid[:4]}, {month} {jid[6:8]} {jid[8:10]}:{jid[10:12]}:{jid[12:14]}.{jid[14:20]}"


def _formatJob(job: dict[str, Any] | None, withMinions: bool) -> dict[str, Any]:
    """
    Salt's C{_format_job_instance}: a cached job in C{salt-run}'s words.

    @param job: a job as L{IJobCache.getJob} gives it, or L{None}.
    @param withMinions: add C{Minions} (the targeted minions, sorted), as
        Salt does for one job (its C{get_load}) and not in job lists.
    """
    if not job:
        return {"Error": _NO_JOB}
    arg = list(job.get("arg") or [])
    formatted: dict[str, Any] = {
        "Function": job.get("fun", "unknown-function"),
        "Arguments": arg,
        "Target": job.get("tgt") if job.get("tgt") is not None else "unknown-target",
        "Target-type": job.get("tgt_type") or "list",
        "User": job.get("user") or "root",
    }
    # Salt shows a metadata=... keyword argument of the job as its Metadata.
    for item in arg:
        if isinstance(item, dict) and item.get("__kwarg__") is True and "metadata" in item:
            formatted["Metadata"] = item["metadata"]
            break
    if withMinions and job.get("minions"):
        formatted["Minions"] = sorted(job["minions"])
    return formatted


def _formatJid(jid: str, job: dict[str, Any] | None, withMinions: bool = False) -> dict[str, Any]:
    """
    Salt's C{_format_jid_instance}: L{_formatJob} with C{StartTime}.
    """
    formatted = _formatJob(job, withMinions)
    formatted["StartTime"] = _jidToTime(jid)
    return formatted


def _result(returns: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """
    The returns of a job in the shape of Salt's C{get_jid}: by minion id,
    each C{{"return", "retcode", "success"}}.
    """
    return {
        minionId: {key: ret.get(key) for key in ("return", "retcode", "success")}
        for minionId, ret in sorted(returns.items())
    }


# Arguments -----------------------------------------------------------------


def _checkJid(jid: object) -> str:
    """
    @return: C{jid} as a string: the command line reads a jid as a number,
        as Salt's does.
    @raise ValueError: if it is not a jid.
    """
    if isinstance(jid, int) and not isinstance(jid, bool):
        jid = str(jid)
    if not isJid(jid):
        raise ValueError(f"invalid jid {jid!r}: a jid is a string of exactly 20 digits")
    assert isinstance(jid, str)
    return jid


def _parseTime(name: str, value: object) -> datetime | float | None:
    """
    Read C{start_time} or C{end_time}.

    @return: a L{datetime} (local time unless it names a zone), POSIX seconds
        for a number, or L{None} when not given.
    @raise ValueError: naming the argument, if it cannot be read.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a time, not {value!r}")
    if isinstance(value, int) and value >= 10**19:
        value = str(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if isJid(text):
            return datetime.strptime(text, "%Y%m%d%H%M%S%f")
        match = _SALT_TIME.match(text)
        if match is not None and match.group(2).lower() in _MONTH_NUMBERS:
            year, month, day, hour, minute, second, micro = match.groups()
            try:
                return datetime(
                    int(year),
                    _MONTH_NUMBERS[month.lower()],
                    int(day),
                    int(hour or 0),
                    int(minute or 0),
                    int(second or 0),
                    int((micro or "0").ljust(6, "0")),
                )
            except ValueError as e:
                raise ValueError(f"{name} {value!r} is not a valid time: {e}") from None
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    raise ValueError(
        f"cannot read {name} {value!r}: give an ISO 8601 time ('2026-03-16 19:00'), "
        "Salt's format ('2026, Mar 16 19:00'), a jid or POSIX seconds"
    )


def _patterns(value: object) -> object:
    """
    A search pattern as the job cache takes it: a number the command line
    made of the pattern is the pattern's text again.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _jobCache(context: RunnerContext) -> IJobCache:
    """
    @raise ValueError: if the master keeps no job cache.
    """
    cache = context.master.jobCache
    if cache is None:
        raise ValueError("the master has no job cache")
    return cache


async def _loadJob(
    context: RunnerContext, jid: str
) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """
    @return: the cached job C{jid} (or L{None}) and its returns.
    """
    cache = _jobCache(context)
    job = await cache.getJob(jid)
    returns = await cache.getReturns(jid)
    return job, returns


# Runners -------------------------------------------------------------------


async def _askRunning(context: RunnerContext, timeout: float) -> dict[str, Any]:
    """
    Publish C{saltutil.running} to every minion, as Salt's C{jobs.active}
    does, and gather the answers of the connected ones.

    @param timeout: the most seconds to wait for them.
    @return: each answering minion's return, by minion id; a minion that did
        not answer within C{timeout} is left out.
    """
    master = context.master
    reply = await master.clientPublish(
        None,  # type: ignore[arg-type]  # the master itself, as its reactor publishes
        {"fun": RUNNING, "arg": [], "tgt": "*", "tgt_type": "glob", "user": context.user},
    )
    jid, waiting = reply.get("jid"), set(reply.get("connected") or ())
    if not jid or not waiting:
        return {}
    answers: dict[str, Any] = {}
    allAnswered: Deferred[None] = Deferred()

    def answered(tag: str, data: dict[str, Any]) -> None:
        minionId = data.get("id")
        if minionId in waiting:
            waiting.discard(minionId)
            answers[minionId] = data.get("return")
            if not waiting and not allAnswered.called:
                allAnswered.callback(None)

    # No return can have come yet: the job was only written to the minions'
    # connections, and the reactor has not run since.
    subscription = master.bus.subscribe([f"salt/job/{jid}/ret/"], answered)
    allAnswered.addTimeout(timeout, master.clock, onTimeoutCancel=lambda result, timeout: None)
    try:
        await allAnswered
    finally:
        subscription.stop()
    return answers


async def _returned(context: RunnerContext, jid: str) -> list[str]:
    """
    @return: the minions that have returned for job C{jid}, sorted: as the
        master's job registry knows, else as its job cache does.
    """
    master = context.master
    job = master.jobs.get(jid)
    if job is not None:
        return sorted(job.returned)
    if master.jobCache is None:
        return []
    return sorted(await master.jobCache.getReturns(jid))


async def active(context: RunnerContext) -> dict[str, dict[str, Any]]:
    """
    Return a report on all actively running jobs from a job id centric
    perspective.

    Every minion is asked which jobs it is running (C{saltutil.running});
    the answers of the connected minions are awaited for at most the
    master's C{timeout} seconds. Each job some minion reports is listed,
    oldest first, with C{Running}, the minions running it (each with its
    pid), and C{Returned}, those that have returned. A job nobody reports
    running, however recent, is not listed.

    CLI Example:

    .. code-block:: bash

        salttwist-run jobs.active
    """
    master = context.master
    answers = await _askRunning(context, float(master.config["timeout"]))
    report: dict[str, dict[str, Any]] = {}
    for minionId, running in sorted(answers.items()):
        if not isinstance(running, list):
            # An error, from a minion without saltutil.running say.
            continue
        for data in running:
            if not isinstance(data, dict) or not isJid(data.get("jid")):
                continue
            jid = data["jid"]
            entry = report.get(jid)
            if entry is None:
                known = master.jobs.get(jid)
                entry = report[jid] = _formatJid(jid, known.load if known is not None else data)
                entry["Running"] = []
            entry["Running"].append({minionId: data.get("pid")})
    for jid, entry in report.items():
        entry["Returned"] = await _returned(context, jid)
    return dict(sorted(report.items()))


@inWorker(idempotent=True, needsJobCache=True)
async def list_job(context: RunnerContext, jid: str) -> dict[str, Any]:
    """
    List a specific job given by its jid, with its returns under C{Result}.

    CLI Example:

    .. code-block:: bash

        salttwist-run jobs.list_job 20130916125524463507
    """
    jid = _checkJid(jid)
    job, returns = await _loadJob(context, jid)
    listed: dict[str, Any] = {"jid": jid}
    listed.update(_formatJid(jid, job, withMinions=True))
    listed["Result"] = _result(returns)
    return listed


@inWorker(idempotent=True, needsJobCache=True)
async def lookup_jid(
    context: RunnerContext, jid: str, returned: bool = True, missing: bool = False
) -> dict[str, Any]:
    """
    Return the printout from a previously executed job: each minion's return
    by minion id.

    jid
        The jid to look up.

    returned : True
        If C{True}, include the minions that did return from the command.

    missing : False
        If C{True}, include the minions that did I{not} return from the
        command, as C{Minion did not return}.

    CLI Example:

    .. code-block:: bash

        salttwist-run jobs.lookup_jid 20130916125524463507
        salttwist-run jobs.lookup_jid 20130916125524463507 missing=True
    """
    data = await list_job(context, jid)
    returns = data["Result"]
    looked: dict[str, Any] = {}
    if returned:
        for minionId, ret in returns.items():
            looked[minionId] = ret.get("return")
    if missing:
        for minionId in data.get("Minions", []):
            if minionId not in returns:
                looked[minionId] = _NO_RETURN
    if looked and data.get("Function") in _HIGHSTATE_FUNCTIONS:
        # Salt's: the returns of a state run name their outputter.
        return {"outputter": "highstate", "data": looked}
    return looked


@inWorker(idempotent=True, needsJobCache=True)
async def list_jobs(
    context: RunnerContext,
    search_metadata: dict[str, Any] | None = None,
    search_function: str | list[str] | None = None,
    search_target: str | list[str] | None = None,
    start_time: Any = None,
    end_time: Any = None,
) -> dict[str, dict[str, Any]]:
    """
    List all detectable jobs and associated functions, oldest first. With
    several filters, only the jobs that match all of them are listed.

    search_metadata
        A map to match to the job's metadata (its C{metadata=} keyword
        argument); a job matches if any of the pairs matches.

    search_function
        Globs, as a list or separated by commas, matched against the job's
        function.

    search_target
        Globs, as a list or separated by commas, matched against the job's
        target (each id of a list target).

    start_time
        Only jobs that started at or after this time: ISO 8601
        (C{2026-03-16 19:00}), Salt's format (C{2026, Mar 16 19:00}), a jid or
        POSIX seconds; local time unless a zone is given.

    end_time
        Only jobs that started at or before this time.

    CLI Example:

    .. code-block:: bash

        salttwist-run jobs.list_jobs
        salttwist-run jobs.list_jobs search_function='test.*' search_target='web*'
        salttwist-run jobs.list_jobs start_time='2015, Mar 16 19:00' end_time='2015, Mar 18 22:00'
    """
    if search_metadata and not isinstance(search_metadata, dict):
        raise ValueError(f"search_metadata must be a map, not {search_metadata!r}")
    start = _parseTime("start_time", start_time)
    end = _parseTime("end_time", end_time)
    cache = _jobCache(context)
    filters = {
        "searchFunction": _patterns(search_function),
        "searchTarget": _patterns(search_target),
        "startTime": start,
        "endTime": end,
    }
    summaries = getattr(cache, "listJobSummaries", None)
    if summaries is not None:
        rows = await summaries(**filters)
    else:
        rows = [
            (j["jid"], j.get("fun"), j.get("arg"), j.get("tgt"), j.get("tgt_type"), j.get("user"))
            for j in await cache.listJobs(**filters)
        ]
    # The cache lists the newest first; Salt's outputters show jids ascending.
    rows.reverse()
    return _formatListing(rows, search_metadata or None)


def _formatListing(
    rows: list[tuple[Any, ...]], searchMetadata: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """
    L{_formatJid} of each listed job, as C{{jid: formatted}}, for
    C{list_jobs}: the same result, made for 100,000 jobs in a few hundred
    milliseconds (no dict per job from the cache, the C{StartTime} of an
    hour's jids made once).

    @param rows: C{(jid, fun, arg, tgt, tgt_type, user)}, in the order
        listed.
    @param searchMetadata: only the jobs whose C{Metadata} has one of these
        pairs.
    """
    listed: dict[str, dict[str, Any]] = {}
    startTime = _ListedStartTime()
    for jid, fun, arg, tgt, tgtType, user in rows:
        # A summary's lists are the caller's own already (the cache's
        # fallback's too): copied only when not a list.
        arguments = arg if type(arg) is list else list(arg or [])
        formatted = {
            "Function": fun if fun is not None else "unknown-function",
            "Arguments": arguments,
            "Target": tgt if tgt is not None else "unknown-target",
            "Target-type": tgtType or "list",
            "User": user or "root",
        }
        for item in arguments:
            if isinstance(item, dict) and item.get("__kwarg__") is True and "metadata" in item:
                formatted["Metadata"] = item["metadata"]
                break
        if searchMetadata:
            metadata = formatted.get("Metadata")
            if not isinstance(metadata, dict) or not any(
                key in metadata and metadata[key] == value for key, value in searchMetadata.items()
            ):
                continue
        formatted["StartTime"] = startTime(jid)
        listed[jid] = formatted
    return listed


class _ListedStartTime:
    """
    L{_jidToTime} for many jids: the part of an hour's jids before the
    minutes is made once per hour.
    """

    def __init__(self) -> None:
        self._hours: dict[str, str] = {}

    def __call__(self, jid: str) -> str:
        if type(jid) is not str or len(jid) != 20 or not (jid.isascii() and jid.isdigit()):
            return _jidToTime(jid)
        hour = jid[:10]
        prefix = self._hours.get(hour)
        if prefix is None:
            whole = _jidToTime(jid)
            if not whole:
                return whole
            # "2026, Nov 27 05:" of "2026, Nov 27 05:12:34.123456".
            prefix = self._hours[hour] = whole[:-12]
        return f"{prefix}{jid[10:12]}:{jid[12:14]}.{jid[14:]}"


@inWorker(idempotent=True, needsJobCache=True)
async def print_job(context: RunnerContext, jid: str) -> dict[str, dict[str, Any]]:
    """
    Print a specific job's detail given by its jid, including the return
    data, under the jid.

    CLI Example:

    .. code-block:: bash

        salttwist-run jobs.print_job 20130916125524463507
    """
    data = await list_job(context, jid)
    jid = data.pop("jid")
    return {jid: data}


@inWorker(idempotent=True, needsJobCache=True)
async def exit_success(context: RunnerContext, jid: str) -> dict[str, bool]:
    """
    Check if a job has been executed and exit successfully: for each minion
    targeted or returned, whether it returned a true value (Salt's test: the
    return, not its retcode).

    jid
        The jid to look up.

    CLI Example:

    .. code-block:: bash

        salttwist-run jobs.exit_success 20160520145827701627
    """
    data = await list_job(context, jid)
    result = data["Result"]
    success: dict[str, bool] = {}
    for minionId in data.get("Minions", []):
        success[minionId] = minionId in result and bool(result[minionId].get("return"))
    for minionId, ret in result.items():
        if ret.get("return"):
            success[minionId] = True
    return success
