""""数据中还有 / Also in the data": the effects (measure/site/findings.py) in the answer card's data this page shows
that no chart and no comparison on it says, listed at the page's foot with both figures."""

from __future__ import annotations

import html

from measure.site import cards, findings
from measure.site.labels import column_label, unit_label, value_label, with_unit
from measure.site.render.formatting import format_number, title_attr_value
from measure.site.render.vocabulary import t


class AlsoInData:
    def also_in_data(self) -> str:
        """The effects of the datasets this page showed (on the answer card) that it neither charts nor compares,
        one line each, folded; nothing where every effect is said."""
        lines = []
        for effect in self.unsaid_effects():
            lines.append(f"<li>{self._effect_line(effect)}</li>")
            self._record(key=f"also:{effect.dataset}:{effect.column}:{effect.condition}", kind="effect",
                         status="measured", dataset=effect.dataset, detail=f"{effect.strongest.ratio:.3g}")
        if not lines:
            return ""
        return (f'<details class="claim-also-in-data" id="also-in-data"><summary>{t("also_in_data", self.lang)}'
                f'</summary><p>{t("also_in_data_lead", self.lang)}</p><ul>{"".join(lines)}</ul></details>')

    def unsaid_effects(self) -> list[findings.Effect]:
        """Effects in the answer card's rows of the datasets this page showed, less those a chart draws (that figure
        against that condition) or a comparison sets two rows apart in."""
        out, seen = [], set()
        said = self.compared_effects | self._figures_side_by_side()
        for dataset, envs in self.shown:
            if cards.ANSWER_CARD not in envs or dataset in seen:
                continue
            seen.add(dataset)
            for effect in findings.effects(self.store, self.store.env(cards.ANSWER_CARD), dataset):
                if (dataset, effect.condition, effect.column) in self.charted:
                    continue
                if (dataset, effect.column, effect.condition) in said:
                    continue
                out.append(effect)
        return out

    def _figures_side_by_side(self) -> set[tuple[str, str, str]]:
        """(dataset, figure, condition) for every two figures this page printed from rows of one dataset that differ
        in that one condition: the prose gives both sides of the effect."""
        printed = [(f.dataset, f.column, self.conditions[f.key]) for f in self.figures
                   if f.env == cards.ANSWER_CARD and f.key in self.conditions]
        out = set()
        for i, (dataset, column, a) in enumerate(printed):
            for other_dataset, other_column, b in printed[i + 1:]:
                if (other_dataset, other_column) != (dataset, column):
                    continue
                differ = [k for k in a if k in b and a[k] != b[k]]
                if len(differ) == 1:
                    out.add((dataset, column, differ[0]))
        return out

    def _effect_line(self, effect: findings.Effect) -> str:
        """'“Title” · time to first token: in flight 1 → 256: 21.2 ms → 783 ms (37×; 3 more pairs)'."""
        schema = self.store.schema(effect.dataset)
        pair = effect.strongest
        unit = unit_label(schema.column(effect.column).unit, self.lang)

        def condition(row: dict) -> str:  # the column's label names what it counts: 'requests in flight 16 → 128'
            value = row[effect.condition]
            return format_number(value, self.lang) if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else str(value_label(value, self.lang))

        held = ", ".join(f"{column_label(k, self.lang, effect.dataset)} {value_label(v, self.lang)}"
                         for k, v in pair.low_row.items() if k not in (effect.condition, effect.column))
        more = len(effect.pairs) - 1
        title = schema.title.get(self.lang) or effect.dataset
        colon = "：" if self.lang == "zh" else ": "
        figure = " → ".join(with_unit(format_number(row[effect.column], self.lang), unit, self.lang)
                            for row in (pair.low_row, pair.high_row))
        ratio = t("also_ratio", self.lang).format(ratio=format_number(pair.ratio, self.lang),
                                                  more=t("also_more_pairs" if more > 1 else "also_one_more_pair", self.lang).format(n=more) if more else "")
        text = (f"“{title}” · {column_label(effect.column, self.lang, effect.dataset)}{colon}"
                f"{column_label(effect.condition, self.lang, effect.dataset)} {condition(pair.low_row)} → "
                f"{condition(pair.high_row)}{colon}{figure}{ratio}")
        return f'<span title="{title_attr_value(held)}">{html.escape(text)}</span>' + self._source_link(
            self.store.env(effect.env), effect.dataset)
