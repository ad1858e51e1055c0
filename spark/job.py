"""The report as a ``spark-submit`` application; same arguments as ``rms report``::

    spark-submit --master yarn --jars /usr/share/java/postgresql.jar \\
        spark/job.py --since 2026-03-02T10:00:00Z --until 2026-03-02T11:00:00Z --out /srv/report

``spark-submit``'s own options (``--master``, ``--driver-memory``, ``--conf``) take effect; the
``rms`` package must be importable by the driver's Python (installed, or on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _fix_path() -> None:
    """Run as a script, Python puts ``spark/`` itself first on the path; the project root is
    what makes ``import spark`` work (and keeps ``spark/*.py`` from shadowing other modules)."""
    if sys.path and Path(sys.path[0] or ".").resolve() == _HERE:
        sys.path[0] = str(_HERE.parent)


def main(argv: Sequence[str] | None = None) -> int:
    from spark import cli

    parser = argparse.ArgumentParser(prog="spark-submit spark/job.py",
                                     description="build the RMS SLA report with Spark")
    cli.configure(parser)
    return cli.run(parser.parse_args(argv))


if __name__ == "__main__":
    _fix_path()
    sys.exit(main())
