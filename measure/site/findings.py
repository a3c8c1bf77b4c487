"""What the data show that a page may not say: pairs of rows of one dataset that differ in one recorded condition and
whose figure differs by EFFECT_RATIO or more beyond the spread of their repeats (the slower side's fastest repeat
against the faster side's slowest). Grouped per dataset, figure and condition, each such *effect* is either cited on
its page (a chart of that figure against that condition, or a comparison of two of its rows) or listed, generated,
under "数据中还有 / Also in the data" on that page, and by ``nox -s claims``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pandas as pd

from measure.schema import CLIENT_LOAD, SETTING, DatasetSchema
from measure.site.render.formatting import plain, recorded_range
from measure.store import Environment, Store

EFFECT_RATIO = 2.0
# The figures an effect is looked for in: speeds and times (counts and shares follow from the settings themselves)
FIGURE_UNITS = ("tok/s", "req/s", "inputs/s", "pairs/s", "ms", "s")
# Key columns that name a thing rather than set a condition: two servers' start-up times are no effect of a setting
NAMING_COLUMNS = ("server",)


@dataclass(frozen=True)
class Pair:
    low_row: dict  # the row with the smaller figure
    high_row: dict
    ratio: float  # high / low, from the medians
    beyond_spread: float  # the high side's slowest repeat / the low side's fastest (≥ EFFECT_RATIO)


@dataclass(frozen=True)
class Effect:
    env: str
    dataset: str
    column: str
    condition: str  # the key column the two rows differ in
    pairs: tuple[Pair, ...]  # strongest first

    @property
    def strongest(self) -> Pair:
        return self.pairs[0]


def figure_columns(schema: DatasetSchema) -> list[str]:
    return [c.name for c in schema.columns
            if c.unit in FIGURE_UNITS and c.name not in schema.key and c.role not in (SETTING, CLIENT_LOAD)
            and not c.name.endswith(("_min", "_max"))]


def _bounds(schema: DatasetSchema, row: pd.Series, column: str) -> tuple[float, float]:
    """The figure's recorded range, else the figure itself at both ends."""
    return recorded_range(schema, row, column) or (float(row[column]),) * 2


def effects(store: Store, env: Environment, dataset: str) -> list[Effect]:
    """The effects in one dataset of one environment, strongest first within each (figure, condition); found once
    per store (the page scan and each language's build ask for the same)."""
    known = store.__dict__.setdefault("_effects", {})
    if (env.name, dataset) not in known:
        known[env.name, dataset] = _find_effects(store, env, dataset)
    return known[env.name, dataset]


def _find_effects(store: Store, env: Environment, dataset: str) -> list[Effect]:
    schema = store.schema(dataset)
    frame = store.frame(env, dataset)
    key = [k for k in schema.key if k in frame.columns and k not in NAMING_COLUMNS]
    found: dict[tuple[str, str], list[Pair]] = {}
    rows = [row for _, row in frame.iterrows()]
    for column in figure_columns(schema):
        for a, b in itertools.combinations(rows, 2):
            differ = [k for k in key if a[k] != b[k]]
            if len(differ) != 1 or pd.isna(a[column]) or pd.isna(b[column]):
                continue
            low, high = (a, b) if a[column] <= b[column] else (b, a)
            if float(low[column]) <= 0:
                continue
            beyond = _bounds(schema, high, column)[0] / _bounds(schema, low, column)[1]
            if beyond >= EFFECT_RATIO:
                found.setdefault((column, differ[0]), []).append(Pair(
                    {k: plain(low[k]) for k in [*key, column]}, {k: plain(high[k]) for k in [*key, column]},
                    float(high[column]) / float(low[column]), beyond))
    return [Effect(env.name, dataset, column, condition, tuple(sorted(pairs, key=lambda p: -p.ratio)))
            for (column, condition), pairs in found.items()]
