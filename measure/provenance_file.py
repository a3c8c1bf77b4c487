"""Reading ``provenance.json`` as strictly as a CSV cell: its size, encoding, JSON (no duplicate keys, no NaN or
Infinity), every field's type and name (an unknown key is an error), and every string free of characters that reorder
or hide text. Each error names the file and the field's path (``servers.NAME.command.2``), never a page."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from measure.schema import SchemaError, excerpt, invisible_character

# The largest provenance.json ever written is ~0.2 MB (every server's command of a whole CPU run); 4 MiB leaves room
# for years of servers and refuses a file no harness wrote.
MAX_BYTES = 4 << 20


class _Strict(BaseModel):
    """Fields as the harness writes them; a key it never writes is an error (a typo, or a hand edit)."""

    model_config = ConfigDict(strict=True, extra="forbid")


class _Gpu(_Strict):
    name: str
    driver: str | None = None
    memory_mib: int | None = None


class _Hardware(_Strict):
    host: str | None = None
    platform: str | None = None
    machine: str | None = None
    cpu: str | None = None
    cpu_count: int | None = None
    cpu_extensions: list[str] | None = None
    memory_gib: float | None = None
    gpus: list[_Gpu] = []
    gpu_topology: str | dict[str, str] | list[str] | None = None
    # attach mode: the server runs elsewhere
    attached: bool | None = None
    servers: dict[str, str] | None = None
    client: dict[str, str | int | None] | None = None


class _Software(_Strict):
    vllm: str | None = None
    torch: str | None = None
    cuda: str | None = None
    python: str | None = None
    transformers: str | None = None
    attached: bool | None = None
    client_python: str | None = None


class _Server(_Strict):
    model: str | None = None
    model_path: str | None = None
    architecture: str | None = None
    weights: str | None = None
    command: list[str] | str | None = None  # attach mode writes a sentence: the user's flags are not known
    env: dict[str, str] | None = None
    vllm: str | None = None
    startup: dict[str, float | int | str | None] | None = None
    startup_s: float | None = None
    started_together: int | None = None
    started: bool | None = None
    error: str | None = None


class _Dataset(_Strict):
    experiment: str | None = None
    servers: list[str] = []
    date: str | None = None
    code_revision: str | None = None
    software: _Software | None = None
    hardware: _Hardware | None = None
    section: str | None = None


class _ServerStart(_Strict):
    experiment: str | None = None
    server: str
    started: bool | None = None  # whether this start came up
    started_together: int | None = None
    startup_s: float | None = None


class _Resumed(_Strict):
    started: str | None = None
    code_revision: str | None = None
    host: str | None = None


class _CarriedOver(_Strict):
    fingerprint_then: str
    how: str


class _Experiment(_Strict):
    date: str | None = None
    code_revision: str | None = None
    fingerprint: str | None = None
    plan: dict[str, str | int | dict[str, int] | None] | None = None
    datasets: list[str] | None = None
    wall_s: float | None = None
    server_starts: list[_ServerStart] | None = None
    software: _Software | None = None
    partial: str | None = None
    sizes_override: dict | None = None
    resumed_from: _Resumed | None = None
    carried_over: _CarriedOver | None = None
    stale: str | None = None


class _Citation(_Strict):
    title: str | None = None
    date: str | None = None
    file: str | None = None
    hardware: str | None = None
    note: str | None = None


class _Provenance(_Strict):
    """What ``provenance.json`` holds (measure/harness/provenance.py writes it; a cited one is written by hand)."""

    source: str
    date: str
    label: dict[str, str]
    citation: _Citation | None = None
    hardware: _Hardware | None = None
    software: _Software | None = None
    code_revision: str | None = None
    profile: str | None = None
    servers: dict[str, _Server] = {}
    datasets: dict[str, _Dataset] = {}
    experiments: dict[str, _Experiment] = {}


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise SchemaError(f"the key {excerpt(key)} appears twice in one object")
        seen[key] = value
    return seen


def _no_constant(name: str):
    raise SchemaError(f"{name} is no JSON number (a browser cannot parse the file); no measurement gives it")


def _leaves(value, path: str = ""):
    """(path, item) for every key and every value below ``value``, depth first."""
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            yield sub, key
            yield sub, item
            yield from _leaves(item, sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield f"{path}.{i}", item
            yield from _leaves(item, f"{path}.{i}")


def read_provenance(path: Path) -> dict:
    """``path`` (a provenance.json) parsed and checked; SchemaError naming the file and field otherwise."""
    if path.is_symlink():
        raise SchemaError(f"{path}: a symbolic link; data/ holds plain files (a link is not followed out of it)")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SchemaError(f"{path}: {size:,} bytes; a provenance file holds at most {MAX_BYTES:,}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SchemaError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        prov = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None
    validate_provenance(prov, path)
    return prov


def validate_provenance(prov, where: Path) -> None:
    """Types, names, characters and the rules between fields of a parsed provenance file."""
    if not isinstance(prov, dict):
        raise SchemaError(f"{where}: a provenance file holds one JSON object, not {type(prov).__name__}")
    try:
        _Provenance.model_validate(prov)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        got = first.get("input")
        shown = f", got {excerpt(got if isinstance(got, str) else json.dumps(got)[:200])}" \
            if first["type"] not in ("extra_forbidden", "missing") else ""
        raise SchemaError(f"{where}: {field}: {first['msg']}{shown}{more}") from None
    for field, item in _leaves(prov):
        hidden = invisible_character(item) if isinstance(item, str) else None
        if hidden:
            raise SchemaError(f"{where}: {field}: holds {hidden}, a character that reorders or hides text; remove it")
        if isinstance(item, float) and not math.isfinite(item):  # 1e999 parses as infinity
            raise SchemaError(f"{where}: {field}: {item} is no finite number")
    if prov["source"] not in ("measured", "cited"):
        raise SchemaError(f"{where}: source: one of measured, cited, not {excerpt(prov['source'])}")
    if prov["source"] == "cited" and not prov.get("citation"):
        raise SchemaError(f"{where}: citation: a cited environment must say what it cites")
    if prov["source"] == "measured":
        for key in ("hardware", "software", "code_revision"):
            if key not in prov:
                raise SchemaError(f"{where}: {key}: measured provenance lacks it")
        known = set(prov.get("servers") or {})
        for name, record in sorted((prov.get("datasets") or {}).items()):
            unknown = [s for s in record.get("servers", []) if s not in known]
            if unknown:  # the commands behind those rows would be nowhere
                raise SchemaError(f"{where}: datasets.{name}.servers: names servers that 'servers' lacks: "
                                  f"{', '.join(excerpt(s) for s in unknown[:3])}; re-measure the dataset (its "
                                  "servers' commands are lost) or remove it")
