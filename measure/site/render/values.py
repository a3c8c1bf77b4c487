"""One number from one row: ``value``, with its range, provenance and every reason it may be unconfirmed."""

from __future__ import annotations

import html
import math

import pandas as pd

from measure.schema import SETTING, DatasetSchema, SchemaError, UnknownName
from measure.site.labels import unit_label, value_label, with_unit
from measure.site.render.formatting import (
    VERBATIM_COLUMNS,
    _verbatim_names,
    format_number,
    plain,
    recorded_range,
    title_attr_value,
)
from measure.site.render.vocabulary import Figure, t


class Values:
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
        drops_if_empty: bool = False,
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
        other value fails the build, as compare() does for a ratio. ``drops_if_empty``: an empty cell in the row means
        "none" (the rung that bought most, where none did), and the answer sentence citing it drops itself (a
        facts.Absent sentence says it instead); anywhere else an empty cell fails the build."""
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
            if len(rows) == 1 and drops_if_empty and pd.isna(rows.iloc[0][column]):
                if not self.in_sentence:
                    raise SchemaError(f"{self.page}: {dataset}.{column} where {where} is empty in {candidate.name}; "
                                      "drops_if_empty works only in an answer's sentence, which it drops")
                self.empty_cells.add(claim_key)
                self.sentence_drops += 1
                return ""
            if len(rows) == 0 or pd.isna(rows.iloc[0][column]):
                continue
            raw = rows.iloc[0][column]
            raw = plain(raw)  # numpy's int64 is no int: its unit lost the no-break space
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
            self.conditions[claim_key] = {"environment": candidate.name} | {
                name: plain(rows.iloc[0][name]) for name in schema.key if name in rows.columns}
            bounds = recorded_range(schema, rows.iloc[0], column) if numeric else None
            if bounds:
                low, high = (end * scale for end in bounds)
                printed = f"{format_number(low, self.lang, digits)}–{format_number(high, self.lang, digits)}"
                self.ranges[claim_key] = (low, high, text, printed)
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
        bounds = recorded_range(schema, row, column)
        if bounds is None:
            return ""
        low, high = bounds
        counted = next(((c, row[c]) for c in ("repeats", "rounds", "requests") if c in names and not pd.isna(row[c])),
                       (None, None))
        if counted[0] is None:  # the dataset counts neither repeats nor requests: the range alone
            return f"{format_number(low * scale, self.lang, digits)}–{format_number(high * scale, self.lang, digits)}"
        return t("range_requests" if counted[0] == "requests" else "range", self.lang).format(
            n=format_number(counted[1], self.lang, 0) if counted[1] is not None else "?",
            low=format_number(low * scale, self.lang, digits), high=format_number(high * scale, self.lang, digits))
