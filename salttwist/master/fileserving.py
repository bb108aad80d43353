# -*- test-case-name: tests.test_master_fileserving -*-
"""
The file server's room on the master: C{salt://} requests inside a
minion's session (SKELETON: the file-transfer slice of issue 20 fills it).

Wire (each request a session payload with C{cmd}; each answered for the
session's own minion id):
  - C{_file_envs} C{{}} -> C{{"ret": [saltenv, ...]}}
  - C{_file_list} C{{"saltenv", "prefix"}} -> C{{"ret": [path, ...]}}
  - C{_dir_list} C{{"saltenv", "prefix"}} -> C{{"ret": [path, ...]}}
  - C{_file_hash} C{{"saltenv", "path"}} -> C{{"ret": {"hsum", "hash_type",
    "size"}}} or C{{"ret": {}}} when there is no such file
  - C{_file_hashes} C{{"saltenv", "prefix"}} -> C{{"ret": {path: hsum}}}
  - C{_serve_file} C{{"saltenv", "path", "loc", "hsum"}} -> C{{"data":
    bytes, "loc": next offset, "eof": bool}}: one chunk of at most
    C{file_buffer_size} bytes from offset C{loc}
  - C{_file_recv} C{{"path", "loc", "data", "size", "eof"}} -> C{{"ret":
    True}} (C{cp.push}; refused unless C{file_recv})
A refused request is answered C{{"error": "<why>"}}.
"""

from __future__ import annotations

from typing import Any


class FileRequests:
    """
    The file server's requests from minion sessions.
    """

    def __init__(self, config: dict[str, Any], clock: Any, runBlocking: Any) -> None:
        self.config = config
        self.clock = clock
        self.runBlocking = runBlocking

    def _unavailable(self, proto: Any, load: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("the file server is not available on this master yet")

    fileEnvs = fileList = dirList = fileHash = fileHashes = serveFile = fileRecv = _unavailable

    def sessionEnded(self, proto: Any) -> None:
        """
        A session closed: forget what it had in flight.
        """
