"""Cards: one card per answer, the same figure compared across cards, and where each GPU figure comes from.

An answer, a comparison sentence and a home-page finding cite one GPU card, ``ANSWER_CARD``; other cards' figures sit
in their own "On other GPUs" sections. Across cards, the figures ``measure/quantities.py`` lists in ``CARD_FIGURES``
are compared row by row: where the card with less measured memory bandwidth (and no more compute) is faster beyond
the rounds' spread, both figures render 未确认, side by side, unless a measured reason is declared.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from measure.quantities import CARD_FIGURES, CardFigure
from measure.schema import UnknownName
from measure.store import Environment, Store

# The card every answer cites: the one the site's GPU chapter is measured on.
ANSWER_CARD = "gpu-1x-nvidia-h200"
# A card is weaker than another where its measured bandwidth is this much lower and its compute no higher (beyond
# this margin): two runs of one card's copy or matmul differ by a few per cent.
STRENGTH_MARGIN = 0.05
# Where a figure has no recorded range: how far two cards' figures may lie apart and still not be told apart.
UNRANGED_TOLERANCE = 0.05
# The measurements a card's strength is read from (its own data, never a datasheet).
BANDWIDTH = ("capacity.bandwidth", "bandwidth_gb_s")
COMPUTE = ("pooling_limits.matmul_peak", "tflops")


def is_card(env: Environment | None) -> bool:
    """A measured environment whose figures come from a GPU (not the CPU stand-in, not a cited source)."""
    return env is not None and not env.cited and bool((env.provenance.get("hardware") or {}).get("gpus"))


def card_name(env: Environment) -> str:
    gpus = (env.provenance.get("hardware") or {}).get("gpus") or [{}]
    return str(gpus[0].get("name") or env.name)


def check_one_card(store: Store, where: str, envs: list[str]) -> None:
    """Fail the build where an answer or a comparison (``where``, naming page and fact) cites another GPU card than
    ANSWER_CARD: the other card's figures belong in its own section, linked from the answer."""
    others = sorted({e for e in envs if e != ANSWER_CARD and is_card(store.env(e))})
    if others:
        raise UnknownName(
            f"{where} cites {', '.join(others)}: answers and comparisons cite one card, {ANSWER_CARD}. Cite the "
            f"{ANSWER_CARD} figure (未实测 until it is measured; Question.elsewhere links the other card's section) "
            "and show the other card's figures under their own heading (其他 GPU / On other GPUs)")


def check_same_card(store: Store, where: str, left_env: str | None, right_env: str | None) -> None:
    """A sentence comparing two figures compares them on one card (the cross-card check compares cards)."""
    if left_env and right_env and left_env != right_env and is_card(store.env(left_env)) \
            and is_card(store.env(right_env)):
        raise UnknownName(f"{where} compares a figure from {left_env} with one from {right_env}: a comparison "
                          "sentence stays on one card; the cross-card check (measure/quantities.py CARD_FIGURES) "
                          "compares cards and marks what does not add up")


@dataclass(frozen=True)
class CardReading:
    env: str
    card: str
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class CrossVerdict:
    """One figure of one row on a weaker and a stronger card, where the weaker one is faster beyond the spread."""

    figure: CardFigure
    key: tuple  # the row's key values (the dataset's key columns)
    weaker: CardReading
    stronger: CardReading

    def describe(self) -> str:
        w, s = self.weaker, self.stronger
        return (f"{self.figure.dataset}.{self.figure.column} {self.key}: {w.env} {w.value:,.4g} ({w.low:,.4g}–"
                f"{w.high:,.4g}) did better than {s.env} {s.value:,.4g} ({s.low:,.4g}–{s.high:,.4g}) on a card with "
                "less measured bandwidth" + ("; explained: " + self.figure.reason["en"] if self.figure.reason
                                             else ": both render 未确认"))

    def involves(self, env: str, dataset: str, column: str, key: tuple) -> bool:
        return (self.figure.dataset, self.figure.column, self.key) == (dataset, column, key) \
            and env in (self.weaker.env, self.stronger.env)


class CrossCards:
    """The cross-card check over every pair of measured cards that can be ranked by their own data."""

    def __init__(self, store: Store, figures: tuple[CardFigure, ...] = CARD_FIGURES):
        self.store = store
        self.figures = figures
        for f in figures:
            schema = store.schema(f.dataset)
            schema.column(f.column)
            if f.faster not in ("higher", "lower"):
                raise UnknownName(f"measure/quantities.py: CARD_FIGURES {f.dataset}.{f.column}: faster is 'higher' "
                                  f"or 'lower', not {f.faster!r}")

    @cached_property
    def strengths(self) -> dict[str, tuple[float, float]]:
        """Each card's measured (bandwidth GB/s, matmul TFLOP/s): the best row of each, on cards that have both."""
        found = {}
        for env in self.store.environments:
            if not is_card(env) or not (env.has(BANDWIDTH[0]) and env.has(COMPUTE[0])):
                continue
            bandwidth = self.store.frame(env, BANDWIDTH[0])[BANDWIDTH[1]].max()
            compute = self.store.frame(env, COMPUTE[0])[COMPUTE[1]].max()
            if pd.notna(bandwidth) and pd.notna(compute):
                found[env.name] = (float(bandwidth), float(compute))
        return found

    def weaker(self, a: str, b: str) -> bool:
        """Whether card ``a`` has less measured bandwidth than ``b`` and no more compute."""
        if a not in self.strengths or b not in self.strengths:
            return False
        (bw_a, fl_a), (bw_b, fl_b) = self.strengths[a], self.strengths[b]
        return bw_a < bw_b * (1 - STRENGTH_MARGIN) and fl_a <= fl_b * (1 + STRENGTH_MARGIN)

    @cached_property
    def verdicts(self) -> list[CrossVerdict]:
        """Every row where a weaker card's figure is faster than a stronger card's beyond their spread."""
        found = []
        cards = [e for e in self.store.environments if is_card(e)]
        for figure in self.figures:
            schema = self.store.schema(figure.dataset)
            for weak in cards:
                for strong in cards:
                    if weak is strong or not self.weaker(weak.name, strong.name):
                        continue
                    if not (weak.has(figure.dataset) and strong.has(figure.dataset)):
                        continue
                    a, b = (self._readings(env, figure, schema.key) for env in (weak, strong))
                    for key in sorted(a.keys() & b.keys(), key=repr):
                        if self._faster_beyond_spread(figure, a[key], b[key]):
                            found.append(CrossVerdict(figure, key, a[key], b[key]))
        return found

    def _readings(self, env: Environment, figure: CardFigure, key_columns: tuple) -> dict[tuple, CardReading]:
        frame = self.store.frame(env, figure.dataset)
        has_range = {f"{figure.column}_min", f"{figure.column}_max"} <= set(frame.columns)
        out = {}
        for _, row in frame.iterrows():
            value = row[figure.column]
            if pd.isna(value):
                continue
            low = high = float(value)
            if has_range and pd.notna(row[f"{figure.column}_min"]) and pd.notna(row[f"{figure.column}_max"]):
                low, high = float(row[f"{figure.column}_min"]), float(row[f"{figure.column}_max"])
            key = tuple(_plain(row[k]) for k in key_columns)
            out[key] = CardReading(env.name, card_name(env), float(value), low, high)
        return out

    @staticmethod
    def _faster_beyond_spread(figure: CardFigure, weak: CardReading, strong: CardReading) -> bool:
        def band(r: CardReading) -> tuple[float, float]:
            if r.low != r.high:
                return r.low, r.high
            return r.value * (1 - UNRANGED_TOLERANCE), r.value * (1 + UNRANGED_TOLERANCE)

        (weak_low, weak_high), (strong_low, strong_high) = band(weak), band(strong)
        if figure.faster == "higher":
            return weak_low > strong_high
        return weak_high < strong_low

    def for_figure(self, env: str, dataset: str, column: str, row, key_columns: tuple) -> CrossVerdict | None:
        """The unexplained cross-card verdict this row's figure takes part in, if any."""
        key = tuple(_plain(row[k]) for k in key_columns)
        for verdict in self.verdicts:
            if verdict.involves(env, dataset, column, key) and not verdict.figure.reason:
                return verdict
        return None


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def cross_cards_for(store: Store) -> CrossCards:
    """One check per store (every page renders against the same one)."""
    return store.check(CrossCards)


GPU_RUNS_TEXT = {
    "head": {"zh": ("实验", "显卡", "代码版本", "测量日期", "GPU 分钟", "数据集"),
             "en": ("experiment", "card", "code revision", "measured", "GPU minutes", "datasets")},
    "resumed": {"zh": "分几次租用测完，未记总时长", "en": "measured over several leases; no total recorded"},
    "none": {"zh": "还没有 GPU 上的数据。", "en": "No GPU data yet."},
}


def _seven(revision: str) -> str:
    """A revision as git's short form (7 characters), keeping a +dirty mark."""
    commit, plus, rest = revision.partition("+")
    return commit[:7] + plus + rest


def gpu_runs_table(store: Store, lang: str, short_revision, format_number) -> str:
    """Every GPU experiment: its card, code revision, date and GPU minutes (its run's wall time, server starts
    included), answer card first."""
    rows = []
    cards = sorted((e for e in store.environments if is_card(e)), key=lambda e: (e.name != ANSWER_CARD, e.name))
    for env in cards:
        for name, record in sorted((env.provenance.get("experiments") or {}).items()):
            wall = record.get("wall_s")
            minutes = (format_number(wall / 60, lang, 1) if isinstance(wall, (int, float))
                       else f'<span title="{html.escape(GPU_RUNS_TEXT["resumed"][lang])}">—</span>')
            # short cells: the table has six columns and must fit a phone
            cells = (html.escape(name), html.escape(card_name(env).removeprefix("NVIDIA ")),
                     f"<code>{html.escape(_seven(short_revision(record.get('code_revision', ''))))}</code>",
                     html.escape(str(record.get("date", ""))[:10]), minutes,
                     str(len(record.get("datasets") or [])))
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        return f"<p>{GPU_RUNS_TEXT['none'][lang]}</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in GPU_RUNS_TEXT["head"][lang])
    return (f'<div class="claim-table gpu-runs"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")
