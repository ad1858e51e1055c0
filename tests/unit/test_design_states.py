"""The product contract's state table (docs/design.md, section 3) names exactly the changes of
state the transition table allows."""

from __future__ import annotations

import re
from pathlib import Path

from rms.domain.transitions import TABLE

DESIGN = (Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text()


def _documented() -> set[tuple[str | None, str]]:
    section = DESIGN.split("## 3. States", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([a-z()-]+) \| ([a-z-]+) \| [^|]+ \|$", section, flags=re.M)
    return {(None if source == "(new)" else source, target) for source, target in rows
            if (source, target) != ("from", "to")}


def test_the_design_names_every_change_of_state_of_the_table() -> None:
    changes = {(source.value if source else None, t.target.value)
               for t in TABLE for source in (t.sources or {None})
               if source is None or source is not t.target}
    assert _documented() == changes
