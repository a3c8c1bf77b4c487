"""Bad data fail loudly, naming file, line and column (or the provenance field): numbers by one strict grammar and
a plausible range, text without invisible reordering characters or absurd sizes, provenance by a declared model,
and a missing column only where the dataset predates it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, build_site

from measure.schema import SchemaError

CPU_ENV = "fixture-cpu"
THROUGHPUT = "pooling.embedding_throughput"
HEADER = "model,weights,batch_size,encoding_format,tokens_per_input,tokens_per_s,latency_ms,repeats,warmup,client_cpu_share"
GOOD_ROW = ["tiny-Qwen3-Embedding-0.6B", "dummy", "1", "float", "130.0", "4321.5", "30.1", "3", "1", "0.2"]
COLUMN = {name: i for i, name in enumerate(HEADER.split(","))}


def root_with_row(tmp_path: Path, **cells) -> Path:
    """A copy of the fixture data whose throughput table has one row, with ``cells`` replaced."""
    root = tmp_path / "data"
    shutil.copytree(FIXTURES / "data", root)
    row = list(GOOD_ROW)
    for name, text in cells.items():
        row[COLUMN[name]] = text
    (root / CPU_ENV / f"{THROUGHPUT}.csv").write_text(HEADER + "\n" + ",".join(row) + "\n", encoding="utf-8")
    return root


def read_all(root: Path) -> int:
    from measure.site.scan import make_store

    return make_store(root).validate_all()


def test_the_committed_and_fixture_data_pass_every_rule():
    assert read_all(REPO / "data") > 80 and read_all(FIXTURES / "data") == 3


@pytest.mark.parametrize("column, text, why", [
    ("tokens_per_s", "1e308", "outside this column's plausible range"),
    ("tokens_per_s", "inf", "not a number as this data is written"),
    ("tokens_per_s", "nan", "not a number as this data is written"),
    ("tokens_per_s", "2_00.5", "not a number as this data is written"),
    ("tokens_per_s", " 200", "not a number as this data is written"),
    ("tokens_per_s", "200 ", "not a number as this data is written"),
    ("tokens_per_s", "+200", "not a number as this data is written"),
    ("tokens_per_s", "\u0663\u0660\u0660", "not a number as this data is written"),  # Arabic-Indic digits
    ("repeats", "\uff13", "not a whole number as this data is written"),  # a fullwidth 3
    ("repeats", "-3", "negative, but this column holds a count"),
    ("batch_size", "10000000000000", "outside this column's plausible range"),
    ("latency_ms", "-0.5", "negative, but a quantity in ms cannot be"),
    ("client_cpu_share", "-1", "negative"),
    ("client_cpu_share", "99999", "outside this column's plausible range"),
    ("model", "tiny\u202eQwen", "U+202E, a character that reorders or hides text"),
    ("model", "tiny\u200bQwen", "U+200B, a character that reorders or hides text"),
    ("encoding_format", "x" * 100_000, "a text cell holds at most 65,536"),
])
def test_a_bad_cell_fails_naming_file_line_and_column(tmp_path, column, text, why):
    root = root_with_row(tmp_path, **{column: text})
    with pytest.raises(SchemaError) as failure:
        read_all(root)
    message = str(failure.value)
    where = f"{root / CPU_ENV / THROUGHPUT}.csv:2:{COLUMN[column] + 1}: column '{column}'"
    assert message.startswith(where) and why in message, message
    assert len(message) < 600, "an oversized cell is not echoed whole"


def test_a_cell_beyond_the_csv_modules_limit_names_the_file(tmp_path):
    root = root_with_row(tmp_path, model="x" * 10_000_000)  # 10 MB: csv's own field limit stops the read first
    with pytest.raises(SchemaError, match=re.escape(f"{THROUGHPUT}.csv:2: not readable as CSV (field larger than")):
        read_all(root)


def test_values_outside_the_range_are_not_written_either():
    from measure.experiment import all_schemas

    schema = all_schemas()[THROUGHPUT]
    row = dict(zip(HEADER.split(","), GOOD_ROW, strict=True)) | {"tokens_per_s": float("inf")}
    with pytest.raises(SchemaError, match="column 'tokens_per_s': inf: not a finite number"):
        schema.row_to_cells(row)
    with pytest.raises(SchemaError, match="negative"):
        schema.row_to_cells(row | {"tokens_per_s": 1.0, "latency_ms": -2.0})


def provenance_root(tmp_path: Path, change) -> tuple[Path, Path]:
    root = tmp_path / "data"
    shutil.copytree(FIXTURES / "data", root)
    path = root / CPU_ENV / "provenance.json"
    prov = json.loads(path.read_text())
    change(prov)
    path.write_text(json.dumps(prov))
    return root, path


@pytest.mark.parametrize("change, field", [
    (lambda p: p.update(label=[]), "label: Input should be a valid dictionary"),
    (lambda p: p.update(servers="x"), "servers: Input should be a valid dictionary"),
    (lambda p: p["servers"][next(iter(p["servers"]))].update(command=5), ".command"),
    (lambda p: p["datasets"][THROUGHPUT].update(servers="one"), f"datasets.{THROUGHPUT}.servers: Input should be a valid list"),
    (lambda p: p.pop("date"), "date: Field required"),
    (lambda p: p["label"].update(en="Ours\u202e"), "label.en: holds U+202E"),
    # any text a tooltip or the reproduce box shows, not only labels and commands
    (lambda p: p["hardware"].update(cpu="Intel\u202eXeon"), "hardware.cpu: holds U+202E"),
    (lambda p: p["servers"][next(iter(p["servers"]))].update(model="tiny\u2066Qwen"), ".model: holds U+2066"),
    (lambda p: p["hardware"].update(cpu=["a", "list"]), "hardware.cpu: Input should be a valid string"),
    (lambda p: p.update(colour="red"), "colour: Extra inputs are not permitted"),
    (lambda p: p.setdefault("experiments", {}).setdefault("pooling", {}).update(fingerprnt="x"),
     "experiments.pooling.fingerprnt: Extra inputs are not permitted"),
])
def test_provenance_of_the_wrong_shape_fails_naming_file_and_field(tmp_path, change, field):
    root, path = provenance_root(tmp_path, change)
    with pytest.raises(SchemaError) as failure:
        read_all(root)
    assert str(failure.value).startswith(f"{path}: ") and field in str(failure.value), str(failure.value)


def test_a_missing_column_passes_only_where_the_dataset_predates_it(tmp_path):
    # fixture-cpu's throughput table lacks tokens_per_s_min/_max, added 2026-12-01; it was measured 2026-11-29
    read_all(FIXTURES / "data")
    root, _ = provenance_root(tmp_path, lambda p: p["datasets"][THROUGHPUT].update(date="2026-12-02T10:00:00"))
    with pytest.raises(SchemaError, match=r"column 'tokens_per_s_min' is missing, but the dataset was measured on "
                                          r"2026-12-02, not before the column was added \(2026-12-01\)"):
        read_all(root)


def test_a_missing_column_never_added_later_fails_in_any_file(tmp_path):
    root = root_with_row(tmp_path)
    path = root / CPU_ENV / f"{THROUGHPUT}.csv"
    lines = path.read_text().splitlines()  # drop client_cpu_share, a column every file must have
    path.write_text("\n".join(line.rsplit(",", 1)[0] for line in lines) + "\n")
    with pytest.raises(SchemaError, match="client_cpu_share"):
        read_all(root)


def test_the_build_fails_with_the_file_line_and_column_of_a_bad_cell(tmp_path):
    root = root_with_row(tmp_path, tokens_per_s="1e308")
    result = build_site(root, tmp_path / "site", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"{THROUGHPUT}.csv:2:{COLUMN['tokens_per_s'] + 1}: column 'tokens_per_s' (float): \"1e308\"" in output, output[-3000:]
    assert "InvalidOperation" not in output and "Traceback" not in output


@pytest.mark.parametrize("text, why", [
    ('{"source": "measured", "source": "cited"}', 'the key "source" appears twice in one object'),
    ('{"source": "measured", "date": NaN}', "NaN is no JSON number"),
    ('{"source": "measured", "hardware": {"memory_gib": Infinity}}', "Infinity is no JSON number"),
])
def test_provenance_json_a_browser_could_not_read_alike_fails(tmp_path, text, why):
    root, path = provenance_root(tmp_path, lambda p: None)
    path.write_text(text)
    with pytest.raises(SchemaError, match=re.escape(f"{path}: {why}")):
        read_all(root)


def test_a_provenance_file_too_large_or_not_utf8_fails_naming_the_file(tmp_path):
    root, path = provenance_root(tmp_path, lambda p: p.update(label={"zh": "x" * (5 << 20), "en": "x"}))
    with pytest.raises(SchemaError, match=re.escape(f"{path}: ") + r"[\d,]+ bytes; a provenance file holds at most"):
        read_all(root)
    path.write_bytes(b'{"source": "measured", "label": {"en": "\xff"}}')
    with pytest.raises(SchemaError, match=re.escape(f"{path}:1: not UTF-8 (byte 0xff")):
        read_all(root)


def test_a_dataset_that_is_not_utf8_or_has_a_hostile_header_fails_briefly(tmp_path):
    root = root_with_row(tmp_path)
    csv_path = root / CPU_ENV / f"{THROUGHPUT}.csv"
    csv_path.write_bytes(csv_path.read_bytes() + b"\xfe\n")
    with pytest.raises(SchemaError, match=re.escape(f"{csv_path}:3: not UTF-8 (byte 0xfe")):
        read_all(root)
    csv_path.write_text(HEADER + ",<script>" + "x" * 10_000 + "</script>\n" + ",".join(GOOD_ROW) + ",1\n")
    with pytest.raises(SchemaError) as failure:
        read_all(root)
    assert "header does not match" in str(failure.value) and len(str(failure.value)) < 900
    assert "(10,017 characters)" in str(failure.value)


def test_a_link_under_data_is_an_error_naming_it_and_nothing_it_points_to_is_read(tmp_path):
    root = root_with_row(tmp_path)
    secret = tmp_path / "outside.csv"
    secret.write_text("root:x:0:0:secret line\n")
    csv_path = root / CPU_ENV / f"{THROUGHPUT}.csv"
    csv_path.unlink()
    csv_path.symlink_to(secret)
    with pytest.raises(SchemaError) as failure:
        read_all(root)
    assert str(failure.value).startswith(f"{csv_path}: a symbolic link") and "secret" not in str(failure.value)
    csv_path.unlink()
    shutil.copytree(FIXTURES / "data" / CPU_ENV, tmp_path / "elsewhere")
    (root / "linked-env").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SchemaError, match=re.escape(f"{root / 'linked-env'}: a symbolic link")):
        read_all(root)


def test_the_build_checks_and_publishes_every_data_file_and_nothing_else(tmp_path, monkeypatch):
    """A dataset no page reads is published too, so it is checked like the rest; files that are no declared
    dataset or provenance stay out of site/data."""
    from mkdocs.exceptions import PluginError

    from measure.site import hooks, scan

    root = root_with_row(tmp_path)
    # a dataset no page of this empty site reads, with a value no measurement gives
    (root / CPU_ENV / "capacity.bandwidth.csv").write_text(
        "device,buffer_mib,bandwidth_gb_s,threads,torch\ncpu,64,1e308,2,2.13.0\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    monkeypatch.setenv("MEASURE_DATA_ROOT", str(root))
    with pytest.raises(PluginError, match=re.escape("capacity.bandwidth.csv:2:3: column 'bandwidth_gb_s'")):
        hooks.on_pre_build({"docs_dir": str(docs)})
    (root / CPU_ENV / "capacity.bandwidth.csv").unlink()
    (root / CPU_ENV / "notes.txt").write_text("<script>alert(1)</script>")
    scan._site_store = None
    hooks.on_pre_build({"docs_dir": str(docs)})
    site = tmp_path / "site"
    hooks.copy_assets_and_data({"site_dir": str(site)})
    published = sorted(p.relative_to(site / "data").as_posix() for p in (site / "data").rglob("*") if p.is_file())
    assert f"{CPU_ENV}/notes.txt" not in published and f"{CPU_ENV}/{THROUGHPUT}.csv" in published
    assert all(p.endswith((".csv", "/provenance.json")) for p in published), published
