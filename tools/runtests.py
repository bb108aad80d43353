"""
Run trial and end with the line CI reads: C{N passed, N failed[, N skipped]}.

The counts come from trial's own summary line (C{PASSED (successes=N)} or
C{FAILED (failures=N, errors=N, ...)}); the exit code is trial's.
"""

from __future__ import annotations

import re
import subprocess
import sys


def summarize(output: str) -> tuple[int, int, int] | None:
    """
    @return: (passed, failed, skipped) from trial's last summary line, or
        L{None} if there is none.
    """
    matches = re.findall(r"^(PASSED|FAILED) \(([^)]*)\)\s*$", output, re.MULTILINE)
    if not matches:
        return None
    counts = dict((key, int(value)) for key, value in re.findall(r"(\w+)=(\d+)", matches[-1][1]))
    passed = counts.get("successes", 0) + counts.get("expectedFailures", 0)
    failed = (
        counts.get("failures", 0) + counts.get("errors", 0) + counts.get("unexpectedSuccesses", 0)
    )
    return passed, failed, counts.get("skips", 0)


def main(argv: list[str]) -> int:
    """
    Run C{python -m twisted.trial ARGV}, echo its output, print the summary.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "twisted.trial", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        sys.stdout.write(line)
        lines.append(line)
    code = process.wait()
    result = summarize("".join(lines))
    if result is None:
        print("0 passed, 1 failed (trial printed no summary)")
        return code or 1
    passed, failed, skipped = result
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
