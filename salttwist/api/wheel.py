# -*- test-case-name: tests.test_api_wheel -*-
"""
Salt's wheel C{key} module for the API's C{wheel} client and C{/keys}:
key management on the master's key store (as C{salttwist-key}, which
works on it directly too), with Salt's names, arguments and return
shapes. Blocking (file or database work, RSA key generation): the
gateway runs it on a thread.

Each change fires C{salt/key} on the master's bus, as C{salttwist-key}
does, so that a running master acts on it at once.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

from salttwist.crypt import (
    MAX_RSA_BITS,
    MIN_RSA_BITS,
    fingerprint,
    generatePrivateKey,
    privateKeyToPem,
    publicKeyToPem,
)
from salttwist.pki.ids import validateMinionId
from salttwist.pki.keystore import ACCEPTED, DENIED, PENDING, REJECTED, KeyChanged

__all__ = ["SALT_STATES", "KeyWheel"]

#: Salt's names of the key states, by ours.
SALT_STATES = {
    ACCEPTED: "minions",
    PENDING: "minions_pre",
    REJECTED: "minions_rejected",
    DENIED: "minions_denied",
}
_LOCAL_KEYS = ("master.pem", "master.pub")


class KeyWheel:
    """
    The wheel C{key} functions over a key store.

    @ivar functions: the functions by wheel name (C{key.list_all}).
    """

    def __init__(self, store: Any, notify: Callable[[str, str], None] | None = None) -> None:
        """
        @param store: an L{IKeyStore} (its blocking methods).
        @param notify: called with (act, minion id) for each change.
        """
        self.store = store
        self.notify = notify
        self.functions: dict[str, Callable[..., Any]] = {
            "key.list_all": self.list_all,
            "key.list": self.list_,
            "key.name_match": self.glob_match,
            "key.glob_match": self.glob_match,
            "key.accept": self.accept,
            "key.reject": self.reject,
            "key.delete": self.delete,
            "key.finger": self.finger,
            "key.key_str": self.key_str,
            "key.gen": self.gen,
            "key.gen_accept": self.gen_accept,
        }

    def call(self, fun: str, kwargs: dict[str, Any]) -> Any:
        """
        Run the wheel function C{fun}; C{kwargs["__positional__"]} holds
        positional arguments, if any.

        @raise ValueError: the function is unknown or an argument is wrong.
        """
        function = self.functions.get(fun)
        if function is None:
            raise ValueError(
                f"'{fun}' is not available: the wheel functions are"
                f" {', '.join(sorted(self.functions))}"
            )
        kwargs = dict(kwargs)
        positional = kwargs.pop("__positional__", [])
        try:
            return function(*positional, **kwargs)
        except TypeError as e:
            raise ValueError(f"{fun}: {e}") from None

    def _ids(self, state: str) -> list[str]:
        return sorted(self.store.listKeys(state))

    def list_all(self) -> dict[str, list[str]]:
        """
        Every key by state, as Salt's C{key.list_all}.
        """
        ret: dict[str, list[str]] = {"local": list(_LOCAL_KEYS)}
        for state, saltName in SALT_STATES.items():
            ret[saltName] = self._ids(state)
        return ret

    def list_(self, match: str) -> dict[str, list[str]]:
        """
        The keys of one state (C{acc}, C{pre}, C{rej}, C{den}, C{all}).
        """
        states = {
            "acc": ACCEPTED,
            "accepted": ACCEPTED,
            "pre": PENDING,
            "un": PENDING,
            "unaccepted": PENDING,
            "rej": REJECTED,
            "rejected": REJECTED,
            "den": DENIED,
            "denied": DENIED,
        }
        if match == "all":
            return self.list_all()
        state = states.get(match)
        if state is None:
            raise ValueError(f"key.list: unknown status {match!r}")
        return {SALT_STATES[state]: self._ids(state)}

    def _match(self, match: Any, states: tuple[str, ...]) -> dict[str, list[str]]:
        if isinstance(match, list):
            patterns = [str(m) for m in match]
        elif isinstance(match, str):
            patterns = [p for p in match.split(",") if p]
        else:
            raise ValueError(f"match must be a glob or a list of ids, not {match!r}")
        found: dict[str, list[str]] = {}
        for state in states:
            ids = [i for i in self._ids(state) if any(fnmatch.fnmatchcase(i, p) for p in patterns)]
            if ids:
                found[state] = ids
        return found

    def glob_match(self, match: Any) -> dict[str, list[str]]:
        """
        The keys C{match} matches, by Salt state name.
        """
        found = self._match(match, (ACCEPTED, PENDING, REJECTED, DENIED))
        return {SALT_STATES[s]: ids for s, ids in found.items()}

    def _move(self, match: Any, sources: tuple[str, ...], target: str, act: str) -> list[str]:
        moved: list[str] = []
        for state, ids in self._match(match, sources).items():
            for minionId in ids:
                pem = self.store.getKey(state, minionId)
                if pem is None:
                    continue
                try:
                    changed = self.store.moveKey(minionId, state, target, expected=pem)
                except KeyChanged:
                    continue
                if changed and minionId not in moved:
                    moved.append(minionId)
                    self._notify(act, minionId)
        return sorted(moved)

    def _notify(self, act: str, minionId: str) -> None:
        if self.notify is not None:
            self.notify(act, minionId)

    def accept(
        self, match: Any, include_rejected: bool = False, include_denied: bool = False
    ) -> dict[str, list[str]]:
        """
        Accept the pending keys C{match} matches (and rejected, denied ones
        if asked): C{{"minions": [ids accepted]}}.
        """
        sources = (PENDING,) + ((REJECTED,) if include_rejected else ())
        sources += (DENIED,) if include_denied else ()
        moved = self._move(match, sources, ACCEPTED, "accept")
        return {"minions": moved} if moved else {}

    def reject(
        self, match: Any, include_accepted: bool = False, include_denied: bool = False
    ) -> dict[str, list[str]]:
        """
        Reject the pending keys C{match} matches (and accepted, denied ones
        if asked): C{{"minions_rejected": [ids rejected]}}.
        """
        sources = (PENDING,) + ((ACCEPTED,) if include_accepted else ())
        sources += (DENIED,) if include_denied else ()
        moved = self._move(match, sources, REJECTED, "reject")
        return {"minions_rejected": moved} if moved else {}

    def delete(self, match: Any) -> dict[str, list[str]]:
        """
        Delete the keys C{match} matches, in every state: the ids deleted
        by Salt state name.
        """
        deleted: dict[str, list[str]] = {}
        for state, ids in self._match(match, (ACCEPTED, PENDING, REJECTED, DENIED)).items():
            for minionId in ids:
                if self.store.deleteKey(state, minionId):
                    deleted.setdefault(SALT_STATES[state], []).append(minionId)
                    self._notify("delete", minionId)
        return deleted

    def finger(self, match: Any, hash_type: str | None = None) -> dict[str, dict[str, str]]:
        """
        The fingerprints of the keys C{match} matches, by state then id.
        """
        if hash_type not in (None, "sha256"):
            raise ValueError(f"key.finger: only sha256 fingerprints exist here, not {hash_type!r}")
        ret: dict[str, dict[str, str]] = {}
        for state, ids in self._match(match, (ACCEPTED, PENDING, REJECTED, DENIED)).items():
            for minionId in ids:
                pem = self.store.getKey(state, minionId)
                if pem is not None:
                    ret.setdefault(SALT_STATES[state], {})[minionId] = fingerprint(pem)
        return ret

    def key_str(self, match: Any) -> dict[str, dict[str, str]]:
        """
        The public keys C{match} matches, by state then id.
        """
        ret: dict[str, dict[str, str]] = {}
        for state, ids in self._match(match, (ACCEPTED, PENDING, REJECTED, DENIED)).items():
            for minionId in ids:
                pem = self.store.getKey(state, minionId)
                if pem is not None:
                    ret.setdefault(SALT_STATES[state], {})[minionId] = pem.decode("ascii")
        return ret

    def gen(self, id_: str | None = None, keysize: int = 2048) -> dict[str, str]:
        """
        A new key pair, C{{"priv", "pub"}} (PEM text), written nowhere.
        """
        if isinstance(keysize, bool) or not isinstance(keysize, int):
            raise ValueError(f"keysize must be an integer, not {keysize!r}")
        if not MIN_RSA_BITS <= keysize <= MAX_RSA_BITS:
            raise ValueError(f"keysize must be between {MIN_RSA_BITS} and {MAX_RSA_BITS}")
        key = generatePrivateKey(keysize)
        return {
            "priv": privateKeyToPem(key).decode("ascii"),
            "pub": publicKeyToPem(key.public_key()).decode("ascii"),
        }

    def gen_accept(self, id_: str, keysize: int = 2048, force: bool = False) -> dict[str, str]:
        """
        A new key pair for minion C{id_}, its public key accepted: C{{}}
        when the minion already has an accepted key and not C{force}.
        """
        try:
            minionId = validateMinionId(id_)
        except ValueError as e:
            raise ValueError(f"key.gen_accept: {e}") from None
        if self.store.getKey(ACCEPTED, minionId) is not None and not force:
            return {}
        ret = self.gen(minionId, keysize)
        self.store.putKey(ACCEPTED, minionId, ret["pub"].encode("ascii"))
        self._notify("accept", minionId)
        return ret
