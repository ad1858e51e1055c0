"""The generated pages of the documentation site are current: each is rendered again from the
code it describes (the OpenAPI document, the commands' parsers, the settings, the transition
table) and compared with the checked-in file. ``python -m docs_gen`` writes them again."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from pydantic.fields import FieldInfo

from docs_gen import cli_page, openapi_page, settings_page, state_machine
from docs_gen.hooks import resolve
from docs_gen.pages import ROOT, rendered, with_regions
from rms.cli import COMMANDS
from rms.config import Settings
from rms.domain.states import State

REPOSITORY = "https://github.com/rms-dev/rms"


@cache
def _pages() -> dict[Path, str]:
    return rendered()


@pytest.mark.parametrize("path", sorted(_pages()), ids=lambda path: path.name)
def test_the_checked_in_page_is_what_the_code_renders(path: Path) -> None:
    assert path.read_text() == _pages()[path], f"{path} is stale: run python -m docs_gen"


def test_every_setting_is_on_the_configuration_page_with_its_default() -> None:
    page = settings_page.render()
    rows = dict(re.findall(r"^\| `(RMS_[A-Z_]+)` \| ([^|]+) \|", page, flags=re.M))
    assert set(rows) == {f"RMS_{name.upper()}" for name in Settings.model_fields}
    assert rows["RMS_DB_POOL_SIZE"].strip() == "`20`"
    assert rows["RMS_LOG_JSON"].strip() == "`true`"
    assert rows["RMS_ADMISSION_QUEUE_TARGET_SECONDS"].strip() == "`0.005`"
    assert rows["RMS_ADMIN_TOKEN"].strip() == "(none)"


def test_a_setting_without_a_description_stops_the_generator() -> None:
    with pytest.raises(ValueError, match="RMS_UNDESCRIBED has no description"):
        settings_page._description("undescribed", FieldInfo(default=1))


def test_every_command_and_sub_command_has_its_section() -> None:
    page = cli_page.render()
    for name in COMMANDS:
        assert f"## `rms {name}` {{#rms-{name}}}" in page
    for sub in ("rms dead list", "rms dead resend", "rms topics create", "rms retention run"):
        assert f"`{sub}` {{#{sub.replace(' ', '-')}}}" in page
    assert "`--older-than OLDER_THAN`" in page


def test_every_operation_of_the_served_document_is_on_the_api_page() -> None:
    page = openapi_page.render()
    document = openapi_page.document()
    for path, item in document["paths"].items():
        for method in item:
            anchor = openapi_page.operation_anchor(method, path)
            assert f"### `{method.upper()} {path}` {{#{anchor}}}" in page
    for name in document["components"]["schemas"]:
        assert f"{{#{openapi_page.schema_anchor(name)}}}" in page


def test_the_state_machine_shows_every_state_and_state_change() -> None:
    picture = state_machine.render()
    for state in State:
        assert f">{state.value}</text>" in picture
    assert state_machine.edges()[(State.PENDING_SEND.value, State.SENT.value)] == [
        "confirm", "confirm-claimed"]
    assert ("new", State.SENT.value) in state_machine.edges()


def test_a_state_without_a_place_in_the_picture_stops_the_generator() -> None:
    with pytest.raises(ValueError, match="no place"):
        state_machine._position("parked")


@pytest.mark.parametrize(("target", "page", "expected"), [
    ("../design.md#3-states", "operations/index.md", "../design.md#3-states"),
    ("security.md#rotating-secrets", "operations/alerts.md", "security.md#rotating-secrets"),
    ("../../deploy/compose", "operations/deploying.md",
     f"{REPOSITORY}/tree/main/deploy/compose"),
    ("../../Dockerfile", "operations/index.md", f"{REPOSITORY}/blob/main/Dockerfile"),
    ("../../docs/design.md", "clients/go.md", "../design.md"),
    ("examples/quickstart.mjs", "clients/typescript.md",
     f"{REPOSITORY}/blob/main/clients/typescript/examples/quickstart.mjs"),
    ("https://example.com/x", "index.md", "https://example.com/x"),
    ("#local", "index.md", "#local"),
    ("../no/such/file.py", "index.md", None),
    ("../../../outside", "index.md", None),
])
def test_links_resolve_from_the_file_they_are_written_in(
        target: str, page: str, expected: str | None) -> None:
    assert resolve(target, page, REPOSITORY) == expected


def test_the_generated_pages_live_in_the_docs_folder() -> None:
    assert all(path.is_relative_to(ROOT / "docs") for path in _pages())


def test_a_page_without_the_markers_of_its_region_stops_the_generator() -> None:
    with pytest.raises(ValueError, match="lacks the markers of the generated region 'x'"):
        with_regions("# A page\n", {"x": lambda: "table"}, "page.md")


def test_a_region_is_rendered_between_its_markers_and_the_rest_is_kept() -> None:
    text = "before\n<!-- docs_gen: x -->\nold\n<!-- /docs_gen: x -->\nafter\n"
    assert with_regions(text, {"x": lambda: "new\n"}, "page.md") == (
        "before\n<!-- docs_gen: x -->\nnew\n<!-- /docs_gen: x -->\nafter\n")
