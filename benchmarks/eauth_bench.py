# -*- test-case-name: tests.test_eauth_engine -*-
"""
Costs of external authentication (L{salttwist.eauth}), to tell what may run
on the reactor thread and what must not:

  - the ACL engine: C{Permissions.authorize} of a C{local} call to N
    minions covered by target restrictions (grain and glob words), and
    of a runner call, in microseconds per call;
  - password hashes: one verification by the htpasswd backend for each
    scheme it accepts, at the parameters C{htpasswd -B} and libpass use
    by default, in milliseconds (libpass's SHA-crypt is pure Python, its
    bcrypt and argon2 backends are native);
  - the SQLite token store: create and get, synchronously on this thread,
    in microseconds per call.

Figures only, no assertions. Usage::

    .venv/bin/python benchmarks/eauth_bench.py [--minions 1000] [--repeats 200]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from passlib.hash import argon2, bcrypt, sha512_crypt
from twisted.internet.task import Clock

from salttwist.blocking import runSynchronously
from salttwist.eauth.backends import HtpasswdBackend
from salttwist.eauth.engine import Permissions
from salttwist.eauth.interfaces import TokenData
from salttwist.eauth.tokens import SQLiteTokenStore


def _perCall(f: Callable[[], Any], repeats: int) -> float:
    """
    @return: the best of three runs of C{repeats} calls, in seconds per call.
    """
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            f()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def _engine(minions: int, repeats: int) -> None:
    ids = [f"web{n}" for n in range(minions)]
    grains = {m: {"os": "Debian" if n % 2 else "RedHat"} for n, m in enumerate(ids)}
    perms = Permissions.fromItems(
        [
            "test.ping",
            {"G@os:Debian": ["pkg.*"]},
            {"G@os:RedHat and web*": ["pkg.*"]},
            {"@runner": ["manage.*"]},
        ]
    )
    everywhere = _perCall(lambda: perms.authorize("test.ping", ids), repeats)
    targeted = _perCall(
        lambda: perms.authorize("pkg.install", ids, grainsById=grains), max(1, repeats // 10)
    )
    runner = _perCall(lambda: perms.authorize("manage.up", kind="runner"), repeats)
    print(f"engine, {minions} minions:")
    print(f"  local, allowed everywhere     {everywhere * 1e6:10.1f} us/call")
    print(
        f"  local, two grain targets      {targeted * 1e6:10.1f} us/call"
        f" ({targeted * 1e6 / minions:.2f} us/minion)"
    )
    print(f"  runner                        {runner * 1e6:10.1f} us/call")


def _hashes(directory: str) -> None:
    path = os.path.join(directory, "htpasswd")
    schemes = {
        "bcrypt (cost 5, htpasswd -B)": bcrypt.using(rounds=5).hash("pw"),
        "bcrypt (cost 12, libpass)": bcrypt.hash("pw"),
        "argon2id (libpass default)": argon2.hash("pw"),
        "sha512_crypt (5000, htpasswd -5)": sha512_crypt.using(rounds=5000).hash("pw"),
        "sha512_crypt (libpass default)": sha512_crypt.hash("pw"),
    }
    with open(path, "w") as f:
        for n, hashed in enumerate(schemes.values()):
            f.write(f"u{n}:{hashed}\n")
    backend = HtpasswdBackend(path)
    print("htpasswd verification (right password):")
    for n, name in enumerate(schemes):
        assert backend.authenticate(f"u{n}", "pw")
        seconds = _perCall(lambda n=n: backend.authenticate(f"u{n}", "pw"), 3)
        print(f"  {name:33s}{seconds * 1e3:7.1f} ms")


def _tokens(directory: str, repeats: int) -> None:
    clock = Clock()
    clock.advance(time.time())
    results: list[Any] = []
    SQLiteTokenStore.open(
        os.path.join(directory, "tokens.sqlite"), clock, runSynchronously
    ).addCallback(results.append)
    store = results[0]
    data = TokenData("fred", "pam", clock.seconds(), clock.seconds() + 3600, (), ["test.*"])
    tokens: list[str] = []
    create = _perCall(lambda: store.create(data).addCallback(tokens.append), repeats)
    get = _perCall(lambda: store.get(tokens[0]), repeats)
    print("SQLite token store (synchronous, autocommit):")
    print(f"  create                        {create * 1e6:10.1f} us/call")
    print(f"  get                           {get * 1e6:10.1f} us/call")
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--minions", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=200)
    options = parser.parse_args()
    _engine(options.minions, options.repeats)
    with tempfile.TemporaryDirectory() as directory:
        _hashes(directory)
        _tokens(directory, options.repeats)


if __name__ == "__main__":
    main()
