"""MkDocs hooks: ship plotly.js and the data files with the site, so it works offline and every
number links to the CSV it came from."""

from __future__ import annotations

import logging
import re
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


_site_dir: Path | None = None


def on_config(config, **kwargs):
    global _site_dir
    _site_dir = Path(config["site_dir"])
    return config


def on_build_error(error, **kwargs):
    # A failed build must not leave the previous, complete-looking site behind: a reader (or a deploy step)
    # would take it for this build's.
    if _site_dir is not None and (_site_dir / "index.html").is_file():
        shutil.rmtree(_site_dir, ignore_errors=True)
        log.error(f"build failed: removed {_site_dir} so that no stale site is taken for this build")


def on_page_content(html, page, **kwargs):
    from measure.site import stash

    html = stash.restore(html)
    for token in stash.leftovers(html):
        log.warning(f"{page.file.src_uri}: a macro's output was lost in Markdown ({token}); put the macro on a line "
                    "or in a sentence of its own")
    return html


def on_post_page(output, page, **kwargs):
    # plotly.js is most of a page's weight (4.8 MB): only pages that draw a chart load it.
    if 'class="claim-chart"' not in output:
        output = re.sub(r'<script src="[^"]*' + re.escape(PLOTLY_TARGET) + r'"></script>', "", output)
    return output


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
