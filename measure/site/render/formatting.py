"""Numbers, names and marks as a page prints them: locale-aware numbers, revisions, CPU names, escaping for
attributes and Plotly, flags as code, and the tidying of an answer's marks and source links."""

from __future__ import annotations

import functools
import html
import math
import re

import pandas as pd
from babel.numbers import format_decimal

from measure.schema import CLIENT_LOAD, SATURATED, SETTING, DatasetSchema, SchemaError
from measure.site.render.vocabulary import BABEL_LOCALE, TEXT
from measure.store import Environment


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


def recorded_range(schema: DatasetSchema, row, column: str) -> tuple[float, float] | None:
    """A figure's slowest and fastest repeat where its row records them (``COLUMN_min``/``_max``, or ``base_min`` for
    ``base_value``), else None."""
    stem = _spread_stem(column)
    if not {f"{stem}_min", f"{stem}_max"} <= schema.by_column.keys():
        return None
    low, high = row[f"{stem}_min"], row[f"{stem}_max"]
    return None if pd.isna(low) or pd.isna(high) else (float(low), float(high))


def plain(value):
    """A cell as a plain Python value: numpy's scalars compare and print as their Python twins (an int64 is no int)."""
    return value.item() if hasattr(value, "item") else value


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
