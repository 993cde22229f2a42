"""Every rule the code and docs cite (``§6.9``) is one heading of docs/kafka-rules/.

The code states its rules by citing the rules pages; a renumbered or merged heading must not
leave a citation pointing nowhere or at two places.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from conftest import require_nonempty

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "docs" / "kafka-rules"
HEADING = re.compile(r"^#{2,4} (\d+\.\d+)\b")
CITATION = re.compile(r"§(\d+\.\d+)")


def _headings() -> Counter[str]:
    found: Counter[str] = Counter()
    for page in require_nonempty(sorted(RULES.glob("*.md")), "rules pages"):
        for line in page.read_text(encoding="utf-8").splitlines():
            m = HEADING.match(line)
            if m:
                found[m.group(1)] += 1
    return found


def _citing_files() -> list[Path]:
    files = [*(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.pyx"),
             ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    return require_nonempty(sorted(files), "files that may cite rules")


def test_rule_headings_are_numbered_once():
    headings = _headings()
    assert len(headings) > 50
    assert [n for n, k in headings.items() if k > 1] == []


def test_every_cited_rule_has_a_heading():
    headings = _headings()
    missing = []
    cited = 0
    for path in _citing_files():
        for number in CITATION.findall(path.read_text(encoding="utf-8")):
            cited += 1
            if number not in headings:
                missing.append(f"{path.relative_to(ROOT)}: §{number}")
    assert cited > 100
    assert missing == []
