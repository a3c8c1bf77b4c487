"""mkdocs-macros entry point: the claim vocabulary, bound to the page being rendered.

Pages may call: value, table, chart, matrix, unconfirmed, not_measured, compare, claims_status, reproduce,
server_commands.
"""

from __future__ import annotations

import functools
import html
import shlex
from pathlib import Path

from measure.site import stash
from measure.site.claims import MACROS, TEXT, ClaimRenderer
from measure.site.facts import topics
from measure.site.scan import data_url_for, open_claims, page_base, page_lang, scan_pages, site_store

STATUS_TEXT = {
    "zh": {"page": "页面", "claim": "声明", "status": "状态", "detail": "说明", "none": "没有待实测或待确认的声明。",
           "figures": "（{n} 个数字）"},
    "en": {"page": "Page", "claim": "Claim", "status": "Status", "detail": "Note", "none": "No open claims.",
           "figures": "({n} figures)"},
}
PENDING_TEXT = {
    "zh": "实验 {} 目前只声明了数据集，运行部分尚待完成。",
    "en": "Experiment {} declares its datasets but cannot run yet.",
}
SERVER_COMMANDS_TEXT = {
    "zh": ("服务器命令", "{env} 上测 {dataset} 时启动的每个 vLLM 服务器（按启动顺序）："),
    "en": ("Server commands", "Every vLLM server started for {dataset} on {env}, in the order they started:"),
}
REPRODUCE_TEXT = {
    "zh": ("复现本页", "在你自己的机器上重新测量本页的数据，然后重建站点："),
    "en": ("Reproduce this page", "Re-measure this page's data on your own machine, then rebuild the site:"),
}


def define_env(env):
    store = site_store()

    current: dict = {}

    def renderer() -> ClaimRenderer:
        """One renderer per page being rendered, so compare() sees the values named above it."""
        page = env.page
        if current.get("page") is not page:
            src = page.file.src_uri
            lang = page_lang(src)
            current.update(page=page, renderer=ClaimRenderer(store, lang, src, data_url=data_url_for(page.url, lang)))
        return current["renderer"]

    def bind(name):
        def call(*args, **kwargs):
            return stash.put(getattr(renderer(), name)(*args, **kwargs))

        call.__name__ = name
        call.__doc__ = getattr(ClaimRenderer, name).__doc__
        return call

    for name in MACROS:
        if name != "faq":
            env.macro(bind(name), name)

    def faq() -> str:
        """The FAQ: Markdown headings (they reach the table of contents and search), answers kept as HTML."""
        pages = {name: f"../{name}/" for name in topics()}  # the FAQ is a page beside the topic pages
        return renderer().faq(keep=stash.put, pages=pages)

    env.macro(faq, "faq")

    def stashed(function):
        """Register ``function`` as a macro whose HTML Markdown never sees (see measure/site/stash.py)."""
        def call(*args, **kwargs):
            return stash.put(function(*args, **kwargs))

        call.__name__, call.__doc__ = function.__name__, function.__doc__
        env.macro(call, function.__name__)
        return function

    @stashed
    def claims_status() -> str:
        """Every 未实测 / 未确认 claim of this language's pages, grouped by cause: one line per page and dataset (or
        per page and reason), with how many figures it covers; a comparison of figures not measured is left out,
        since the figures' own line says it."""
        lang = page_lang(env.page.file.src_uri)
        words = STATUS_TEXT[lang]
        rows = [c for c in open_claims(scan_pages(store=store)) if page_lang(c.page) == lang]
        docs_dir = Path(env.conf["docs_dir"])
        if not rows:
            return f"<p>{words['none']}</p>"
        body = []
        root = data_url_for(env.page.url, lang)[: -len("data/")]
        for group in claim_groups(rows):
            first = group[0]
            links = "、" if lang == "zh" else ", "
            pages = links.join(
                f'<a href="{html.escape(root + ("" if page_base(page) == "index" else page_base(page) + "/"))}">'
                f"{html.escape(page_title(docs_dir, page))}</a>" for page in dict.fromkeys(c.page for c in group))
            said = group_words(first, store, lang)
            figures = len({c.key for c in group})
            count = f' <span class="claim-count">{words["figures"].format(n=figures)}</span>' if figures > 1 else ""
            keys = " ".join(dict.fromkeys(c.key for c in group))
            body.append(
                f"<tr><td>{pages}</td>"
                f'<td data-claim="{html.escape(keys)}">{marked_names(said, first.names)}{count}</td>'
                f'<td><span class="claim-badge claim-{first.status.replace("_", "-")}">{TEXT[first.status][lang]}</span></td>'
                f"<td>{html.escape(first.detail if first.detail != said and first.status == 'unconfirmed' else '')}</td></tr>"
            )
        head = "".join(f"<th>{words[k]}</th>" for k in ("page", "claim", "status", "detail"))
        return f'<div class="claim-table"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'

    @stashed
    def server_commands(dataset: str, env_name: str) -> str:
        """A folded box with the full command of every server behind ``dataset`` in environment ``env_name``."""
        return server_commands_box(store, page_lang(env.page.file.src_uri), dataset, env_name)

    @stashed
    def reproduce(*experiments: str) -> str:
        """A box with the exact commands that re-measure this page's experiments."""
        return reproduce_box(store, page_lang(env.page.file.src_uri), experiments)


@functools.lru_cache(maxsize=256)
def page_title(docs_dir: Path, page: str) -> str:
    """A page's own title (its first '# ' heading), as the reader sees it in the nav."""
    text = (docs_dir / page).read_text(encoding="utf-8")
    if text.startswith("---\n"):  # YAML front matter: its comments start with '# ' too
        text = text.split("\n---\n", 1)[-1]
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page


def marked_names(text: str, names: tuple[str, ...]) -> str:
    """``text`` escaped, its verbatim names (a server's label, a model) marked translate="no"."""
    out = html.escape(text)
    for name in sorted(set(names), key=len, reverse=True):
        escaped = html.escape(name)
        out = out.replace(escaped, f'<span translate="no">{escaped}</span>')
    return out


def claim_groups(claims) -> list[list]:
    """Open claims by cause, said once: the 未实测 figures of one dataset form one group, and the 未确认 figures that
    share a reason form one, whichever pages cite them (topic pages first, the home page and the FAQ after); a
    comparison whose figures are not measured adds nothing."""
    summaries = ("index", "faq")
    ordered = sorted(claims, key=lambda c: page_base(c.page) in summaries)  # stable: page order otherwise
    groups: dict[tuple, list] = {}
    for c in ordered:
        if c.kind == "compare" and c.status == "not_measured":
            continue
        cause = c.dataset or c.text or c.key if c.status == "not_measured" else c.detail or c.key
        groups.setdefault((c.status, cause), []).append(c)
    return list(groups.values())


def group_words(claim, store, lang: str) -> str:
    """What a group of open claims is about: the dataset's title where the group is one dataset's figures."""
    if claim.dataset and claim.status == "not_measured":
        return store.schema(claim.dataset).title.get(lang) or claim.dataset
    return claim_words(claim, store, lang)


def claim_words(claim, store, lang: str) -> str:
    """What an open claim says, in the page's language: its own text, else its dataset's title, else its detail
    (the key stays in the markup, for contributors, and in `nox -s claims`)."""
    if claim.text:
        return claim.text
    if claim.dataset:
        return store.schema(claim.dataset).title.get(lang) or claim.dataset
    return claim.detail


def server_commands_box(store, lang: str, dataset: str, env_name: str) -> str:
    """The full command of each server behind a dataset (from the environment's provenance), escaped, in the order
    the dataset's experiment started them (a server it found started by an earlier experiment last)."""
    store.schema(dataset)  # an unknown dataset fails the build
    environment = store.env(env_name)
    if environment is None or not environment.has(dataset):
        return ""  # the figure above already says 未实测 and how to measure it
    servers = environment.provenance.get("servers") or {}
    recorded = environment.dataset_provenance(dataset)
    starts = ((environment.provenance.get("experiments") or {}).get(recorded.get("experiment", "")) or {}).get(
        "server_starts") or []
    order: dict[str, int] = {}
    for i, start in enumerate(starts):
        order.setdefault(start.get("server", ""), i)
    names = sorted((s for s in recorded.get("servers", []) if s in servers), key=lambda s: (order.get(s, len(starts)), s))
    items = "".join(f"<li><code>{html.escape(name)}</code><pre><code>"
                    f"{html.escape(shlex.join(str(a) for a in servers[name].get('command') or []))}</code></pre></li>"
                    for name in names)
    title, lead = SERVER_COMMANDS_TEXT[lang]
    return (f'<details class="server-commands"><summary>{html.escape(title)}</summary>'
            f"<p>{html.escape(lead.format(dataset=dataset, env=env_name))}</p><ol>{items}</ol></details>")


def reproduce_box(store, lang: str, experiments: tuple[str, ...]) -> str:
    """The commands that re-measure ``experiments``, and the environments under data/ that hold their data."""
    from measure.experiment import get

    classes = [get(name) for name in experiments]  # get() fails the build on unknown names
    pending = [cls.name for cls in classes if cls.pending]
    title, lead = REPRODUCE_TEXT[lang]
    if pending:
        lead = PENDING_TEXT[lang].format(", ".join(pending)) + " " + lead
    setup = list(dict.fromkeys(command for cls in classes for command in cls.setup))
    cmd = "\n".join([*setup, f"nox -s measure -- {' '.join(experiments)}", "nox -s build"])
    datasets = [schema.name for cls in classes for schema in cls.datasets]
    envs = ", ".join(e.name for e in store.environments if not e.cited and any(e.has(d) for d in datasets)) or "-"
    return (
        f'<div class="admonition tip reproduce"><p class="admonition-title">{title}</p>'
        f"<p>{lead}</p><pre><code>{html.escape(cmd)}</code></pre>"
        f"<p><small>data/: {html.escape(envs)}</small></p></div>"
    )
