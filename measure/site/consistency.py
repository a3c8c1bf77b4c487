"""One quantity, one story: the figures that several datasets of an environment hold for the same quantity
(measure/quantities.py) must agree within their spread, or the claims citing them render 未确认."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from measure.quantities import QUANTITIES, Member, Quantity
from measure.schema import UnknownName
from measure.store import Store


@dataclass(frozen=True)
class Reading:
    dataset: str
    value: float
    low: float  # the slowest/fastest repeat where the dataset records them, else the value itself
    high: float
    # the row's key columns the quantity does not group by, (column, value): what tells two readings of one
    # dataset apart (the processor cache at 4 GiB and at 0)
    condition: tuple = ()


@dataclass(frozen=True)
class Verdict:
    quantity: Quantity
    env: str
    group: tuple  # the values of quantity.by
    readings: tuple[Reading, ...]
    machine: tuple = ()  # what every reading ran on (machine_of): figures from different machines are not compared

    @property
    def spread(self) -> float:
        """How far apart the figures are: largest / smallest - 1."""
        values = [r.value for r in self.readings]
        return max(values) / min(values) - 1 if min(values) > 0 else math.inf

    @property
    def overlap(self) -> bool:
        """The ranges overlap: a figure's recorded range (its slowest to fastest repeat) where it has one, else
        the figure ± ``rel_tol``. Two recorded ranges get no tolerance: apart, they differ by more than the
        repeats of either did (a warm-up, another run's conditions), and the reader is told so."""
        tol = 1 + self.quantity.rel_tol
        ranged = [r.low != r.high for r in self.readings]
        lows = [r.low if has else r.value / tol for r, has in zip(self.readings, ranged, strict=True)]
        highs = [r.high if has else r.value * tol for r, has in zip(self.readings, ranged, strict=True)]
        return max(lows) <= min(highs)

    @property
    def agree(self) -> bool:
        """The ranges overlap and the medians lie within ``rel_tol`` of each other: overlapping ranges alone may
        only mean that the repeats spread too widely to tell (``too_wide``)."""
        return self.overlap and self.spread <= self.quantity.rel_tol

    @property
    def too_wide(self) -> bool:
        """The ranges overlap but the medians lie further apart than ``rel_tol``: the repeats cannot tell."""
        return self.overlap and not self.agree

    def describe(self) -> str:
        by = ", ".join(f"{k}={v}" for k, v in zip(self.quantity.by, self.group, strict=True))
        figures = "; ".join(f"{r.dataset} {r.value:,.0f}" + (f" ({r.low:,.0f}–{r.high:,.0f})" if r.low != r.high else "")
                            for r in self.readings)
        return (f"{self.quantity.name} in {self.env} [{by}]: {figures} → {self.spread:.0%} apart, "
                + ("agree" if self.agree else "TOO WIDE TO TELL: their claims render 未确认" if self.too_wide
                   else "DISAGREE: their claims render 未确认"))


def machine_of(env, dataset: str) -> tuple:
    """The machine a dataset was measured on, as far as it sets the figures: the GPUs' names, or on a CPU-only run
    the CPU's name and the vector extensions vLLM's CPU kernels depend on (an EPYC without AVX-512 embedded several
    times slower than one with it). Datasets published before they kept their own hardware read the environment's."""
    hw = env.dataset_provenance(dataset).get("hardware") or env.provenance.get("hardware") or {}
    if hw.get("gpus"):
        return tuple(str(g.get("name")) for g in hw["gpus"])
    return (hw.get("cpu"), *(hw.get("cpu_extensions") or ()))


def _matches(member: Member, row) -> bool:
    for column, wanted in member.where.items():
        options = wanted if isinstance(wanted, tuple) else (wanted,)
        if row[column] not in options:
            return False
    return True


class Consistency:
    def __init__(self, store: Store, quantities: tuple[Quantity, ...] = QUANTITIES):
        self.store = store
        self.quantities = quantities
        self._validate()

    def _validate(self) -> None:
        """A declaration naming a dataset, column or selector value nothing has is a typo: fail, don't skip."""
        for q in self.quantities:
            for m in q.members:
                schema = self.store.schema(m.dataset)
                for column in (m.column, *m.where, *m.group_columns(q.by)):
                    schema.column(column)
                if self.store.partial:
                    continue
                frames = [self.store.frame(e, m.dataset) for e in self.store.sources(m.dataset, cited=False)]
                for column, wanted in m.where.items():
                    seen = set(pd.concat([f[column] for f in frames]).dropna()) if frames else set()
                    options = wanted if isinstance(wanted, tuple) else (wanted,)
                    if frames and not seen & set(options):
                        raise UnknownName(f"measure/quantities.py: quantity {q.name!r}, member {m.dataset}: "
                                          f"{column}={wanted!r} occurs in no environment's data")

    @cached_property
    def verdicts(self) -> list[Verdict]:
        """Every (quantity, environment, group) that at least two readings share."""
        found = []
        for q in self.quantities:
            for env in self.store.environments:
                if env.cited:
                    continue
                groups: dict[tuple, list[Reading]] = {}  # (machine, group) -> readings
                for m in q.members:
                    if not env.has(m.dataset):
                        continue
                    machine = machine_of(env, m.dataset)
                    frame = self.store.frame(env, m.dataset)
                    grouped = m.group_columns(q.by)
                    own_key = [k for k in self.store.schema(m.dataset).key if k not in grouped]
                    stem = m.column[: -len("_value")] if m.column.endswith("_value") else m.column  # base_value: base_min
                    has_range = {f"{stem}_min", f"{stem}_max"} <= set(frame.columns)
                    for _, row in frame.iterrows():
                        if not _matches(m, row) or pd.isna(row[m.column]):
                            continue
                        value = float(row[m.column])
                        low, high = value, value
                        if has_range and not pd.isna(row[f"{stem}_min"]) and not pd.isna(row[f"{stem}_max"]):
                            low, high = float(row[f"{stem}_min"]), float(row[f"{stem}_max"])
                        condition = tuple((k, row[k].item() if hasattr(row[k], "item") else row[k]) for k in own_key)
                        groups.setdefault((machine, tuple(row[c] for c in grouped)), []).append(
                            Reading(m.dataset, value, low, high, condition))
                found += [Verdict(q, env.name, group, tuple(r), machine)
                          for (machine, group), r in groups.items() if len(r) > 1]
        return found

    def for_figure(self, env: str, dataset: str, column: str, row) -> Verdict | None:
        """The verdict on the quantity that this row's figure belongs to, if any quantity declares it."""
        env_obj = self.store.env(env)
        machine = machine_of(env_obj, dataset) if env_obj is not None else ()
        for v in self.verdicts:
            if v.env != env or v.machine != machine:
                continue
            for m in v.quantity.members:
                if (m.dataset == dataset and m.column == column and _matches(m, row)
                        and tuple(row[c] for c in m.group_columns(v.quantity.by)) == v.group):
                    return v
        return None


def consistency_for(store: Store) -> Consistency:
    """One check per store (the build renders every page against the same one)."""
    return store.check(Consistency)
