"""``nox -s chapter -- NAME``: a new chapter that builds at once, its claims showing 未实测.

Writes docs/NAME.zh.md and docs/NAME.en.md (claim macros in place), an experiment module declaring
one dataset, a test, and a nav entry. The experiment is marked pending until its plan() and run()
are written, so nothing pretends to have been measured.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NAV_ANCHOR = "  - 待确认: unconfirmed.md\n"

PAGE = {
    "zh": """# {title}

这一章还在写。下面的声明已经接到数据集 `{name}.example` 上：在有人运行 `nox -s measure -- {name}` 之前，它们显示为未实测。

- 示例数值：{{{{ value("{name}.example", "value", case="baseline") }}}}

{{{{ table("{name}.example") }}}}

{{{{ reproduce("{name}") }}}}
""",
    "en": """# {title}

This chapter is being written. The claims below are wired to the dataset `{name}.example`: until someone runs
`nox -s measure -- {name}` they show as not measured.

- Example value: {{{{ value("{name}.example", "value", case="baseline") }}}}

{{{{ table("{name}.example") }}}}

{{{{ reproduce("{name}") }}}}
""",
}

EXPERIMENT = '''"""{title}. Datasets declared; write plan() and run(), then drop `pending`."""

from __future__ import annotations

from measure.experiment import Experiment, register
from measure.schema import Column, DatasetSchema

EXAMPLE = DatasetSchema(
    name="{name}.example",
    title={{"zh": "{title}：示例", "en": "{title}: example"}},
    key=("case",),
    columns=(
        Column("case", "str", doc="what was measured"),
        Column("value", "float", "ms", "replace with the real column and unit"),
    ),
)


@register
class {cls}(Experiment):
    name = "{name}"
    title = {{"zh": "{title}", "en": "{title}"}}
    datasets = (EXAMPLE,)
    pending = "scaffolded: plan() and run() not written yet"
'''

TEST = '''from measure.experiment import all_schemas
from measure.site.scan import keys_by_page_pair, scan_pages


def test_{name}_chapter_is_wired():
    assert "{name}.example" in all_schemas()
    keys = keys_by_page_pair(scan_pages())["{name}"]
    assert keys["zh"] == keys["en"] and any(k.startswith("{name}.example") for k in keys["en"])
'''


def scaffold(name: str, repo: Path = REPO) -> list[Path]:
    if not re.fullmatch(r"[a-z][a-z0-9_]{1,30}", name):
        raise SystemExit(f"chapter name {name!r}: use lower-case letters, digits and _ (it names a module and a page)")
    title = name.replace("_", " ").capitalize()
    targets = {
        repo / "docs" / f"{name}.zh.md": PAGE["zh"].format(name=name, title=title),
        repo / "docs" / f"{name}.en.md": PAGE["en"].format(name=name, title=title),
        repo / "measure" / "experiments" / f"{name}.py": EXPERIMENT.format(
            name=name, title=title, cls="".join(p.capitalize() for p in name.split("_"))),
        repo / "tests" / f"test_chapter_{name}.py": TEST.format(name=name),
    }
    existing = [str(p.relative_to(repo)) for p in targets if p.exists()]
    if existing:
        raise SystemExit(f"chapter {name!r} exists already: {', '.join(existing)}")
    config = repo / "mkdocs.yml"
    text = config.read_text(encoding="utf-8")
    if NAV_ANCHOR not in text:
        raise SystemExit(f"mkdocs.yml: cannot find the nav line {NAV_ANCHOR.strip()!r} to insert before")
    for path, content in targets.items():
        path.write_text(content, encoding="utf-8")
    config.write_text(text.replace(NAV_ANCHOR, f"  - {title}: {name}.md\n" + NAV_ANCHOR), encoding="utf-8")
    return [*targets, config]
