"""The claim vocabulary: every number, table and chart on a page goes through these functions.

A claim renders as one of four things:

* measured: the value, formatted for the page's language, with its provenance;
* cited: a value from a cited environment (the source article), visibly marked as cited;
* not measured (未实测): no environment holds data for it;
* unconfirmed (未确认): measured or cited, but its cause is not established.

A name that nothing declares (dataset, column, selector column) raises :class:`UnknownName`, so a
typo fails the build instead of quietly turning into "not measured".

Each concern lives in a room of its own under ``measure/site/render/`` (vocabulary, formatting, the shared base,
values, comparisons, tables, charts, answers, also-in-the-data); this module binds them into the renderer the macros call.
"""

from __future__ import annotations

from dataclasses import dataclass

from measure.site.render.also import AlsoInData
from measure.site.render.answers import Answers
from measure.site.render.base import RendererBase
from measure.site.render.charts import Charts
from measure.site.render.comparisons import Comparisons
from measure.site.render.formatting import (  # noqa: F401 - what pages' hooks and tests import from here
    _gap,
    _natural_order,
    _verdict_id,
    cpu_words,
    flags_as_code,
    format_number,
    inline_code,
    legend_names,
    once_per_source,
    one_mark_per_range,
    short_revision,
    title_attr_value,
)
from measure.site.render.tables import Tables
from measure.site.render.values import Values
from measure.site.render.vocabulary import LANGS, TEXT, TIE_MARGIN, Claim, EmptySelection  # noqa: F401


@dataclass
class ClaimRenderer(Values, Comparisons, Tables, Charts, Answers, AlsoInData, RendererBase):
    """Renders claims for one page in one language and records each claim it renders."""

    def macros(self) -> dict:
        return {name: getattr(self, name) for name in MACROS}


# The claim macros pages may call (the site's and the page scanner's alike); anything else fails the build.
MACROS = ("value", "table", "chart", "matrix", "unconfirmed", "not_measured", "compare", "agreement", "fact", "answers",
          "site_answers", "faq", "gpu_runs", "also_in_data")
