import pytest

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
    assert f"{path}:3" in message and "'rate'" in message and "'fast'" in message


def test_empty_cell_in_required_column_fails(tmp_path):
    with pytest.raises(SchemaError, match=r":2: column 'rate'"):
        SCHEMA.read(write(tmp_path, "n,rate,note\n1,,\n"))


def test_header_mismatch_fails_with_expected_order(tmp_path):
    with pytest.raises(SchemaError, match=r":1: header .*missing: \['note'\]"):
        SCHEMA.read(write(tmp_path, "n,rate\n1,2\n"))


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
    with pytest.raises(SchemaError, match="no schema declares dataset 'pooling.unknown'"):
        _ = make_store(fixture_root).environments


def test_cited_environment_must_cite(fixture_root):
    from measure.site.scan import make_store

    prov = fixture_root / "fixture-article" / "provenance.json"
    prov.write_text(prov.read_text().replace('"citation"', '"not_a_citation"'))
    with pytest.raises(SchemaError, match="must say what it cites"):
        _ = make_store(fixture_root).environments


def test_every_committed_dataset_validates():
    from measure.site.scan import make_store

    assert make_store().validate_all() > 0
