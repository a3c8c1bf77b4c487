"""Render every page's claims without building the site.

The claims status page and ``nox -s claims`` both need all claims of all pages before any page is
built; they get them by rendering each page's Jinja with the same claim functions the build uses.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import jinja2

from measure.experiment import all_schemas
from measure.schema import SchemaError, UnknownName
from measure.site.claims import LANGS, Claim, ClaimRenderer
from measure.store import Store, default_data_root

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"


def page_lang(src_path: str) -> str:
    """``page.en.md`` → en; every other page is the default language, zh."""
    stem = Path(src_path).name.rsplit(".", 2)
    return stem[-2] if len(stem) == 3 and stem[-2] in LANGS else "zh"


def page_base(src_path: str) -> str:
    """``pooling.en.md`` → ``pooling``: the name both languages of a page share."""
    name = src_path[:-3] if src_path.endswith(".md") else src_path
    for lang in LANGS:
        if name.endswith("." + lang):
            return name[: -len(lang) - 1]
    return name


def data_url_for(page_url: str, lang: str) -> str:
    """Relative URL from a built page to the site's ``data/`` folder (copied there by the hook)."""
    depth = len([p for p in page_url.strip("/").split("/") if p])
    return posixpath.join(*([".."] * depth), "data/") if depth else "data/"


def make_store(root: Path | None = None, partial: bool | None = None) -> Store:
    """``partial``: the root holds only part of what the pages name (default: $MEASURE_PARTIAL_DATA)."""
    store = Store(root or default_data_root(), all_schemas())
    if partial is not None:
        store.partial = partial
    return store


def _fingerprint(folder: Path, pattern: str = "*") -> tuple:
    """What changes when a file under ``folder`` is edited, added or removed (``mkdocs serve`` rebuilds)."""
    return tuple((p.as_posix(), p.stat().st_mtime_ns, p.stat().st_size)
                 for p in sorted(folder.rglob(pattern)) if p.is_file()) if folder.is_dir() else ()


_site_store: tuple[tuple, Store] | None = None


def site_store() -> Store:
    """The store the build's hooks and macros share: the data are read and checked once per build, not once per
    language and per hook, and again when a data file changes under ``mkdocs serve``."""
    global _site_store
    root = default_data_root()
    key = (root, os.environ.get("MEASURE_PARTIAL_DATA"), _fingerprint(root))
    if _site_store is None or _site_store[0] != key:
        _site_store = (key, make_store(root))
    return _site_store[1]


class PageError(RuntimeError):
    """A page could not be rendered; the message names the page, then what went wrong."""


def scan_pages(docs_dir: Path = DOCS_DIR, store: Store | None = None, skip_status: bool = True) -> list[Claim]:
    """All claims of all pages, in page order. Raises on unknown names, as the build does. A store scans the same
    pages once: the build asks for them in each language's pre-build hook and on each status page."""
    store = store or make_store()
    key = (Path(docs_dir).resolve(), _fingerprint(Path(docs_dir), "*.md"))
    done = getattr(store, "_scans", None)
    if done is None:
        done = {}
        object.__setattr__(store, "_scans", done)
    if key not in done:
        done[key] = _scan(Path(docs_dir), store)
    return list(done[key])


def _scan(docs_dir: Path, store: Store) -> list[Claim]:
    claims: list[Claim] = []
    jenv = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    for path in sorted(docs_dir.rglob("*.md")):
        rel = path.relative_to(docs_dir).as_posix()
        renderer = ClaimRenderer(store, page_lang(rel), rel)
        names = renderer.macros()
        names["claims_status"] = lambda *a, **k: ""  # the status page lists claims; it makes none
        names["reproduce"] = names["server_commands"] = lambda *a, **k: ""  # boxes of commands: no claims
        source = path.read_text(encoding="utf-8")
        try:
            jenv.from_string(source).render(**names)
        except (UnknownName, SchemaError) as exc:  # both take one message: the page's name goes in front
            raise type(exc)(f"{rel}: {exc}") from exc
        except Exception as exc:  # a data error, a template error: say which page met it, keep the cause
            raise PageError(f"{rel}: {type(exc).__name__}: {exc}") from exc
        claims.extend(renderer.claims)
    return claims


def open_claims(claims: list[Claim]) -> list[Claim]:
    return [c for c in claims if c.status in ("not_measured", "unconfirmed")]


def keys_by_page_pair(claims: list[Claim]) -> dict[str, dict[str, set[str]]]:
    """{page base: {lang: set of claim keys}} — both languages of a page must carry the same claims."""
    out: dict[str, dict[str, set[str]]] = {}
    for c in claims:
        out.setdefault(page_base(c.page), {}).setdefault(page_lang(c.page), set()).add(c.key)
    return out
