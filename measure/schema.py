"""Dataset schemas: the columns, dtypes and units a dataset promises.

Every CSV under ``data/`` is read through its schema; a file that breaks it fails with the file,
line and column named, so a bad measurement never reaches a page silently.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

DTYPES = ("int", "float", "str", "bool")
# A column with this role holds a load client's busiest process's share of one CPU core. Where it reaches
# SATURATED the client's event loop falls behind (it stamps chunks late and in bursts; AIPerf warns at the
# same level), so the client, not the server, may have set the row's figures: the site renders them 未确认.
CLIENT_LOAD = "client_load"
# Quantities that are never below zero: a negative one in a data file is a bug, not a finding.
NON_NEGATIVE_UNITS = frozenset({"tok/s", "req/s", "chunks/s", "ms", "s", "GiB", "MiB", "tokens", "requests", "chunks",
                                "inputs", "docs", "px", "cores", "processes", "servers", "TFLOP/s"})
SATURATED = 0.85
ROLES = ("", CLIENT_LOAD)


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
    nullable: bool = False
    role: str = ""  # CLIENT_LOAD, or nothing

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"column {self.name!r}: dtype must be one of {DTYPES}, not {self.dtype!r}")
        if self.role not in ROLES:
            raise ValueError(f"column {self.name!r}: role must be one of {ROLES}, not {self.role!r}")

    def parse(self, text: str):
        """Parse one CSV cell; raise ValueError with a reason on bad input."""
        if text == "":
            if self.nullable:
                return None
            raise ValueError("empty, but the column is not nullable")
        if self.dtype == "int":
            value = int(text)
            self.check_range(value)
            return value
        if self.dtype == "float":
            value = float(text)
            if math.isnan(value):
                raise ValueError("NaN is not a value; leave the cell empty and mark the column nullable")
            if not math.isfinite(value):
                raise ValueError("not a finite number (a chart cannot draw it and no measurement gives it)")
            self.check_range(value)
            return value
        if self.dtype == "bool":
            if text in ("true", "false"):
                return text == "true"
            raise ValueError("bool cells are 'true' or 'false'")
        return text

    def check_range(self, value) -> None:
        if self.unit in NON_NEGATIVE_UNITS and value < 0:
            raise ValueError(f"negative, but a quantity in {self.unit} cannot be")

    def format_cell(self, value) -> str:
        """The CSV text for a value (the inverse of parse)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if not self.nullable:
                raise SchemaError(f"column {self.name!r} is not nullable but got no value")
            return ""
        if self.dtype == "bool":
            return "true" if value else "false"
        if self.dtype == "int":
            if isinstance(value, float) and not value.is_integer():
                raise SchemaError(f"column {self.name!r} is int but got {value!r}")
            return str(int(value))
        if self.dtype == "float":
            return repr(float(value))
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

    def read(self, path: Path, older: bool = False) -> pd.DataFrame:
        """Read and validate a CSV; errors name the file, line and column. ``older``: a file written before
        nullable columns were added to the schema is read with those columns empty (a run merging new rows
        into such a file rewrites it whole)."""
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            try:
                header = next(reader)
            except StopIteration:
                raise SchemaError(f"{path}:1: empty file, expected header {','.join(self.header)}") from None
            added = {c.name for c in self.columns if c.name not in header and c.nullable}
            if older and added and header == [c for c in self.header if c not in added]:
                # Written before those nullable columns existed: each row gets them empty, in the schema's order.
                written = header
                reader = ([dict(zip(written, cells, strict=True)).get(c, "") for c in self.header]
                          if len(cells) == len(written) else cells for cells in reader)  # a bad row fails below
                header = self.header
            if header != self.header:
                missing = [c for c in self.header if c not in header]
                unknown = [c for c in header if c not in self.by_column]
                raise SchemaError(
                    f"{path}:1: header does not match dataset {self.name!r}"
                    f" (missing: {missing or '-'}; undeclared: {unknown or '-'}; expected order: {','.join(self.header)})"
                )
            records = []
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
                        raise SchemaError(
                            f"{path}:{line_no}: column {col.name!r} ({col.dtype}): {text!r}: {exc}"
                        ) from None
                records.append(record)
        if not records:
            raise SchemaError(f"{path}:2: a header and no rows; a run that measured nothing publishes no file"
                              " (remove it, or re-measure the experiment)")
        frame = pd.DataFrame.from_records(records, columns=self.header)
        return frame
