# -*- test-case-name: tests.test_keystore_stores -*-
"""
Which key store the master, its auth workers and C{salttwist-key} open:
Salt's option C{keys.cache_driver}.

  - C{localfs_key} (the default, Salt's name): L{FilesystemKeyStore} over
    C{pki_dir/<state>/<id>}; no database server needed.
  - C{postgres}: L{salttwist.pki.keystore_pg.PostgresKeyStore}, a database
    several masters share, reached with the C{keys.postgres.*} options
    (C{host}, C{port}, C{db}, C{user}, C{pass}, C{sslmode}, C{sslcert},
    C{sslkey}, C{sslrootcert}, C{sslcrl}, C{connect_timeout}: the names of
    Salt's C{returner.pgjsonb.*}) and C{keys.postgres.write_timeout}.

The choice travels as a L{KeyStoreSpec} (plain data), so that a worker
process opens the same store as its master without reading the config.
Shared ground: the CLI and the master both use it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from salttwist import pgsql
from salttwist.pki.ids import DEFAULT_ID_RULES, IdRules
from salttwist.pki.keystore import STATES, FilesystemKeyStore

__all__ = [
    "KEY_CACHE_DRIVERS",
    "LOCALFS",
    "POSTGRES",
    "KeyStoreSetupError",
    "KeyStoreSpec",
    "copyKeys",
    "describeKeyStore",
    "keyStoreSpec",
    "openKeyStore",
    "postgresOptions",
]

LOCALFS = "localfs_key"
POSTGRES = "postgres"

KEY_CACHE_DRIVERS = (LOCALFS, POSTGRES)
"""
The values of C{keys.cache_driver}.
"""


class KeyStoreSetupError(Exception):
    """
    The configured key store cannot be opened (an unknown driver, psycopg
    missing, or the keys not loaded in time).
    """


class KeyStoreSpec(TypedDict, total=False):
    """
    The key store to open: C{driver} (one of L{KEY_CACHE_DRIVERS}),
    C{pki_dir}, and for C{postgres} the C{psycopg.connect} C{options} and
    the C{write_timeout}.
    """

    driver: str
    pki_dir: str
    options: dict[str, Any]
    write_timeout: float


def postgresOptions(config: dict[str, Any]) -> dict[str, Any]:
    """
    The libpq connection parameters of C{keys.postgres.*}; unset ones
    (L{None}) are left to libpq (its environment variables, C{~/.pgpass}).

    @return: keyword arguments for C{psycopg.connect}.
    """
    return pgsql.optionsFromConfig(config, "keys.postgres.")


def keyStoreSpec(config: dict[str, Any]) -> KeyStoreSpec:
    """
    @return: the key store a master's C{config} selects.
    @raise KeyStoreSetupError: if C{keys.cache_driver} is unknown.
    """
    driver = config.get("keys.cache_driver") or LOCALFS
    if driver not in KEY_CACHE_DRIVERS:
        raise KeyStoreSetupError(
            f"keys.cache_driver: unknown driver {driver!r}; expected one of "
            + ", ".join(KEY_CACHE_DRIVERS)
        )
    spec: KeyStoreSpec = {"driver": driver, "pki_dir": config["pki_dir"]}
    if driver == POSTGRES:
        spec["options"] = postgresOptions(config)
        spec["write_timeout"] = float(config.get("keys.postgres.write_timeout", 10))
    return spec


def describeKeyStore(spec: KeyStoreSpec) -> str:
    """
    @return: the store for messages: C{pki_dir} or C{user@host:port/db}
        (never the password).
    """
    if spec["driver"] == POSTGRES:
        from salttwist.pgsql import describeServer

        return f"PostgreSQL {describeServer(spec.get('options', {}))}"
    return spec["pki_dir"]


def openKeyStore(
    spec: KeyStoreSpec,
    idRules: IdRules = DEFAULT_ID_RULES,
    readyTimeout: float | None = None,
    start: bool = True,
) -> Any:
    """
    Open the key store C{spec} describes. A PostgreSQL store is started
    (its threads connect and load every key, retrying with back-off); with
    C{readyTimeout}, this blocks until the keys are loaded.

    @param start: start a PostgreSQL store's threads now; L{False} leaves
        that to the caller (the master starts it with its services: twistd
        may fork to daemonize after building them, and threads do not
        survive a fork).
    @param readyTimeout: seconds to wait for the keys to be loaded; L{None}
        returns at once (reads fail until loaded: see
        L{PostgresKeyStore.loaded}).
    @return: an L{IKeyStore}; a PostgreSQL one has C{close}, C{watch} and
        C{whenReady}.
    @raise KeyStoreSetupError: if the driver is unknown, psycopg is
        missing, or the keys were not loaded within C{readyTimeout} (the
        message names the server and why).
    @raise OSError: if C{pki_dir} cannot be made (C{localfs_key}).
    """
    driver = spec["driver"]
    if driver == LOCALFS:
        return FilesystemKeyStore(spec["pki_dir"], idRules)
    if driver != POSTGRES:
        raise KeyStoreSetupError(
            f"keys.cache_driver: unknown driver {driver!r}; expected one of "
            + ", ".join(KEY_CACHE_DRIVERS)
        )
    try:
        import psycopg  # noqa: F401
    except ImportError as e:
        raise KeyStoreSetupError(
            "keys.cache_driver: postgres needs psycopg 3: pip install 'salttwist[postgres]'"
        ) from e
    from salttwist.pki.keystore_pg import KeyStoreError, PostgresKeyStore

    store = PostgresKeyStore(spec.get("options", {}), idRules, spec.get("write_timeout", 10.0))
    if not start:
        return store
    store.start()
    if readyTimeout is not None:
        try:
            store.waitReady(readyTimeout)
        except KeyStoreError as e:
            store.close()
            raise KeyStoreSetupError(str(e)) from e
    return store


def copyKeys(source: Any, target: Any) -> list[tuple[str, str]]:
    """
    Copy every key of C{source} that C{target} lacks, in the same state:
    how a master's existing C{pki_dir} keys move into PostgreSQL
    (C{docs/cluster.md}). A minion that already has a key in C{target}, in
    any state, is left alone there (what the cluster decided stands).
    Blocking.

    @param source: an L{IKeyStore} (a L{FilesystemKeyStore}).
    @param target: an L{IKeyStore} (a loaded PostgreSQL store).
    @return: the C{(state, id)} pairs copied.
    """
    present = {minionId for state in STATES for minionId in target.listKeys(state)}
    copied = []
    for state in STATES:
        for minionId in source.listKeys(state):
            if minionId in present:
                continue
            pem = source.getKey(state, minionId)
            if pem is None:
                continue
            target.putKey(state, minionId, pem)
            copied.append((state, minionId))
    return copied
