"""Tables for looking up: ``table`` and ``matrix``, with like kept with like and each row's marks."""

from __future__ import annotations

import html

import pandas as pd

from measure.schema import DatasetSchema, UnknownName
from measure.site.labels import column_label, dataset_labels, unit_label, value_label
from measure.site.render.formatting import (
    VERBATIM_COLUMNS,
    _records,
    _release_order,
    _spread_stem,
    _stand_in_rows,
    _td,
    title_attr_value,
    units_kept,
)
from measure.site.render.vocabulary import t
from measure.store import Environment


class Tables:
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
        labels = dataset_labels(dataset, self.lang) | (labels or {})  # pages pass none
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
        self.shown.append((dataset, tuple(e.name for e, _ in frames)))
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
        sources = " ".join(self._source_link(e, dataset, named=True) for e, _ in frames)
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
        sources = {e.name: self._source_link(e, schema.name, named=True) + (self.badge("cited") if e.cited else "") for e, _ in frames}
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

