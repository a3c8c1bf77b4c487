import json

import pytest
from conftest import REPO

from measure.schema import Column, DatasetSchema, SchemaError, UnknownName
from measure.store import select

SCHEMA = DatasetSchema(
    name="demo.points",
    title={"zh": "演示", "en": "demo"},
    key=("n",),
    columns=(Column("n", "int"), Column("rate", "float", "tok/s"), Column("note", "str", nullable=True)),
)


def write(tmp_path, text):
    path = tmp_path / "demo.points.csv"
    path.write_text(text)
    return path


def test_valid_file_reads_typed_values(tmp_path):
    frame = SCHEMA.read(write(tmp_path, "n,rate,note\n1,2.5,\n4,10.0,ok\n"))
    assert list(frame["n"]) == [1, 4]
    assert frame["rate"].iloc[1] == 10.0
    assert frame["note"].isna().iloc[0] and frame["note"].iloc[1] == "ok"


def test_bad_cell_names_file_line_and_column(tmp_path):
    path = write(tmp_path, "n,rate,note\n1,2.5,\n2,fast,\n")
    with pytest.raises(SchemaError) as err:
        SCHEMA.read(path)
    message = str(err.value)
    assert f"{path}:3" in message and "'rate'" in message and '"fast"' in message


def test_empty_cell_in_required_column_fails(tmp_path):
    with pytest.raises(SchemaError, match=r":2: column 'rate'"):
        SCHEMA.read(write(tmp_path, "n,rate,note\n1,,\n"))


def test_header_mismatch_fails_with_expected_order(tmp_path):
    with pytest.raises(SchemaError, match=r':1: header .*undeclared: "speed"; expected order: n,rate,note'):
        SCHEMA.read(write(tmp_path, "n,speed,note\n1,2,\n"))
    with pytest.raises(SchemaError, match=r":1: column 'note' is missing; it was not added after data were published"):
        SCHEMA.read(write(tmp_path, "n,rate\n1,2\n"))  # a nullable column may be absent only from older data


def test_a_column_added_later_in_a_day_may_be_absent_from_that_morning_s_data(tmp_path, monkeypatch):
    from measure import schema

    monkeypatch.setitem(schema.COLUMNS_ADDED, "demo.points", {"note": "2026-12-04T23:10"})
    path = write(tmp_path, "n,rate\n1,2\n")
    frame = SCHEMA.read(path, measured_on="2026-12-04T09:28:59+0000")
    assert list(frame.columns) == ["n", "rate", "note"] and frame["note"].isna().all()
    with pytest.raises(SchemaError, match=r"measured on 2026-12-04T23:30, not before the column was added"):
        SCHEMA.read(path, measured_on="2026-12-04T23:30:00+0000")


def test_row_round_trip_and_undeclared_column():
    assert SCHEMA.row_to_cells({"n": 3, "rate": 1.5}) == ["3", "1.5", ""]
    with pytest.raises(SchemaError, match="undeclared"):
        SCHEMA.row_to_cells({"n": 3, "rate": 1.5, "oops": 1})
    with pytest.raises(SchemaError, match="not nullable"):
        SCHEMA.row_to_cells({"n": 3})


def test_unknown_column_is_a_loud_error():
    with pytest.raises(UnknownName, match="no column 'rat'"):
        SCHEMA.column("rat")


def test_store_separates_measured_and_cited(store):
    names = [e.name for e in store.environments]
    assert names == ["fixture-cpu", "fixture-article"]  # measured sorts before cited
    assert [e.name for e in store.sources("pooling.embedding_throughput", cited=True)] == ["fixture-article"]
    frame = store.frame(store.env("fixture-cpu"), "pooling.embedding_throughput")
    assert len(select(frame, store.schema("pooling.embedding_throughput"), {"batch_size": 4})) == 2


def test_unknown_dataset_suggests_siblings(store):
    with pytest.raises(UnknownName, match="pooling.embedding_throughput"):
        store.schema("pooling.embeding_throughput")


def test_csv_without_schema_is_rejected(fixture_root):
    from measure.site.scan import make_store

    (fixture_root / "fixture-cpu" / "pooling.unknown.csv").write_text("a\n1\n")
    with pytest.raises(SchemaError, match='no schema declares dataset "pooling.unknown"'):
        _ = make_store(fixture_root).environments


def test_cited_environment_must_cite(fixture_root):
    from measure.site.scan import make_store

    prov = fixture_root / "fixture-article" / "provenance.json"
    record = json.loads(prov.read_text())
    record.pop("citation")
    prov.write_text(json.dumps(record))
    with pytest.raises(SchemaError, match="must say what it cites"):
        _ = make_store(fixture_root).environments


def test_every_committed_dataset_validates():
    from measure.site.scan import make_store

    assert make_store().validate_all() > 0


@pytest.mark.parametrize("cell, why", [("inf", "not a number as this data is written"),
                                       ("-inf", "not a number as this data is written"),
                                       ("-5.0", "negative, but a quantity in tok/s cannot be")])
def test_non_finite_or_impossible_values_fail_naming_the_cell(tmp_path, cell, why):
    """`inf` once passed the build and then no chart on the page drew (JSON.parse refuses Infinity); a negative
    throughput passed silently."""
    path = write(tmp_path, f"n,rate,note\n1,2.5,\n2,{cell},\n")
    with pytest.raises(SchemaError, match=why) as err:
        SCHEMA.read(path)
    assert f"{path}:3:2: column 'rate'" in str(err.value)


def test_a_file_cut_to_its_header_fails(tmp_path):
    """A CSV cut to its header once rendered every figure of its dataset as 未实测 without a word."""
    path = write(tmp_path, "n,rate,note\n")
    with pytest.raises(SchemaError, match="a header and no rows") as err:
        SCHEMA.read(path)
    assert f"{path}:2" in str(err.value)


def test_malformed_provenance_is_named_with_line_and_column(fixture_root):
    """It was never named, and the page scanner's wrapper raised a TypeError of its own."""
    from measure.site.scan import make_store, scan_pages

    prov = fixture_root / "fixture-cpu" / "provenance.json"
    prov.write_text('{"source": "measured",\n  "date": }\n')
    with pytest.raises(SchemaError, match=rf"{prov}:2:\d+: not valid JSON"):
        list(make_store(fixture_root).environments)
    with pytest.raises(SchemaError, match=r"\.md: .*provenance\.json:2:"):
        scan_pages(store=make_store(fixture_root))


@pytest.mark.site
def test_a_failed_build_leaves_no_stale_site(fixture_root, tmp_path):
    from conftest import build_site

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<p>an earlier, complete-looking build</p>")
    (fixture_root / "fixture-cpu" / "pooling.embedding_throughput.csv").write_text(
        "model,weights,batch_size,encoding_format,tokens_per_input,tokens_per_s,latency_ms,repeats,warmup,client_cpu_share\n")
    result = build_site(fixture_root, site, check=False)
    assert result.returncode != 0 and "a header and no rows" in result.stdout + result.stderr
    assert not (site / "index.html").exists()


def test_a_dataset_naming_a_server_provenance_lacks_fails(fixture_root):
    """data/gpu-1x-nvidia-h200 once published multimodal.size_hint_gain with 7 servers that its provenance did not
    hold: the commands behind those rows were nowhere."""
    import json

    from measure.site.scan import make_store

    prov_path = fixture_root / "fixture-cpu" / "provenance.json"
    prov = json.loads(prov_path.read_text())
    prov["datasets"]["pooling.embedding_throughput"]["servers"].append("vl-size hints-gone-33422f")
    prov_path.write_text(json.dumps(prov))
    with pytest.raises(SchemaError, match="names servers that 'servers' lacks: \"vl-size hints-gone-33422f\""):
        list(make_store(fixture_root).environments)


def test_committed_data_names_no_path_of_the_machine_that_measured_it():
    """Provenance once held the checkout's absolute path, temporary clones and the interpreter's location: they say
    nothing about the measurement and differ on every machine. Commands keep <repo>, python and <site-packages>/."""
    import re

    local = re.compile(r"(?<![\w<])/(?:work|tmp|home|opt|root|usr|Users|var)/[^\s\",\]]*")
    found = {str(p.relative_to(REPO)): sorted(set(local.findall(p.read_text())))[:3]
             for p in (REPO / "data").glob("*/*") if p.suffix in (".json", ".csv")}
    assert not {k: v for k, v in found.items() if v}


def test_portable_text_drops_the_checkout_the_interpreter_and_site_packages():
    import sys

    from measure.harness.server import REPO_ROOT, portable

    text = f"{sys.executable} -m vllm --model {REPO_ROOT}/.cache/models/x --chat-template /opt/v/lib/python3.12/site-packages/m/t.jinja"
    assert portable(text) == "python -m vllm --model <repo>/.cache/models/x --chat-template <site-packages>/m/t.jinja"
    assert portable("/opt/torch/.venv/bin/python3 -m vllm", python="/opt/torch/.venv/bin/python3") == "python -m vllm"


def test_portable_text_drops_a_package_folder_on_pythonpath(monkeypatch):
    from measure.harness.server import portable

    # the offline GPU bundle: `pip install --target /tmp/vllm-bundle/site`, then PYTHONPATH=/tmp/vllm-bundle/site
    monkeypatch.setenv("PYTHONPATH", "/tmp/vllm-bundle/site/:/")
    text = "--chat-template /tmp/vllm-bundle/site/vllm/t.jinja --model /tmp/vllm-bundle/sitex/m"
    assert portable(text) == "--chat-template <site-packages>/vllm/t.jinja --model /tmp/vllm-bundle/sitex/m"
