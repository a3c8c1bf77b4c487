"""The glossary's terms marked in Chinese text too (a Markdown extension, after ``abbr`` in mkdocs.yml).

Python-Markdown's ``abbr`` finds a term between two ``\\b``: in Chinese, where no space separates words, a term is
seldom at such a boundary (in "KV 缓存是" none lies between 存 and 是), so most of the Chinese glossary's terms never
got their definition. Here a term only may not run on into a Latin letter or digit ("TP" stays out of "TPOT")."""

from __future__ import annotations

import re

from markdown import Extension
from markdown.extensions.abbr import AbbrTreeprocessor


class GlossaryTreeprocessor(AbbrTreeprocessor):
    def run(self, root):
        if not self.abbrs:
            return
        terms = sorted(self.abbrs, key=len, reverse=True)
        self.RE = re.compile(f"(?<![A-Za-z0-9_])(?:{'|'.join(map(re.escape, terms))})(?![A-Za-z0-9_])")
        self.iter_element(root)


class GlossaryExtension(Extension):
    def extendMarkdown(self, md):
        if "abbr" not in md.treeprocessors:
            raise ValueError("measure.site.glossary_terms needs the abbr extension listed before it in mkdocs.yml")
        md.treeprocessors.register(GlossaryTreeprocessor(md, md.treeprocessors["abbr"].abbrs), "abbr", 7)


def makeExtension(**kwargs):  # noqa: N802 (Python-Markdown's name)
    return GlossaryExtension(**kwargs)
