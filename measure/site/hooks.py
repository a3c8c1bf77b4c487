"""MkDocs hooks: ship plotly.js and the data files with the site, so it works offline and every
number links to the CSV it came from."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import plotly

from measure.store import PROVENANCE_FILE, default_data_root

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PLOTLY_TARGET = "assets/javascripts/plotly.min.js"
log = logging.getLogger("mkdocs.hooks.claims")  # warnings here fail `mkdocs build --strict`


def on_page_markdown(markdown, page, **kwargs):
    from measure.site.lint import typed_numbers

    # The source as written: by now the macros have already put measured numbers into `markdown`.
    source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    for finding in typed_numbers(source, page.file.src_uri):
        log.warning(str(finding))
    return markdown


def on_pre_build(config, **kwargs):
    from measure.site.lint import claim_set_mismatches, unused_datasets
    from measure.site.scan import keys_by_page_pair, make_store, scan_pages

    store = make_store()
    claims = scan_pages(Path(config["docs_dir"]), store=store)
    for finding in claim_set_mismatches(keys_by_page_pair(claims)) + unused_datasets(claims, store.schemas):
        log.warning(str(finding))


def on_post_build(config, **kwargs):
    site = Path(config["site_dir"])
    target = site / PLOTLY_TARGET
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PLOTLY_JS, target)
    root = default_data_root()
    out = site / "data"
    if out.exists():
        shutil.rmtree(out)
    for env_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []:
        if not (env_dir / PROVENANCE_FILE).is_file():
            continue
        for f in [env_dir / PROVENANCE_FILE, *sorted(env_dir.glob("*.csv"))]:
            dest = out / env_dir.name / f.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
