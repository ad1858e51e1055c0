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
