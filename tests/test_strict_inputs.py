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
    (lambda p: p["label"].update(en="Ours\u202e"), "U+202E"),
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
    assert f"{THROUGHPUT}.csv:2:{COLUMN['tokens_per_s'] + 1}: column 'tokens_per_s' (float): '1e308'" in output, output[-3000:]
    assert "InvalidOperation" not in output and "Traceback" not in output
