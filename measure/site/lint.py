"""Claims lint: what a reviewer would catch by eye, caught by code.

* a figure with a unit typed straight into prose (it must come from a dataset through a macro);
* a unit typed right after a value() that prints its own (``{{ value(…) }} ms`` reads "12.3 ms ms");
* zh and en pages of one chapter carrying different claims;
* datasets that no page uses.
(Pages naming a dataset without a schema already fail the build: see measure.store.)
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from measure.site.claims import Claim
from measure.site.labels import UNIT_ZH, unit_label

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


# value("dataset", "column", ...) }} and what follows it on the same line
VALUE_CALL = re.compile(r"\{\{-?\s*value\((?P<args>.*?)\)\s*-?\}\}[ \t\u00a0]*(?=(?P<after>[^\n]*))", re.S)
# Spellings of units that are not column units of any schema, but read as one after a number.
PROSE_UNITS = ("tok/s", "tokens/s", "token/s", "ms", "s", "GiB", "MiB", "GB", "MB", "%", "×", "x", "倍", "秒", "毫秒",
               "tokens", "token", "个 token")


def printed_unit(args: str, schemas: dict, lang: str) -> tuple[str, str] | None:
    """(what ``value(ARGS)`` prints after its number, "dataset.column"), or None where it prints no unit or the
    call is not literal enough to tell (value() itself reports bad names)."""
    try:
        call = ast.parse(f"f({args})", mode="eval").body
    except SyntaxError:
        return None
    names = [a.value for a in call.args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(names) < 2 or names[0] not in schemas:
        return None
    given = {k.arg: k.value for k in call.keywords if k.arg}
    if "unit" in given:
        unit = given["unit"].value if isinstance(given["unit"], ast.Constant) else None
    else:
        column = next((c for c in schemas[names[0]].columns if c.name == names[1]), None)
        unit = unit_label(column.unit, lang) if column else None
    return (unit, ".".join(names)) if isinstance(unit, str) and unit else None


# fact("TOPIC.NAME") }} and what follows it: a named fact prints its unit as the value() it stands for does
FACT_CALL = re.compile(r"\{\{-?\s*fact\((?P<args>.*?)\)\s*-?\}\}[ \t\u00a0]*(?=(?P<after>[^\n]*))", re.S)


def fact_unit(args: str, schemas: dict, lang: str) -> tuple[str, str] | None:
    """What ``fact(ARGS)`` prints after its number, as ``printed_unit`` says for a value() call."""
    from measure.site import facts

    try:
        name = ast.literal_eval(args.strip())
        spec = facts.lookup(name)[2]
    except (ValueError, SyntaxError, LookupError):
        return None  # fact() itself reports unknown names, naming the page
    if not isinstance(spec, facts.Value):
        return None
    unit = spec.options.get("unit")
    if unit is None:
        column = schemas[spec.dataset].by_column.get(spec.column) if spec.dataset in schemas else None
        unit = unit_label(column.unit, lang) if column else None
    return (unit, name) if isinstance(unit, str) and unit else None


def doubled_units(markdown: str, page: str, schemas: dict, lang: str) -> list[Finding]:
    """Units typed right after a value() or fact() that prints its own unit: the reader sees the unit twice."""
    spellings = {c.unit for s in schemas.values() for c in s.columns if c.unit}
    spellings |= {label for pair in UNIT_ZH.values() for label in pair} | set(PROSE_UNITS)
    findings = []
    calls = [(m, printed_unit) for m in VALUE_CALL.finditer(markdown)]
    calls += [(m, fact_unit) for m in FACT_CALL.finditer(markdown)]
    for match, unit_of in calls:
        found = unit_of(match.group("args"), schemas, lang)
        if found is None:
            continue
        after = match.group("after")
        typed = next((u for u in sorted(spellings | {found[0]}, key=len, reverse=True) if after.startswith(u)
                      and not (u[-1].isascii() and u[-1].isalnum() and after[len(u):len(u) + 1].isalnum())), None)
        if typed:
            line = markdown.count("\n", 0, match.start("after")) + 1
            findings.append(Finding(f"{page}:{line}", f"{typed!r} typed after value({found[1]!r}…), which prints its "
                                    f"unit {found[0]!r} itself: delete the typed unit (or pass unit=\"\" to print "
                                    "the bare number)"))
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
    from measure.site.scan import keys_by_page_pair, page_lang

    findings = []
    for path in sorted(docs_dir.rglob("*.md")):
        page, text = path.relative_to(docs_dir).as_posix(), path.read_text(encoding="utf-8")
        findings += typed_numbers(text, page) + doubled_units(text, page, schemas, page_lang(page))
    findings += claim_set_mismatches(keys_by_page_pair(claims))
    findings += unused_datasets(claims, schemas)
    return findings
