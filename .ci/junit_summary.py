"""Summarise a pytest JUnit XML report: ``python3 .ci/junit_summary.py pytest-junit.xml``.

Prints the totals and one line per failed, erroring or skipped test (a skip is listed so that a test
skipped for a missing file or tool is seen). Exit 0 unless the file cannot be read. Standard library only.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def summarise(xml_text: str) -> list[str]:
    root = ET.fromstring(xml_text)
    suites = [root] if root.tag == "testsuite" else list(root)
    total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    lines = ["pytest: {tests} tests, {failures} failed, {errors} errors, {skipped} skipped".format(**total)]
    for suite in suites:
        for case in suite.iter("testcase"):
            for tag in ("failure", "error", "skipped"):
                node = case.find(tag)
                if node is not None:
                    lines.append(f"  {tag:8s} {case.get('classname')}::{case.get('name')}: {(node.get('message') or '')[:160]}")
    return lines


def main(argv: list[str]) -> int:
    try:
        lines = summarise(Path(argv[1]).read_text())
    except (OSError, IndexError, ET.ParseError) as err:
        print(f"CI: cannot read the JUnit report: {err}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
