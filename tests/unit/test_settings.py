"""Each process reads its own settings: a worker reads only what every process shares, the API
reads all of them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rms.config import Settings, WorkerSettings


def test_the_api_reads_every_worker_setting() -> None:
    assert set(WorkerSettings.model_fields) < set(Settings.model_fields)


def test_a_worker_reads_none_of_the_api_only_settings() -> None:
    api_only = {"ack_consumer_enabled", "max_payload_bytes", "http_limit_concurrency",
                "max_pending_per_app", "report_dir"}
    assert api_only <= set(Settings.model_fields) - set(WorkerSettings.model_fields)


def test_only_the_api_needs_the_admin_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RMS_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("RMS_DEV_MODE", raising=False)
    assert "admin_token" not in WorkerSettings.model_fields
    WorkerSettings()  # a worker starts without it
    with pytest.raises(ValidationError, match="RMS_ADMIN_TOKEN is required"):
        Settings()
