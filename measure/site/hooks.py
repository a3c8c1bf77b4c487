"""MkDocs hooks: ship plotly.js and the data files with the site, so it works offline and every
number links to the CSV it came from."""

from __future__ import annotations

import shutil
from pathlib import Path

import plotly

from measure.store import PROVENANCE_FILE, default_data_root

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PLOTLY_TARGET = "assets/javascripts/plotly.min.js"


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
