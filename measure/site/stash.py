"""Macro output kept out of Markdown's reach, as Python-Markdown's own HTML stash keeps raw HTML.

The macros run before Markdown. If their HTML went into the page as text, Markdown would parse it again:
a data cell ``[x](javascript:…)`` or a provenance field in a ``title=""`` would become a live link, however
well the HTML was escaped. So each macro's HTML is stored here and the page gets a plain placeholder word;
after Markdown has made the page's HTML (``on_page_content``), the placeholders are swapped back.
"""

from __future__ import annotations

import re
import secrets

# Letters and digits only: nothing Markdown or its extensions act on.
_RUN = secrets.token_hex(4)
_TOKEN = re.compile(r"(<p>)?zqclaim" + _RUN + r"n(\d+)zq(</p>)?")
_stash: dict[int, str] = {}


def put(html: str) -> str:
    """Keep ``html``; return the placeholder that stands for it until the page's HTML is made."""
    index = len(_stash)
    _stash[index] = html
    return f"zqclaim{_RUN}n{index}zq"


def restore(page_html: str) -> str:
    """The page's HTML with every placeholder replaced by what it stands for. A placeholder that was a whole
    paragraph (a table, a chart) loses the ``<p>`` Markdown wrapped it in."""
    def swap(match: re.Match) -> str:
        stored = _stash.pop(int(match.group(2)))
        if match.group(1) and match.group(3):
            return stored
        return (match.group(1) or "") + stored + (match.group(3) or "")

    return _TOKEN.sub(swap, page_html)


def leftovers(page_html: str) -> list[str]:
    """Placeholders still in a page (a macro whose output Markdown moved or split): they must fail the build."""
    return re.findall(r"zqclaim\w+zq", page_html)
