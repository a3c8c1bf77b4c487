"""Staging and promotion: rows land in ``data/.staging/<env>/`` as they are measured; a finished
experiment's datasets are moved into ``data/<env>/`` with a rename, so published data is never
half-written and an interrupted run keeps every row it finished.

Beside the rows, ``run.json`` records what they were measured on and with (hardware, software, the
experiments' fingerprints, each server's command): a run interrupted on a machine that is then gone
(a device lease ending) can be carried to the next machine of the same kind and resumed there, and
its provenance still names the servers behind the earlier rows."""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from pathlib import Path

from measure.schema import DatasetSchema, SchemaError
from measure.store import PROVENANCE_FILE

RUN_FILE = "run.json"


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.replace(tmp, path)


class Staging:
    def __init__(self, data_root: Path, env_name: str):
        self.data_root = data_root
        self.env_name = env_name
        self.dir = data_root / ".staging" / env_name
        self.published = data_root / env_name

    def csv_path(self, schema: DatasetSchema) -> Path:
        return self.dir / schema.file_name

    def rows(self, schema: DatasetSchema) -> list[dict]:
        path = self.csv_path(schema)
        if not path.is_file():
            return []
        try:
            return schema.read(path, repeated_keys="last").to_dict("records")
        except SchemaError as exc:  # --resume again would meet it again: say what does work
            raise SchemaError(f"staged rows cannot be read: {exc}. Remove that line from the staged file (the row "
                              "is measured again) or discard every staged row with --fresh") from None

    def drop_torn_rows(self) -> list[str]:
        """Cut each staged file back to its last complete line: a run killed while appending a row left part of it
        (rows are written a line at a time, so only the last can be torn). Returns what was dropped, in words."""
        notes = []
        for path in self.staged_files():
            data = path.read_bytes()
            if not data or data.endswith(b"\n"):
                continue
            keep = data.rfind(b"\n") + 1
            if keep == 0:  # not even the header is whole: nothing staged in it
                path.unlink()
                notes.append(f"{path}: removed (a torn header, no rows)")
                continue
            with open(path, "r+b") as fh:
                fh.truncate(keep)
            line = data[:keep].count(b"\n") + 1
            notes.append(f"{path}:{line}: dropped a torn last row ({len(data) - keep} bytes written before the run was "
                         "cut short); it is measured again")
        return notes

    def staged_files(self) -> list[Path]:
        return sorted(self.dir.glob("*.csv")) if self.dir.is_dir() else []

    def append(self, schema: DatasetSchema, row: dict) -> None:
        cells = schema.row_to_cells(row)
        path = self.csv_path(schema)
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        with open(path, "a", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            if new:
                writer.writerow(schema.header)
            writer.writerow(cells)
            fh.flush()
            os.fsync(fh.fileno())

    def run_record(self) -> dict | None:
        path = self.dir / RUN_FILE
        return json.loads(path.read_text()) if path.is_file() else None

    def save_run(self, record: dict) -> None:
        atomic_write(self.dir / RUN_FILE, json.dumps(record, indent=2, ensure_ascii=False, sort_keys=True) + "\n")

    def note(self, section: str, key: str, value) -> None:
        """Add ``value`` under ``section``/``key`` of run.json (a server's record, a dataset's servers)."""
        record = self.run_record()
        if record is not None:
            record.setdefault(section, {})[key] = value
            self.save_run(record)

    def finish(self) -> None:
        """A run that promoted everything it measured leaves no staging behind."""
        if not self.staged_files():
            (self.dir / RUN_FILE).unlink(missing_ok=True)
            if self.dir.is_dir() and not any(self.dir.iterdir()):
                self.dir.rmdir()

    def discard(self) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir)

    def promote(self, schemas: list[DatasetSchema], provenance_update, merge_by_key: tuple[str, ...] = ()) -> list[str]:
        """Move the staged CSVs of ``schemas`` into the published folder and update provenance.

        ``provenance_update(current, promoted_names)`` returns the new provenance dict.

        A dataset named in ``merge_by_key`` keeps published rows whose key this run did not measure
        (the start-up facts of servers other experiments started); every other dataset is replaced.
        """
        # Every file is read and checked before any is written: a promotion that fails leaves the staged rows
        # and the published data as they were (a first try wrote some datasets, then failed on the next).
        writes, promoted = [], []
        for schema in schemas:
            staged = self.csv_path(schema)
            if not staged.is_file():
                continue
            target = self.published / schema.file_name
            if schema.name in merge_by_key:
                # Last row per key wins: a resumed run may have started the same server twice.
                fresh = {schema.row_key(r): r for r in schema.read(staged, repeated_keys="last").to_dict("records")}
                old = schema.read(target, measured_on=self.published_date(schema.name)).to_dict("records") \
                    if target.is_file() else []
                kept = [r for r in old if schema.row_key(r) not in fresh]
                writes.append((staged, target, _csv_text(schema, kept + list(fresh.values()))))
            else:
                writes.append((staged, target, one_row_per_key_text(schema, staged)))
            promoted.append(schema.name)
        self.published.mkdir(parents=True, exist_ok=True)
        for staged, target, text in writes:
            atomic_write(target, text)
            staged.unlink()
        updated = provenance_update(self.published_provenance(), promoted)
        atomic_write(self.published / PROVENANCE_FILE, json.dumps(updated, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
        if self.dir.is_dir() and not any(self.dir.iterdir()):
            self.dir.rmdir()
        return promoted

    def published_provenance(self) -> dict:
        path = self.published / PROVENANCE_FILE
        return json.loads(path.read_text()) if path.is_file() else {}

    def published_date(self, dataset: str) -> str:
        """When the published ``dataset`` was measured (its rows may predate columns added since)."""
        prov = self.published_provenance()
        return ((prov.get("datasets") or {}).get(dataset) or {}).get("date") or prov.get("date", "")

    def keep_only(self, schema: DatasetSchema, keys: set[tuple]) -> None:
        """Drop the published rows of ``schema`` whose key is not in ``keys``."""
        target = self.published / schema.file_name
        if not target.is_file():
            return
        rows = schema.read(target).to_dict("records")
        kept = [r for r in rows if schema.row_key(r) in keys]
        if len(kept) != len(rows):
            atomic_write(target, _csv_text(schema, kept))


def one_row_per_key_text(schema: DatasetSchema, path: Path, measured_on: str = "") -> str:
    """A checked CSV's text to publish, one row per key: a resumed run that measured a row again staged it twice,
    and the newer one counts. The file's own bytes where it has no repeated key."""
    rows = schema.read(path, measured_on=measured_on, repeated_keys="last").to_dict("records")
    with open(path, newline="", encoding="utf-8") as fh:
        lines = sum(1 for cells in csv.reader(fh) if cells) - 1
    return path.read_text(encoding="utf-8") if len(rows) == lines else _csv_text(schema, rows)


def _csv_text(schema: DatasetSchema, rows: list[dict]) -> str:
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(schema.header)
    for row in rows:
        writer.writerow(schema.row_to_cells({k: (None if _isnan(v) else v) for k, v in row.items()}))
    return buf.getvalue()


def _isnan(v) -> bool:
    return isinstance(v, float) and v != v
