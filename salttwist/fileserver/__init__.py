# -*- test-case-name: tests.test_fileserver -*-
"""
The file server (issue 20): Salt's C{salt://} files, served from the
master's C{file_roots} and git repositories to the minions over their
sessions, and cached on the minion.

  - L{salttwist.fileserver.interfaces}: L{IFileServerBackend} (a source of
    files: C{roots}, C{git}) and L{IFileClient} (what execution modules use
    to fetch and cache files, over the session or locally);
  - L{salttwist.fileserver.paths}: C{salt://} URLs and the confinement of
    relative paths;
  - L{salttwist.fileserver.roots} and L{salttwist.fileserver.gitfs}: the
    backends; L{salttwist.fileserver.server}: L{FileServer}, the backends
    of C{fileserver_backend} in order;
  - L{salttwist.fileserver.client}: the minion's file clients and cache.

Ground: imported by the master, the minion, the modules and the CLI; it
imports no wing.
"""
