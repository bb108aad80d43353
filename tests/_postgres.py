# -*- test-case-name: tests.test_jobcache_pg -*-
"""
A PostgreSQL database of its own for a test: made with a random name on the
server at C{SALTTWIST_TEST_PG} (a libpq connection string; by default
C{host=127.0.0.1 port=5432 user=postgres}, trust auth as on the CI machine)
and dropped after the test.

Without psycopg or a reachable server the test is skipped, except in CI
(C{CI} set), where it fails: CI must run these tests (L{.ci/run} starts the
server).
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from twisted.trial.unittest import SkipTest, TestCase

DEFAULT_SERVER = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"


def _unavailable(reason: str) -> None:
    """
    Skip, or fail in CI.
    """
    if os.environ.get("CI"):
        raise AssertionError(f"PostgreSQL tests cannot run in CI: {reason}")
    raise SkipTest(reason)


def serverConnectionString() -> str:
    """
    @return: the libpq connection string of the test server's maintenance
        database.
    """
    return os.environ.get("SALTTWIST_TEST_PG", DEFAULT_SERVER)


def adminConnection() -> Any:
    """
    @return: an autocommit connection to the server's maintenance database.
    """
    try:
        import psycopg
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'salttwist[postgres]')")
    try:
        return psycopg.connect(serverConnectionString(), autocommit=True)
    except psycopg.Error as e:
        _unavailable(f"no PostgreSQL server at {serverConnectionString()!r}: {e}")


def temporaryDatabase(testCase: TestCase) -> dict[str, Any]:
    """
    Make an empty database for C{testCase}, dropped (with its connections)
    when it ends.

    @return: C{psycopg.connect} keyword arguments for it.
    """
    import psycopg.conninfo

    name = "salttwist_test_" + secrets.token_hex(6)
    with adminConnection() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with adminConnection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    testCase.addCleanup(drop)
    options = psycopg.conninfo.conninfo_to_dict(serverConnectionString())
    options["dbname"] = name
    return options
