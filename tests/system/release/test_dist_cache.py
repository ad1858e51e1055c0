"""``make dist`` builds an artifact only when what goes into it changed (``release/cache.py``):
the key follows the contents of its folders and nothing else, and a cached artifact is copied
into ``dist/`` as it was built."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from release import cache


def _repository(root: Path) -> Path:
    for name, text in {"client/a.py": "a = 1\n", "client/b.py": "b = 2\n",
                       "server/c.py": "c = 3\n", "release/recipe.py": "steps = 1\n",
                       ".gitignore": "*.egg-info/\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    return root


def _fixed_key(key: str) -> Callable[..., str]:
    def key_of(*_: object) -> str:
        return key
    return key_of


def test_the_key_follows_the_inputs_and_nothing_else(tmp_path: Path) -> None:
    root = _repository(tmp_path)
    first = cache.key_of("client", ["client"], ["0.2.0"], root)
    assert cache.key_of("client", ["client"], ["0.2.0"], root) == first
    (root / "server" / "c.py").write_text("c = 4\n")  # another artifact's input
    (root / "client" / "x.egg-info").mkdir()  # ignored by git
    (root / "client" / "x.egg-info" / "PKG-INFO").write_text("built\n")
    assert cache.key_of("client", ["client"], ["0.2.0"], root) == first
    (root / "client" / "a.py").write_text("a = 2\n")  # an input's content
    changed = cache.key_of("client", ["client"], ["0.2.0"], root)
    assert changed != first
    (root / "client" / "new.py").write_text("n = 1\n")  # a new file, not yet added
    assert cache.key_of("client", ["client"], ["0.2.0"], root) not in {first, changed}
    assert cache.key_of("client", ["client"], ["0.3.0"], root) != cache.key_of(
        "client", ["client"], ["0.2.0"], root)  # the release number
    before = cache.key_of("client", ["client"], [], root)
    (root / "release" / "recipe.py").write_text("steps = 2\n")  # how it is built
    assert cache.key_of("client", ["client"], [], root) != before


def test_a_cached_artifact_is_copied_and_not_built_again(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(cache, "key_of", _fixed_key("k1"))
    dist = tmp_path / "dist"
    dist.mkdir()
    builds: list[str] = []

    def build() -> None:
        builds.append("built")
        (dist / "sbom").mkdir(exist_ok=True)
        (dist / "thing.whl").write_bytes(b"wheel")
        (dist / "sbom" / "thing.cdx.json").write_text("{}")

    step = cache.Step("thing", ("client",))
    assert cache.produce(step, dist, build) is True
    for path in list(dist.rglob("*.*")):
        path.unlink()
    assert cache.produce(step, dist, build) is False
    assert builds == ["built"]
    assert (dist / "thing.whl").read_bytes() == b"wheel"
    assert (dist / "sbom" / "thing.cdx.json").read_text() == "{}"
    assert not (dist / ".complete").exists()


def test_only_the_newest_keys_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "CACHE", tmp_path / "cache")
    dist = tmp_path / "dist"
    dist.mkdir()
    for number in range(cache.KEPT + 2):
        monkeypatch.setattr(cache, "key_of", _fixed_key(f"k{number}"))
        wheel = dist / f"v{number}.whl"
        cache.produce(cache.Step("thing", ()), dist, partial(wheel.write_text, "x"))
    kept = sorted(path.name for path in (tmp_path / "cache" / "thing").iterdir())
    assert len(kept) == cache.KEPT
    assert f"k{cache.KEPT + 1}" in kept
