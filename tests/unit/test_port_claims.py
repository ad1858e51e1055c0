"""A port handed out is claimed machine-wide (rms/devstack/ports.py): nobody else gets it while
the claim is young; an old claim is taken over."""

from __future__ import annotations

from pathlib import Path

import pytest

from rms.devstack import ports


def test_a_claim_keeps_a_port_until_it_is_old(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "CLAIMS", tmp_path / "claims")
    assert ports.claim(40001, now=1000.0)
    assert not ports.claim(40001, now=1000.0 + ports.CLAIM_SECONDS - 1)
    assert ports.claim(40002, now=1000.0)  # another port is free to claim
    assert ports.claim(40001, now=1000.0 + ports.CLAIM_SECONDS + 1)  # taken over
    assert not ports.claim(40001, now=1000.0 + ports.CLAIM_SECONDS + 2)
