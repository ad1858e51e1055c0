"""The report's grains: the keys each aggregate table is grouped by, and how a row of a
grouping-sets aggregation names its grain.

SLA grains (``SLA_GRAINS``): ``hourly`` (app, topic, hour), ``daily`` (app, topic, day),
``topics`` (app, topic over the window), ``hours`` and ``days`` (all apps and topics),
``totals``. The histogram grains (``DISTRIBUTIONS``) group the messages by their number of
check-backs and of deliveries.
"""

from __future__ import annotations

from typing import Any

KEY_COLUMNS = ("app", "topic", "hour", "day")
SLA_GRAINS: dict[str, tuple[str, ...]] = {
    "hourly": ("app", "topic", "hour"),
    "daily": ("app", "topic", "day"),
    "topics": ("app", "topic"),
    "hours": ("hour",),
    "days": ("day",),
    "totals": (),
}
# histogram grains: grouped by a per-message counter, read with the population's count column
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "checkbacks_per_message": ("checks",),  # population: prepared messages
    "deliveries_per_message": ("publishes",),  # population: sent messages
}
DISTRIBUTION_POPULATIONS = {"checkbacks_per_message": "prepared", "deliveries_per_message": "sent"}
GRAINS: dict[str, tuple[str, ...]] = {**SLA_GRAINS, **DISTRIBUTIONS}


def grain_name(grains: dict[str, tuple[str, ...]], columns: tuple[str, ...],
               gid: str = "gid") -> Any:
    """A column naming the grain of each row of ``groupingSets(..., *columns)``, from its
    ``grouping_id()`` column ``gid`` (bit i set: ``columns[i]`` is not grouped, first column
    highest)."""
    from pyspark.sql import functions as F

    width = len(columns)
    names = None
    for name, keys in grains.items():
        bits = sum(1 << (width - 1 - i) for i, c in enumerate(columns) if c not in keys)
        names = (F.when(F.col(gid) == bits, F.lit(name)) if names is None
                 else names.when(F.col(gid) == bits, F.lit(name)))
    return names
