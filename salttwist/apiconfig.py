# -*- test-case-name: tests.test_api_options -*-
"""
The options of C{salttwist-api}: Salt's C{rest_cherrypy:} block of the
master config, checked with messages that name the option at fault, and
the values the API uses (L{ApiOptions}).

Shared ground (as L{salttwist.aclconfig} for C{publisher_acl}): the config
table (L{salttwist.config}) calls L{checkRestCherrypy} when the master
config is loaded, so that a bad value stops the API, and the master, with
a clear error; the API (L{salttwist.api}) uses L{ApiOptions}, the checked
block.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLIENTS",
    "DEFAULT_MAX_BODY",
    "MISSING_CLIENTS",
    "DEFAULT_PORT",
    "ApiOptions",
    "checkRestCherrypy",
]

#: The lowstate clients of Salt's NetapiClient that salttwist-api runs
#: (Salt's C{netapi_enable_clients} must name each one used).
CLIENTS = (
    "local",
    "local_async",
    "local_batch",
    "local_subset",
    "runner",
    "runner_async",
    "wheel",
    "wheel_async",
)
#: Salt's clients that salttwist-api does not run: C{ssh} (salttwist has
#: no salt-ssh).
MISSING_CLIENTS = ("ssh",)

#: Salt's default port of rest_cherrypy.
DEFAULT_PORT = 8000
#: Salt's default C{max_request_body_size} (1 MB).
DEFAULT_MAX_BODY = 1048576


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"rest_cherrypy: {name} must be true or false, not {value!r}")
    return value


def _int(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"rest_cherrypy: {name} must be an integer, not {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"rest_cherrypy: {name} must be {bound}, not {value}")
    return value


def _number(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"rest_cherrypy: {name} must be a positive number, not {value!r}")
    return value


def _string(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"rest_cherrypy: {name} must be a non-empty string, not {value!r}")
    return value


def _origins(value: object) -> str | list[str]:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise ValueError(
        f"rest_cherrypy: cors_origin must be an origin ('https://ui.example.com'),"
        f" '*' or a list of origins, not {value!r}"
    )


#: The checks of the block's options, by name.
_CHECKS: dict[str, Any] = {
    "port": lambda v: _int("port", v, 0, 65535),
    "host": lambda v: _string("host", v),
    "ssl_crt": lambda v: _string("ssl_crt", v),
    "ssl_key": lambda v: _string("ssl_key", v),
    "ssl_chain": lambda v: _string("ssl_chain", v),
    "disable_ssl": lambda v: _bool("disable_ssl", v),
    "debug": lambda v: _bool("debug", v),
    "webhook_disable_auth": lambda v: _bool("webhook_disable_auth", v),
    "webhook_url": lambda v: _string("webhook_url", v),
    "thread_pool": lambda v: _int("thread_pool", v, 1),
    "socket_queue_size": lambda v: _int("socket_queue_size", v, 1),
    "expire_responses": lambda v: _bool("expire_responses", v),
    "max_request_body_size": lambda v: _int("max_request_body_size", v, 1),
    "collect_stats": lambda v: _bool("collect_stats", v),
    "stats_disable_auth": lambda v: _bool("stats_disable_auth", v),
    "static": lambda v: _string("static", v),
    "static_path": lambda v: _string("static_path", v),
    "app": lambda v: _string("app", v),
    "app_path": lambda v: _string("app_path", v),
    "cors_origin": _origins,
    "log_access_file": lambda v: _string("log_access_file", v),
    "login_rate": lambda v: _number("login_rate", v),
    "login_burst": lambda v: _int("login_burst", v, 1),
}


def checkRestCherrypy(value: object) -> dict[str, Any]:
    """
    Check Salt's C{rest_cherrypy} block.

    @return: the block, as given.
    @raise ValueError: it is not a mapping, names an unknown option, or an
        option has a bad value; the message names it.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"rest_cherrypy must be a mapping of options, not {value!r}")
    checked: dict[str, Any] = {}
    for name, option in value.items():
        check = _CHECKS.get(name)
        if check is None:
            known = ", ".join(sorted(_CHECKS))
            raise ValueError(f"rest_cherrypy: unknown option {name!r}; the options are {known}")
        checked[name] = check(option)
    return checked


@dataclass(frozen=True)
class ApiOptions:
    """
    The checked C{rest_cherrypy} block, with Salt's defaults.

    @ivar loginRate: logins a source address may try per second, on
        average (salttwist's own option, C{login_rate}).
    @ivar loginBurst: how many it may try at once (C{login_burst}).
    @ivar logAccessFile: where to log each request (Salt's
        C{log_access_file}, the common log format); L{None}: nowhere.
    """

    port: int = DEFAULT_PORT
    host: str = "0.0.0.0"
    sslCrt: str | None = None
    sslKey: str | None = None
    sslChain: str | None = None
    disableSsl: bool = False
    debug: bool = False
    webhookDisableAuth: bool = False
    webhookUrl: str = "/hook"
    maxRequestBodySize: int = DEFAULT_MAX_BODY
    collectStats: bool = False
    statsDisableAuth: bool = False
    static: str | None = None
    staticPath: str = "/static"
    app: str | None = None
    appPath: str = "/app"
    corsOrigin: str | list[str] | None = None
    loginRate: float = 0.2
    loginBurst: int = 10
    logAccessFile: str | None = None

    @classmethod
    def fromConfig(cls, config: Mapping[str, Any]) -> ApiOptions:
        """
        @param config: a master config (its C{rest_cherrypy} block).
        @raise ValueError: see L{checkRestCherrypy}.
        """
        block = checkRestCherrypy(config.get("rest_cherrypy"))
        return cls(
            port=block.get("port", DEFAULT_PORT),
            host=block.get("host", "0.0.0.0"),
            sslCrt=block.get("ssl_crt"),
            sslKey=block.get("ssl_key"),
            sslChain=block.get("ssl_chain"),
            disableSsl=block.get("disable_ssl", False),
            debug=block.get("debug", False),
            webhookDisableAuth=block.get("webhook_disable_auth", False),
            webhookUrl=block.get("webhook_url", "/hook"),
            maxRequestBodySize=block.get("max_request_body_size", DEFAULT_MAX_BODY),
            collectStats=block.get("collect_stats", False),
            statsDisableAuth=block.get("stats_disable_auth", False),
            static=block.get("static"),
            staticPath=block.get("static_path", "/static"),
            app=block.get("app"),
            appPath=block.get("app_path", "/app"),
            corsOrigin=block.get("cors_origin"),
            loginRate=block.get("login_rate", 0.2),
            loginBurst=block.get("login_burst", 10),
            logAccessFile=block.get("log_access_file"),
        )

    def tlsProblem(self) -> str | None:
        """
        @return: why the API may not start as configured (no certificate
            and key, and plain HTTP not asked for), or L{None}.
        """
        if self.disableSsl:
            return None
        missing = [n for n, v in (("ssl_crt", self.sslCrt), ("ssl_key", self.sslKey)) if not v]
        if missing:
            return (
                f"rest_cherrypy: {' and '.join(missing)} not set: salttwist-api serves HTTPS"
                " only, with the certificate ssl_crt and its private key ssl_key; set"
                " disable_ssl: True to serve plain HTTP (behind a TLS-terminating proxy"
                " on the same host only)"
            )
        return None
