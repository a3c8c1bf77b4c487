"""Questions and their answers: facts named once and cited by name (``fact``), each page's answers, the home
page's, the FAQ, and the list of GPU runs."""

from __future__ import annotations

import html

from measure.schema import UnknownName
from measure.site import cards, facts
from measure.site.labels import unit_label, with_unit
from measure.site.render.formatting import (
    _gap,
    _verdict_id,
    flags_as_code,
    format_number,
    inline_code,
    once_per_source,
    one_mark_per_range,
    short_revision,
    title_attr_value,
)
from measure.site.render.vocabulary import Figure, t


class Answers:
    def fact(self, name: str) -> str:
        """A fact declared once in measure/site/facts/ (``TOPIC.NAME``), rendered as ``value``, ``compare``, ``table``,
        ``chart`` or ``matrix``."""
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
                                digits=spec.digits, show=spec.show, varies=spec.varies)
        if isinstance(spec, facts.Product):
            return self._product(found, short, spec)
        if isinstance(spec, facts.Absent):
            return self._absent(found, spec)
        if isinstance(spec, facts.Shown):
            return getattr(self, spec.kind)(spec.dataset, **spec.options_in(self.lang))
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

    def _absent(self, found: facts.Topic, spec: facts.Absent) -> str:
        """Nothing; asks its sentence to drop itself unless ``spec.fact`` was measured empty (rendered here, unshown,
        where no sentence above cited it)."""
        key = f"{found.name}.{spec.fact}"
        if key not in self.empty_cells and not any(c.key == key for c in self.claims):
            drops = self.sentence_drops
            self._fact_html(found, spec.fact)
            self.sentence_drops = drops
        if key not in self.empty_cells:
            self.sentence_drops += 1
        return ""

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
        answer, conditions, caveats = question.parts(self.lang)
        kept, missing = self._sentences_html(found, answer)
        said_conditions, missing_conditions = self._sentences_html(found, conditions)
        said_caveats, missing_caveats = self._sentences_html(found, caveats)
        missing = missing or missing_conditions or missing_caveats
        cards.check_one_card(self.store, f"{self.page}: the answer to {question.ask['en']!r} ({found.name})",
                             [f.env for f in self.figures[figures:]])
        space = "" if self.lang == "zh" else " "
        body = space.join(kept)
        if kept and said_conditions:
            body += f'<span class="answer-conditions">{space.join(said_conditions)}</span>'
        if kept and said_caveats:
            body += (f'<details class="answer-caveats"><summary>{html.escape(t("answer_caveats", self.lang))}</summary>'
                     f"{space.join(said_caveats)}</details>")
        body = one_mark_per_range(once_per_source(body))
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

    def _sentences_html(self, found: facts.Topic, text: str) -> tuple[list[str], bool]:
        """Each sentence of ``text`` (escaped) with its facts' HTML in their slots, less the sentences citing a fact
        that is not measured; and whether any was left out."""
        kept, missing = [], False
        for sentence in facts.sentences(text, self.lang) if text else []:
            start, drops = len(self.claims), self.sentence_drops
            parts = facts.SLOT.sub(lambda m: "\0" + m.group(1) + "\0", sentence).split("\0")  # odd: a fact's name
            self.in_sentence = True
            try:
                html_out = "".join(flags_as_code(html.escape(part)) if i % 2 == 0 else self._fact_html(found, part)
                                   for i, part in enumerate(parts))
            finally:
                self.in_sentence = False
            if any(c.status == "not_measured" for c in self.claims[start:]):
                missing = True
            elif self.sentence_drops == drops:  # else: a value measured empty, or an Absent one not, dropped it
                kept.append(html_out)
        return kept, missing

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

