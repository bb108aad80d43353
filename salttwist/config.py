# -*- test-case-name: tests.test_config -*-
"""
YAML configuration for the master and the minion, using Salt's option names.

Each daemon has one table, L{_MASTER_OPTIONS} or L{_MINION_OPTIONS}, that maps
an option name to its default and to a check for its values. Everything else
(defaults, validation, which options are paths) is derived from those tables,
so adding an option means adding one row.

Loading order, later layers winning: the defaults, the main file
(C{CONFIG_DIR/master} or C{CONFIG_DIR/minion}), the drop-in files
(C{CONFIG_DIR/master.d/*.conf} in sorted order), then the caller's overrides.
Each layer is checked on its own, so an error names the file the bad value
came from. C{root_dir} is applied last, to the merged result, as Salt does.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import yaml

from salttwist.configdir import CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR, defaultConfigDir

__all__ = [
    "CONFIG_DIR_ENV",
    "ConfigError",
    "DEFAULT_CONFIG_DIR",
    "MASTER_DEFAULTS",
    "MINION_DEFAULTS",
    "defaultConfigDir",
    "loadMasterConfig",
    "loadMinionConfig",
]


#: The warnings this process has logged, as (format, fields) keys: see
#: L{_warn}.
_warned: set[tuple[str, tuple[tuple[str, str], ...]]] = set()


def _warn(format: str, **fields: Any) -> None:
    """
    Log a warning, once per process: the same warning (same format and
    fields, so the same file and option) is not logged again. A daemon's
    config is loaded twice at start, by its command (C{salttwist-master},
    C{salttwist-minion}, for a plain error message before twistd starts)
    and by its twistd plugin's options, and each warning must appear once.

    Twisted's logger is imported here, on first use: a command that reads
    a clean config (the C{salttwist} command's direct path) does not import
    Twisted at all.
    """
    key = (format, tuple(sorted((name, repr(value)) for name, value in fields.items())))
    if key in _warned:
        return
    _warned.add(key)
    from twisted.logger import Logger

    Logger(namespace=__name__).warn(format, **fields)


_OVERRIDES_SOURCE = "<overrides>"
_LOG_URL_PREFIXES = ("file://", "udp://", "tcp://")
_LOG_LEVELS = (
    "all",
    "garbage",
    "trace",
    "debug",
    "profile",
    "info",
    "warning",
    "error",
    "critical",
    "quiet",
)
_REPR_LIMIT = 60

# Prefer libyaml's parser when PyYAML was built with it; both are "safe" loaders
# (plain data only, no arbitrary Python objects).
_YAMLLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ConfigError(Exception):
    """
    A configuration file, or an override, is unreadable or holds a bad value.

    The message always names the file (or C{<overrides>}) and, when one option
    is at fault, the option, so it can be shown to the user as it is.
    """


class _BadValue(Exception):
    """
    Raised by an option check: the value is not acceptable.

    @ivar expected: what the option needs, as a phrase that follows
        C{"must be"}, such as C{"an integer"}.
    """

    def __init__(self, expected: str, secret: bool = False) -> None:
        """
        @param secret: the value may hold a password: the error does not
            show it.
        """
        super().__init__(expected)
        self.expected = expected
        self.secret = secret


_Check = Callable[[Any], Any]


class _Option(NamedTuple):
    """
    One row of a spec table.

    @ivar default: the value used when no layer sets the option. C{None} here
        also means that C{null} is an accepted value.
    @ivar check: called with a value; returns the value to store (possibly
        normalized) or raises L{_BadValue}. Checks reject C{None}: where the
        default is C{None}, L{_checkLayer} accepts it before the check runs.
    """

    default: Any
    check: _Check


def _isInteger(value: object) -> bool:
    """
    Is C{value} an integer? C{bool} is a subclass of C{int} in Python, but a
    YAML C{true} given for a port is a mistake, not the number 1.
    """
    return isinstance(value, int) and not isinstance(value, bool)


def _integer(minimum: int, maximum: int | None = None, note: str = "") -> _Check:
    """
    Make a check for integer options.

    @param minimum: the smallest accepted value.
    @param maximum: the largest accepted value, or C{None} for no bound.
    @param note: text appended to the range in error messages.
    @return: the check.
    """
    if maximum is not None:
        inRange = f"an integer from {minimum} to {maximum}{note}"
    else:
        inRange = f"an integer >= {minimum}{note}"

    def checkInteger(value: Any) -> int:
        if not _isInteger(value):
            raise _BadValue("an integer")
        if value < minimum or (maximum is not None and value > maximum):
            raise _BadValue(inRange)
        return value

    return checkInteger


def _checkNumber(value: Any) -> int | float:
    """
    Check a duration or a similar quantity: a finite int or float, not
    negative.
    """
    if not (_isInteger(value) or isinstance(value, float)):
        raise _BadValue("a number")
    if not math.isfinite(value) or value < 0:
        raise _BadValue("a finite number >= 0")
    return value


def _checkPositiveNumber(value: Any) -> int | float:
    """
    Check a timeout: a finite int or float greater than 0.
    """
    value = _checkNumber(value)
    if value <= 0:
        raise _BadValue("a finite number > 0")
    return value


def _checkRetryTimerMax(value: Any) -> int | float:
    """
    Check C{return_retry_timer_max}: a positive number. Salt's C{0} (a
    wait that does not grow) is refused with what to set instead.
    """
    try:
        return _checkPositiveNumber(value)
    except _BadValue as e:
        raise _BadValue(
            f"{e.expected} (for a wait that does not grow, Salt's 0, set it to return_retry_timer)"
        ) from None


def _checkBool(value: Any) -> bool:
    """
    Check a flag: only a real YAML boolean (C{true}, C{false}, and YAML 1.1's
    C{yes}/C{no}/C{on}/C{off}) is accepted, never C{0}/C{1} or a string.
    """
    if not isinstance(value, bool):
        raise _BadValue("a boolean (true or false)")
    return value


def _checkString(value: Any) -> str:
    """
    Check a plain string option.
    """
    if not isinstance(value, str):
        raise _BadValue("a string")
    return value


def _checkNonEmptyString(value: Any) -> str:
    """
    Check a string option for which C{""} has no sensible meaning.
    """
    if not isinstance(value, str) or not value:
        raise _BadValue("a non-empty string")
    return value


def _checkPath(value: Any) -> str:
    """
    Check a filesystem path. Options with this check are the ones that
    C{root_dir} is applied to (see L{_applyRootDir}).
    """
    if not isinstance(value, str):
        raise _BadValue("a string (a filesystem path)")
    return value


def _checkHTTPURL(value: Any) -> str:
    """
    Check a URL the master makes requests to: C{http://} or C{https://}.
    """
    expected = "an http:// or https:// URL with a host"
    if not isinstance(value, str):
        raise _BadValue(expected)
    # Imported here: only a config that names a URL pays for urllib.
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        raise _BadValue(expected) from None
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise _BadValue(expected)
    return value


def _checkMapping(value: Any) -> dict:
    """
    Check a mapping option, such as C{grains} or C{nodegroups}.
    """
    if not isinstance(value, dict):
        raise _BadValue("a mapping")
    return value


def _checkPublisherAcl(value: Any) -> dict:
    """
    Check Salt's C{publisher_acl}: user (or C{group%}) patterns mapped to
    lists of function patterns and C{{target: [functions]}} mappings (see
    L{salttwist.aclconfig}).
    """
    # Imported here: most configs have no ACL, and every command loads one.
    from salttwist.aclconfig import checkPublisherAclConfig

    try:
        return checkPublisherAclConfig(value)
    except ValueError as e:
        raise _BadValue(
            "a mapping of user names to lists of function patterns or"
            f" {{target: [function patterns]}} mappings ({e})"
        ) from None


def _checkPublisherAclBlacklist(value: Any) -> dict:
    """
    Check Salt's C{publisher_acl_blacklist}: C{users} and C{modules} lists
    of patterns.
    """
    from salttwist.aclconfig import checkBlacklistConfig

    try:
        return checkBlacklistConfig(value)
    except ValueError as e:
        raise _BadValue(
            f"a mapping with 'users' and/or 'modules' lists of patterns ({e})"
        ) from None


def _checkExternalAuth(value: Any) -> dict:
    """
    Check Salt's C{external_auth}: backends (C{pam}, C{file}) mapped to
    their C{^} options and user entries (see L{salttwist.eauth.config}).
    """
    from salttwist.eauth.config import checkExternalAuthConfig

    try:
        return checkExternalAuthConfig(value)
    except ValueError as e:
        raise _BadValue(f"a mapping of eauth backends (pam, file) to user entries ({e})") from None


def _checkTokenExpireUserOverride(value: Any) -> bool | dict:
    """
    Check Salt's C{token_expire_user_override}: a boolean, or backends
    mapped to the users who may choose their tokens' lifetime.
    """
    from salttwist.eauth.config import checkTokenExpireUserOverride

    try:
        return checkTokenExpireUserOverride(value)
    except ValueError as e:
        raise _BadValue(f"true, false or a mapping of eauth backends to user lists ({e})") from None


def _checkRestCherrypy(value: Any) -> dict:
    """
    Check Salt's C{rest_cherrypy} block, salttwist-api's options (see
    L{salttwist.apiconfig}).
    """
    from salttwist.apiconfig import checkRestCherrypy

    try:
        return checkRestCherrypy(value)
    except ValueError as e:
        raise _BadValue(f"a mapping of salttwist-api options ({e})") from None


def _checkNetapiClients(value: Any) -> list[str]:
    """
    Check Salt's C{netapi_enable_clients}: the lowstate clients
    salttwist-api runs.
    """
    from salttwist.apiconfig import CLIENTS, MISSING_CLIENTS

    if not _isStringList(value):
        raise _BadValue(f"a list of client names ({', '.join(CLIENTS)})")
    unknown = [c for c in value if c not in CLIENTS and c not in MISSING_CLIENTS]
    if unknown:
        raise _BadValue(f"a list of client names ({', '.join(CLIENTS)}), not {unknown!r}")
    return list(value)


def _isStringList(value: object) -> bool:
    """
    Is C{value} a list whose items are all strings?
    """
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _checkStringList(value: Any) -> list[str]:
    """
    Check a list of strings, such as C{autosign_grains}.
    """
    if not _isStringList(value):
        raise _BadValue("a list of strings")
    return value


def _checkStringOrList(value: Any) -> str | list[str]:
    """
    Check an option that takes one string or several, such as the minion's
    C{master}.
    """
    if isinstance(value, str) or (_isStringList(value) and value):
        return value
    raise _BadValue("a string or a non-empty list of strings")


def _checkDisabledRequisites(value: Any) -> list[str]:
    """
    Check C{disabled_requisites}: a requisite kind or a list of them
    (C{require}, C{watch_in} ...).
    """
    kinds = [value] if isinstance(value, str) else value
    if not _isStringList(kinds):
        raise _BadValue("a requisite kind or a list of them")
    return list(kinds)


def _checkAggregate(value: Any) -> bool | list[str]:
    """
    Check C{state_aggregate}: a boolean, or the state modules to aggregate.
    """
    if isinstance(value, bool) or _isStringList(value):
        return value
    raise _BadValue("a boolean or a list of state module names")


def _checkLogLevel(value: Any) -> str:
    """
    Check a Salt log level name, in any case; the result is lowercase.
    """
    if isinstance(value, str) and value.lower() in _LOG_LEVELS:
        return value.lower()
    raise _BadValue("a log level (" + ", ".join(_LOG_LEVELS) + ")")


_REACTOR_SHAPE = "a list of single-key mappings {tag glob: file or [file, ...]}"


def _checkReactor(value: Any) -> list[dict[str, list[str]]]:
    """
    Check Salt's C{reactor} option: a list of single-key mappings from a tag
    glob to one reaction file or a list of them. The result always has a
    list of files. A file may be a path (relative ones start at the config
    directory) or a C{salt://} URL of the master's file server.
    """
    if not isinstance(value, list):
        raise _BadValue(_REACTOR_SHAPE)
    checked: list[dict[str, list[str]]] = []
    for number, entry in enumerate(value, 1):
        if not isinstance(entry, dict) or len(entry) != 1:
            raise _BadValue(f"{_REACTOR_SHAPE} (entry {number} is not a single-key mapping)")
        ((tagGlob, files),) = entry.items()
        if not isinstance(tagGlob, str) or not tagGlob:
            raise _BadValue(f"{_REACTOR_SHAPE} (entry {number}: the tag glob must be a string)")
        if isinstance(files, str):
            files = [files]
        if not isinstance(files, list) or not files:
            raise _BadValue(f"{_REACTOR_SHAPE} (entry {tagGlob!r} has no reaction file)")
        for path in files:
            if not isinstance(path, str) or not path:
                raise _BadValue(
                    f"{_REACTOR_SHAPE} (entry {tagGlob!r}: every file must be a non-empty string)"
                )
        checked.append({tagGlob: list(files)})
    return checked


def _checkClusterName(value: Any) -> str:
    """
    Check C{cluster_id} or C{cluster_master_id}: a part of the broker's
    subject, stream and consumer names.
    """
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value):
        raise _BadValue("1 to 64 letters, digits, '_' or '-'")
    return value


def _checkBrokerUrl(value: Any) -> str:
    """
    Check C{cluster_broker}: a C{nats://} or C{tls://} URL, with
    C{user:password@} or C{token@} if the broker wants credentials.
    """
    expected = "a nats://[user:password@|token@]host:port or tls://... URL (NATS with JetStream)"
    if not isinstance(value, str):
        raise _BadValue(expected)
    # Imported here: only a config that names a broker pays for urllib.
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        raise _BadValue(expected, secret=True) from None
    if (
        parts.scheme not in ("nats", "tls")
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise _BadValue(expected, secret=True)
    return value


def _choice(*choices: str) -> _Check:
    """
    @return: a check that accepts one of C{choices}.
    """

    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in choices:
            raise _BadValue("one of " + ", ".join(repr(c) for c in choices))
        return value

    return check


def _checkRoots(value: Any) -> dict[str, list[str]]:
    """
    C{file_roots} and C{pillar_roots}: a mapping of saltenv names to a
    directory or a list of directories (searched in order).
    """
    if not isinstance(value, dict):
        raise _BadValue("a mapping of saltenv names to lists of directories")
    roots: dict[str, list[str]] = {}
    for env, dirs in value.items():
        if not isinstance(env, str) or not env:
            raise _BadValue("a mapping whose keys (saltenv names) are non-empty strings")
        if isinstance(dirs, str):
            dirs = [dirs]
        if not _isStringList(dirs) or not all(dirs):
            raise _BadValue(f"a mapping of saltenv names to lists of directories ({env!r})")
        roots[env] = list(dirs)
    return roots


def _checkExtPillar(value: Any) -> list[dict[str, Any]]:
    """
    C{ext_pillar}: a list of single-key mappings C{{name: config}}, run in
    that order.
    """
    shape = "a list of single-key mappings {ext_pillar name: its configuration}"
    if not isinstance(value, list):
        raise _BadValue(shape)
    for entry in value:
        if not isinstance(entry, dict) or len(entry) != 1 or not isinstance(next(iter(entry)), str):
            raise _BadValue(shape)
    return value


def _checkGitfsRemotes(value: Any) -> list[Any]:
    """
    C{gitfs_remotes}: a list of repository URLs, each a string or a
    single-key mapping C{{url: [per-remote options]}}.
    """
    shape = "a list of repository URLs or single-key mappings {url: [options]}"
    if not isinstance(value, list):
        raise _BadValue(shape)
    for entry in value:
        if isinstance(entry, str) and entry:
            continue
        if isinstance(entry, dict) and len(entry) == 1 and isinstance(next(iter(entry)), str):
            continue
        raise _BadValue(shape)
    return value


#: The values of C{state_output} (and C{--state-output}), as Salt's.
STATE_OUTPUTS = (
    "full",
    "terse",
    "mixed",
    "changes",
    "filter",
    "filter_id",
    "full_id",
    "terse_id",
    "mixed_id",
    "changes_id",
)


def _configManagementOptions() -> dict[str, _Option]:
    """
    The rows of the file server, pillar and renderers (issue 20), read by
    the master and, with C{file_client: local}, by the minion.
    """
    return {
        "file_roots": _Option({"base": ["/srv/salt"]}, _checkRoots),
        "pillar_roots": _Option({"base": ["/srv/pillar"]}, _checkRoots),
        "fileserver_backend": _Option(["roots"], _checkStringList),
        "file_ignore_regex": _Option([], _checkStringList),
        "file_ignore_glob": _Option([], _checkStringList),
        "fileserver_followsymlinks": _Option(True, _checkBool),
        "fileserver_ignoresymlinks": _Option(False, _checkBool),
        "top_file_merging_strategy": _Option("merge", _choice("merge", "same", "merge_all")),
        "env_order": _Option([], _checkStringList),
        "default_top": _Option("base", _checkNonEmptyString),
        "state_top": _Option("top.sls", _checkNonEmptyString),
        "state_top_saltenv": _Option(None, _checkNonEmptyString),
        "hash_type": _Option("sha256", _choice("sha256")),
        "renderer": _Option("jinja|yaml", _checkNonEmptyString),
        "allow_undefined": _Option(False, _checkBool),
        "gitfs_remotes": _Option([], _checkGitfsRemotes),
        "gitfs_base": _Option("master", _checkNonEmptyString),
        "gitfs_root": _Option("", _checkString),
        "gitfs_mountpoint": _Option("", _checkString),
        "gitfs_update_interval": _Option(60, _checkPositiveNumber),
        "gitfs_env_whitelist": _Option([], _checkStringList),
        "gitfs_env_blacklist": _Option([], _checkStringList),
        "pillar_source_merging_strategy": _Option(
            "smart", _choice("smart", "recurse", "overwrite", "aggregate", "none")
        ),
        "pillar_merge_lists": _Option(False, _checkBool),
        "ext_pillar": _Option([], _checkExtPillar),
        "ext_pillar_first": _Option(False, _checkBool),
        "pillarenv": _Option(None, _checkString),
        "pillarenv_from_saltenv": _Option(False, _checkBool),
        "pillar_safe_render_error": _Option(True, _checkBool),
        "pillar_includes_override_sls": _Option(False, _checkBool),
        "exclude_ext_pillar": _Option([], _checkStringList),
        # The state system (issue 21).
        "state_auto_order": _Option(True, _checkBool),
        "failhard": _Option(False, _checkBool),
        "test": _Option(False, _checkBool),
        "state_events": _Option(False, _checkBool),
        "state_output": _Option("full", _choice(*STATE_OUTPUTS)),
        "state_verbose": _Option(True, _checkBool),
        "state_output_diff": _Option(False, _checkBool),
        "state_compress_ids": _Option(False, _checkBool),
    }


_PORT = _integer(0, 65535, " (0 lets the OS choose)")
_KEYSIZE = _integer(2048)
_MAX_FRAME_BYTES = _integer(65536)
_COUNT = _integer(0)


def _commonOptions(daemon: str) -> dict[str, _Option]:
    """
    The rows shared by the master and the minion tables.

    @param daemon: C{"master"} or C{"minion"}, used in the default paths.
    @return: a new table.
    """
    return {
        "root_dir": _Option("/", _checkNonEmptyString),
        "pki_dir": _Option(f"/etc/salttwist/pki/{daemon}", _checkPath),
        "cachedir": _Option(f"/var/cache/salttwist/{daemon}", _checkPath),
        "sock_dir": _Option(f"/var/run/salttwist/{daemon}", _checkPath),
        "log_file": _Option(f"/var/log/salttwist/{daemon}", _checkPath),
        "pidfile": _Option(f"/var/run/salttwist-{daemon}.pid", _checkPath),
        "log_level": _Option("warning", _checkLogLevel),
        "log_level_logfile": _Option(None, _checkLogLevel),
        "log_fmt_json": _Option(False, _checkBool),
        "user": _Option(None, _checkString),
        "publish_port": _Option(4505, _PORT),
        "keysize": _Option(2048, _KEYSIZE),
        "transport": _Option("tcp", _checkNonEmptyString),
        "max_frame_bytes": _Option(104857600, _MAX_FRAME_BYTES),
    }


_MASTER_OPTIONS: dict[str, _Option] = {
    **_commonOptions("master"),
    **_configManagementOptions(),
    "file_buffer_size": _Option(1048576, _integer(4096, 16777216)),
    "file_recv": _Option(False, _checkBool),
    "file_recv_max_size": _Option(100, _integer(1)),
    "fileserver_request_rate": _Option(1000, _checkPositiveNumber),
    "fileserver_request_burst": _Option(2000, _integer(1)),
    "fileserver_inflight_bytes": _Option(16777216, _integer(65536)),
    "pillar_cache": _Option(False, _checkBool),
    "pillar_cache_ttl": _Option(3600, _checkPositiveNumber),
    "interface": _Option("0.0.0.0", _checkString),
    "ret_port": _Option(4506, _PORT),
    "worker_threads": _Option(max(1, os.cpu_count() or 1), _integer(1)),
    "auto_accept": _Option(False, _checkBool),
    "autosign": _Option(None, _checkBool),
    "autosign_file": _Option(None, _checkPath),
    "autoreject_file": _Option(None, _checkPath),
    "autosign_policy": _Option(None, _checkPath),
    "autosign_grains_dir": _Option(None, _checkPath),
    "autosign_url": _Option(None, _checkHTTPURL),
    "autosign_timeout": _Option(10, _checkPositiveNumber),
    "autosign_max_concurrent": _Option(4, _integer(1)),
    "autosign_output_max": _Option(65536, _COUNT),
    "keep_jobs": _Option(24, _COUNT),
    # The job cache (issue 23): local_cache is the SQLite file under
    # cachedir; pgjsonb (or postgres) a PostgreSQL database, reached with
    # Salt's returner.pgjsonb.* options (salttwist.master.jobcache_pg).
    "master_job_cache": _Option("local_cache", _choice("local_cache", "pgjsonb", "postgres")),
    "returner.pgjsonb.host": _Option("localhost", _checkNonEmptyString),
    "returner.pgjsonb.port": _Option(5432, _integer(1, 65535)),
    "returner.pgjsonb.db": _Option("salt", _checkNonEmptyString),
    "returner.pgjsonb.user": _Option("salt", _checkNonEmptyString),
    "returner.pgjsonb.pass": _Option(None, _checkString),
    "returner.pgjsonb.sslmode": _Option(
        None, _choice("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
    ),
    "returner.pgjsonb.sslcert": _Option(None, _checkNonEmptyString),
    "returner.pgjsonb.sslkey": _Option(None, _checkNonEmptyString),
    "returner.pgjsonb.sslrootcert": _Option(None, _checkNonEmptyString),
    "returner.pgjsonb.sslcrl": _Option(None, _checkNonEmptyString),
    "returner.pgjsonb.connect_timeout": _Option(10, _integer(1)),
    # Several active masters (issue 23, salttwist.cluster, docs/cluster.md):
    # cluster_id turns the fan-out between masters on, through the NATS
    # JetStream broker cluster_broker; off by default.
    "cluster_id": _Option(None, _checkClusterName),
    "cluster_master_id": _Option(None, _checkClusterName),
    "cluster_broker": _Option(None, _checkBrokerUrl),
    # With a tls:// cluster_broker: a PEM file of the authorities that may
    # sign the broker's certificate (null: the system's); as the
    # keys.postgres.sslrootcert file, not prefixed with root_dir.
    "cluster_broker_ca": _Option(None, _checkNonEmptyString),
    # With a tls:// cluster_broker that asks for client certificates: this
    # master's certificate (PEM, its chain after it) and its key (PEM,
    # unencrypted, mode 0600).
    "cluster_broker_cert": _Option(None, _checkNonEmptyString),
    "cluster_broker_key": _Option(None, _checkNonEmptyString),
    # NATS's decentralised logins (one of them, mode 0600): a file holding
    # an NKEY user seed (SU...), or a .creds file (a user JWT and its seed).
    "cluster_broker_nkey": _Option(None, _checkNonEmptyString),
    "cluster_broker_creds": _Option(None, _checkNonEmptyString),
    # The directory of the key every master of the cluster shares
    # (cluster.key); pki_dir/cluster when null.
    "cluster_pki_dir": _Option(None, _checkPath),
    # Seconds the keys in cluster_pki_dir/cluster.previous_keys are still
    # accepted (to open messages) after this master first reads them: the
    # cluster key's rotation (docs/cluster.md).
    "cluster_previous_keys_grace": _Option(86400, _checkPositiveNumber),
    "cluster_buffer_messages": _Option(10000, _integer(1)),
    "cluster_buffer_bytes": _Option(67108864, _integer(65536)),
    "cluster_unreachable_limit": _Option(10, _checkPositiveNumber),
    "cluster_job_max_age": _Option(300, _checkPositiveNumber),
    # The key store (issue 23, salttwist.pki.stores): localfs_key (Salt's
    # name) is pki_dir/<state>/<id>; postgres a PostgreSQL database that
    # several masters share, reached with the keys.postgres.* options.
    "keys.cache_driver": _Option("localfs_key", _choice("localfs_key", "postgres")),
    "keys.postgres.host": _Option("localhost", _checkNonEmptyString),
    "keys.postgres.port": _Option(5432, _integer(1, 65535)),
    "keys.postgres.db": _Option("salt", _checkNonEmptyString),
    "keys.postgres.user": _Option("salt", _checkNonEmptyString),
    "keys.postgres.pass": _Option(None, _checkString),
    "keys.postgres.sslmode": _Option(
        None, _choice("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
    ),
    "keys.postgres.sslcert": _Option(None, _checkNonEmptyString),
    "keys.postgres.sslkey": _Option(None, _checkNonEmptyString),
    "keys.postgres.sslrootcert": _Option(None, _checkNonEmptyString),
    "keys.postgres.sslcrl": _Option(None, _checkNonEmptyString),
    "keys.postgres.connect_timeout": _Option(10, _integer(1)),
    "keys.postgres.write_timeout": _Option(10, _checkPositiveNumber),
    # The grains and pillar caches (issue 23, salttwist.master.minioncache_pg):
    # localfs (Salt's default: each master its own) or postgres, a database
    # several masters share, reached with the cache.postgres.* options.
    "cache": _Option("localfs", _choice("localfs", "postgres")),
    "cache.postgres.host": _Option("localhost", _checkNonEmptyString),
    "cache.postgres.port": _Option(5432, _integer(1, 65535)),
    "cache.postgres.db": _Option("salt", _checkNonEmptyString),
    "cache.postgres.user": _Option("salt", _checkNonEmptyString),
    "cache.postgres.pass": _Option(None, _checkString),
    "cache.postgres.sslmode": _Option(
        None, _choice("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
    ),
    "cache.postgres.sslcert": _Option(None, _checkNonEmptyString),
    "cache.postgres.sslkey": _Option(None, _checkNonEmptyString),
    "cache.postgres.sslrootcert": _Option(None, _checkNonEmptyString),
    "cache.postgres.sslcrl": _Option(None, _checkNonEmptyString),
    "cache.postgres.connect_timeout": _Option(10, _integer(1)),
    "timeout": _Option(5, _checkNumber),
    "publish_session": _Option(86400, _checkNumber),
    "gather_job_timeout": _Option(10, _checkNumber),
    "nodegroups": _Option({}, _checkMapping),
    "publisher_acl": _Option({}, _checkPublisherAcl),
    "publisher_acl_blacklist": _Option({}, _checkPublisherAclBlacklist),
    # External authentication (issue 24, salttwist.eauth).
    "external_auth": _Option({}, _checkExternalAuth),
    "token_expire": _Option(43200, _checkPositiveNumber),
    "token_expire_user_override": _Option(False, _checkTokenExpireUserOverride),
    "keep_acl_in_token": _Option(False, _checkBool),
    "permissive_acl": _Option(False, _checkBool),
    "auth.pam.service": _Option("login", _checkNonEmptyString),
    # salttwist-api (issue 24, salttwist.api): Salt's rest_cherrypy block,
    # the clients it runs, and its pidfile and log file.
    "rest_cherrypy": _Option({}, _checkRestCherrypy),
    "netapi_enable_clients": _Option([], _checkNetapiClients),
    "api_pidfile": _Option("/var/run/salttwist-api.pid", _checkPath),
    "api_logfile": _Option("/var/log/salttwist/api", _checkPath),
    "presence_events": _Option(False, _checkBool),
    "loop_interval": _Option(60, _checkPositiveNumber),
    "event_queue_max": _Option(10000, _integer(1)),
    "ipc_write_buffer": _Option(16777216, _integer(65536)),
    "pub_write_buffer": _Option(16777216, _integer(65536)),
    "req_write_buffer": _Option(16777216, _integer(65536)),
    "master_stats": _Option(False, _checkBool),
    "master_stats_event_iter": _Option(60, _checkPositiveNumber),
    "reactor": _Option([], _checkReactor),
    "reactor_worker_threads": _Option(10, _integer(1)),
    "reactor_worker_hwm": _Option(10000, _integer(1)),
    # In a cluster: also react to the events other masters forwarded (each
    # reacts once by default, on the master where its event happened).
    "reactor_cluster_events": _Option(False, _checkBool),
    "auth_rate_limit": _Option(10, _checkNumber),
    "preauth_timeout": _Option(60, _checkPositiveNumber),
    "max_auth_in_flight": _Option(10000, _integer(1)),
    "auth_rate_burst": _Option(100, _integer(1)),
    "minion_event_rate_limit": _Option(100, _checkNumber),
    "minion_event_rate_burst": _Option(1000, _integer(1)),
    "max_minions_pre": _Option(10000, _COUNT),
    "allow_unicode_minion_ids": _Option(False, _checkBool),
}

_MINION_OPTIONS: dict[str, _Option] = {
    **_commonOptions("minion"),
    **_configManagementOptions(),
    "file_client": _Option("remote", _choice("remote", "local")),
    "saltenv": _Option(None, _checkString),
    "extension_modules": _Option(None, _checkPath),
    "autoload_dynamic_modules": _Option(True, _checkBool),
    "providers": _Option({}, _checkMapping),
    "service_init_dir": _Option(None, _checkPath),
    "service_rc_dir": _Option(None, _checkPath),
    "service_systemd_root": _Option(None, _checkPath),
    "cron_spool_dir": _Option(None, _checkPath),
    "apt_lock_timeout": _Option(300, _checkPositiveNumber),
    "master": _Option("salt", _checkStringOrList),
    # Salt's failover (salttwist.minion.masters); its multi-master "hot"
    # mode (a list with master_type str) is not supported.
    "master_type": _Option("str", _choice("str", "failover")),
    "master_alive_interval": _Option(0, _checkNumber),
    "master_failback": _Option(False, _checkBool),
    "master_failback_interval": _Option(0, _checkNumber),
    "random_master": _Option(False, _checkBool),
    "master_port": _Option(4506, _PORT),
    "id": _Option(None, _checkString),
    "acceptance_wait_time": _Option(10, _checkNumber),
    "acceptance_wait_time_max": _Option(0, _checkNumber),
    "recon_default": _Option(1000, _COUNT),
    "recon_max": _Option(10000, _COUNT),
    "recon_randomize": _Option(True, _checkBool),
    "random_reauth_delay": _Option(10, _checkNumber),
    "single_connection": _Option(False, _checkBool),
    "master_finger": _Option("", _checkString),
    "grains": _Option({}, _checkMapping),
    "autosign_grains": _Option([], _checkStringList),
    "req_write_buffer": _Option(16777216, _integer(65536)),
    "returns_memory_max": _Option(67108864, _integer(65536)),
    # The back-off for returns the master refused for now (see etc/minion):
    # the first wait, the longest, and how many internal errors in a row
    # set a return aside. Salt's defaults are 5, 10 and 3.
    "return_retry_timer": _Option(5, _checkPositiveNumber),
    "return_retry_timer_max": _Option(60, _checkRetryTimerMax),
    "return_retry_tries": _Option(5, _integer(1)),
    "state_aggregate": _Option(False, _checkAggregate),
    "state_max_parallel": _Option(0, _COUNT),
    "disabled_requisites": _Option([], _checkDisabledRequisites),
}


def _defaults(options: Mapping[str, _Option]) -> dict[str, Any]:
    """
    The default value of every option in a table.
    """
    return {name: option.default for name, option in options.items()}


MASTER_DEFAULTS: dict[str, Any] = _defaults(_MASTER_OPTIONS)
"""The master's options and their defaults. Do not mutate: copy it."""

MINION_DEFAULTS: dict[str, Any] = _defaults(_MINION_OPTIONS)
"""The minion's options and their defaults. Do not mutate: copy it."""


def _describe(value: object) -> str:
    """
    Show a bad value in an error message: its (shortened) repr and its type.
    """
    if value is None:
        return "null"
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{text} ({type(value).__name__})"


def _yamlErrorText(error: yaml.YAMLError) -> str:
    """
    Describe a YAML error by line and column (counted from 1) and problem,
    without PyYAML's own name for the stream (which is not the file name).
    """
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or getattr(error, "reason", None) or str(error)
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _readFile(path: str, missingOk: bool) -> dict[Any, Any]:
    """
    Parse one YAML config file.

    @param path: the file.
    @param missingOk: if true, a file that does not exist reads as C{{}}.
    @return: the top-level mapping; C{{}} for an empty file.
    @raise ConfigError: the file cannot be read, is not YAML, or its top
        level is not a mapping.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if missingOk:
            return {}
        raise ConfigError(f"{path}: file disappeared while loading the config") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config file: {e.strerror or e}") from e
    try:
        # Bytes, not text: PyYAML then detects UTF-8/UTF-16 itself and reports
        # undecodable input as a YAMLError.
        document = yaml.load(data, Loader=_YAMLLoader)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: {_yamlErrorText(e)}") from e
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of option names to values,"
            f" not {type(document).__name__}"
        )
    return document


def _dropInFiles(directory: str) -> list[str]:
    """
    List the drop-in files of a C{master.d} or C{minion.d} directory: the
    C{*.conf} files, sorted by name. Like a shell glob, names starting with a
    dot are skipped (editor and backup leftovers).

    @param directory: the drop-in directory; it may not exist.
    @return: absolute paths.
    @raise ConfigError: the directory exists but cannot be listed.
    """
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise ConfigError(f"{directory}: cannot list config directory: {e.strerror or e}") from e
    return [
        os.path.join(directory, name)
        for name in sorted(names)
        if name.endswith(".conf") and not name.startswith(".")
    ]


def _checkLayer(
    source: str, values: Mapping[Any, Any], options: Mapping[str, _Option]
) -> dict[str, Any]:
    """
    Check every value of one layer (a file or the overrides).

    Unknown options are logged and kept: a newer config may be shared with an
    older daemon, and extension code may read options of its own.

    @param source: the file name, or C{<overrides>}, for messages.
    @param values: option name to value.
    @param options: the daemon's spec table.
    @return: the values to merge, normalized.
    @raise ConfigError: an option name is not a string or a value is bad.
    """
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise ConfigError(f"{source}: option names must be strings, not {_describe(key)}")
        option = options.get(key)
        if option is None:
            _warn("{path}: unknown option {key!r} ignored", path=source, key=key)
            checked[key] = value
        elif value is None and option.default is None:
            checked[key] = None
        else:
            checked[key] = _checkValue(source, key, value, option)
    return checked


#: The last part of the names of options that hold a secret (such as
#: C{keys.postgres.pass}): a bad value of one is not shown in the error.
_SECRET_NAMES = frozenset({"pass", "password", "passwd", "token", "secret"})


def _checkValue(source: str, key: str, value: Any, option: _Option) -> Any:
    """
    Run one option's check, turning a failure into a L{ConfigError}.

    @return: the value to store.
    """
    try:
        return option.check(value)
    except _BadValue as e:
        expected = e.expected + (" or null" if option.default is None else "")
        secret = e.secret or key.rsplit(".", 1)[-1] in _SECRET_NAMES
        shown = "the value given (not shown: it may hold a password)" if secret else None
        raise ConfigError(
            f"{source}: option {key!r} must be {expected}, not {shown or _describe(value)}"
        ) from None


def _underRoot(rootDir: str, path: str) -> str:
    """
    Put one path under C{root_dir} as Salt's C{prepend_root_dir} does.

    @param rootDir: an absolute root directory other than C{/}.
    @param path: the configured path.
    @return: C{path} if it is already under C{rootDir}, else C{rootDir} joined
        with C{path} (with its leading slashes removed, if absolute).
    """
    if os.path.isabs(path):
        # Compare whole components: "/srvx/pki" is not under "/srv".
        if path == rootDir or path.startswith(rootDir.rstrip(os.sep) + os.sep):
            return path
        return os.path.join(rootDir, path.lstrip(os.sep))
    return os.path.join(rootDir, path)


def _applyRootDir(config: dict[str, Any], options: Mapping[str, _Option]) -> None:
    """
    Make C{root_dir} absolute and move every path option under it, in place.

    Empty and C{null} paths stay as they are, and so does a C{log_file} that
    is a syslog URL (C{file://}, C{udp://}, C{tcp://}).
    """
    rootDir = os.path.abspath(config["root_dir"])
    config["root_dir"] = rootDir
    if rootDir == os.sep:
        return
    for name, option in options.items():
        path = config.get(name)
        if option.check is not _checkPath or not path:
            continue
        if name == "log_file" and path.startswith(_LOG_URL_PREFIXES):
            continue
        config[name] = _underRoot(rootDir, path)


#: Options that are read and checked but do nothing yet, with the issue that
#: brings them. Setting one to a value other than its default logs a warning,
#: so nobody believes a setting took effect when it did not.
NOT_YET_IMPLEMENTED: dict[str, dict[str, str]] = {
    "master": {},
    "minion": {
        "publish_port": "the minion learns it from the master",
        "acceptance_wait_time_max": "acceptance_wait_time is used as is",
    },
}


def _severalMasters(value: Any, config: Mapping[str, Any]) -> str | None:
    """
    The minion's C{master}: a list of several masters is used with
    C{master_type: failover}; with C{master_type: str} only the first is
    used (Salt's multi-master "hot" mode, a session to each, is not
    supported).

    @return: the note of the warning, or L{None} for one master or
        failover.
    """
    if isinstance(value, list) and len(value) > 1 and config.get("master_type") != "failover":
        return (
            "multi-master with a session to each is not supported (set master_type: "
            f"failover): only the first, {value[0]!r}, is used (salttwist-call tries "
            "each in turn)"
        )
    return None


#: Options of which some values are read and checked but not implemented
#: yet: each maps to a function of the value that returns the note of the
#: warning, or L{None} for a value that is implemented; it is given the
#: value and the whole configuration.
NOT_YET_IMPLEMENTED_VALUES: dict[str, dict[str, Callable[[Any, Mapping[str, Any]], str | None]]] = {
    "master": {},
    "minion": {"master": _severalMasters},
}


def _warnNotImplemented(
    config: Mapping[str, Any], daemon: str, options: Mapping[str, _Option]
) -> None:
    defaults = _defaults(options)
    notes = [
        (name, note)
        for name, note in NOT_YET_IMPLEMENTED[daemon].items()
        if config.get(name) != defaults.get(name)
    ]
    for name, noteOf in NOT_YET_IMPLEMENTED_VALUES[daemon].items():
        note = noteOf(config.get(name), config)
        if note is not None:
            notes.append((name, note))
    for name, note in notes:
        _warn(
            "{conf}: option {name!r} is accepted but not implemented yet ({note})",
            conf=config["conf_file"],
            name=name,
            note=note,
        )


#: Options that must be at least another option, per daemon: (option, the
#: one it may not be below), checked on the merged configuration.
_AT_LEAST: dict[str, list[tuple[str, str]]] = {
    "master": [],
    "minion": [("return_retry_timer_max", "return_retry_timer")],
}


def _checkAtLeast(config: Mapping[str, Any], daemon: str, sources: Mapping[str, str]) -> None:
    """
    Check the options of L{_AT_LEAST} on the merged configuration.

    @param sources: the layer (file or C{<overrides>}) that set each option
        last; options no layer set have their default.
    @raise ConfigError: one is below the other; the error names the layer
        that set the first option (or else the second's), and both options
        with their values and where each came from.
    """

    def origin(option: str) -> str:
        return sources.get(option, "its default")

    for name, floor in _AT_LEAST[daemon]:
        value, least = config[name], config[floor]
        if value >= least:
            continue
        source = sources.get(name) or sources.get(floor) or config["conf_file"]
        raise ConfigError(
            f"{source}: option {name!r} ({value!r}, from {origin(name)}) must be >= "
            f"option {floor!r} ({least!r}, from {origin(floor)})"
        )


def _loadConfig(
    configDir: str,
    daemon: str,
    options: Mapping[str, _Option],
    overrides: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """
    Load one daemon's configuration; see L{loadMasterConfig}.

    @param configDir: the config directory.
    @param daemon: C{"master"} or C{"minion"}: the main file's name.
    @param options: the daemon's spec table.
    @param overrides: values that win over the files, or C{None}.
    @return: the configuration.
    """
    configDir = os.path.abspath(configDir)
    confFile = os.path.join(configDir, daemon)
    # Deep copies: the returned dict is the caller's to mutate, and mutable
    # defaults ({} and []) must not be shared between configs.
    config = copy.deepcopy(_defaults(options))
    layers: Iterable[tuple[str, Mapping[Any, Any]]] = [
        (confFile, _readFile(confFile, missingOk=True)),
        *((path, _readFile(path, missingOk=False)) for path in _dropInFiles(confFile + ".d")),
        (_OVERRIDES_SOURCE, copy.deepcopy(dict(overrides or {}))),
    ]
    sources: dict[str, str] = {}
    for source, values in layers:
        checked = _checkLayer(source, values, options)
        config.update(checked)
        sources.update(dict.fromkeys(checked, source))
    _applyRootDir(config, options)
    config["config_dir"] = configDir
    config["conf_file"] = confFile
    _checkAtLeast(config, daemon, sources)
    _warnNotImplemented(config, daemon, options)
    return config


def loadMasterConfig(configDir: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """
    Load the master's configuration.

    Reads C{configDir/master} (a missing file means all defaults), then
    C{configDir/master.d/*.conf} in sorted order, then C{overrides}; each
    later layer wins. Options no layer sets take L{MASTER_DEFAULTS}. Path
    options are then moved under C{root_dir}.

    @param configDir: the config directory (C{-c}); relative paths are taken
        from the current directory.
    @param overrides: values that win over the files (CLI flags, tests). They
        are checked like file values; C{None} is a value, not "unset".
    @return: a new dict of every option, plus unknown options found in the
        files, plus C{config_dir} and C{conf_file} (both absolute).
    @raise ConfigError: a file is unreadable, not YAML, or not a mapping, or
        a value has the wrong type or is out of range.
    """
    return _loadConfig(configDir, "master", _MASTER_OPTIONS, overrides)


def loadApiConfig(configDir: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """
    Load the master's configuration as salttwist-api uses it: its pidfile
    is C{api_pidfile} and its log file C{api_logfile}, as Salt's salt-api.

    @raise ConfigError: see L{loadMasterConfig}.
    """
    config = loadMasterConfig(configDir, overrides)
    config["pidfile"] = config["api_pidfile"]
    config["log_file"] = config["api_logfile"]
    return config


def loadMinionConfig(configDir: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """
    Load the minion's configuration.

    Like L{loadMasterConfig}, with C{configDir/minion}, C{configDir/minion.d}
    and L{MINION_DEFAULTS}.

    @param configDir: the config directory (C{-c}).
    @param overrides: values that win over the files.
    @return: a new dict of the configuration.
    @raise ConfigError: as for L{loadMasterConfig}.
    """
    return _loadConfig(configDir, "minion", _MINION_OPTIONS, overrides)
