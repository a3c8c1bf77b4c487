"""The renderer's shared state and its plumbing: provenance text, source links, row selection, badges, and the
checks a claim must pass before it prints (published rows, selector values, tolerances, saturation)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd

from measure.schema import SATURATED, DatasetSchema, UnknownName
from measure.site import cards
from measure.site.consistency import Consistency, consistency_for
from measure.site.labels import column_label, model_label, value_label, with_unit
from measure.site.render.formatting import (
    _CLOSING,
    SETTING_SOURCE,
    _records,
    client_can_move,
    cpu_words,
    format_number,
    inline_code,
    plain,
    saturation,
    short_revision,
    title_attr_value,
    units_kept,
)
from measure.site.render.vocabulary import TEXT, Claim, EmptySelection, Figure, t
from measure.store import Environment, Store, select


@dataclass
class RendererBase:
    """Renders claims for one page in one language and records each claim it renders; the rooms of
    ``measure/site/render`` add what each kind of claim needs."""

    store: Store
    lang: str
    page: str
    data_url: str = "data/"  # URL of the data root relative to the page
    claims: list[Claim] = field(default_factory=list)
    numbers: dict[str, float | None] = field(default_factory=dict)  # value key → its number, for compare()
    texts: dict[str, str] = field(default_factory=dict)  # value key → the claim in words, for compare()'s own claim
    # value key → (slowest, fastest repeat, the figure as printed, the range as printed) where its row records them:
    # compare() tells noise from a difference and prints both figures with their ranges
    ranges: dict[str, tuple[float, float, str, str]] = field(default_factory=dict)
    # value key → the recorded conditions of its row (the dataset's key columns, and the environment): compare()
    # sets like against like
    conditions: dict[str, dict] = field(default_factory=dict)
    # what this page shows and says, for also_in_data(): each (dataset, environments) a table or chart showed, each
    # (dataset, x, y) a chart drew, each (dataset, figure, condition) a comparison set two rows apart in
    shown: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    charted: set[tuple[str, str, str]] = field(default_factory=set)
    compared_effects: set[tuple[str, str, str]] = field(default_factory=set)
    # One quantity, one story: each figure of ours this renderer printed with the verdict on its quantity (None where
    # no quantity of measure/quantities.py holds it), and each verdict an agreement() sentence printed.
    figures: list[Figure] = field(default_factory=list)
    verdicts_shown: list = field(default_factory=list)
    verdict_anchors: dict = field(default_factory=dict)  # verdict id → the id of the answer note that compares it
    missing_said: set = field(default_factory=set)  # (dataset, env) whose "no data yet" note this page already shows
    # An answer sentence being rendered (value(drops_if_empty=True) may drop it), the values measured empty, and how
    # many times a sentence was asked to drop itself (see Answers._sentences_html)
    in_sentence: bool = False
    empty_cells: set = field(default_factory=set)
    sentence_drops: int = 0

    # ---- helpers -------------------------------------------------------------------------
    def _remember(self, key: str, number) -> None:
        """A value's number under its claim key, for ``compare`` further down the page."""
        number = plain(number)
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
        text = f"{schema.title.get(self.lang) or schema.name} · {column_label(column, self.lang, schema.name)}"
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

    def _source_link(self, env: Environment, dataset: str, setting: bool = False, named: bool = False) -> str:
        """The link to the data file, its provenance (hardware, versions, revision, date) on hover: after a figure
        in prose an empty link claims.css draws an information icon in (a glyph such as ⓘ
        is missing from many fonts), in a table's source column or below a chart the source's short name
        (``named``: H200, CPU, the article). ``setting``: beside a value the run was set to, which once_per_source
        passes over for a measured figure of the same file."""
        href = f"{self.data_url}{env.name}/{dataset}.csv"
        name = self._source_name(env)
        css = "claim-src" + (" claim-src-named" if named else "") + (f" {SETTING_SOURCE}" if setting else "")
        label = html.escape(name) if named else ""
        aria = "" if named else f' aria-label="{html.escape(t("source", self.lang))}: {html.escape(name)}"'
        return (f'<a class="{css}" href="{html.escape(href)}"{aria} '
                f'title="{title_attr_value(self.provenance_text(env, dataset))}">{label}</a>')

    def _source_name(self, env: Environment) -> str:
        """A source as a reader tells sources apart: the GPU card (without the vendor's name), the CPU stand-in, or a
        cited source's label."""
        if env.cited:
            return t("cited_source", self.lang)
        if cards.is_card(env):
            return cards.card_name(env).removeprefix("NVIDIA ")
        return t("cpu_stand_in", self.lang)

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
        names = [self._env_words(n) for n in ([env] if isinstance(env, str) else list(env or []))]
        where = t("figure_missing_where", self.lang).format(
            env="、".join(names) if self.lang == "zh" else ", ".join(names)) if names else ""
        text = t("figure_missing", self.lang).format(title=self.store.schema(dataset).title[self.lang], where=where,
                                                    experiment=dataset.split(".")[0]).replace("  ", " ")
        title = self.store.schema(dataset).title[self.lang]
        return f'<p class="claim-missing">{self.badge("not_measured", title)} {inline_code(text)}</p>'

    def _env_words(self, name: str) -> str:
        """An environment as a reader knows it: its GPU's name (an H200), else its id as the source tags show it."""
        env = self.store.env(name)
        gpus = ((env.provenance.get("hardware") or {}).get("gpus") or []) if env is not None else []
        return gpus[0].get("name") or f"`{name}`" if gpus else f"`{name}`"

    def _dummy_note(self, dataset: str) -> str:
        schema = self.store.schema(dataset)
        if not schema.needs_real_weights:
            return ""
        if any(not self._usable(e, dataset) for e in self.store.sources(dataset, cited=False)):
            return t("dummy_only", self.lang)
        return t("real_only", self.lang)

    # ---- the vocabulary ------------------------------------------------------------------

    def _cell(self, column: str, value, digits: int | None) -> str:
        if column == "model":
            return model_label(value, self.lang)
        return format_number(value_label(value, self.lang), self.lang, digits)


    def _percent(self, share: float) -> str:
        """0.44 as '44 %', as the site prints a percentage."""
        return with_unit(format_number(share * 100, self.lang, 0), "%", self.lang)

    def _parens(self) -> tuple[str, str]:
        """A parenthesis after a figure: full-width in Chinese, after a space in English."""
        return ("（", "）") if self.lang == "zh" else (" (", ")")

    @property
    def consistency(self) -> Consistency:
        return consistency_for(self.store)

    @property
    def cross_cards(self) -> cards.CrossCards:
        return cards.cross_cards_for(self.store)

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

