"""``rms export``: a window of the history streamed into Parquet in bounded row groups, with a
manifest, atomically. No Spark needed."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from history.export import ExportRequest, export
from history.options import UsageError, parse_window
from tests.integration.spark.history import SINCE, UNTIL, hand_history

pytestmark = pytest.mark.spark  # pyarrow, from the spark extra

IN_WINDOW = {m.message_id for m in hand_history().messages
             if m.message_id not in {"m16", "m17", "m20"}}


def _ids(directory: Path, column: str = "message_id") -> list[str]:
    return sorted(pq.read_table(directory).column(column).to_pylist())


@pytest.fixture(scope="module")
def spark_export(spark_hand_db: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "history"
    export(ExportRequest(spark_hand_db, out, parse_window(SINCE, UNTIL), batch_size=4,
                         rows_per_file=10))
    return out


def test_window_tables(spark_export: Path) -> None:
    assert _ids(spark_export / "messages") == sorted(IN_WINDOW)
    assert set(_ids(spark_export / "events")) == IN_WINDOW - {"m15"}  # m15 has no events
    # open: created before --until, pending-send, sent or dead (m16 and m20 predate --since)
    assert _ids(spark_export / "open") == ["m13", "m14", "m16", "m18", "m20", "m6", "m7",
                                           "m8", "m9"]


def test_streams_in_bounded_row_groups_and_files(spark_export: Path) -> None:
    files = sorted((spark_export / "events").iterdir())
    assert len(files) > 3
    for file in files:
        metadata = pq.ParquetFile(file).metadata
        assert metadata.num_rows <= 12  # a new file once one holds 10 rows: 3 batches of 4
        assert all(metadata.row_group(i).num_rows <= 4 for i in range(metadata.num_row_groups))


def test_manifest_and_columns(spark_export: Path) -> None:
    manifest = json.loads((spark_export / "_export.json").read_text())
    assert (manifest["since"], manifest["until"]) == (SINCE, UNTIL)
    assert manifest["exported_at"].endswith("Z")
    assert manifest["tables"]["messages"]["rows"] == len(IN_WINDOW)
    assert manifest["tables"]["events"]["files"] == sorted(
        p.name for p in (spark_export / "events").iterdir())
    messages = pq.read_table(spark_export / "messages")
    assert "claim_token" not in messages.column_names
    assert messages.schema.field("created_at").type.tz == "UTC"
    assert set(messages.column("payload").to_pylist()) == {"{}"}
    details = pq.read_table(spark_export / "events").column("detail").to_pylist()
    assert {"by": "check-back"} in [json.loads(d) for d in details]


def test_refuses_a_non_empty_destination_unless_overwriting(spark_hand_db: str,
                                                            tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("precious")
    request = ExportRequest(spark_hand_db, tmp_path / "out", parse_window(SINCE, UNTIL))
    with pytest.raises(UsageError, match="not empty"):
        export(request)
    assert (tmp_path / "out" / "keep.txt").exists()
    export(ExportRequest(spark_hand_db, tmp_path / "out", parse_window(SINCE, UNTIL),
                         overwrite=True))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "_export.json", "events", "messages", "open"]


def test_failure_leaves_nothing_behind(tmp_path: Path) -> None:
    from rms.devstack.embedded import free_port

    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    with pytest.raises(OSError):
        export(ExportRequest(url, tmp_path / "out"))
    assert list(tmp_path.iterdir()) == []


def test_empty_window_writes_schema_only_files(spark_hand_db: str, tmp_path: Path) -> None:
    result = export(ExportRequest(spark_hand_db, tmp_path / "out",
                                  parse_window("2030-01-01", "2030-01-02")))
    assert result.rows["messages"] == 0 and result.rows["events"] == 0
    table = pq.read_table(tmp_path / "out" / "messages")
    assert table.num_rows == 0 and "created_at" in table.column_names
    assert result.rows["open"] == 10  # everything open created before 2030, m17 included
