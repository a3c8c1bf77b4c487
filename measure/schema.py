"""Dataset schemas: the columns, dtypes and units a dataset promises.

Every CSV under ``data/`` is read through its schema; a file that breaks it fails with the file,
line and column named, so a bad measurement never reaches a page silently.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

DTYPES = ("int", "float", "str", "bool")
# A column with this role holds a load client's busiest process's share of one CPU core. Where it reaches
# SATURATED the client's event loop falls behind (it stamps chunks late and in bursts; AIPerf warns at the
# same level), so the client, not the server, may have set the row's figures: the site renders them 未确认.
CLIENT_LOAD = "client_load"
# A column with this role holds what the experiment chose (requests in flight, a flag's value, rounds): a saturated
# client does not make it uncertain, so it never renders 未确认 for that reason.
SETTING = "setting"
# Quantities that are never below zero: a negative one in a data file is a bug, not a finding.
NON_NEGATIVE_UNITS = frozenset({"tok/s", "req/s", "chunks/s", "ms", "s", "GiB", "MiB", "tokens", "requests", "chunks",
                                "inputs", "inputs/s", "words", "docs", "docs/s", "px", "cores", "processes", "servers", "TFLOP/s",
                                "GB/s", "GB"})
SATURATED = 0.85
ROLES = ("", CLIENT_LOAD, SETTING)

# One grammar per dtype: ASCII digits, an optional leading minus where the column allows negatives, an exponent for
# floats; no underscores, padding, '+', other scripts' digits or words like inf/nan (Python's int() and float() take
# all of those). What format_cell writes always matches.
INT_CELL = re.compile(r"-?[0-9]+")
FLOAT_CELL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# A ceiling no measurement reaches, per unit (the default for a column of that unit); others: GENERIC_CEILING.
# A cell beyond it is a corrupted or hostile file, and the number formatter could not print it anyway.
CEILINGS = {"ms": 1e8, "s": 1e7, "tok/s": 1e9, "req/s": 1e8, "chunks/s": 1e10, "GiB": 1e6, "MiB": 1e9,
            "tokens": 1e10, "requests": 1e9, "chunks": 1e10, "inputs": 1e9, "inputs/s": 1e9, "words": 1e9, "docs": 1e9, "docs/s": 1e9, "px": 1e6, "cores": 1e5,
            "processes": 1e5, "servers": 1e5, "TFLOP/s": 1e6, "×": 1e6, "GB/s": 1e6, "GB": 1e6, "%": 1e4}
GENERIC_CEILING = 1e15
CLIENT_LOAD_CEILING = 1e3  # a load client's share of one core: its busiest process, or all of them on a big host
# A text cell longer than this is not a measurement (the longest real one, an error message, is ~300 characters).
MAX_CELL_CHARS = 64 * 1024
# Characters that reorder or hide text in a reader's browser (bidirectional controls, zero-width characters): a
# data cell that carries one could show a reader something other than what it holds.
INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


# Nullable columns added to a dataset after data had been published, with the date (YYYY-MM-DD, or YYYY-MM-DDTHH:MM
# in UTC where data of the same day exist) each was added: a file may lack one only if its dataset was measured
# before then (the source article's tables, rows measured
# before); any other file without it fails. Kept here, not in the experiment modules, whose source is part of their
# fingerprint: a note on a schema's history does not change what an experiment measures.
COLUMNS_ADDED: dict[str, dict[str, str]] = {
    "servers.startup": {"started_together": "2026-12-01"},
    "lora.overhead": dict.fromkeys(("base_min", "base_max", "adapter_min", "adapter_max", "repeats"), "2026-12-01"),
    "pooling.embedding_throughput": dict.fromkeys(("tokens_per_s_min", "tokens_per_s_max"), "2026-12-01"),
    "pooling.prefill_comparison": dict.fromkeys(("tokens_per_s_min", "tokens_per_s_max", "repeats"), "2026-12-01"),
    "capacity.decode_floor": {"beyond_floor_ms": "2026-12-04T23:10"},
    "pooling_limits.matmul_peak": {"dtype": "2026-12-05T12:00"},
    "capacity.knee": {"queue_ms": "2026-12-05T23:30"},
}


# What an error shows of text from a file: enough to find it, never the whole of a hostile one.
EXCERPT_CHARS = 60


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short, escaped excerpt of ``text`` for an error message: quoted, control and non-ASCII characters escaped,
    cut at ``limit`` characters with the full length said."""
    quoted = json.dumps(text[:limit], ensure_ascii=True)
    return quoted if len(text) <= limit else f"{quoted}… ({len(text):,} characters)"


def invisible_character(text: str) -> str | None:
    """The first bidi-control or zero-width character of ``text``, named (U+202E), or None."""
    found = INVISIBLE.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


class SchemaError(ValueError):
    """A data file or row does not match its declared schema."""


class UnknownName(KeyError):
    """A dataset, column, environment or claim name that nothing declares (a typo, not missing data)."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable
        return str(self.args[0])


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    unit: str = ""
    doc: str = ""
    # keywords only: an experiment's fingerprint leaves a column's doc out by position (measure/harness/fingerprint.py)
    _: KW_ONLY
    nullable: bool = False
    role: str = ""  # CLIENT_LOAD, SETTING, or nothing
    # The plausible range of a numeric column; None: the unit's default (≥ 0 for counts, times and rates; below the
    # unit's ceiling in CEILINGS, or GENERIC_CEILING). A cell outside fails the build naming file, line and column.
    minimum: float | None = None
    maximum: float | None = None

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"column {self.name!r}: dtype must be one of {DTYPES}, not {self.dtype!r}")
        if self.role not in ROLES:
            raise ValueError(f"column {self.name!r}: role must be one of {ROLES}, not {self.role!r}")

    @property
    def bounds(self) -> tuple[float, float]:
        """(lowest, highest) a cell of this numeric column may hold."""
        low = self.minimum if self.minimum is not None else (
            0.0 if self.unit in NON_NEGATIVE_UNITS or self.role == CLIENT_LOAD or self.dtype == "int" or self.unit == "×"
            else -GENERIC_CEILING)  # whole numbers here are counts, sizes and settings; × is a ratio
        high = self.maximum if self.maximum is not None else (
            CLIENT_LOAD_CEILING if self.role == CLIENT_LOAD else CEILINGS.get(self.unit, GENERIC_CEILING))
        return low, high

    def parse(self, text: str):
        """Parse one CSV cell by the column's grammar; raise ValueError with a reason on bad input."""
        if text == "":
            if self.nullable:
                return None
            raise ValueError("empty, but the column is not nullable")
        if self.dtype in ("int", "float"):
            grammar = INT_CELL if self.dtype == "int" else FLOAT_CELL
            if not grammar.fullmatch(text):
                raise ValueError(f"not {'a whole number' if self.dtype == 'int' else 'a number'} as this data is "
                                 "written (ASCII digits, an optional leading minus" + (", an exponent" if self.dtype ==
                                 "float" else "") + "; no spaces, underscores or other characters)")
            value = int(text) if self.dtype == "int" else float(text)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError("not a finite number (a chart cannot draw it and no measurement gives it)")
            self.check_range(value)
            return value
        if self.dtype == "bool":
            if text in ("true", "false"):
                return text == "true"
            raise ValueError("bool cells are 'true' or 'false'")
        if len(text) > MAX_CELL_CHARS:
            raise ValueError(f"{len(text):,} characters; a text cell holds at most {MAX_CELL_CHARS:,}")
        hidden = invisible_character(text)
        if hidden:
            raise ValueError(f"holds {hidden}, a character that reorders or hides text in a browser; remove it")
        return text

    def check_range(self, value) -> None:
        low, high = self.bounds
        if value < 0 <= low:
            raise ValueError(f"negative, but a quantity in {self.unit} cannot be" if self.unit else
                             "negative, but this column holds a count or a ratio")
        if not low <= value <= high:
            raise ValueError(f"{value:g} is outside this column's plausible range [{low:g}, {high:g}]"
                             + (f" for {self.unit}" if self.unit else "") + "; no measurement gives it")

    def format_cell(self, value) -> str:
        """The CSV text for a value (the inverse of parse)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if not self.nullable:
                raise SchemaError(f"column {self.name!r} is not nullable but got no value")
            return ""
        if self.dtype == "bool":
            return "true" if value else "false"
        if self.dtype in ("int", "float"):
            if self.dtype == "int" and isinstance(value, float) and not value.is_integer():
                raise SchemaError(f"column {self.name!r} is int but got {value!r}")
            number = int(value) if self.dtype == "int" else float(value)
            try:  # what could not be read back is not written either
                if not math.isfinite(number):
                    raise ValueError("not a finite number (a chart cannot draw it and no measurement gives it)")
                self.check_range(number)
            except ValueError as exc:
                raise SchemaError(f"column {self.name!r}: {value!r}: {exc}") from None
            return str(number) if self.dtype == "int" else repr(number)
        return str(value)


@dataclass(frozen=True)
class DatasetSchema:
    """One dataset: a name such as ``pooling.embedding_throughput`` and its columns.

    ``key`` names the columns that identify a row; they are what a page selects on and what a
    resumed run uses to skip rows it already has.
    """

    name: str
    title: dict[str, str]
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    doc: str = ""
    # Accuracy-like datasets: rows from dummy weights must never reach a page.
    needs_real_weights: bool = False
    by_column: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_column", {c.name: c for c in self.columns})
        if len(self.by_column) != len(self.columns):
            raise ValueError(f"dataset {self.name!r} declares a column twice")
        for k in self.key:
            self.column(k)

    @property
    def client_load_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.role == CLIENT_LOAD)

    @property
    def file_name(self) -> str:
        return f"{self.name}.csv"

    @property
    def header(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        try:
            return self.by_column[name]
        except KeyError:
            raise UnknownName(
                f"dataset {self.name!r} has no column {name!r}; its columns are {', '.join(self.header)}"
            ) from None

    def row_to_cells(self, row: dict) -> list[str]:
        """Validate a measured row (a dict) and return its CSV cells in column order."""
        extra = set(row) - set(self.by_column)
        if extra:
            raise SchemaError(f"dataset {self.name!r}: row has undeclared columns {sorted(extra)}")
        return [c.format_cell(row.get(c.name)) for c in self.columns]

    def row_key(self, row: dict) -> tuple:
        return tuple(row.get(k) for k in self.key)

    def read(self, path: Path, measured_on: str = "", repeated_keys: Literal["fail", "last"] = "fail") -> pd.DataFrame:
        """Read and validate a CSV; errors name the file, line and column (``file:line:column``). A file may lack
        a nullable column only if it was measured (``measured_on``, ISO date and time) before the column was ``added``:
        its rows read with that column empty (a run merging new rows into such a file rewrites it whole).

        Two rows with the same key fail (a page could not say which one it shows), unless ``repeated_keys`` is
        ``"last"``: staged rows, where a resumed run that measured a row again appended the newer one."""
        raw = Path(path).read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise SchemaError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
        with io.StringIO(text, newline="") as fh:
            reader = csv.reader(fh)
            try:
                header = next(reader)
            except StopIteration:
                raise SchemaError(f"{path}:1: empty file, expected header {','.join(self.header)}") from None
            except csv.Error as exc:
                raise SchemaError(f"{path}:1: not readable as CSV ({exc})") from None
            positions = {name: i for i, name in enumerate(header, start=1)}  # the file's own column numbers
            absent = [c for c in self.columns if c.name not in header]
            if absent and header == [c for c in self.header if c not in {a.name for a in absent}]:
                self._check_absent_columns(path, absent, measured_on)
                written = header
                reader = ([dict(zip(written, cells, strict=True)).get(c, "") for c in self.header]
                          if len(cells) == len(written) else cells for cells in reader)  # a bad row fails below
                header = self.header
            if header != self.header:
                missing = [c for c in self.header if c not in header]
                unknown = ", ".join(excerpt(c, 40) for c in [c for c in header if c not in self.by_column][:5])
                raise SchemaError(
                    f"{path}:1: header does not match dataset {self.name!r}"
                    f" (missing: {missing or '-'}; undeclared: {unknown or '-'}; expected order: {','.join(self.header)})"
                )
            records = self._records(path, reader, positions)
        records = self._one_row_per_key(path, records, keep_last=repeated_keys == "last") if self.key \
            else [record for _, record in records]
        if not records:
            raise SchemaError(f"{path}:2: a header and no rows; a run that measured nothing publishes no file"
                              " (remove it, or re-measure the experiment)")
        return pd.DataFrame.from_records(records, columns=self.header)

    def _check_absent_columns(self, path: Path, absent: list[Column], measured_on: str) -> None:
        """Columns a file lacks are allowed only where the schema added them after the file was measured."""
        for col in absent:
            added = COLUMNS_ADDED.get(self.name, {}).get(col.name)
            if not col.nullable:
                raise SchemaError(f"{path}:1: column {col.name!r} is missing and not nullable; re-measure the dataset")
            if not added:
                raise SchemaError(f"{path}:1: column {col.name!r} is missing; it was not added after data were "
                                  "published (measure/schema.py COLUMNS_ADDED), so every file must have it")
            if not measured_on or measured_on[:len(added)] >= added:
                raise SchemaError(f"{path}:1: column {col.name!r} is missing, but the dataset was measured on "
                                  f"{measured_on[:len(added)] or 'an unknown date'}, not before the column was added "
                                  f"({added}); re-measure it or fix the file")

    def _one_row_per_key(self, path: Path, records: list[tuple[int, dict]], keep_last: bool) -> list[dict]:
        latest: dict[tuple, tuple[int, dict]] = {}
        for line_no, record in records:
            key = self.row_key(record)
            if key in latest and not keep_last:
                shown = ", ".join(f"{k}={v!r}" for k, v in zip(self.key, key, strict=True))
                raise SchemaError(f"{path}:{line_no}: a second row for {shown} (the first is on line "
                                  f"{latest[key][0]}); one row per key ({', '.join(self.key)}): remove one, or "
                                  "re-measure the dataset")
            latest.pop(key, None)  # re-inserted: the newer row takes the later place
            latest[key] = (line_no, record)
        return [record for _, record in latest.values()]

    def _records(self, path: Path, reader, positions: dict[str, int]) -> list[tuple[int, dict]]:
        records = []
        line_no = 1
        try:
            for line_no, cells in enumerate(reader, start=2):
                if not cells:
                    continue
                if len(cells) != len(self.columns):
                    raise SchemaError(f"{path}:{line_no}: {len(cells)} cells, expected {len(self.columns)}")
                record = {}
                for col, text in zip(self.columns, cells, strict=True):
                    try:
                        record[col.name] = col.parse(text)
                    except ValueError as exc:
                        raise SchemaError(f"{path}:{line_no}:{positions[col.name]}: column {col.name!r} ({col.dtype}): "
                                          f"{excerpt(text)}: {exc}") from None
                records.append((line_no, record))
        except csv.Error as exc:  # e.g. a cell over csv's field limit: say where, not only what
            raise SchemaError(f"{path}:{line_no + 1}: not readable as CSV ({exc}); a cell holds at most "
                              f"{MAX_CELL_CHARS:,} characters") from None
        return records
