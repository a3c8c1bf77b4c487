"""Numbers set against each other: a sentence's relation between two values (``compare``), the agreement of a
quantity's datasets, and the same figure on two cards."""

from __future__ import annotations

import html
from collections import Counter

from measure.schema import DatasetSchema, SchemaError, UnknownName
from measure.site import cards
from measure.site.labels import column_label, unit_label, value_label, with_unit
from measure.site.render.formatting import format_number, title_attr_value
from measure.site.render.vocabulary import RELATIONS, EmptySelection, Figure, t
from measure.store import Environment


class Comparisons:
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
        text = t("agree" if verdict.agree else "too_wide" if verdict.too_wide else "disagree", self.lang).format(
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
        return t("too_wide_inconsistent" if verdict.too_wide else "inconsistent", self.lang).format(quantity=self._quantity_words(verdict.quantity),
                                                   figures=self._readings(verdict, self._quantity_unit(verdict.quantity)),
                                                   spread=self._percent(verdict.spread))

    def _readings(self, verdict, unit: str) -> str:
        """'“Dataset” 43.2 ms, “Other” 62 ms': each reading with its dataset, to three significant digits."""
        return ("、" if self.lang == "zh" else ", ").join(
            f"{self._dataset_words(r.dataset)} {with_unit(format_number(r.value, self.lang), unit, self.lang)}"
            for r in verdict.readings)
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

    def _printed_figure(self, key: str) -> Figure | None:
        return next((f for f in reversed(self.figures) if f.key == key), None)

    def _figure_env(self, key: str) -> str | None:
        figure = self._printed_figure(key)
        return figure.env if figure else None

    def compare(self, left: str, relation: str, right: str, *, digits: int = 2, show: bool = True,
                varies: tuple[str, ...] = ()) -> str:
        """The ratio of two values named earlier on the page (their ``key=``), checked against what the sentence
        says of them: ``<``/``>`` (smaller/larger by more than TIE_MARGIN), ``≤``/``≥`` (ties allowed: an ordering
        such as "the lowest"), ``<<``/``>>`` (by a third or more / half or more), ``≈`` (within 10 %). A sentence
        the data stop supporting fails the build; ``show=False`` checks without printing. Like with like: the two
        rows may differ in one recorded condition (a key column, the environment), or in those ``varies`` declares
        (the sentence must say them)."""
        if relation not in RELATIONS:
            raise UnknownName(f"{self.page}: compare relation {relation!r}; use one of {', '.join(RELATIONS)}")
        for name in (left, right):
            if name not in self.numbers:
                raise UnknownName(f"{self.page}: compare({left!r}, {relation!r}, {right!r}): no number named {name!r}"
                                  " earlier on this page (give the value key=...)")
        cards.check_same_card(self.store, f"{self.page}: compare({left!r}, {relation!r}, {right!r})",
                              self._figure_env(left), self._figure_env(right))
        differ = self._check_like_with_like(left, relation, right, varies)
        if differ is not None and len(differ) == 1:
            self._note_said_effect(left, right, differ[0])
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
        noise = self._within_noise(left, right)
        if relation == "~" and not noise:
            raise SchemaError(f"{self.page}: compare({left!r}, '~', {right!r}) says there is no measurable difference, "
                              "but " + ("one of them records no range of repeats; say how close they are with '≈'"
                                        if left not in self.ranges or right not in self.ranges else
                                        f"their repeats do not overlap ({self._range_words(left)} against "
                                        f"{self._range_words(right)}): the data show a difference; rewrite the sentence"))
        if noise and relation != "~" and (show or relation not in ("≈", "≤", "≥")):
            raise SchemaError(f"{self.page}: the text says {left} ({a:g}) is {meaning} {right} ({b:g}), but their repeats "
                              f"overlap ({self._range_words(left)} against {self._range_words(right)}): no measurable "
                              f"difference. Say so: compare({left!r}, '~', {right!r}) prints both figures with their ranges")
        if not holds(ratio):
            raise SchemaError(f"{self.page}: the text says {left} ({a:g}) is {meaning} {right} ({b:g}), but the ratio is"
                              f" {ratio:.3g}; rewrite the sentence or re-check the data")
        self._record(key=key, kind="compare", status="measured", detail=f"{ratio:.3g}", text=words)
        if not show:
            return ""
        if relation == "~":
            return self._no_difference(left, right)
        ratio_of = f"{self.texts.get(left, left)} / {self.texts.get(right, right)}"
        return (f'<span class="claim-value claim-compare claim-number" title="{title_attr_value(ratio_of)}">'
                f"{html.escape(with_unit(format_number(ratio, self.lang, digits), '×', self.lang))}</span>")

    def _check_like_with_like(self, left: str, relation: str, right: str, varies: tuple[str, ...]) -> list[str] | None:
        """A comparison varies one condition: fail, naming both rows' conditions, where the two figures' rows differ
        in more recorded conditions (their shared key columns and the environment) than one, or than ``varies``.
        Returns the conditions they differ in (None where a side records none)."""
        a, b = self.conditions.get(left), self.conditions.get(right)
        if a is None or b is None:
            return None
        differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
        allowed = set(varies) if varies else set(differ[:1])
        extra = [k for k in differ if k not in allowed]
        if extra:
            shown = "; ".join(f"{k}: {a[k]!r} against {b[k]!r}" for k in differ)
            raise SchemaError(
                f"{self.page}: compare({left!r}, {relation!r}, {right!r}) sets rows against each other that differ in "
                f"{len(differ)} conditions ({shown}): a comparison varies one. Compare rows that differ in one, or "
                f"declare the others with varies=({', '.join(repr(k) for k in differ)}) and say them in the sentence")
        unknown = sorted(set(varies) - set(differ))
        if unknown:
            raise SchemaError(f"{self.page}: compare({left!r}, {relation!r}, {right!r}) declares varies={unknown}, "
                              f"but both rows have the same {', '.join(unknown)}: drop it")
        return differ

    def _note_said_effect(self, left: str, right: str, condition: str) -> None:
        """Two rows of one figure set apart in ``condition``: the sentence says that effect (also_in_data)."""
        sides = [self._printed_figure(key) for key in (left, right)]
        if all(sides) and (sides[0].dataset, sides[0].column) == (sides[1].dataset, sides[1].column):
            self.compared_effects.add((sides[0].dataset, sides[0].column, condition))

    def _within_noise(self, left: str, right: str) -> bool | None:
        """Whether two values' recorded ranges (slowest to fastest repeat) overlap: then their difference is inside
        the rounds' own spread. None where either records no range."""
        if left not in self.ranges or right not in self.ranges:
            return None
        (a_low, a_high, *_), (b_low, b_high, *_) = self.ranges[left], self.ranges[right]
        return max(a_low, b_low) <= min(a_high, b_high)

    def _range_words(self, key: str) -> str:
        low, high, *_ = self.ranges[key]
        return f"{key} {low:g}–{high:g}"

    def _no_difference(self, left: str, right: str) -> str:
        """'no measurable difference: 7.0 ms (5.86–7.11) against 5.01 ms (4.73–11.9)': both figures as the page
        printed them, with their ranges; never their ratio."""
        (*_, left_shown, left_range), (*_, right_shown, right_range) = self.ranges[left], self.ranges[right]
        text = t("no_difference", self.lang).format(left=left_shown, right=right_shown, left_range=left_range,
                                                    right_range=right_range)
        words = f"{self.texts.get(left, left)} ~ {self.texts.get(right, right)}"
        return f'<span class="claim-compare claim-no-difference" title="{title_attr_value(words)}">{html.escape(text)}</span>'
