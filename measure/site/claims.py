"""The claim vocabulary: every number, table and chart on a page goes through these functions.

A claim renders as one of four things:

* measured: the value, formatted for the page's language, with its provenance;
* cited: a value from a cited environment (the source article), visibly marked as cited;
* not measured (未实测): no environment holds data for it;
* unconfirmed (未确认): measured or cited, but its cause is not established.

A name that nothing declares (dataset, column, selector column) raises :class:`UnknownName`, so a
typo fails the build instead of quietly turning into "not measured".
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import math
import numbers
import re
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd
from babel.numbers import format_decimal

from measure.schema import CLIENT_LOAD, SATURATED, SETTING, DatasetSchema, SchemaError, UnknownName
from measure.site import cards, facts
from measure.site.consistency import Consistency, consistency_for
from measure.site.labels import column_label, model_label, unit_label, value_label, with_unit
from measure.store import Environment, Store, select


class EmptySelection(UnknownName):
    """A claim's selection found no row in a dataset that is published: a typo or a stale sentence."""


LANGS = ("zh", "en")
BABEL_LOCALE = {"zh": "zh_Hans_CN", "en": "en_US"}

TEXT = {
    "not_measured": {"zh": "未实测", "en": "Not measured"},
    "answers": {"zh": "本页回答", "en": "This page answers"},
    "site_answers": {"zh": "本站回答的问题", "en": "Questions this site answers"},
    "answer_figure": {"zh": "看图表 →", "en": "See the figure →"},
    "unconfirmed": {"zh": "未确认", "en": "Unconfirmed"},
    "cited": {"zh": "引用", "en": "cited"},
    "stand_in": {"zh": "CPU 上的缩小版模型：看走势，不看速度", "en": "Scaled-down models on the CPU backend: the shape, not the speed"},
    "same_in_every_row": {"zh": "每行相同", "en": "Same in every row"},
    "eager_mode": {"zh": "eager 模式", "en": "eager mode"},
    "default_mode": {"zh": "默认模式", "en": "default mode"},
    "weights_dummy": {"zh": "虚拟权重", "en": "dummy weights"},
    "weights_real": {"zh": "真实权重", "en": "real weights"},
    "revision": {"zh": "代码版本", "en": "rev"},
    "conditions": {"zh": "条件", "en": "conditions"},
    "measured": {"zh": "实测", "en": "measured"},
    "source": {"zh": "来源", "en": "Source"},
    "every_series": {"zh": "各系列相同", "en": "Every series"},
    "ours_missing": {"zh": "本站尚无自己的测量数据", "en": "we have no measurement of our own yet"},
    "log_scale": {"zh": "（对数刻度）", "en": " (log scale)"},
    "figure_missing": {"zh": "{where}还没有“{title}”的数据；在这样的机器上运行 `nox -s measure -- {experiment}` 即可测得。",
                       "en": "No data for “{title}” {where} yet; `nox -s measure -- {experiment}` on such a machine "
                             "measures them."},
    "figure_missing_where": {"zh": "{env} 上", "en": "on {env}"},
    "data_file": {"zh": "数据文件", "en": "data file"},
    "all_data": {"zh": "全部数据", "en": "All data"},
    "weights": {"zh": "权重", "en": "weights"},
    "real_only": {"zh": "只接受真实权重的数据", "en": "accepts real-weight data only"},
    "yes": {"zh": "是", "en": "yes"},
    "no": {"zh": "否", "en": "no"},
    "saturated": {
        "zh": "测量时负载客户端最忙的进程占用了 {share} 个 CPU 核心（{column}，≥ {limit} 即视为饱和）："
              "这一数值可能由客户端而不是服务器决定",
        "en": "measured while the load client's busiest process used {share} of a CPU core ({column}; {limit} or more "
              "counts as saturated): the client, not the server, may have set this figure",
    },
    "outside_tolerance": {
        "zh": "{column} = {value}，超出本页设定的容差 {low}–{high}",
        "en": "{column} = {value}, outside this page's tolerance of {low}–{high}",
    },
    "inconsistent": {
        "zh": "同一个量（{quantity}）在本环境的几个数据集中测得 {figures}，彼此相差 {spread}，超出了记录的离散范围："
              "不知道哪一个代表你的部署",
        "en": "the same quantity ({quantity}) measured by several datasets of this environment: {figures}, {spread} "
              "apart, beyond their recorded spread: which one holds for your deployment is not known",
    },
    "range": {"zh": "{n} 次测量，范围 {low}–{high}", "en": "{n} repeats, {low}–{high}"},
    # the figure is a median over single timed requests (no repeats or rounds column): say so
    "range_requests": {"zh": "{n} 个请求，范围 {low}–{high}", "en": "{n} requests, {low}–{high}"},
    "agree": {
        "zh": "这 {count} 次测量记录的范围相互重叠，彼此一致：{figures}",
        "en": "the ranges these {count} measurements recorded overlap, so they agree: {figures}",
    },
    "disagree": {
        "zh": "这 {count} 次测量彼此不一致，最大的比最小的高 {spread}，超出了各自记录的范围（没有记录范围的，"
              "超出了容差），因此都标为未确认：{figures}",
        "en": "these {count} measurements disagree, the largest {spread} above the smallest, more than their recorded "
              "ranges (or, where none was recorded, the tolerance) allow, so each is marked unconfirmed: {figures}",
    },
    "same_quantity": {"zh": "其他数据集也测了同一个量，", "en": "Other datasets measure the same quantity; "},
    "same_quantity_brief": {
        "zh": "上面有 {count} 个数字标为未确认：其他数据集对同一数字的读数与它们最多相差 {spread}。展开对比",
        "en": "{count} of the figures above are unconfirmed: other datasets' readings of them lie up to {spread} from "
              "them. Open to compare",
    },
    "same_quantity_brief_one": {
        "zh": "上面有 1 个数字标为未确认：其他数据集对同一数字的读数与它最多相差 {spread}。展开对比",
        "en": "One of the figures above is unconfirmed: other datasets' readings of it lie up to {spread} from it. Open to "
              "compare",
    },
    "same_quantity_seen": {"zh": "未确认的原因：同一数字的其他测值见上文对比",
                           "en": "Why unconfirmed: this figure's other readings are compared above"},
    "card_inconsistent": {
        "zh": "{weak_card} 的实测带宽更低、算力不更高，这一数字却比 {strong_card} 更好，超出了两者各轮的范围：{weak_card} "
              "{weak}，{strong_card} {strong}；这里没有测出原因",
        "en": "the {weak_card}, with less measured bandwidth and no more compute, did better here than the {strong_card},"
              " beyond both cards' rounds: {weak_card} {weak}, {strong_card} {strong}; no measurement here explains it",
    },
    "elsewhere": {"zh": "其他 GPU 上测得的结果", "en": "what other GPUs measured"},
    "differs": {"zh": "与同一个量的其他测量条件不同：{why}", "en": "measured under other conditions than the rest of its quantity: {why}"},
    "saturated_rows": {
        "zh": "{count} 行在负载客户端饱和时测得（标为未确认；{where}）",
        "en": "{count} row(s) measured while a load client was saturated (marked unconfirmed; {where})",
    },
    "flagged_rows": {
        "zh": "{count} 行标为未确认（悬停在标记上可看原因）",
        "en": "{count} row(s) marked unconfirmed (hover over the mark for the reason)",
    },
    "dummy_only": {
        "zh": "仅有虚拟权重的数据，不能用于正确率结论",
        "en": "only dummy-weight data exists, which cannot support an accuracy claim",
    },
}

STATUSES = ("measured", "cited", "not_measured", "unconfirmed")

# What a sentence may say of two numbers (left / right = ratio), and the test the data must pass.
# "smaller"/"larger" in prose needs a visible gap: two figures within TIE_MARGIN of each other are a tie (≈), and
# "lowest"/"highest" claims that allow a tie use ≤/≥.
TIE_MARGIN = 0.02
RELATIONS = {
    "<": (lambda r: r < 1 - TIE_MARGIN, f"smaller (by more than {TIE_MARGIN:.0%}) than"),
    ">": (lambda r: r > 1 + TIE_MARGIN, f"larger (by more than {TIE_MARGIN:.0%}) than"),
    "≤": (lambda r: r <= 1, "no larger than"),
    "≥": (lambda r: r >= 1, "no smaller than"),
    "<<": (lambda r: r <= 2 / 3, "a third or more below"),
    ">>": (lambda r: r >= 1.5, "half again or more above"),
    "≈": (lambda r: abs(r - 1) <= 0.1, "within 10 % of"),
}


def t(key: str, lang: str) -> str:
    return TEXT[key][lang]


@dataclass
class Claim:
    page: str
    key: str
    kind: str  # value | table | chart | unconfirmed | not_measured
    status: str  # one of STATUSES
    dataset: str = ""
    detail: str = ""
    text: str = field(default="", compare=False)  # what the claim says, in the page's language (no ids)
    names: tuple[str, ...] = field(default=(), compare=False)  # verbatim names inside ``text`` (servers, models)


def format_number(value, lang: str, digits: int | None = None) -> str:
    if hasattr(value, "item"):  # numpy scalars from pandas
        value = value.item()
    if isinstance(value, bool):
        return TEXT["yes" if value else "no"][lang]
    if not isinstance(value, (int, float)):
        return str(value)
    if not math.isfinite(value):
        raise SchemaError(f"{value!r} is not a number a page can print")
    if digits is None:  # the site's one rule: three significant digits, thousands separated, no trailing zeros
        return _format_decimal(value, math.copysign(1, value), "#,##0" + _optional_decimals(value), BABEL_LOCALE[lang])
    return _format_decimal(value, math.copysign(1, value), "#,##0" + ("." + "0" * digits if digits > 0 else ""),
                           BABEL_LOCALE[lang])


def _optional_decimals(value: float) -> str:
    """The pattern's optional decimals that keep three significant digits: 23,615 · 43.8 · 1.99 · 0.283 · 0.06."""
    size = abs(value)
    if size == 0 or float(value).is_integer() or size >= 100:
        return ""
    places = min(2 - math.floor(math.log10(size)), 6)
    return "." + "#" * places


@functools.lru_cache(maxsize=65536, typed=True)
def _format_decimal(value, sign: float, pattern: str, locale: str) -> str:
    """babel's, remembered: a build formats tens of thousands of cells, many the same number (``sign`` keeps -0.0,
    which babel prints "-0", apart from 0.0, which compares equal to it)."""
    return format_decimal(value, format=pattern, locale=locale)


def short_revision(revision) -> str:
    """A commit hash cut to 10 characters, keeping the +dirty mark of a run from uncommitted code."""
    commit, plus, rest = str(revision or "").partition("+")
    return commit[:10] + plus + rest


def cpu_words(hardware: dict, lang: str = "en") -> str:
    """The CPU a CPU-only dataset ran on, with what its vector extensions mean for vLLM's CPU kernels where they were
    recorded ("AMD EPYC (AVX2, no AVX-512)"): two CPUs of one name measured the same model several times apart.
    Empty on a GPU, whose label names the GPU."""
    if hardware.get("gpus") or not hardware.get("cpu"):
        return ""
    extensions = set(hardware.get("cpu_extensions") or ())
    if not extensions:
        return str(hardware["cpu"])
    names = (["AVX-512"] if any(x.startswith("avx512") for x in extensions) else []) + \
        (["AMX"] if any(x.startswith("amx") for x in extensions) else [])
    if names:
        what = {"zh": "有 " + "、".join(names), "en": "with " + " and ".join(names)}
    else:
        what = {"zh": "仅 AVX2，无 AVX-512", "en": "AVX2, no AVX-512"} if "avx2" in extensions else \
            {"zh": "无 AVX2", "en": "no AVX2"}
    return f"{hardware['cpu']}（{what['zh']}）" if lang == "zh" else f"{hardware['cpu']} ({what['en']})"


def title_attr_value(text: str) -> str:
    """``text`` for a title="" attribute. Material's content.tooltips turns every title in a page into a tooltip
    whose text it inserts as HTML (an escaped <img onerror> in a title ran on hover in Chromium), so the
    attribute's value must itself be escaped HTML: escaped twice. Quotes only once: as HTML text they are harmless,
    and the browser's own tooltip (before Material's script takes over) then shows an apostrophe, not &#x27;."""
    return html.escape(html.escape(text, quote=False))


def saturation(schema: DatasetSchema, row) -> tuple[str, float] | None:
    """The first client-load column of ``row`` at or above SATURATED, with its value; None if the client kept up."""
    for column in schema.client_load_columns:
        share = row[column]
        if share is not None and not pd.isna(share) and share >= SATURATED:
            return column, float(share)
    return None


def client_can_move(schema: DatasetSchema, column: str) -> bool:
    """Whether a saturated client can have pulled ``column`` off course: not the row's key, a setting the experiment
    chose, a client's own CPU share or words (which process was saturated)."""
    col = schema.column(column)
    return column not in schema.key and col.role not in (SETTING, CLIENT_LOAD) and col.dtype not in ("str", "bool")


def _stable_id(*parts: str) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Figure:
    """A figure of ours as a page printed it: where it came from, and the verdict on the quantity it measures."""

    key: str
    env: str
    dataset: str
    column: str
    verdict: object  # consistency.Verdict | None
    differs: str | None
    value: float | None = None  # as the data hold it (before a page's scale): what the verdict's readings compare


@dataclass
class ClaimRenderer:
    """Renders claims for one page in one language and records each claim it renders."""

    store: Store
    lang: str
    page: str
    data_url: str = "data/"  # URL of the data root relative to the page
    claims: list[Claim] = field(default_factory=list)
    numbers: dict[str, float | None] = field(default_factory=dict)  # value key → its number, for compare()
    texts: dict[str, str] = field(default_factory=dict)  # value key → the claim in words, for compare()'s own claim
    # One quantity, one story: each figure of ours this renderer printed with the verdict on its quantity (None where
    # no quantity of measure/quantities.py holds it), and each verdict an agreement() sentence printed.
    figures: list[Figure] = field(default_factory=list)
    verdicts_shown: list = field(default_factory=list)
    verdict_anchors: dict = field(default_factory=dict)  # verdict id → the id of the answer note that compares it
    missing_said: set = field(default_factory=set)  # (dataset, env) whose "no data yet" note this page already shows

    # ---- helpers -------------------------------------------------------------------------
    def _remember(self, key: str, number) -> None:
        """A value's number under its claim key, for ``compare`` further down the page."""
        if hasattr(number, "item"):
            number = number.item()
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            self.numbers[key] = float(number)

    def _record(self, **kw) -> Claim:
        claim = Claim(page=self.page, **kw)
        if claim not in self.claims:  # a fact cited in the answers block and again in the prose is one claim
            self.claims.append(claim)
        return claim

    def badge(self, status: str, title: str = "") -> str:
        title_attr = f' title="{title_attr_value(title)}"' if title else ""
        return f'<span class="claim-badge claim-{status.replace("_", "-")}"{title_attr}>{t(status, self.lang)}</span>'

    def provenance_text(self, env: Environment, dataset: str) -> str:
        prov = env.provenance
        if env.cited:  # the label says, in the reader's language, whose hardware the figure comes from
            c = prov["citation"]
            return " · ".join(x for x in (env.label(self.lang), c.get("title", ""), c.get("date", "")) if x)
        ds = env.dataset_provenance(dataset)
        sw = ds.get("software") or prov.get("software", {})  # per dataset since runs may differ
        servers = env.servers_for(dataset)
        models = ", ".join(sorted({f"{model_label(s.get('model', '?'), self.lang)} ({self._weights_words(s.get('weights'))})"
                                   for s in servers}))
        modes = sorted({TEXT["eager_mode" if "--enforce-eager" in s["command"] else "default_mode"][self.lang]
                        for s in servers if isinstance(s.get("command"), list)})
        parts = [
            env.label(self.lang),
            cpu_words(ds.get("hardware") or prov.get("hardware") or {}, self.lang),
            f"vLLM {sw.get('vllm', '?')}" + (f", torch {sw['torch']}" if sw.get("torch") else ""),
            models,
            "/".join(modes),
            ds.get("date", prov.get("date", "")),
            f"{t('revision', self.lang)} {short_revision(ds.get('code_revision', prov.get('code_revision', '')))}",
        ]
        return " · ".join(p for p in parts if p)

    def _value_text(self, schema: DatasetSchema, column: str, where: dict) -> str:
        """A value's claim in words, for the open-claims page and compare(): dataset, quantity and conditions."""
        text = f"{schema.title.get(self.lang) or schema.name} · {column_label(column, self.lang)}"
        conditions = self._conditions_text(where)
        return text + (f" ({conditions})" if conditions else "")

    def _weights_words(self, weights: str | None) -> str:
        return TEXT.get(f"weights_{weights}", {}).get(self.lang) or f"{t('weights', self.lang)}: {weights or '?'}"

    def _conditions_text(self, where: dict) -> str:
        """The row a figure was read from, in words: its workload and settings as the page selected them."""
        shown = [f"{column_label(k, self.lang)} {format_number(value_label(v, self.lang), self.lang)}"
                 for k, v in where.items() if not isinstance(v, (list, tuple, set))]
        colon, comma = ("：", "，") if self.lang == "zh" else (": ", ", ")
        return f"{t('conditions', self.lang)}{colon}" + comma.join(shown) if shown else ""

    def _source_link(self, env: Environment, dataset: str, setting: bool = False) -> str:
        """The link to the data file; ``setting``: beside a value the run was set to, which once_per_source passes
        over for a measured figure of the same file."""
        href = f"{self.data_url}{env.name}/{dataset}.csv"
        label = env.name
        css = "claim-src" + (f" {SETTING_SOURCE}" if setting else "")
        return f'<a class="{css}" href="{html.escape(href)}" title="{title_attr_value(self.provenance_text(env, dataset))}">[{html.escape(label)}]</a>'

    def _select(self, env: Environment, schema: DatasetSchema, where: dict) -> pd.DataFrame:
        """``select`` on ``env``'s rows, remembered on the store: each page's selections recur in both languages and in
        the page scan (the frames are read-only here)."""
        key = (env.name, schema.name, tuple(sorted(where.items())))
        try:
            hash(key)
        except TypeError:  # a selector value that is a list: not worth keeping
            return select(self.store.frame(env, schema.name), schema, where)
        known = self.store.__dict__.setdefault("_selections", {})
        if key not in known:
            known[key] = select(self.store.frame(env, schema.name), schema, where)
        return known[key]

    def _usable(self, env: Environment, dataset: str) -> bool:
        schema = self.store.schema(dataset)
        return not (schema.needs_real_weights and not env.cited and env.weights(dataset) != {"real"})

    def _missing_figure(self, dataset: str, env: str | list | None) -> str:
        """What stands in for a chart or table with no rows: which data are missing and the command that measures
        them (a bare badge told a reader nothing)."""
        said = (dataset, repr(env))
        if said in self.missing_said:  # a chart and its table of one dataset: one note says it for both
            return ""
        self.missing_said.add(said)
        note = self._dummy_note(dataset)
        if note:
            return f'<p class="claim-missing">{self.badge("not_measured", note)} {html.escape(note)}</p>'
        names = [f"`{n}`" for n in ([env] if isinstance(env, str) else list(env or []))]  # as the source tags name them
        where = t("figure_missing_where", self.lang).format(
            env="、".join(names) if self.lang == "zh" else ", ".join(names)) if names else ""
        text = t("figure_missing", self.lang).format(title=self.store.schema(dataset).title[self.lang], where=where,
                                                    experiment=dataset.split(".")[0]).replace("  ", " ")
        return f'<p class="claim-missing">{self.badge("not_measured", dataset)} {inline_code(text)}</p>'

    def _dummy_note(self, dataset: str) -> str:
        schema = self.store.schema(dataset)
        if not schema.needs_real_weights:
            return ""
        if any(not self._usable(e, dataset) for e in self.store.sources(dataset, cited=False)):
            return t("dummy_only", self.lang)
        return t("real_only", self.lang)

    # ---- the vocabulary ------------------------------------------------------------------
    def value(
        self,
        dataset: str,
        column: str,
        *,
        env: str | None = None,
        source: str = "measured",
        digits: int | None = None,
        unit: str | None = None,
        scale: float = 1.0,
        key: str | None = None,
        tolerance: dict | None = None,
        missing_ok: bool = False,
        differs: str | None = None,
        show_range: bool = False,
        round_down: bool = False,
        expect=None,
        **where,
    ) -> str:
        """One number from one row. ``source`` is ``measured`` (ours, best environment first) or ``cited``;
        ``tolerance`` ({column: (low, high)}) renders the value 未确认 where the row's column falls outside.
        A dataset nobody has measured renders 未实测; one that is published but has no such row (or an empty cell)
        fails the build, since that is a typo or a stale sentence, unless ``missing_ok`` declares the gap.
        A figure that other datasets of its environment also measure (measure/quantities.py) renders 未确认 where
        they disagree, unless ``differs`` says how its conditions differ (the page must say so too). Where the
        row records the figure's range (``COLUMN_min``/``COLUMN_max``), the tooltip gives it, and ``show_range``
        prints it after the figure. ``round_down`` cuts it to ``digits`` instead of rounding: a count of what fits
        (190.97 requests fit 190, not 191). ``expect``: the value a sentence's words rely on ("No: HTTP 200"); any
        other value fails the build, as compare() does for a ratio."""
        if source not in ("measured", "cited"):
            raise UnknownName(f"source must be 'measured' or 'cited', not {source!r}")
        schema = self.store.schema(dataset)
        col = schema.column(column)
        for name in where:
            schema.column(name)
        self._check_tolerance(schema, tolerance)
        claim_key = key or f"{dataset}:{column}" + "".join(f"[{k}={v}]" for k, v in sorted(where.items()))
        self.texts[claim_key] = words = self._value_text(schema, column, where)
        envs = self.store.sources(dataset, env=env, cited=(source == "cited"))
        self._check_selector_values(dataset, where, missing_ok)
        for candidate in envs:
            if not self._usable(candidate, dataset):
                continue
            rows = self._select(candidate, schema, where)
            if len(rows) > 1:
                raise UnknownName(
                    f"{self.page}: selector {where} matches {len(rows)} rows of {dataset!r} in {candidate.name};"
                    f" add key columns ({', '.join(schema.key)}) to pick one"
                )
            if len(rows) == 0 or pd.isna(rows.iloc[0][column]):
                continue
            raw = rows.iloc[0][column]
            raw = raw.item() if hasattr(raw, "item") else raw  # numpy's int64 is no int: its unit lost the no-break space
            if expect is not None and raw != expect:
                raise SchemaError(f"{self.page}: the text relies on {dataset}.{column} where {where} in {candidate.name} "
                                  f"being {expect!r}, but it is {raw!r}; rewrite the sentence or re-check the data")
            numeric = isinstance(raw, (int, float)) and not isinstance(raw, bool)
            number = raw * scale if numeric else raw
            if round_down and numeric:
                number = math.floor(number * 10 ** (digits or 0)) / 10 ** (digits or 0)
            shown_unit = unit_label(col.unit, self.lang) if unit is None else unit
            shown = format_number(value_label(number, self.lang), self.lang, digits)
            text = with_unit(shown, shown_unit, self.lang) if numeric else shown + (f" {shown_unit}" if shown_unit else "")
            status = "cited" if candidate.cited else "measured"
            reasons = self.row_reasons(schema, rows.iloc[0], tolerance, column)
            note = ""
            if not candidate.cited:
                agreement, note = self._agreement(candidate.name, dataset, column, rows.iloc[0], differs)
                reasons += agreement + self._card_disagreement(candidate.name, schema, column, rows.iloc[0])
                self.figures.append(Figure(claim_key, candidate.name, dataset, column,
                                           self.consistency.for_figure(candidate.name, dataset, column, rows.iloc[0]),
                                           differs, raw if numeric else None))
            elif differs is not None:
                raise UnknownName(f"{self.page}: differs= on a cited figure; it applies to our own measurements")
            reason = "; ".join(reasons)
            saturated = bool(reason)
            self._record(key=claim_key, kind="value", status="unconfirmed" if saturated else status, dataset=dataset,
                         detail=reason or candidate.name, text=f"{words} · {candidate.label(self.lang)}",
                         names=_verbatim_names(where))
            self._remember(claim_key, number)
            css = ("claim-cited" if candidate.cited else "claim-measured") + (" claim-number" if numeric else "")
            cited_mark = f"{self.badge('cited')}" if candidate.cited else ""
            guard = self.badge("unconfirmed", reason) if saturated else ""
            spread = self._range_text(schema, rows.iloc[0], column, scale, digits)
            if show_range and not spread:
                raise UnknownName(f"{self.page}: show_range=True but {dataset} records no range of {column} in "
                                  f"{candidate.name} ({column}_min/_max)")
            title = self.provenance_text(candidate, dataset) + "".join(
                f" · {x}" for x in (self._conditions_text(where), spread, note) if x)
            open_, close = self._parens()
            shown_range = f'<span class="claim-range">{open_}{html.escape(spread)}{close}</span>' if show_range else ""
            verbatim = ' translate="no"' if column in VERBATIM_COLUMNS and isinstance(raw, str) else ""
            return (
                f'<span class="claim-value {css}"{verbatim} title="{title_attr_value(title)}">'
                f"{html.escape(text)}</span>{shown_range}{cited_mark}{guard}"
                f"{self._source_link(candidate, dataset, setting=col.role == SETTING)}"
            )
        self._fail_if_published(dataset, envs, f"{column} where {where or 'any row'}", missing_ok)
        note = self._dummy_note(dataset)
        self._record(key=claim_key, kind="value", status="not_measured", dataset=dataset, detail=note,
                     text=words, names=_verbatim_names(where))
        self.numbers[claim_key] = None
        return self.badge("not_measured", note or f"{dataset}: {column}")

    def _range_text(self, schema: DatasetSchema, row, column: str, scale: float, digits: int | None) -> str:
        """'5 repeats, 34,349–45,108' where the row records the figure's range, else ''."""
        names = schema.by_column
        if not {f"{column}_min", f"{column}_max"} <= names.keys():
            return ""
        low, high = row[f"{column}_min"], row[f"{column}_max"]
        if pd.isna(low) or pd.isna(high):
            return ""
        counted = next(((c, row[c]) for c in ("repeats", "rounds", "requests") if c in names and not pd.isna(row[c])),
                       (None, None))
        return t("range_requests" if counted[0] == "requests" else "range", self.lang).format(
            n=format_number(counted[1], self.lang, 0) if counted[1] is not None else "?",
            low=format_number(low * scale, self.lang, digits), high=format_number(high * scale, self.lang, digits))

    def agreement(self, quantity: str, *, env: str, **group) -> str:
        """A sentence, generated from the consistency check, saying whether the figures that several datasets of
        ``env`` hold for ``quantity`` (measure/quantities.py) at ``group`` agree."""
        names = {q.name: q for q in self.consistency.quantities}
        if quantity not in names:
            raise UnknownName(f"{self.page}: agreement({quantity!r}): no such quantity in measure/quantities.py "
                              f"(it has: {', '.join(sorted(names))})")
        by = names[quantity].by
        if set(group) != set(by):
            raise UnknownName(f"{self.page}: agreement({quantity!r}) needs exactly {', '.join(by)}, got {sorted(group)}")
        wanted = tuple(group[b] for b in by)
        verdict = next((v for v in self.consistency.verdicts
                        if v.quantity.name == quantity and v.env == env and v.group == wanted), None)
        key = f"agreement:{quantity}:{env}:{wanted}"
        if verdict is None:
            if self.store.partial:
                return self.badge("not_measured", key)
            raise EmptySelection(f"{self.page}: agreement({quantity!r}, env={env!r}, {group}): fewer than two datasets "
                                 "of that environment hold this figure; nothing to compare")
        return self._verdict_sentence(verdict, key)

    def _verdict_sentence(self, verdict, key: str) -> str:
        """The agreement sentence for ``verdict``: agreeing figures in a word, disagreeing ones side by side, each
        with its dataset and the quantity's unit, so the reader sees every figure of the quantity in one unit."""
        self.verdicts_shown.append(verdict)
        unit = self._quantity_unit(verdict.quantity)
        readings = self._readings(verdict, unit)
        # A dataset that repeats another's row (the prefill table's embeddings row) is one measurement, not two.
        distinct = {}
        for r in verdict.readings:
            distinct.setdefault((r.value, r.low, r.high), r)
        separator = "；" if self.lang == "zh" else "; "
        open_, close = self._parens()
        per_dataset = Counter(r.dataset for r in distinct.values())
        figures = separator.join(
            f"{self._dataset_words(r.dataset)}"
            + (self._condition_words(r.dataset, r.condition) if per_dataset[r.dataset] > 1 else "")
            + f" {with_unit(format_number(v, self.lang), unit, self.lang)}"
            + (f"{open_}{format_number(lo, self.lang)}–{format_number(hi, self.lang)}{close}" if lo != hi else "")
            for (v, lo, hi), r in distinct.items())
        text = t("agree" if verdict.agree else "disagree", self.lang).format(
            count=len(distinct), spread=self._percent(verdict.spread), figures=figures)
        self._record(key=key, kind="agreement", status="measured" if verdict.agree else "unconfirmed",
                     dataset=verdict.readings[0].dataset, detail=text,
                     text=self._quantity_words(verdict.quantity) + ("：" if self.lang == "zh" else ": ") + readings)
        return f'<span class="claim-agreement" title="{title_attr_value(readings)}">{html.escape(text)}</span>'

    def _agreement(self, env: str, dataset: str, column: str, row, differs: str | None) -> tuple[list[str], str]:
        """(reasons this figure is 未确认, a note for its tooltip) from the figures of the same quantity."""
        verdict = self.consistency.for_figure(env, dataset, column, row)
        where = f"{self.page}: {dataset}.{column} in {env}"
        if differs is not None and (verdict is None or verdict.agree):
            raise UnknownName(f"{where}: differs= but " + (
                "no quantity in measure/quantities.py holds this figure" if verdict is None else
                f"it agrees with the other figures of {verdict.quantity.name!r} ({verdict.describe()}); drop differs="))
        if verdict is None or verdict.agree:
            return [], ""
        if differs is not None:
            return [], t("differs", self.lang).format(why=differs)
        return [self._disagreement(verdict)], ""

    def _cell(self, column: str, value, digits: int | None) -> str:
        if column == "model":
            return model_label(value, self.lang)
        return format_number(value_label(value, self.lang), self.lang, digits)

    def _row_disagreement(self, env: Environment, schema: DatasetSchema, row) -> list[str]:
        """A table row holding a figure that other datasets of its environment measure differently (未确认)."""
        if env.cited:
            return []
        reasons = []
        # in the order measure/quantities.py declares them (a set's order changes from one build to the next)
        columns = dict.fromkeys(m.column for q in self.consistency.quantities for m in q.members
                                if m.dataset == schema.name)
        for column in columns:
            verdict = self.consistency.for_figure(env.name, schema.name, column, row)
            if verdict is not None and not verdict.agree:
                reasons.append(self._disagreement(verdict))
        for figure in self.cross_cards.figures:
            if figure.dataset == schema.name:
                reasons += self._card_disagreement(env.name, schema, figure.column, row)
        return reasons

    def _disagreement(self, verdict) -> str:
        return t("inconsistent", self.lang).format(quantity=self._quantity_words(verdict.quantity),
                                                   figures=self._readings(verdict, self._quantity_unit(verdict.quantity)),
                                                   spread=self._percent(verdict.spread))

    def _readings(self, verdict, unit: str) -> str:
        """'“Dataset” 43.2 ms, “Other” 62 ms': each reading with its dataset, to three significant digits."""
        return ("、" if self.lang == "zh" else ", ").join(
            f"{self._dataset_words(r.dataset)} {with_unit(format_number(r.value, self.lang), unit, self.lang)}"
            for r in verdict.readings)

    def _percent(self, share: float) -> str:
        """0.44 as '44 %', as the site prints a percentage."""
        return with_unit(format_number(share * 100, self.lang, 0), "%", self.lang)

    def _condition_words(self, dataset: str, condition: tuple) -> str:
        """What tells a reading from another of its dataset, in words: ' at processor cache 4 GiB'."""
        schema = self.store.schema(dataset)
        parts = []
        for name, value in condition:
            unit = unit_label(schema.column(name).unit, self.lang)
            shown = format_number(value, self.lang) if isinstance(value, (int, float)) else value_label(value, self.lang)
            parts.append(f"{column_label(name, self.lang)} {with_unit(shown, unit, self.lang)}")
        if not parts:
            return ""
        return ("（" + "，".join(parts) + "）") if self.lang == "zh" else (" (" + ", ".join(parts) + ")")

    def _dataset_words(self, dataset: str) -> str:
        """A dataset as a reader knows it: its title in the page's language (the id stays in the CSV link)."""
        return f"“{self.store.schema(dataset).title.get(self.lang) or dataset}”"

    def _quantity_words(self, quantity) -> str:
        return column_label(quantity.members[0].column, self.lang)

    def _quantity_unit(self, quantity) -> str:
        """'tok/s': the unit of the quantity's first member, in the reader's language ('' for none)."""
        first = quantity.members[0]
        return unit_label(self.store.schema(first.dataset).column(first.column).unit, self.lang)

    def _parens(self) -> tuple[str, str]:
        """A parenthesis after a figure: full-width in Chinese, after a space in English."""
        return ("（", "）") if self.lang == "zh" else (" (", ")")

    @property
    def consistency(self) -> Consistency:
        return consistency_for(self.store)

    @property
    def cross_cards(self) -> cards.CrossCards:
        return cards.cross_cards_for(self.store)

    def _card_disagreement(self, env: str, schema: DatasetSchema, column: str, row) -> list[str]:
        """This figure 未确认 where a card with less measured bandwidth and compute did better beyond the spread:
        both cards' figures side by side, with their ranges."""
        verdict = self.cross_cards.for_figure(env, schema.name, column, row, schema.key)
        if verdict is None:
            return []
        unit = unit_label(schema.column(column).unit, self.lang)
        open_, close = self._parens()

        def reading(r: cards.CardReading) -> str:
            shown = with_unit(format_number(r.value, self.lang), unit, self.lang)
            spread = f"{open_}{format_number(r.low, self.lang)}–{format_number(r.high, self.lang)}{close}"
            return shown + (spread if r.low != r.high else "")

        return [t("card_inconsistent", self.lang).format(
            weak_card=verdict.weaker.card, strong_card=verdict.stronger.card,
            weak=reading(verdict.weaker), strong=reading(verdict.stronger))]

    def _figure_env(self, key: str) -> str | None:
        return next((f.env for f in reversed(self.figures) if f.key == key), None)

    def compare(self, left: str, relation: str, right: str, *, digits: int = 2, show: bool = True) -> str:
        """The ratio of two values named earlier on the page (their ``key=``), checked against what the sentence
        says of them: ``<``/``>`` (smaller/larger by more than TIE_MARGIN), ``≤``/``≥`` (ties allowed: an ordering
        such as "the lowest"), ``<<``/``>>`` (by a third or more / half or more), ``≈`` (within 10 %). A sentence
        the data stop supporting fails the build; ``show=False`` checks without printing."""
        if relation not in RELATIONS:
            raise UnknownName(f"{self.page}: compare relation {relation!r}; use one of {', '.join(RELATIONS)}")
        for name in (left, right):
            if name not in self.numbers:
                raise UnknownName(f"{self.page}: compare({left!r}, {relation!r}, {right!r}): no number named {name!r}"
                                  " earlier on this page (give the value key=...)")
        cards.check_same_card(self.store, f"{self.page}: compare({left!r}, {relation!r}, {right!r})",
                              self._figure_env(left), self._figure_env(right))
        a, b = self.numbers[left], self.numbers[right]
        key = f"compare:{left}{relation}{right}"
        words = f"{self.texts.get(left, left)} {relation} {self.texts.get(right, right)}"
        if a is None or b is None:
            self._record(key=key, kind="compare", status="not_measured", detail=words, text=words)
            return self.badge("not_measured", words) if show else ""
        if b == 0:
            raise SchemaError(f"{self.page}: compare({left!r}, {relation!r}, {right!r}): {right} is 0")
        ratio = a / b
        holds, meaning = RELATIONS[relation]
        if not holds(ratio):
            raise SchemaError(f"{self.page}: the text says {left} ({a:g}) is {meaning} {right} ({b:g}), but the ratio is"
                              f" {ratio:.3g}; rewrite the sentence or re-check the data")
        self._record(key=key, kind="compare", status="measured", detail=f"{ratio:.3g}", text=words)
        if not show:
            return ""
        ratio_of = f"{self.texts.get(left, left)} / {self.texts.get(right, right)}"
        return (f'<span class="claim-value claim-compare claim-number" title="{title_attr_value(ratio_of)}">'
                f"{html.escape(with_unit(format_number(ratio, self.lang, digits), '×', self.lang))}</span>")

    def _fail_if_published(self, dataset: str, envs: list[Environment], what: str, missing_ok: bool) -> None:
        """A claim that found nothing in a dataset these environments do publish is an error, not 未实测."""
        usable = [e.name for e in envs if self._usable(e, dataset)]
        if usable and not missing_ok and not self.store.partial:
            raise EmptySelection(
                f"{self.page}: {dataset} is published in {', '.join(usable)} but has no {what}; fix the selector, "
                "or declare the gap on purpose with missing_ok=True (it then renders 未实测)")

    def _check_selector_values(self, dataset: str, where: dict, missing_ok: bool) -> None:
        """Each selector value must occur in some environment's rows of ``dataset`` (a value misspelt the same way
        in both languages would otherwise render 未实测 quietly)."""
        if missing_ok or not where or self.store.partial:
            return
        frames = [self.store.frame(e, dataset) for e in self.store.sources(dataset)]
        if not frames:
            return
        known = self.store.__dict__.setdefault("_selector_values", {})  # per store: the build asks thousands of times
        for column, wanted in where.items():
            if (dataset, column) not in known:
                known[dataset, column] = pd.concat([f[column] for f in frames]).dropna().unique().tolist()
            seen = known[dataset, column]
            if wanted not in seen:
                shown = ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in sorted(seen, key=str)[:12])
                raise UnknownName(f"{self.page}: {column}={wanted!r} occurs in no environment's {dataset} "
                                  f"(it has: {shown}); a typo? missing_ok=True declares a row still to come")

    def row_reasons(self, schema: DatasetSchema, row, tolerance: dict | None, column: str | None = None) -> list[str]:
        """Why a row's figures (or its ``column``) are 未确认: a saturated load client, or a value outside the page's
        tolerance. A saturated client leaves alone what it cannot have set: the row's key, the experiment's settings,
        the clients' own CPU shares and words (which of them was saturated)."""
        reasons = []
        saturated = saturation(schema, row)
        if saturated and (column is None or client_can_move(schema, column)):
            reasons.append(self.saturation_reason(*saturated))
        for column, (low, high) in (tolerance or {}).items():
            value = row[column]
            if value is not None and not pd.isna(value) and not low <= value <= high:
                reasons.append(t("outside_tolerance", self.lang).format(
                    column=column, value=format_number(value, self.lang, 3), low=format_number(low, self.lang, 2),
                    high=format_number(high, self.lang, 2)))
        return reasons

    def _check_tolerance(self, schema: DatasetSchema, tolerance: dict | None) -> None:
        for column, bounds in (tolerance or {}).items():
            schema.column(column)
            if len(bounds) != 2 or not bounds[0] < bounds[1]:
                raise UnknownName(f"{self.page}: tolerance for {column!r} must be (low, high) with low < high, not {bounds!r}")

    def saturation_reason(self, column: str, share: float) -> str:
        return t("saturated", self.lang).format(share=format_number(share, self.lang, 2), column=column,
                                                limit=format_number(SATURATED, self.lang, 2))

    def _saturated_note(self, schema: DatasetSchema, frames, claim_key: str) -> str:
        """Below a table or chart: how many of its rows a saturated client measured (each is an open claim)."""
        per_env = {env.name: sum(saturation(schema, row) is not None for row in _records(rows)) for env, rows in frames}
        count = sum(per_env.values())
        if not count:
            return ""
        # which environments' rows: below a CPU chart, a count of the GPUs' rows read as the CPU's
        rows_word = " 行" if self.lang == "zh" else ""
        where = ("、" if self.lang == "zh" else ", ").join(
            f"{name} {n}{rows_word}" if len(per_env) > 1 else name for name, n in per_env.items() if n)
        text = t("saturated_rows", self.lang).format(count=count, where=where)
        self._record(key=f"{claim_key}:saturated", kind="unconfirmed", status="unconfirmed", dataset=schema.name,
                     detail=text)
        return f'<p class="claim-saturated">{self.badge("unconfirmed", text)} {html.escape(units_kept(text))}</p>'

    def unconfirmed(self, key: str, reason: str) -> str:
        """A statement whose cause is not established; the reason is shown in the page's language."""
        self._record(key=key, kind="unconfirmed", status="unconfirmed", detail=reason)
        # the reason closes its sentence: pages go on after it ("...is not measured With warm caches" ran on)
        shown = reason if reason.endswith(_CLOSING) else reason + ("。" if self.lang == "zh" else ".")
        return f'{self.badge("unconfirmed", reason)}<span class="claim-reason">{html.escape(units_kept(shown))}</span>'

    def not_measured(self, key: str, what: str = "") -> str:
        """A statement no experiment of ours covers yet (say what would measure it in ``what``)."""
        self._record(key=key, kind="not_measured", status="not_measured", detail=what)
        return self.badge("not_measured", what)

    def _frames(self, dataset: str, env: str | None, where: dict,
                missing_ok: bool = False) -> list[tuple[Environment, pd.DataFrame]]:
        schema = self.store.schema(dataset)
        for name in where:
            schema.column(name)
        self._check_selector_values(dataset, where, missing_ok)
        out = []
        envs = self.store.sources(dataset, env=env)
        for candidate in envs:
            if not self._usable(candidate, dataset):
                continue
            rows = self._select(candidate, schema, where)
            if len(rows):
                out.append((candidate, rows))
        if not out:
            self._fail_if_published(dataset, envs, f"row where {where}" if where else "row", missing_ok)
        return out

    def _summary_status(self, frames) -> str:
        if any(not e.cited for e, _ in frames):
            return "measured"
        return "not_measured"  # cited alone does not count as ours

    def table(
        self,
        dataset: str,
        columns: list[str] | None = None,
        *,
        env: str | None = None,
        where: dict | None = None,
        labels: dict | None = None,
        digits: dict | None = None,
        key: str | None = None,
        tolerance: dict | None = None,
        missing_ok: bool = False,
        collapsed: bool = False,
    ) -> str:
        """All matching rows of every environment (ours and cited) in one table, one source column; rows outside
        ``tolerance`` or measured by a saturated client carry a 未确认 mark with the reason. ``collapsed`` folds it
        behind "全部数据 / All data": for a table no question links to and no paragraph needs."""
        schema = self.store.schema(dataset)
        where = where or {}
        labels = labels or {}
        digits = digits or {}
        cols = [schema.column(c) for c in (columns or schema.header)]
        for name in list(labels) + list(digits):
            schema.column(name)
        self._check_tolerance(schema, tolerance)
        frames = self._frames(dataset, env, where, missing_ok)
        claim_key = key or f"{dataset}:table"
        status = self._summary_status(frames)
        self._record(key=claim_key, kind="table", status=status, dataset=dataset,
                     detail=", ".join(e.name for e, _ in frames))
        if not frames:
            return self._missing_figure(dataset, env)
        groups = self._like_with_like(dataset, frames)  # full-size models and the CPU stand-ins never share a table
        html_table, flagged = "", 0
        for stand_in, group in groups:
            part, part_flagged = self._table_html(schema, group, cols, labels, digits, tolerance, stand_in)
            html_table += part
            flagged += part_flagged
        full = [schema.column(c) for c in schema.header]
        if columns and len(cols) < len(full):  # a compact view of the columns the text uses; all of them one click away
            more = "".join(self._table_html(schema, group, full, labels, digits, tolerance, stand_in)[0]
                           for stand_in, group in groups)
            # counted as the dataset has them: the table folds ranges into cells and constants into its caption
            summary = {"zh": f"数据集的全部 {len(full)} 列", "en": f"All {len(full)} columns of the dataset"}[self.lang]
            html_table += f'<details class="claim-full-table"><summary>{summary}</summary>{more}</details>'
        missing = self._saturated_note(schema, frames, claim_key)
        if tolerance and flagged:
            text = t("flagged_rows", self.lang).format(count=flagged)
            self._record(key=f"{claim_key}:flagged", kind="unconfirmed", status="unconfirmed", dataset=dataset, detail=text)
            missing += f'<p class="claim-flagged">{self.badge("unconfirmed", text)} {html.escape(units_kept(text))}</p>'
        if status == "not_measured":
            missing += f'<p class="claim-missing">{self.badge("not_measured")} {t("ours_missing", self.lang)}</p>'
        return self._all_data(dataset, frames, html_table + missing) if collapsed else html_table + missing

    def matrix(self, dataset: str, *, rows: str, columns: str, cell: str, env: str | None = None,
               where: dict | None = None, key: str | None = None, missing_ok: bool = False,
               collapsed: bool = False) -> str:
        """One dataset pivoted: a row per value of ``rows`` (in the data's order), a column per value of ``columns``
        (releases sort by their numbers, newest first), each cell the row's ``cell``; a combination nobody measured
        shows —."""
        schema = self.store.schema(dataset)
        for name in (rows, columns, cell):
            schema.column(name)
        frames = [(e, f) for e, f in self._frames(dataset, env, where or {}, missing_ok) if not e.cited]
        claim_key = key or f"{dataset}:matrix:{rows}:{columns}"
        self._record(key=claim_key, kind="table", status="measured" if frames else "not_measured", dataset=dataset,
                     detail=", ".join(e.name for e, _ in frames))
        if not frames:
            return self.badge("not_measured", dataset)
        data = pd.concat([f for _, f in frames])
        if data.duplicated([rows, columns]).any():
            raise UnknownName(f"{self.page}: matrix of {dataset}: several rows share one ({rows}, {columns}); narrow it"
                              " with where= or env=")
        heads = sorted(data[columns].dropna().unique(), key=_release_order, reverse=True)  # newest first: most read
        lookup = {(r[rows], r[columns]): r[cell] for _, r in data.iterrows()}
        head = "".join(f"<th>{html.escape(str(v))}</th>" for v in heads)
        body = []
        for label in dict.fromkeys(data[rows]):
            cells = "".join(
                "<td>—</td>" if (label, v) not in lookup or pd.isna(lookup[(label, v)])
                else _td(self._cell(cell, lookup[(label, v)], None), verbatim=True)  # outcomes quote the server
                for v in heads)
            body.append(f"<tr><th>{html.escape(str(value_label(label, self.lang)))}</th>{cells}</tr>")
        sources = " ".join(self._source_link(e, dataset) for e, _ in frames)
        out = (f'<div class="claim-table claim-matrix"><table><thead><tr><th>{html.escape(column_label(rows, self.lang))}'
               f"</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
               f'<p class="claim-sources">{t("source", self.lang)}: {sources}</p>')
        return self._all_data(dataset, frames, out) if collapsed else out

    @staticmethod
    def _like_with_like(dataset: str, frames) -> list[tuple[bool, list[tuple[Environment, pd.DataFrame]]]]:
        """``frames`` as (is it the stand-ins, frames) groups: full-size models first, then the CPU's scaled-down
        stand-ins (``tiny-*``), whichever hold rows: a stand-in's figures show a curve's shape, never a speed to set
        beside a real model's."""
        full, stand_in = [], []
        for env_obj, rows in frames:
            mask = _stand_in_rows(env_obj, dataset, rows)
            if (~mask).any():
                full.append((env_obj, rows[~mask]))
            if mask.any():
                stand_in.append((env_obj, rows[mask]))
        return [(flag, group) for flag, group in ((False, full), (True, stand_in)) if group]

    def _table_html(self, schema: DatasetSchema, frames, cols, labels: dict, digits: dict, tolerance,
                    stand_in: bool = False) -> tuple[str, int]:
        """The table of ``cols`` over every environment's rows, and how many rows carry a 未确认 mark. A column's
        lowest and highest repeat (``X_min``, ``X_max``) print beside it in its cell; a column holding one value in
        every row moves into the caption, so the table keeps what varies."""
        records = [(env_obj, row) for env_obj, rows in frames for row in _records(rows)]
        names = {c.name for c in cols}
        spreads = {c.name: _spread_stem(c.name) for c in cols
                   if {f"{_spread_stem(c.name)}_min", f"{_spread_stem(c.name)}_max"} <= names}
        folded = {f"{stem}_{end}" for stem in spreads.values() for end in ("min", "max")}
        constant = [c for c in cols if c.name not in folded and len(records) > 1
                    and len({self._cell_text(c, row, digits, spreads) for _, row in records}) == 1]
        if len(constant) >= len([c for c in cols if c.name not in folded]):
            constant = []  # nothing varies: the table stays as it is
        caption = ""
        if stand_in:
            caption += f'<p class="claim-table-caption claim-stand-in">{html.escape(t("stand_in", self.lang))}</p>'
        # a column no row of these environments has (added after their data were measured) is left out
        said = [c for c in constant if not pd.isna(records[0][1].get(c.name))]
        if said:
            same = " · ".join(f"{self._heading(c, labels)} {self._cell_text(c, records[0][1], digits, spreads)}"
                              for c in said)
            colon = "：" if self.lang == "zh" else ": "
            caption += (f'<p class="claim-table-caption">{html.escape(t("same_in_every_row", self.lang))}{colon}'
                        f"{html.escape(same)}</p>")
        cols = [c for c in cols if c.name not in folded and c not in constant]
        head = "".join(
            f'<th title="{title_attr_value(c.name + (": " + c.doc if c.doc else ""))}">{html.escape(self._heading(c, labels))}</th>'
            for c in cols
        )
        body, flagged = [], 0
        sources = {e.name: self._source_link(e, schema.name) + (self.badge("cited") if e.cited else "") for e, _ in frames}
        for env_obj, row in records:
            src = sources[env_obj.name]
            row_class = "claim-cited-row" if env_obj.cited else "claim-measured-row"
            cells = "".join(_td(self._cell_text(c, row, digits, spreads), verbatim=c.name in VERBATIM_COLUMNS)
                            for c in cols)
            reasons = self.row_reasons(schema, row, tolerance) + self._row_disagreement(env_obj, schema, row)
            guard = self.badge("unconfirmed", "; ".join(reasons)) if reasons else ""
            flagged += bool(reasons)
            body.append(f'<tr class="{row_class}"><td>{src}{guard}</td>{cells}</tr>')
        return (f'<div class="claim-table">{caption}<table><thead><tr><th>{t("source", self.lang)}</th>{head}</tr></thead>'
                f"<tbody>{''.join(body)}</tbody></table></div>", flagged)

    def _heading(self, column, labels: dict) -> str:
        return (labels.get(column.name) or column_label(column.name, self.lang)) + (
            f" ({unit_label(column.unit, self.lang, heading=True)})" if column.unit else "")

    def _cell_text(self, column, row: dict, digits: dict, spreads: dict) -> str:
        """One cell as printed: empty for no value; with its lowest–highest repeat where the table has them."""
        value = row[column.name]
        if pd.isna(value):
            return ""
        text = self._cell(column.name, value, digits.get(column.name))
        if column.name in spreads:
            low, high = row[f"{spreads[column.name]}_min"], row[f"{spreads[column.name]}_max"]
            if not (pd.isna(low) or pd.isna(high)) and low != high:
                text += (f" ({self._cell(column.name, low, digits.get(column.name))}–"
                         f"{self._cell(column.name, high, digits.get(column.name))})")
        return text

    def chart(
        self,
        dataset: str,
        x: str,
        y: str,
        *,
        color: str | None = None,
        env: str | None = None,
        where: dict | None = None,
        kind: str = "line",
        log_x: bool = False,
        log_y: bool = False,
        title: str = "",
        labels: dict | None = None,
        key: str | None = None,
        spread: tuple[str, str] | None = None,
        missing_ok: bool = False,
        collapsed: bool = False,
        line_at: float | None = None,
    ) -> str:
        """A plotly chart drawn from every environment that holds the dataset; cited series dashed. ``spread``
        names the columns of each point's lowest and highest repeat (drawn as error bars). A bar chart's x axis is
        categorical: its bars stand for conditions, not for positions on a scale; on a scatter chart with a
        categorical x the series stand side by side too. ``line_at`` draws a dotted level line (1 on a chart of
        ratios: where the two sides are equal)."""
        if line_at is not None and not (isinstance(line_at, (int, float)) and math.isfinite(line_at)):
            raise UnknownName(f"line_at must be a finite number, not {line_at!r}")
        schema = self.store.schema(dataset)
        if kind not in ("line", "bar", "scatter"):
            raise UnknownName(f"chart kind must be line, bar or scatter, not {kind!r}")
        if kind == "bar" and log_y:
            raise UnknownName(f"{self.page}: chart({dataset!r}): bars on a log y axis — a bar's length would not be "
                              "its value; draw points (kind=\"scatter\") or a linear axis")
        labels = labels or {}
        schema.column(x), schema.column(y)  # unknown names fail here, before anything is recorded
        if color:
            schema.column(color)
        if spread is not None:
            if len(spread) != 2:
                raise UnknownName(f"spread= names two columns (lowest, highest), not {spread!r}")
            for name in spread:
                schema.column(name)
        frames = self._frames(dataset, env, where or {}, missing_ok)
        claim_key = key or f"{dataset}:chart:{x}:{y}"
        status = self._summary_status(frames)
        self._record(key=claim_key, kind="chart", status=status, dataset=dataset,
                     detail=", ".join(e.name for e, _ in frames))
        if not frames:
            return self._missing_figure(dataset, env)
        groups = self._like_with_like(dataset, frames)  # full-size models and the CPU stand-ins never share an axis
        html_out = "".join(
            self._figure(dataset, schema, group, x, y, color=color, kind=kind, log_x=log_x, log_y=log_y, labels=labels,
                         spread=spread, title=t("stand_in", self.lang) if stand_in else title, line_at=line_at,
                         div_id="chart-" + _stable_id(self.page, claim_key, *(["stand-in"] if i else [])))
            for i, (stand_in, group) in enumerate(groups))
        html_out += self._saturated_note(schema, frames, claim_key)
        return self._all_data(dataset, frames, html_out) if collapsed else html_out

    def _all_data(self, dataset: str, frames, body: str) -> str:
        """One figure per question: a table or chart no question and no paragraph needs, folded behind "全部数据 /
        All data" (its title and CSV links stay in view); nothing is dropped, and its claims count as before."""
        title = self.store.schema(dataset).title.get(self.lang) or dataset
        links = " ".join(self._source_link(e, dataset) for e, _ in frames)
        colon = "：" if self.lang == "zh" else ": "
        return (f'<details class="claim-all-data"><summary>{t("all_data", self.lang)}{colon}{html.escape(title)} '
                f'<span class="claim-all-data-csv">{t("data_file", self.lang)} {links}</span></summary>{body}</details>')

    def _figure(self, dataset: str, schema: DatasetSchema, frames, x: str, y: str, *, color, kind: str, log_x: bool,
                log_y: bool, labels: dict, spread, title: str, div_id: str, line_at: float | None = None) -> str:
        """One plotly figure of ``frames``, with its source links."""
        xcol, ycol = schema.column(x), schema.column(y)
        traces, parts = [], []  # parts: each trace's (series value, model, source), named once all are known
        # One series never mixes models: with a model column, each (environment, model) pair is its own series.
        by_model = "model" in schema.by_column and color != "model"
        for env_obj, rows in frames:
            keys = ([color] if color else []) + (["model"] if by_model else [])
            # series in natural order: 4 MiB before 16 MiB, "--max-loras 2" before "--max-loras 16"
            groups = sorted(rows.groupby(keys, sort=False), key=lambda g: _natural_order(g[0])) if keys else [((), rows)]
            for group_values, part in groups:
                values = group_values if isinstance(group_values, tuple) else (group_values,)
                color_value = values[0] if color else None
                model = values[-1] if by_model else None
                part = part.sort_values(x)
                source = env_obj.label(self.lang) + (f" ({t('cited', self.lang)})" if env_obj.cited else "")
                parts.append((self._series_value(color, color_value, labels),
                              model_label(model, self.lang) if model else None, source))
                trace = {
                    "type": "bar" if kind == "bar" else "scatter",
                    "x": [_plotly_text(_json_value(value_label(v, self.lang))) for v in part[x]],
                    "y": [_plotly_text(_json_value(v)) for v in part[y]],
                }
                if spread is not None:
                    trace["error_y"] = self._error_bars(dataset, env_obj, part, y, *spread)
                if kind != "bar":
                    trace["mode"] = "markers" if kind == "scatter" or len(part) == 1 else "lines+markers"
                    if env_obj.cited:
                        trace["line"] = {"dash": "dash"}
                        trace["marker"] = {"symbol": "diamond-open", "size": 11}
                traces.append(trace)
        names, shared = legend_names(parts)
        for trace, name in zip(traces, names, strict=True):
            trace["name"] = _plotly_text(name)

        def axis(col, log, category=False, settings=False):
            # automargin: tick labels Plotly turns on a narrow screen grow the margin instead of leaving it
            heading = self._heading(col, labels) + (t("log_scale", self.lang) if log and not category else "")
            found = {"title": {"text": _plotly_text(heading)}, "automargin": True,
                     "type": "category" if category else "log" if log else "linear"}
            values = [v for _, rows in frames for v in rows[col.name]]
            if category:  # half a category of room each side, as bars get: markers at the ends keep their labels whole
                return found | {"range": [-0.5, len(set(map(str, values))) - 0.5]}
            return found | self._ticks(col, values, settings)

        side_by_side = kind == "scatter" and xcol.dtype == "str"
        figure = {
            "data": traces,
            "layout": {
                # words on x (a metric, a setting's name) are categories on any kind of chart, not positions
                "xaxis": axis(xcol, log_x, category=kind == "bar" or xcol.dtype == "str", settings=True),
                **({"barmode": "group"} if kind == "bar" else {}),
                # side by side, like bars: two series' error bars at one category would hide each other
                **({"scattermode": "group"} if side_by_side else {}),
                **({"shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": line_at, "y1": line_at,
                                "line": {"dash": "dot", "width": 1, "color": "#888"}}]} if line_at is not None else {}),
                # grouped markers would make Plotly start the axis at 0, as for bars: keep it around the data
                "yaxis": axis(ycol, log_y) | (self._data_range(frames, y, spread, line_at) if side_by_side and not log_y
                                              else {}),
                "margin": {"t": 16, "r": 16},
                # above the plot: below it, the tick labels Plotly turns on a phone ran into the entries
                "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
                "showlegend": True,  # a lone series still says what it is (Plotly hides a one-trace legend)
                "height": 380,
            },
        }
        # No "<" at all inside the <script>: neither "</script>" nor "<!--" can end or swallow it.
        payload = json.dumps(figure, ensure_ascii=False, sort_keys=True).replace("<", "\\u003c")
        sources = " ".join(self._source_link(e, dataset) for e, _ in frames)
        colon = "：" if self.lang == "zh" else ": "
        # the title is the page's text, not Plotly's: it wraps on a phone, where Plotly cut a long one at both ends
        return (
            (f'<p class="claim-chart-title">{html.escape(title)}</p>' if title else "")
            + f'<div class="claim-chart" id="{div_id}"></div>'
            f'<script type="application/json" data-chart-for="{div_id}">{payload}</script>'
            + (f'<p class="claim-chart-shared">{t("every_series", self.lang)}{colon}{html.escape(shared)}</p>' if shared else "")
            + f'<p class="claim-chart-sources">{t("source", self.lang)}{colon}{sources}</p>'
        )

    def _series_value(self, color: str | None, value, labels: dict) -> str | None:
        """A legend entry's condition in words: a bare number says which column it is ("in flight 16")."""
        if color is None:
            return None
        shown = value_label(value, self.lang)
        if isinstance(shown, numbers.Number) and not isinstance(shown, bool):
            return f"{labels.get(color) or column_label(color, self.lang)} {format_number(shown, self.lang)}"
        return str(shown)

    def _ticks(self, column, values, settings: bool = False) -> dict:
        """Ticks a reader can read: an x axis of a few settings (concurrency, batch size) is labelled at exactly
        those values, printed by the site's number rule; any other numeric axis (a measured y: its values may lie
        close together, and labels at each would overlap) gets three significant digits with separators, whole
        numbers only on a whole-number column."""
        numbers = sorted({float(v) for v in values if isinstance(v, (int, float)) and not pd.isna(v)})
        if settings and column.dtype == "int" and 0 < len(numbers) <= 12:
            return {"tickmode": "array", "tickvals": [_json_value(v) for v in numbers],
                    "ticktext": [format_number(v, self.lang) for v in numbers], "hoverformat": ",d"}
        return {"tickformat": ",d" if column.dtype == "int" else ",.3~r",
                "hoverformat": ",d" if column.dtype == "int" else ",.3~r"}

    @staticmethod
    def _data_range(frames, y: str, spread, line_at: float | None) -> dict:
        """A y range around every point, its spread and the level line, with a little room each side."""
        columns = [y, *(spread or ())]
        values = [float(v) for _, rows in frames for c in columns for v in rows[c] if not pd.isna(v)]
        values += [line_at] if line_at is not None else []
        low, high = min(values), max(values)
        pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
        return {"range": [low - pad, high + pad]}

    @staticmethod
    def _error_bars(dataset: str, env_obj, part, y: str, low: str, high: str) -> dict:
        """Plotly error bars from a point's lowest and highest repeat; a point outside its own spread is a bug in
        the data, and the build says where."""
        for _, row in part.iterrows():
            lo, mid, hi = row[low], row[y], row[high]
            if not (pd.isna(lo) or pd.isna(hi)) and not lo <= mid <= hi:
                raise SchemaError(f"{env_obj.name}/{dataset}.csv: {y}={mid} lies outside its spread "
                                  f"{low}={lo} … {high}={hi}")
        return {"type": "data", "symmetric": False, "visible": True,
                "array": [None if pd.isna(h) else _json_value(h - m) for h, m in zip(part[high], part[y], strict=True)],
                "arrayminus": [None if pd.isna(lo) else _json_value(m - lo) for lo, m in zip(part[low], part[y], strict=True)]}

    # ---- named facts (measure/site/facts/) -----------------------------------------------
    def fact(self, name: str) -> str:
        """A fact declared once in measure/site/facts/ (``TOPIC.NAME``), rendered as ``value`` or ``compare``."""
        found, short, _ = facts.lookup(name)
        return self._fact_html(found, short)

    def _fact_html(self, found: facts.Topic, short: str) -> str:
        spec = found.facts[short]
        if isinstance(spec, facts.Unconfirmed):
            return self.unconfirmed(f"{found.name}.{short}", spec.reason[self.lang])
        if isinstance(spec, facts.NotMeasured):
            return self.not_measured(f"{found.name}.{short}", spec.what[self.lang])
        if isinstance(spec, facts.Ratio):
            for side in (spec.left, spec.right):  # a ratio's terms need not have been cited above it
                if f"{found.name}.{side}" not in self.numbers:
                    self._fact_html(found, side)
            return self.compare(f"{found.name}.{spec.left}", spec.relation, f"{found.name}.{spec.right}",
                                digits=spec.digits, show=spec.show)
        if isinstance(spec, facts.Product):
            return self._product(found, short, spec)
        return self.value(spec.dataset, spec.column, key=f"{found.name}.{short}", **spec.options, **spec.where)

    def _product(self, found: facts.Topic, short: str, spec: facts.Product) -> str:
        """A Product fact (or a quotient): its two terms (rendered, not printed, where the page has not cited them) multiplied, with
        both terms' source links; 未实测 while either is."""
        names = [f"{found.name}.{side}" for side in (spec.left, spec.right)]
        for side, name in zip((spec.left, spec.right), names, strict=True):
            if name not in self.numbers:
                self._fact_html(found, side)
        key = f"{found.name}.{short}"
        words = (" ÷ " if spec.divide else " × ").join(self.texts.get(n, n) for n in names)
        self.texts[key] = words
        a, b = (self.numbers.get(n) for n in names)
        if a is None or b is None:
            self._record(key=key, kind="value", status="not_measured", detail=words, text=words)
            self.numbers[key] = None
            return self.badge("not_measured", words)
        if spec.divide and not b:
            raise ValueError(f"{self.page}: fact {key!r} divides by {names[1]!r}, which is zero")
        number = a / b if spec.divide else a * b
        self._remember(key, number)
        sides = [next(f for f in reversed(self.figures) if f.key == n) for n in names
                 if any(f.key == n for f in self.figures)]
        open_ = [c for c in self.claims if c.key in names and c.status == "unconfirmed"]
        status = "unconfirmed" if open_ else "measured"
        self._record(key=key, kind="value", status=status, dataset=sides[0].dataset if sides else "",
                     detail="; ".join(c.detail for c in open_) or ", ".join(sorted({f.env for f in sides})), text=words)
        links = self._source_link(self.store.env(sides[0].env), sides[0].dataset) if sides else ""  # the rate's
        guard = self.badge("unconfirmed", "; ".join(c.detail for c in open_)) if open_ else ""
        text = with_unit(format_number(number, self.lang, spec.digits), unit_label(spec.unit, self.lang), self.lang)
        return (f'<span class="claim-value claim-measured claim-product claim-number" title="{title_attr_value(words)}">'
                f"{html.escape(text)}</span>{guard}{links}")

    def answers(self, topic: str) -> str:
        """The block a topic page opens with: the questions it settles, each answered from the topic's facts and
        linked to the figure below that shows it. An answer whose facts are not all measured says what would
        settle it."""
        found = facts.get_topic(topic)
        if not found.questions:
            raise UnknownName(f"{self.page}: topic {topic!r} declares no questions")
        items = []
        for question in found.questions:
            body = self._answer_html(found, question)
            items.append(f'<dt><a href="#{html.escape(question.figure)}" data-answer-figure="{html.escape(question.figure)}">'
                         f"{flags_as_code(html.escape(question.ask[self.lang]))}</a></dt><dd>{body}</dd>")
        return (f'<div class="page-answers"><p class="page-answers-title">{t("answers", self.lang)}</p>'
                f'<dl>{"".join(items)}</dl></div>')

    def _answer_html(self, found: facts.Topic, question: facts.Question, topic_page: str = "") -> str:
        """A question's answer: its sentences (escaped) with each fact's HTML in its slot. A sentence citing a fact
        that is not measured is left out (a sentence of blanks says nothing), and one mark with what would settle
        it stands in for all such sentences, with a link to the other cards' figures where the question names their
        section (``topic_page``: the topic page's address from the page rendering it, "" on that page itself).
        Figures other datasets measured differently: see ``_other_figures``."""
        figures = len(self.figures)
        kept, missing = [], False
        for sentence in facts.sentences(question.answer[self.lang], self.lang):
            start = len(self.claims)
            parts = facts.SLOT.sub(lambda m: "\0" + m.group(1) + "\0", sentence).split("\0")  # odd: a fact's name
            html_out = "".join(flags_as_code(html.escape(part)) if i % 2 == 0 else self._fact_html(found, part)
                               for i, part in enumerate(parts))
            if any(c.status == "not_measured" for c in self.claims[start:]):
                missing = True
            else:
                kept.append(html_out)
        cards.check_one_card(self.store, f"{self.page}: the answer to {question.ask['en']!r} ({found.name})",
                             [f.env for f in self.figures[figures:]])
        body = one_mark_per_range(once_per_source(("" if self.lang == "zh" else " ").join(kept)))
        if kept:
            body += self._other_figures(self.figures[figures:])
        if missing:
            unsettled = question.unsettled.get(self.lang, "")
            body += (" " if body else "") + self.badge("not_measured", question.ask[self.lang]) + (
                f' <span class="answer-unsettled">{flags_as_code(inline_code(unsettled))}</span>' if unsettled else "")
            if question.elsewhere:
                href = f"{topic_page}#{question.elsewhere}"
                body += (f' <a class="answer-elsewhere" href="{html.escape(href)}">'
                         f'{html.escape(t("elsewhere", self.lang))}</a>')
        return body

    def _other_figures(self, figures: list[Figure]) -> str:
        """One quantity, one story: where an answer cites a figure that other datasets measure differently (and
        says no condition that explains it, ``differs=``), the answer shows them all, side by side in one unit —
        once a page: a later answer citing the same figures keeps its 未确认 mark, not a second copy of the note.
        One line after the answer counts them and opens onto the figures: written out in the answer, two such notes
        buried the answer they qualify (the method page's first)."""
        done = {_verdict_id(v) for v in self.verdicts_shown}
        disagreeing, sentences, gaps, earlier = [], [], [], []
        for figure in figures:
            verdict = figure.verdict
            if verdict is None or verdict.agree or figure.differs is not None:
                continue
            if _verdict_id(verdict) in done:
                anchor = self.verdict_anchors.get(_verdict_id(verdict))
                if anchor and anchor not in earlier:
                    earlier.append(anchor)
                continue
            done.add(_verdict_id(verdict))
            disagreeing.append(verdict)
            gaps.append(_gap(figure.value, verdict) if figure.value is not None else verdict.spread)
            sentence = self._verdict_sentence(verdict, f"agreement:{verdict.quantity.name}:{verdict.env}:{verdict.group}")
            sentences.append(f'<span class="answer-same-quantity">{html.escape(t("same_quantity", self.lang))}{sentence}'
                             f'{"。" if self.lang == "zh" else "."}</span>')
        # a figure compared in an earlier answer's note keeps its mark here and links back to that note
        seen = html.escape(t("same_quantity_seen", self.lang))
        back = "".join(f' <a class="answer-same-quantity-seen" href="#{anchor}">{seen}</a>' for anchor in earlier)
        if not disagreeing:
            return back
        anchor = f"same-quantity-{len(set(self.verdict_anchors.values())) + 1}"
        for verdict in disagreeing:
            self.verdict_anchors[_verdict_id(verdict)] = anchor
        summary = t("same_quantity_brief" if len(disagreeing) > 1 else "same_quantity_brief_one", self.lang).format(
            count=len(disagreeing), spread=self._percent(max(gaps)))
        return (f' <details class="answer-same-quantity-brief" id="{anchor}"><summary>{html.escape(summary)}</summary>'
                f'{" ".join(sentences)}</details>{back}')

    def site_answers(self) -> str:
        """For the home page: each topic's first question answered, its other questions linked (``TOPIC/#figure``
        is the topic page's address relative to a language's home page)."""
        sections = []
        for found in facts.topics().values():
            if not found.questions or not found.has_page:
                continue
            first, *rest = found.questions
            answered = self._answer_html(found, first, f"{found.name}/")
            more = "".join(f'<li><a href="{html.escape(found.name)}/#{html.escape(q.figure)}">'
                           f"{flags_as_code(html.escape(q.ask[self.lang]))}</a></li>" for q in rest)
            sections.append(
                f'<dt><a href="{html.escape(found.name)}/#{html.escape(first.figure)}">{flags_as_code(html.escape(first.ask[self.lang]))}'
                f'</a> <span class="page-answers-topic">{html.escape(found.title[self.lang])}</span></dt>'
                f"<dd>{answered}" + (f"<ul>{more}</ul>" if more else "") + "</dd>")
        return (f'<div class="page-answers site-answers"><p class="page-answers-title">{t("site_answers", self.lang)}</p>'
                f'<dl>{"".join(sections)}</dl></div>')

    def faq(self, keep=lambda html: html, pages: dict[str, str] | None = None) -> str:
        """Every topic's questions as a page of their own: Markdown headings (so the table of contents and search
        list each question) with each answer's HTML passed through ``keep`` (the site keeps it out of Markdown's
        reach) and a link to the figure on its page (``pages``: topic → that page's address from here)."""
        lines = []
        for found in sorted(facts.topics().values(), key=lambda topic: not topic.has_page):  # open questions last
            if not found.questions:
                continue
            lines.append(f"## {found.title[self.lang]}\n")
            for question in found.questions:
                href = (pages or {}).get(found.name) if found.has_page else None
                link = (f' <a class="answer-figure" href="{html.escape(href)}#{html.escape(question.figure)}">'
                        f'{t("answer_figure", self.lang)}</a>') if href else ""
                lines.append(f"### {question.ask[self.lang]}\n\n{keep(self._answer_html(found, question, href or '') + link)}\n")
        return "\n".join(lines)

    def gpu_runs(self) -> str:
        """Every GPU experiment with its card, code revision, date and GPU minutes (the method page)."""
        return cards.gpu_runs_table(self.store, self.lang, short_revision, format_number)

    def macros(self) -> dict:
        return {name: getattr(self, name) for name in MACROS}


# The claim macros pages may call (the site's and the page scanner's alike); anything else fails the build.
MACROS = ("value", "table", "chart", "matrix", "unconfirmed", "not_measured", "compare", "agreement", "fact", "answers",
          "site_answers", "faq", "gpu_runs")


# Plotly reads its strings as a small HTML (links, <br>, <b>…) and decodes entities first, so escaping is not
# enough (an escaped <img onerror> still ran in Chromium): text from data gets look-alike characters instead.
PLOTLY_SAFE = str.maketrans({"<": "\uff1c", ">": "\uff1e", "&": "\uff06"})


_CLOSING = tuple(".。!?！？)）")


def _gap(value: float, verdict) -> float:
    """How far the other readings of ``verdict`` lie from ``value``, as a verdict's spread is counted (largest ÷
    smallest − 1): the figure a reader saw, not the whole group's spread."""
    values = [r.value for r in verdict.readings]
    return max(max(values) / value, value / min(values)) - 1 if value > 0 else verdict.spread


def _verdict_id(verdict) -> tuple:
    return verdict.quantity.name, verdict.env, verdict.group


_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")  # 0.06 < 0.1: a decimal is one number, not 0, ".", 06


def _numbers_as_numbers(parts) -> tuple:
    """Text split into parts, with the numeric parts compared as numbers and before words."""
    return tuple((0, float(p)) if _NUMBER.fullmatch(p) else (1, p) for p in parts if p)


def _natural_order(value) -> tuple:
    """A sort key that compares the numbers inside values as numbers: (4194304 < 16777216, "x 2" < "x 16")."""
    values = value if isinstance(value, tuple) else (value,)
    return tuple(((0, float(v)),) if isinstance(v, (int, float)) and not isinstance(v, bool)
                 else _numbers_as_numbers(_NUMBER.split(str(v))) for v in values)


def _release_order(version) -> tuple:
    """0.8.5.post2 < 0.10.2 < 0.14.0: releases compare by their numbers, not as text."""
    return _numbers_as_numbers(re.split(r"[.+-]", str(version)))


# Columns whose text is shown as the server, the tool or the command wrote it (names, commands, error messages):
# marked translate="no", the one kind of English a zh page keeps besides product names, flags and code.
VERBATIM_COLUMNS = frozenset({"answer", "bench_command", "command", "device", "endpoint", "error", "model", "path",
                              "paths_requested", "server", "torch", "version", "vllm_version", "kv_cache_dtype", "target",
                              "url_libraries", "fetched"})


def _verbatim_names(where: dict) -> tuple[str, ...]:
    return tuple(str(v) for k, v in where.items() if k in VERBATIM_COLUMNS and isinstance(v, str))


def _td(text: str, verbatim: bool = False) -> str:
    """A table cell; one with a long unbroken run (a URL, a path, a flag) may break anywhere, so it never widens the
    table beyond the article, while names and numbers break only between words."""
    long_run = any(len(word) > 24 for word in text.split())
    attrs = (' class="claim-long"' if long_run else "") + (' translate="no"' if verbatim else "")
    return f"<td{attrs}>{html.escape(text)}</td>"


def _spread_stem(column: str) -> str:
    """The name a column's lowest and highest repeat are stored under: ``tokens_per_s_min`` for ``tokens_per_s``,
    ``base_min`` for ``base_value``."""
    return column[: -len("_value")] if column.endswith("_value") else column


def _stand_in_rows(env_obj: Environment, dataset: str, rows: pd.DataFrame) -> pd.Series:
    """Which rows come from a CPU stand-in (``tiny-*``): by the row's model, or else by the dataset's servers."""
    if "model" in rows.columns:
        return rows["model"].astype(str).str.startswith("tiny-")
    models = [s.get("model") or "" for s in env_obj.servers_for(dataset)]
    return pd.Series(bool(models) and all(m.startswith("tiny-") for m in models), index=rows.index)


def _records(frame: pd.DataFrame) -> list[dict]:
    """A frame's rows as dicts: a table reads every cell of every row, which ``iterrows`` (a Series per row) made the
    build's costliest loop."""
    return frame.to_dict("records")


def _plotly_text(v):
    return v.translate(PLOTLY_SAFE) if isinstance(v, str) else v


SETTING_SOURCE = "claim-src-setting"
SOURCE_LINK = re.compile(rf'<a class="claim-src(?: {SETTING_SOURCE})?" [^>]*>[^<]*</a>')


def once_per_source(answer_html: str) -> str:
    """An answer's source tags, each (environment, dataset) once: a dozen identical tags in one paragraph buried the
    numbers on a phone. The first measured figure from a data file carries its link; a value the run was set to
    (0.9 of --gpu-memory-utilization) carries it only where the answer cites no measured figure of that file."""
    links = [(m.start(), m.end(), m.group(0).replace(f" {SETTING_SOURCE}", ""), SETTING_SOURCE in m.group(0))
             for m in SOURCE_LINK.finditer(answer_html)]
    keep: dict[str, int] = {}  # a file's link -> the index of the one shown: the first measured, else the first
    for i, (_, _, link, setting) in enumerate(links):
        if link not in keep or (links[keep[link]][3] and not setting):
            keep[link] = i
    out, at = [], 0
    for i, (start, end, link, _) in enumerate(links):
        out += [answer_html[at:start], link if keep[link] == i else ""]
        at = end
    return "".join(out) + answer_html[at:]


FLAG = re.compile(r"(?<![\w>-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


RANGE_MARKED_TWICE = re.compile(
    r'(<span class="claim-badge claim-unconfirmed"[^>]*>[^<]*</span>)(–<span class="claim-value[^"]*"[^>]*>[^<]*</span>)\1')


def one_mark_per_range(answer_html: str) -> str:
    """'1.136× 未确认–1.328× 未确认' as '1.136×–1.328× 未确认': a range whose ends are unconfirmed for one reason is
    one unconfirmed range (the answers' badges, one on each end, outnumbered their words on a phone)."""
    return RANGE_MARKED_TWICE.sub(r"\2\1", answer_html)


UNIT_AFTER_NUMBER = re.compile(r"(?<=\d) (?=(?:%|ms|s|GiB|GB|MiB|tok/s|req/s|cores?|×)(?![\w/]))")


def units_kept(text: str) -> str:
    """Generated words (a reason, a note) with each number's unit after a no-break space, as figures have it."""
    return UNIT_AFTER_NUMBER.sub("\u00a0", text)


def flags_as_code(escaped: str) -> str:
    """Command-line flags in an answer's (escaped) words as code, as the pages' Markdown shows them: a flag is one
    word to a reader, and CSS keeps code from breaking at its hyphens."""
    return FLAG.sub(r'<code class="flag">\1</code>', escaped)


def inline_code(text: str) -> str:
    """Plain text as HTML, with `backticks` as code (as the page's Markdown would show them)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def legend_names(parts: list[tuple]) -> tuple[list[str], str]:
    """Each series' legend entry (what tells it from the others), and what every series shares, said once below
    the chart where it can wrap: a legend entry is one line, and on a phone the long shared part (model, source)
    pushed the part that differs out of sight. A lone series keeps the whole description in its entry."""
    varying = [i for i in range(3) if len({p[i] for p in parts}) > 1]
    if not varying:
        return [" · ".join(str(v) for v in p if v is not None) for p in parts], ""
    shared = " · ".join(str(parts[0][i]) for i in range(3) if i not in varying and parts[0][i] is not None)
    return [" · ".join(str(p[i]) for i in varying if p[i] is not None) for p in parts], shared


def _json_value(v):
    if hasattr(v, "item"):
        return v.item()
    return v
