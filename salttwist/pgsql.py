# -*- test-case-name: tests.test_jobcache_pg,tests.test_keystore_pg -*-
"""
What the PostgreSQL stores share (the job cache, L{salttwist.master.jobcache_pg};
the key store, L{salttwist.pki.keystore_pg}): libpq's connection defaults,
how a server is named in messages, numbered schema migrations applied
once under an advisory lock, and how a connection blocked on a server that
hangs is cut from another thread. Blocking psycopg calls: run on the stores'
own threads, never on the reactor.
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = ["CONNECTION_DEFAULTS", "Migration", "applyMigrations", "cutSocket", "describeServer"]

CONNECTION_DEFAULTS: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30000,
}
"""
libpq options used unless a store's options give their own: a server that
vanished without closing its connections (a partition, a dead host) fails
the operation in flight in about half a minute, rather than holding the
store's thread, and everything queued behind it, until the kernel's two
hours.
"""

#: C{(version, description, SQL statements)}.
Migration = tuple[int, str, tuple[str, ...]]


#: Salt's names of the PostgreSQL connection options (after a prefix such
#: as C{returner.pgjsonb.}) and libpq's parameter for each.
SALT_OPTION_KEYS = {
    "host": "host",
    "port": "port",
    "db": "dbname",
    "user": "user",
    "pass": "password",
    "sslmode": "sslmode",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslrootcert": "sslrootcert",
    "sslcrl": "sslcrl",
    "connect_timeout": "connect_timeout",
}


def optionsFromConfig(config: dict[str, Any], prefix: str) -> dict[str, Any]:
    """
    The libpq connection parameters of C{<prefix>host}, C{<prefix>port},
    C{<prefix>db}, C{<prefix>user}, C{<prefix>pass}, the C{ssl*} ones and
    C{<prefix>connect_timeout} (L{SALT_OPTION_KEYS}); unset ones (L{None})
    are left to libpq (its environment variables and C{~/.pgpass}).

    @param prefix: e.g. C{"returner.pgjsonb."}.
    @return: keyword arguments for C{psycopg.connect}.
    """
    options: dict[str, Any] = {}
    for salt, libpq in SALT_OPTION_KEYS.items():
        value = config.get(f"{prefix}{salt}")
        if value is not None:
            options[libpq] = value
    return options


def cutSocket(connection: psycopg.Connection[Any]) -> None:
    """
    Shut down the socket of C{connection} from any thread: a call blocked
    on it fails at once with a broken connection.
    """
    with contextlib.suppress(Exception):
        # A duplicate of the descriptor: shutting it down ends the socket
        # under the one the blocked call reads.
        cut = socket.socket(fileno=os.dup(connection.fileno()))
        try:
            cut.shutdown(socket.SHUT_RDWR)
        finally:
            cut.close()


def describeServer(options: dict[str, Any]) -> str:
    """
    @return: C{user@host:port/db} for messages (never the password).
    """
    return "{}@{}:{}/{}".format(
        options.get("user", "?"),
        options.get("host", "?"),
        options.get("port", 5432),
        options.get("dbname", "?"),
    )


def applyMigrations(
    connection: psycopg.Connection[Any],
    migrations: list[Migration],
    table: str,
    lockId: int,
    what: str,
    error: type[Exception],
) -> list[int]:
    """
    Apply the C{migrations} that the database lacks, in order, in one
    transaction under the advisory lock C{lockId}, so that several masters
    starting together apply each one once; C{table} records the versions
    applied.

    @param table: the name of the versions table (a constant of the
        store's, never user input).
    @param what: the store, for the error (C{the PostgreSQL job cache}).
    @return: the versions applied now.
    @raise error: if the database has a version not in C{migrations}
        (made by a newer salttwist).
    """
    known = {version for version, _, _ in migrations}
    applied: list[int] = []
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (lockId,))
        connection.execute(
            f"""
            CREATE TABLE IF NOT EXISTS {table} (
                version integer PRIMARY KEY,
                description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """  # type: ignore[arg-type]
        )
        present = {
            version
            for (version,) in connection.execute(f"SELECT version FROM {table}")  # type: ignore[arg-type]
        }
        unknown = present - known
        if unknown:
            raise error(
                f"{what} has schema version {max(unknown)}; this "
                f"salttwist knows versions up to {max(known)}"
            )
        for version, description, statements in sorted(migrations):
            if version in present:
                continue
            for statement in statements:
                connection.execute(statement)  # type: ignore[arg-type]
            connection.execute(
                f"INSERT INTO {table} (version, description) VALUES (%s, %s)",  # type: ignore[arg-type]
                (version, description),
            )
            applied.append(version)
    return applied
