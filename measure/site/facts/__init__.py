"""Facts named once, cited by name from both languages (as Jupyter Book's ``glue``), and the questions they answer.

A *fact* is one selection of data with its formatting: a value (dataset, column, row selector, digits) or a ratio
of two values checked against what the sentence says (``compare``'s relations), or a table or chart the page shows
(``Table``, ``Chart``, ``Matrix``). A page writes ``{{ fact("eager.tok_s_32_default") }}`` or
``{{ fact("eager.startup_chart") }}`` instead of repeating the selector in each language, and
``{{ answers("eager") }}`` opens it with the questions its topic settles, each answered from facts.

One module per topic in this package declares its facts and its questions (``topic(...)``); the registry imports
them all. Names are ``TOPIC.NAME``; an unknown one fails the build naming the page.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field

from measure.schema import UnknownName

LANGS = ("zh", "en")


@dataclass(frozen=True)
class Value:
    """One number (or word) from one row: ``ClaimRenderer.value``'s arguments, named."""

    dataset: str
    column: str
    where: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # digits, unit, scale, differs, show_range, env, source, …


@dataclass(frozen=True)
class Ratio:
    """``left`` / ``right`` (two facts of the topic), checked against ``relation`` (see ``compare``)."""

    left: str
    relation: str
    right: str
    digits: int = 2
    show: bool = True  # False: the relation is checked, nothing is printed (a sentence states it in words)
    # the conditions the two rows differ in where that is more than one (the sentence says them): see compare()
    varies: tuple[str, ...] = ()


@dataclass(frozen=True)
class Product:
    """``left`` × ``right`` (or ÷, with ``divide``; two facts of the topic) in ``unit``: a figure in another unit than
    its dataset's, from two measured columns (requests per second × tokens per request = tokens per second; KV tokens
    ÷ tokens per request = requests), never a typed factor."""

    left: str
    right: str
    unit: str
    digits: int | None = 0
    divide: bool = False


@dataclass(frozen=True)
class Absent:
    """Keeps its answer sentence only where ``fact`` (a Value of the topic with the option ``drops_if_empty``) was
    measured empty: the sentence that says what an empty cell means ("no rung raised throughput measurably"), where
    the sentence citing ``fact`` drops itself. Prints nothing."""

    fact: str


@dataclass(frozen=True)
class Unconfirmed:
    """A 未确认 / Unconfirmed mark with its reason in each language: what the data show but do not explain."""

    reason: dict[str, str]

    def __post_init__(self) -> None:
        if set(self.reason) != set(LANGS):
            raise ValueError(f"an Unconfirmed fact needs its reason in {LANGS}")


@dataclass(frozen=True)
class NotMeasured:
    """A 未实测 / Not measured mark: what no experiment of ours measures yet, and what would (each language)."""

    what: dict[str, str]

    def __post_init__(self) -> None:
        if set(self.what) != set(LANGS):
            raise ValueError(f"a NotMeasured fact needs its text in {LANGS}")


class Shown:
    """A table, chart or matrix a page shows, declared once by name: the dataset and the options its macro takes
    (``ClaimRenderer.table`` / ``chart`` / ``matrix``). An option given as ``{"zh": …, "en": …}`` (a chart's
    ``title``) is read in the page's language; every other option is the same in both."""

    kind = ""

    def __init__(self, dataset: str, **options) -> None:
        self.dataset, self.options = dataset, options
        for key, option in options.items():
            if isinstance(option, dict) and key == "title" and set(option) != set(LANGS):
                raise ValueError(f"{type(self).__name__}({dataset!r}): a {key} in {LANGS}, not {sorted(option)}")

    def options_in(self, lang: str) -> dict:
        return {key: option[lang] if key == "title" and isinstance(option, dict) else option
                for key, option in self.options.items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dataset!r}, **{self.options!r})"


class Table(Shown):
    """A table for looking up rows."""

    kind = "table"


class Chart(Shown):
    """A chart for seeing a shape."""

    kind = "chart"


class Matrix(Shown):
    """A grid of one column's values by two others (``security_versions.matrix``: probe × release)."""

    kind = "matrix"


Fact = Value | Ratio | Product | Absent | Unconfirmed | NotMeasured | Shown


@dataclass(frozen=True)
class Question:
    """A question a reader brings, its answer as sentences with ``{fact}`` slots, the heading id (``figure``) of the
    figure below that shows it, and what measurement would settle it while its facts are not measured."""

    ask: dict[str, str]
    answer: dict[str, str]
    figure: str
    unsettled: dict[str, str] = field(default_factory=dict)
    # the heading id, on the topic's page, of the section showing other GPU cards' figures for this question: an
    # answer cites one card (measure/site/cards.py ANSWER_CARD) and, while that card lacks a figure, links there
    elsewhere: str = ""
    # An answer opens with the figure and what to do with it; the conditions it was measured under follow in one
    # short line, and the reasons and caveats behind a disclosure (both may cite facts, as the answer does)
    conditions: dict[str, str] = field(default_factory=dict)
    caveats: dict[str, str] = field(default_factory=dict)

    def parts(self, lang: str) -> tuple[str, str, str]:
        """(answer, conditions, caveats) in ``lang``."""
        return self.answer[lang], self.conditions.get(lang, ""), self.caveats.get(lang, "")

    def slots(self) -> list[str]:
        found = {lang: SLOT.findall(" ".join(self.parts(lang))) for lang in LANGS}
        if set(found["zh"]) != set(found["en"]):
            raise UnknownName(f"question {self.ask['en']!r}: the zh and en answers cite different facts "
                              f"({sorted(set(found['zh']) ^ set(found['en']))})")
        return found["en"]


@dataclass(frozen=True)
class Topic:
    """A page's facts and questions; ``name`` is the page (docs/NAME.zh.md, docs/NAME.en.md), ``title`` its short
    name in each language where the home page lists it."""

    name: str
    facts: dict[str, Fact]
    questions: tuple[Question, ...] = ()
    title: dict[str, str] = field(default_factory=dict)
    has_page: bool = True  # False: questions no page answers yet (the FAQ lists them; the home page does not)


SLOT = re.compile(r"\{([a-z0-9_]+)\}")
# Where an answer's sentences end: 。 or ； in Chinese; in English . ; ? or ! before a space and a capital, a slot,
# a flag or a quote (never a decimal point: the numbers are in the slots)
SENTENCE_END = {"zh": re.compile(r"(?<=[。；？！])"), "en": re.compile(r"(?<=[.;?!])\s+(?=[A-Z{`\-\"(])")}


def sentences(text: str, lang: str) -> list[str]:
    """An answer's sentences, each with its closing mark (``facts.SENTENCE_END``)."""
    return [part for part in SENTENCE_END[lang].split(text) if part.strip()]


_TOPICS: dict[str, Topic] = {}


def topic(name: str, facts: dict[str, Fact], questions: tuple[Question, ...] = (),
          title: dict[str, str] | None = None, has_page: bool = True) -> Topic:
    """Declare a topic's facts (short names, cited as ``TOPIC.NAME``) and questions."""
    if name in _TOPICS:
        raise ValueError(f"topic {name!r} declared twice")
    if questions and set(title or {}) != set(LANGS):
        raise ValueError(f"topic {name!r}: a topic with questions has a title in {LANGS}")
    declared = Topic(name, facts, questions, title or {}, has_page)
    for ratio in (f for f in facts.values() if isinstance(f, (Ratio, Product))):
        for side in (ratio.left, ratio.right):
            if side not in facts:
                raise UnknownName(f"topic {name!r}: a {type(ratio).__name__.lower()} names {side!r}, which the topic "
                                  "does not declare")
    for name_, absent in ((n, f) for n, f in facts.items() if isinstance(f, Absent)):
        target = facts.get(absent.fact)
        if not isinstance(target, Value) or not target.options.get("drops_if_empty"):
            raise UnknownName(f"topic {name!r}: Absent fact {name_!r} names {absent.fact!r}, which is not a Value of "
                              "the topic with drops_if_empty")
    asked = [q.ask.get("en") for q in questions]
    if len(set(asked)) != len(asked):
        raise ValueError(f"topic {name!r} asks a question twice: "
                         f"{sorted({a for a in asked if asked.count(a) > 1})}")
    for question in questions:
        for lang in LANGS:
            if not question.ask.get(lang) or not question.answer.get(lang):
                raise ValueError(f"topic {name!r}: a question lacks its {lang} text")
        for extra in (question.conditions, question.caveats):
            if extra and set(extra) != set(LANGS):
                raise ValueError(f"topic {name!r}: question {question.ask['en']!r} gives conditions or caveats in "
                                 f"{sorted(extra)}, not in {LANGS}")
        if question.ask["zh"][-1] != "？" or question.ask["en"][-1] != "?":
            raise ValueError(f"topic {name!r}: a question ends with ？ (zh) and ? (en): {question.ask}")
        unknown = [s for s in question.slots() if s not in facts]
        if unknown:
            raise UnknownName(f"topic {name!r}: question {question.ask['en']!r} cites undeclared facts {unknown}")
    _TOPICS[name] = declared
    return declared


def topics() -> dict[str, Topic]:
    import measure.site.facts as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    return _TOPICS


def get_topic(name: str) -> Topic:
    found = topics()
    if name not in found:
        raise UnknownName(f"unknown topic {name!r}; topics: {', '.join(sorted(found))}")
    return found[name]


def lookup(name: str) -> tuple[Topic, str, Fact]:
    """``TOPIC.NAME`` → (topic, short name, fact)."""
    topic_name, _, short = name.partition(".")
    found = get_topic(topic_name)
    if short not in found.facts:
        raise UnknownName(f"unknown fact {name!r}; {topic_name} declares: {', '.join(found.facts)}")
    return found, short, found.facts[short]
