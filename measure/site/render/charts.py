"""Charts for seeing: ``chart`` as Plotly JSON, with spreads, ticks and the data behind it one click away."""

from __future__ import annotations

import html
import json
import math
import numbers

import pandas as pd

from measure.schema import DatasetSchema, SchemaError, UnknownName
from measure.site.labels import column_label, dataset_labels, model_label, value_label
from measure.site.render.formatting import _json_value, _natural_order, _plotly_text, format_number, legend_names
from measure.site.render.vocabulary import _stable_id, t


class Charts:
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
        labels = dataset_labels(dataset, self.lang) | (labels or {})  # pages pass none
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
        self.shown.append((dataset, tuple(e.name for e, _ in frames)))
        self.charted.update((dataset, axis, y) for axis in (x, color) if axis)  # its series show the colour's effect
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
        links = " ".join(self._source_link(e, dataset, named=True) for e, _ in frames)
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
        sources = " ".join(self._source_link(e, dataset, named=True) for e, _ in frames)
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
