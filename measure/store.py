"""The data store: ``data/<env>/provenance.json`` plus one CSV per dataset.

An *environment* is one place numbers came from: a machine we measured on (``source: measured``)
or a publication we cite (``source: cited``, e.g. the source article's laptop figures). Cited and
measured environments never share a folder, and every page renders them differently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from measure.provenance_file import read_provenance
from measure.schema import DatasetSchema, SchemaError, UnknownName, excerpt

PROVENANCE_FILE = "provenance.json"
SOURCES = ("measured", "cited")
REPO_ROOT = Path(__file__).resolve().parent.parent


def default_data_root() -> Path:
    """``$MEASURE_DATA_ROOT`` if set (tests build from fixture roots), else the repo's ``data/``."""
    return Path(os.environ.get("MEASURE_DATA_ROOT") or REPO_ROOT / "data").resolve()


@dataclass
class Environment:
    name: str
    path: Path
    provenance: dict

    @property
    def source(self) -> str:
        return self.provenance["source"]

    @property
    def cited(self) -> bool:
        return self.source == "cited"

    def label(self, lang: str) -> str:
        labels = self.provenance.get("label") or {}
        return labels.get(lang) or labels.get("en") or self.name

    def dataset_provenance(self, dataset: str) -> dict:
        """What produced one dataset here: experiment, date, revision and the servers used."""
        return (self.provenance.get("datasets") or {}).get(dataset, {})

    def servers_for(self, dataset: str) -> list[dict]:
        servers = self.provenance.get("servers") or {}
        return [servers[s] for s in self.dataset_provenance(dataset).get("servers", []) if s in servers]

    def weights(self, dataset: str) -> set[str]:
        """Weights modes (``real``/``dummy``) of the servers behind a dataset."""
        return {s.get("weights", "unknown") for s in self.servers_for(dataset)}

    def csv_path(self, dataset: str) -> Path:
        return self.path / f"{dataset}.csv"

    def has(self, dataset: str) -> bool:
        return self.csv_path(dataset).is_file()

    @property
    def sort_key(self) -> tuple:
        """Measured before cited; GPU before CPU; then newest first (for picking a default)."""
        hw = self.provenance.get("hardware") or {}
        return (self.cited, not hw.get("gpus"), -_date_ordinal(self.provenance.get("date", "")), self.name)


def _date_ordinal(date: str) -> int:
    digits = "".join(ch for ch in date[:10] if ch.isdigit())
    return int(digits) if digits else 0


@dataclass
class Store:
    """All environments under one data root, read lazily and validated against the schemas."""

    root: Path
    schemas: dict[str, DatasetSchema]
    # A root that holds only part of the data (a test's fixtures, a contributor's subset): claims naming an
    # environment or row it lacks render 未实测 instead of failing the build ($MEASURE_PARTIAL_DATA=1).
    partial: bool = field(default_factory=lambda: os.environ.get("MEASURE_PARTIAL_DATA") == "1")
    _frames: dict = field(default_factory=dict, repr=False)
    _checks: dict = field(default_factory=dict, repr=False)

    def check(self, kind: type):
        """One ``kind(self)`` per store, made on first use: the build renders every page against the same checks
        (the consistency of quantities, the cross-card comparison)."""
        if kind not in self._checks:
            self._checks[kind] = kind(self)
        return self._checks[kind]

    @cached_property
    def environments(self) -> list[Environment]:
        envs = []
        if self.root.is_dir():
            for child in sorted(self.root.iterdir()):
                if child.name.startswith("."):
                    continue
                if child.is_symlink():  # nothing under data/ is read through a link out of it
                    raise SchemaError(f"{child}: a symbolic link; data/ holds plain folders and files (links are not "
                                      "followed): replace it with the folder itself")
                prov_path = child / PROVENANCE_FILE
                if not child.is_dir() or not (prov_path.is_file() or prov_path.is_symlink()):
                    continue
                env = Environment(child.name, child, read_provenance(prov_path))
                for csv_path in child.glob("*.csv"):
                    if csv_path.is_symlink():
                        raise SchemaError(f"{csv_path}: a symbolic link; a dataset is a plain file in its "
                                          "environment's folder (links are not followed)")
                    if csv_path.stem not in self.schemas:
                        raise SchemaError(
                            f"{csv_path}: no schema declares dataset {excerpt(csv_path.stem)};"
                            " declare it in an experiment module (measure/experiments/) or remove the file"
                        )
                envs.append(env)
        return sorted(envs, key=lambda e: e.sort_key)

    def schema(self, dataset: str) -> DatasetSchema:
        try:
            return self.schemas[dataset]
        except KeyError:
            close = [n for n in self.schemas if n.split(".")[0] == dataset.split(".")[0]]
            hint = f"; datasets of that experiment: {', '.join(sorted(close))}" if close else ""
            raise UnknownName(f"unknown dataset {dataset!r}{hint}") from None

    def env(self, name: str) -> Environment | None:
        return next((e for e in self.environments if e.name == name), None)

    def frame(self, env: Environment, dataset: str) -> pd.DataFrame:
        cache_key = (env.name, dataset)
        if cache_key not in self._frames:
            # a table measured before a nullable column was added reads with it empty (schema.COLUMNS_ADDED)
            measured_on = env.dataset_provenance(dataset).get("date") or env.provenance.get("date", "")
            self._frames[cache_key] = self.schema(dataset).read(env.csv_path(dataset), measured_on=measured_on)
        return self._frames[cache_key]

    def sources(self, dataset: str, env: str | None = None, cited: bool | None = None) -> list[Environment]:
        """Environments that hold ``dataset``, best first; optionally one by name, or only cited/measured."""
        self.schema(dataset)
        if env is not None and not self.partial and env not in {e.name for e in self.environments}:
            raise UnknownName(f"env {env!r}: no such environment under {self.root} "
                              f"(there are: {', '.join(e.name for e in self.environments)})")
        envs = [e for e in self.environments if e.has(dataset)]
        if env is not None:
            envs = [e for e in envs if e.name == env]
        if cited is not None:
            envs = [e for e in envs if e.cited == cited]
        return envs

    def published_files(self, env: Environment) -> list[Path]:
        """The dataset files of ``env`` (every one a declared dataset, none a link: ``environments`` checks)."""
        return sorted(env.path.glob("*.csv"))

    def validate_all(self) -> int:
        """Read every CSV of every environment, as a page would; returns how many files were checked."""
        count = 0
        for env in self.environments:
            for csv_path in self.published_files(env):
                self.frame(env, csv_path.stem)
                count += 1
        return count


def select(frame: pd.DataFrame, schema: DatasetSchema, where: dict) -> pd.DataFrame:
    """Rows matching every ``column=value`` in ``where``; unknown columns raise UnknownName."""
    mask = pd.Series(True, index=frame.index)
    for column, wanted in where.items():
        schema.column(column)
        mask &= frame[column] == wanted
    return frame[mask]
