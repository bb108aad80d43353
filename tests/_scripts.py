# -*- test-case-name: tests.test_daemon,tests.test_minion_path_bench,tests.test_vs_salt_table -*-
"""
The project's scripts (C{tools/}, C{benchmarks/}), imported as modules so
their functions can be tested.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

#: The checkout's top folder.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loadScript(*path: str) -> ModuleType:
    """
    Import the script at C{path} (relative to the checkout) as a new module.

    @return: the module.
    """
    filename = os.path.join(ROOT, *path)
    name = os.path.splitext(os.path.basename(filename))[0]
    spec = importlib.util.spec_from_file_location(f"salttwist_script_{name}", filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
