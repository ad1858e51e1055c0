"""Check-back URL normalisation, property-based: whatever dot segments and percent-encodings a
URL carries, the prefix check and the stored URL speak of the same resolved path."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rms.callback_urls import matches_prefix, normalize_url
from rms.domain.errors import Invalid

PREFIX = "http://hooks.example:8080/rms/"
SEGMENTS = st.sampled_from([".", "..", "%2e", "%2E%2e", ".%2e", "a", "rms", "check", "%61b",
                            "x~y", "", "%7E"])


def _decoded(segment: str) -> str:
    return segment.replace("%2e", ".").replace("%2E", ".").replace("%61", "a").replace("%7E", "~")


@given(st.lists(SEGMENTS, max_size=8))
def test_a_url_matches_the_prefix_only_if_its_resolved_path_is_under_it(segments: list[str]) -> None:
    url = PREFIX + "/".join(segments)
    normalized = normalize_url(url)
    resolved = posixpath.normpath("/rms/" + "/".join(_decoded(s) for s in segments))
    # a path ending in "", "." or ".." names a directory: it keeps its trailing slash
    directory = not segments or _decoded(segments[-1]) in {"", ".", ".."}
    inside = resolved.startswith("/rms/") or (resolved == "/rms" and directory)

    assert matches_prefix(url, [PREFIX]) == (inside and normalized.startswith(PREFIX))
    path = normalized.removeprefix("http://hooks.example:8080")
    assert "/./" not in path + "/" and "/../" not in path + "/"
    assert "%2e" not in path.lower()
    assert normalize_url(normalized) == normalized  # one spelling


@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=30))
def test_control_characters_and_separators_never_pass(suffix: str) -> None:
    url = PREFIX + suffix
    forbidden = any(ord(c) <= 0x20 or ord(c) == 0x7F for c in suffix) or "\\" in suffix
    if forbidden:
        with pytest.raises(Invalid):
            normalize_url(url)
    else:
        try:
            normalize_url(url)
        except Invalid as exc:
            assert "encoded slash" in str(exc) or "not a valid URL" in str(exc)


def test_host_and_scheme_case_and_fragment() -> None:
    assert normalize_url("HTTPS://Hooks.Example/RMS/x#f") == "https://hooks.example/RMS/x"


def test_remembered_urls_keep_their_answers() -> None:
    """Normalising and parsing are remembered per URL: a refusal is raised again every time,
    a URL longer than any valid one is never kept, and an accepted one answers the same."""
    from rms.callback_urls import MAX_URL_LENGTH, ParsedUrl, _normalized_short

    for _ in range(2):
        with pytest.raises(Invalid, match="backslash"):
            normalize_url("http://hooks.example/a\\b")
        with pytest.raises(Invalid, match="credentials"):
            ParsedUrl.parse("http://user:secret@hooks.example/")
    kept = _normalized_short.cache_info().currsize
    long_url = PREFIX + "a" * MAX_URL_LENGTH
    assert normalize_url(long_url) == long_url
    assert _normalized_short.cache_info().currsize == kept
    assert normalize_url(PREFIX + "x/../check") == normalize_url(PREFIX + "check")
    assert matches_prefix(PREFIX + "x/%2e%2e/check", [PREFIX])
    assert not matches_prefix("http://hooks.example:8081/rms/check", [PREFIX])
