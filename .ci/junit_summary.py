"""Summarise pytest JUnit XML reports, and fail CI on a skip that is not allowed.

    python3 .ci/junit_summary.py REPORT.xml [REPORT.xml ...]
    python3 .ci/junit_summary.py --check-skips .ci/allowed-skips.txt REPORT.xml [REPORT.xml ...]

Prints each report's totals and one line per failed, erroring or skipped test. With ``--check-skips``
the reports are one CI run (``make test`` and every hook's pytest): a test counts as run when any report
ran it (a test that skips in ``make test`` for want of Ray and passes in the real-engine hook was run);
a test that no report ran is a skip, and every such skip must give a reason that the allow-list file
matches (hardware this machine lacks: a GPU), else exit 1 naming it. An expected failure (xfail) is a
skip here: it also turns a test green without its assertion holding. Exit 1 too when a report cannot
be read. Standard library only (CI runs it with the system python3).
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

# pytest-xdist's loadgroup scheduling appends "@<group>" to a grouped test's id (tests/conftest.py
# groups the testbed's tests); the same test run without xdist (a hook) has none.
_GROUP_SUFFIX = re.compile(r"@[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class Case:
    test_id: str  # classname::name, without an xdist group suffix
    outcome: str  # passed | failure | error | skipped
    message: str


def cases(xml_text: str) -> list[Case]:
    """Every testcase of one report with its outcome (the first of failure/error/skipped it holds)."""
    root = ET.fromstring(xml_text)
    out = []
    for case in root.iter("testcase"):
        name = _GROUP_SUFFIX.sub("", case.get("name") or "")
        test_id = f"{case.get('classname')}::{name}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome, message = tag, node.get("message") or (node.text or "").strip()
                break
        out.append(Case(test_id, outcome, message))
    return out


def summarise(xml_text: str) -> list[str]:
    root = ET.fromstring(xml_text)
    suites = [root] if root.tag == "testsuite" else list(root)
    total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    lines = ["pytest: {tests} tests, {failures} failed, {errors} errors, {skipped} skipped".format(**total)]
    for case in cases(xml_text):
        if case.outcome != "passed":
            lines.append(f"  {case.outcome:8s} {case.test_id}: {case.message[:160]}")
    return lines


def load_allowed(text: str) -> list[re.Pattern[str]]:
    """One regular expression a line (searched in the skip reason); '#' starts a comment line."""
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            patterns.append(re.compile(line))
    return patterns


def skip_problems(reports: list[list[Case]], allowed: list[re.Pattern[str]]) -> tuple[list[str], list[str]]:
    """(skips no allow-list entry covers, skips it covers), one line each, over all reports together."""
    ran: set[str] = set()
    skipped: dict[str, str] = {}
    for report in reports:
        for case in report:
            if case.outcome == "skipped":
                skipped.setdefault(case.test_id, case.message)
            else:
                ran.add(case.test_id)
    bad, ok = [], []
    for test_id, reason in sorted(skipped.items()):
        if test_id in ran:
            continue
        line = f"{test_id}: {reason[:200]}"
        (ok if any(p.search(reason) for p in allowed) else bad).append(line)
    return bad, ok


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="pytest --junitxml files")
    parser.add_argument("--check-skips", type=Path, metavar="ALLOWED", help="fail on a skip whose reason no line of ALLOWED matches")
    args = parser.parse_args(argv[1:])
    parsed = []
    try:
        for path in args.reports:
            text = path.read_text()
            print(f"{path.name}:")
            print("\n".join(summarise(text)))
            parsed.append(cases(text))
        allowed = load_allowed(args.check_skips.read_text()) if args.check_skips else []
    except (OSError, ET.ParseError, re.error) as err:
        print(f"CI: cannot read a JUnit report or the allow-list: {err}", file=sys.stderr)
        return 1
    if args.check_skips is None:
        return 0
    bad, ok = skip_problems(parsed, allowed)
    for line in ok:
        print(f"  allowed skip (hardware this machine lacks) {line}")
    if bad:
        print(f"CI: {len(bad)} test(s) skipped in every report, for a reason the allow-list ({args.check_skips.name}) does not cover:",
              file=sys.stderr)
        for line in bad:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"skips: none outside the allow-list ({len(ok)} allowed)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
