"""Claims lint: what a reviewer would catch by eye, caught by code.

* a figure with a unit typed straight into prose (it must come from a dataset through a macro);
* zh and en pages of one chapter carrying different claims;
* datasets that no page uses.
(Pages naming a dataset without a schema already fail the build: see measure.store.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from measure.site.claims import Claim

# Measurement units only: "8 GB-class card" names hardware, "21,900 tok/s" is a measurement.
UNITS = r"(?:tok/s|tokens?/s|ms\b|GiB\b|MiB\b|%|倍|×(?!\s?\d)|x\b)"  # 448×448 is a size, not a ratio
TYPED_NUMBER = re.compile(r"(?<![\w.#/-])\d[\d,.]*\s?" + UNITS)
CODE_OR_MACRO = re.compile(r"```.*?```|`[^`\n]*`|\{\{.*?\}\}|\{%.*?%\}|<[^>]+>", re.S)


@dataclass
class Finding:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def typed_numbers(markdown: str, page: str) -> list[Finding]:
    """Figures with units in prose; code, macro calls and HTML tags are blanked out first."""
    blanked = CODE_OR_MACRO.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), markdown)
    findings = []
    for line_no, line in enumerate(blanked.splitlines(), start=1):
        for match in TYPED_NUMBER.finditer(line):
            findings.append(Finding(f"{page}:{line_no}", f"number typed into prose: {match.group(0)!r}"
                                    " (put it in a dataset and use value(), or cite it through the article's data)"))
    return findings


def claim_set_mismatches(pairs: dict[str, dict[str, set[str]]]) -> list[Finding]:
    findings = []
    for base, langs in sorted(pairs.items()):
        zh, en = langs.get("zh", set()), langs.get("en", set())
        if zh != en:
            findings.append(Finding(base, f"zh and en carry different claims: only zh {sorted(zh - en)}, only en {sorted(en - zh)}"))
    return findings


def unused_datasets(claims: list[Claim], schemas: dict) -> list[Finding]:
    used = {c.dataset for c in claims if c.dataset}
    return [Finding(name, "no page uses this dataset") for name in sorted(set(schemas) - used)]


def lint_docs(docs_dir: Path, claims: list[Claim], schemas: dict) -> list[Finding]:
    from measure.site.scan import keys_by_page_pair

    findings = []
    for path in sorted(docs_dir.rglob("*.md")):
        findings += typed_numbers(path.read_text(encoding="utf-8"), path.relative_to(docs_dir).as_posix())
    findings += claim_set_mismatches(keys_by_page_pair(claims))
    findings += unused_datasets(claims, schemas)
    return findings
