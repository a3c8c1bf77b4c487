"""Adopt experiments measured elsewhere (an offline GPU host, several leases) into a local environment folder.

Each lease brings back a whole environment folder that started from the committed one; only some of its
experiments were measured there. ``adopt`` copies those experiments' datasets, their provenance (datasets,
servers with full commands, the experiment's entry) and their servers' start-up rows, and leaves the rest
of the local folder as it was, so several leases' results combine without losing anything.
"""

from __future__ import annotations

import json
from pathlib import Path

from measure.experiment import all_schemas
from measure.harness.provenance import STARTUP_DATASET, servers_in_use
from measure.harness.staging import _csv_text, atomic_write, one_row_per_key_text
from measure.store import PROVENANCE_FILE

# What a new environment folder takes from the first one returned (the rest comes with each adopted experiment)
ENVIRONMENT_FACTS = ("hardware", "label", "profile", "source")


class AdoptError(RuntimeError):
    pass


def _read(folder: Path) -> dict:
    path = folder / PROVENANCE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise AdoptError(f"{path}: no provenance; is {folder} an environment folder (data/<env>/)?") from None
    except json.JSONDecodeError as exc:
        raise AdoptError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None


def adopt(source: Path, target: Path, experiments: list[str]) -> list[str]:
    """Copy ``experiments`` from the environment folder ``source`` into ``target``; returns the datasets copied."""
    src = _read(source)
    # A machine's first lease: the environment starts here with what the returned one says of its machine.
    dst = _read(target) if (target / PROVENANCE_FILE).is_file() else {
        key: src[key] for key in ENVIRONMENT_FACTS if key in src} | {
        "datasets": {name: entry for name, entry in src.get("datasets", {}).items() if name == STARTUP_DATASET}}
    if src.get("hardware", {}).get("gpus") != dst.get("hardware", {}).get("gpus"):
        raise AdoptError(f"{source} was measured on other hardware than {target}: adopt only into the same environment")
    missing = [e for e in experiments if e not in src.get("experiments", {})]
    if missing:
        raise AdoptError(f"{source} has no measured experiment {', '.join(missing)} (it has: "
                         f"{', '.join(sorted(src.get('experiments', {})))})")
    absent = [f"{d}.csv" for e in experiments for d in src["experiments"][e]["datasets"] if not (source / f"{d}.csv").is_file()]
    if absent:  # checked before anything is written: a failed adoption leaves the local folder as it was
        raise AdoptError(f"{source}: {', '.join(absent)} listed in its {PROVENANCE_FILE} but missing")
    texts = {dataset: _published_text(source, dataset, src["datasets"][dataset].get("date") or src.get("date", ""))
             for e in experiments for dataset in src["experiments"][e]["datasets"]}  # every file checked first
    target.mkdir(parents=True, exist_ok=True)
    copied, servers = [], set()
    for name in experiments:
        entry = src["experiments"][name]
        for dataset in entry["datasets"]:
            atomic_write(target / f"{dataset}.csv", texts[dataset])
            dst.setdefault("datasets", {})[dataset] = src["datasets"][dataset]
            servers.update(src["datasets"][dataset].get("servers", []))
            copied.append(dataset)
        dst.setdefault("experiments", {})[name] = entry
    for server in servers:
        dst.setdefault("servers", {})[server] = src["servers"][server]
    # Top-level facts describe the newest measurement in the folder.
    if src.get("date", "") >= dst.get("date", ""):
        for field in ("date", "code_revision", "software"):
            if field in src:
                dst[field] = src[field]
    _adopt_startup_rows(source, target, dst, servers)
    atomic_write(target / PROVENANCE_FILE, json.dumps(dst, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    return copied


def _published_text(source: Path, dataset: str, measured_on: str) -> str:
    """The dataset's CSV as it is to be published here: checked against its schema, and with one row per key
    (a host whose resumed run measured a row twice promoted both before the harness kept only the newer)."""
    csv, schema = source / f"{dataset}.csv", all_schemas().get(dataset)
    if schema is None:
        raise AdoptError(f"{csv}: no dataset {dataset!r} is declared by any experiment in this code")
    return one_row_per_key_text(schema, csv, measured_on)


def _adopt_startup_rows(source: Path, target: Path, dst: dict, adopted: set[str]) -> None:
    """Provenance keeps the servers some dataset names (``servers_in_use``); the start-up table keeps their rows,
    the adopted servers' rows replacing the local ones of the same server."""
    from measure.experiment import STARTUP  # not at import time: measure.experiment imports the harness

    dst["servers"] = servers_in_use(dst)
    fresh = {}
    if (source / STARTUP.file_name).is_file():
        fresh = {r["server"]: r for r in STARTUP.read(source / STARTUP.file_name).to_dict("records")
                 if r["server"] in adopted}
    local = target / STARTUP.file_name
    old = STARTUP.read(local).to_dict("records") if local.is_file() else []
    rows = sorted((r for r in [*(r for r in old if r["server"] not in fresh), *fresh.values()]
                   if r["server"] in dst["servers"]), key=lambda r: r["server"])
    atomic_write(local, _csv_text(STARTUP, rows))
    entry = dst.setdefault("datasets", {}).setdefault(STARTUP_DATASET, {})
    entry["servers"] = [r["server"] for r in rows]
    entry.update({field: dst[field] for field in ("code_revision", "date") if field in dst})  # newest rows: adopted
