"""``rms dead``: the operator CLI against the API (in process), its output, its exit codes."""

from __future__ import annotations

import argparse
import io

import orjson
import pytest

from recovery_service import dead_cli
from rms.cli import main
from tests.integration.redelivery.helpers import SqlHelper, events, message
from tests.support import Api


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rms dead")
    dead_cli.configure(parser)
    return parser.parse_args(["--token", "test-admin-token", "--operator", "dana", *argv])


async def _rms_dead(api: Api, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await dead_cli.execute(_parse(*argv), api.client, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
async def dead(api: Api, sql: SqlHelper, unique: str) -> dict[str, list[str]]:
    await api.create_app("shop")
    alpha, beta = f"alpha.{unique}", f"beta.{unique}"
    found = {"alpha": await sql.seed_sent("shop", alpha, 3, prefix="a"),
             "beta": await sql.seed_sent("shop", beta, 2, prefix="b")}
    await sql.make_dead(found["alpha"] + found["beta"])
    found["pending"] = [await api.prepared_id(api.apps["shop"], alpha, message_id="p-1")]
    await sql.make_dead(found["pending"], reason="check-exhausted")
    found["topics"] = [alpha, beta]
    return found


async def test_list_as_table_and_json_with_filters(api: Api, dead: dict[str, list[str]]) -> None:
    code, out, _ = await _rms_dead(api, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == list(dead_cli.COLUMNS)
    assert [line.split()[0] for line in lines[1:-1]] == (
        dead["alpha"] + dead["beta"] + dead["pending"])
    assert lines[-1] == "6 dead letters"

    code, out, _ = await _rms_dead(api, "list", "--json", "--reason", "check-exhausted")
    assert [m["message_id"] for m in orjson.loads(out)] == dead["pending"]
    code, out, _ = await _rms_dead(api, "list", "--json", "--topic", dead["topics"][1],
                                   "--limit", "1")
    assert [m["message_id"] for m in orjson.loads(out)] == dead["beta"][:1]


async def test_resend_by_id_reports_each_failure_and_records_the_operator(
        api: Api, dead: dict[str, list[str]]) -> None:
    first = dead["alpha"][0]
    code, out, err = await _rms_dead(api, "resend", "--dry-run", "--id", first)
    assert (code, out.strip()) == (0, f"would resend {first} (delivery 2)")
    assert (await message(api, first))["dead"] is True

    code, out, err = await _rms_dead(api, "resend", "--id", first, "no-such-id")
    assert code == 1
    assert out.strip() == f"resent {first} (delivery 2)"
    assert "no-such-id" in err and "Not found (404)" in err
    assert (await message(api, first))["dead"] is False
    resent = [e for e in await events(api, first) if e["event"] == "resent"]
    assert [(e["actor"], e["detail"]) for e in resent] == [("admin:dana", {"delivery": 2})]


async def test_resend_all_with_dry_run_filters_and_limit(
        api: Api, dead: dict[str, list[str]]) -> None:
    alpha = dead["topics"][0]
    code, out, _ = await _rms_dead(api, "resend", "--all", "--dry-run")
    assert code == 0
    assert out.splitlines()[-1] == "5 messages would be resent (dry run: nothing changed)"
    code, out, _ = await _rms_dead(api, "resend", "--all", "--topic", alpha, "--limit", "2")
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()[:-1]] == dead["alpha"][:2]
    assert out.splitlines()[-1] == "2 messages resent"
    still_dead = [(await message(api, i))["dead"] for i in dead["alpha"] + dead["beta"]]
    assert still_dead == [False, False, True, True, True]


async def _owed_by_one_of_two(api: Api, sql: SqlHelper, topic: str) -> tuple[str, str]:
    """Two dead sent messages of ``topic``, which two consumer apps consume: ``points`` acked
    the first (``invoices`` still owes it) and neither acked the second."""
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    await api.create_app("invoices", produce=["none"], consume=[topic])
    ids = []
    for _ in range(2):
        message_id = await api.prepared_id(producer, topic)
        confirmed = await api.post(producer, f"/v1/messages/{message_id}/confirm")
        assert confirmed.status_code == 200, confirmed.text
        ids.append(message_id)
    await sql.make_dead(ids)
    acked = await api.post(points, f"/v1/messages/{ids[0]}/ack")
    assert acked.status_code == 200, acked.text
    return ids[0], ids[1]


async def test_list_and_resend_by_consumer_with_the_consumers_still_owing(
        api: Api, sql: SqlHelper, topic: str) -> None:
    one_owing, both_owing = await _owed_by_one_of_two(api, sql, topic)
    code, out, _ = await _rms_dead(api, "list", "--topic", topic)
    assert code == 0
    header, *rows, total = out.splitlines()
    column = header.split().index("consumers")
    assert {row.split()[0]: row.split()[column] for row in rows} == {
        one_owing: "invoices", both_owing: "invoices,points"}
    assert total == "2 dead letters"

    code, out, _ = await _rms_dead(api, "list", "--consumer", "points")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == [both_owing]
    code, out, _ = await _rms_dead(api, "list", "--json", "--consumer", "invoices")
    assert [m["message_id"] for m in orjson.loads(out)] == [one_owing, both_owing]

    code, out, _ = await _rms_dead(api, "resend", "--all", "--consumer", "points")
    assert code == 0
    assert out.splitlines() == [f"resent {both_owing} (orders {topic})", "1 message resent"]
    assert [(await message(api, i))["dead"] for i in (one_owing, both_owing)] == [True, False]


async def test_confirm_and_cancel_a_dead_pending_send(api: Api, sql: SqlHelper,
                                                      dead: dict[str, list[str]]) -> None:
    code, out, _ = await _rms_dead(api, "confirm", dead["pending"][0])
    assert (code, out.strip()) == (0, f"{dead['pending'][0]}: sent")
    assert (await events(api, dead["pending"][0]))[1]["actor"] == "admin:dana"
    code, _, err = await _rms_dead(api, "cancel", dead["pending"][0])
    assert code == 1
    assert "Illegal state transition (409)" in err and "'sent'" in err


async def test_stats(api: Api, dead: dict[str, list[str]]) -> None:
    code, out, _ = await _rms_dead(api, "stats")
    assert code == 0
    assert out.splitlines()[0].startswith("totals: pending-send=1, sent=5")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMS_ADMIN_TOKEN", "test-admin-token")
    for argv in (["dead", "resend"], ["dead", "resend", "--id", "x", "--all"],
                 ["dead", "resend", "--all", "--limit", "5000"], ["dead", "nothing"]):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2, argv
    monkeypatch.delenv("RMS_ADMIN_TOKEN")
    assert main(["dead", "list"]) == 2
    assert "RMS_ADMIN_TOKEN" in capsys.readouterr().err


def test_unreachable_api_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dead", "--url", "http://127.0.0.1:1", "--token", "t", "list"]) == 1
    assert "cannot reach RMS at http://127.0.0.1:1" in capsys.readouterr().err
