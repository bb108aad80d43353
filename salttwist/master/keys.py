# -*- test-case-name: tests.test_master_auth -*-
"""
The master's own secrets: its RSA key pair, the rotating publication key and
the local admin's root key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric import rsa

from salttwist import crypt
from salttwist.rootkey import ROOT_KEY_FILE as ROOT_KEY_FILE
from salttwist.rootkey import readRootKey as readRootKey


@dataclass
class PublicationKey:
    """
    The AES key every publication is sealed with; C{kid} numbers its
    generations so a minion can tell which key a publication needs.
    """

    key: bytes = field(default_factory=crypt.newAesKey)
    kid: int = 1

    def cipher(self) -> crypt.AesCipher:
        """
        @return: the cipher for this key.
        """
        return crypt.AesCipher(self.key)


@dataclass
class MasterKeys:
    """
    @ivar privateKey: the master's RSA key; signs auth replies and publications.
    @ivar publicPem: its public half, pinned by minions.
    @ivar rootKey: the secret the local client proves knowledge of; lives in
        C{cachedir/.root_key}, mode 0600, new at every start.
    @ivar userKeys: the keys of the users C{publisher_acl} names, by user
        name; each lives in C{cachedir/.<user>_key}, mode 0400, owned by
        that user, new at every start (L{salttwist.master.acl}).
    """

    privateKey: rsa.RSAPrivateKey
    publicPem: bytes
    rootKey: bytes
    userKeys: dict[str, bytes] = field(default_factory=dict)


def loadMasterKeys(pkiDir: str, cachedir: str, keysize: int) -> MasterKeys:
    """
    Load or create C{master.pem}/C{master.pub} in C{pkiDir} and write a fresh
    root key. Blocking: called while the daemon starts, before the reactor runs.
    """
    privateKey, publicPem = crypt.loadOrCreateKeyPair(pkiDir, "master", keysize)
    rootKey = os.urandom(32)
    crypt.writePrivateFile(os.path.join(cachedir, ROOT_KEY_FILE), rootKey.hex().encode())
    return MasterKeys(privateKey, publicPem, rootKey)
