# -*- test-case-name: tests.adversarial.test_atheris -*-
"""
The coverage-guided fuzzer (L{tests.adversarial.atheris_fuzz}) runs in the
suite, bounded: a fixed seed and a fixed number of runs, so it is the same
run on every machine, and a time cap.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from twisted.trial.unittest import SkipTest, SynchronousTestCase

SCRIPT = os.path.join(os.path.dirname(__file__), "atheris_fuzz.py")
RUNS = 100000
MAX_SECONDS = 120


class AtherisTests(SynchronousTestCase):
    """
    libFuzzer over the frame decoder, msgpack, the session envelope, the
    target parser and the id check finds no crash.
    """

    def test_noCrash(self) -> None:
        """
        L{RUNS} inputs from seed 1 run with no unexpected exception (the
        script exits 0; a crash exits non-zero with the input).
        """
        try:
            import atheris  # noqa: F401
        except ImportError:
            raise SkipTest("atheris is not installed (pip install '.[test]')") from None
        with tempfile.TemporaryDirectory() as workDir:
            result = subprocess.run(
                [
                    sys.executable,
                    SCRIPT,
                    f"-runs={RUNS}",
                    f"-max_total_time={MAX_SECONDS}",
                    "-seed=1",
                    f"-artifact_prefix={workDir}/",
                ],
                capture_output=True,
                text=True,
                timeout=MAX_SECONDS + 60,
                cwd=workDir,
            )
        self.assertEqual(result.returncode, 0, result.stderr[-4000:])
        self.assertIn("Done", result.stderr)
