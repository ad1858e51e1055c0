"""``python -m docs_gen``: write the generated pages again; ``--check``: exit 1 naming the
stale ones instead (``make docs`` runs it before the build)."""

from __future__ import annotations

import argparse
import sys

from docs_gen.pages import ROOT, stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docs_gen", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a generated page is stale")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for path in found:
            print(f"stale: {path.relative_to(ROOT)} (run python -m docs_gen)", file=sys.stderr)
        return 1 if found else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
