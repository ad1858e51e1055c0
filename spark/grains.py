"""The report's grains: the keys each aggregate table is grouped by.

SLA grains (``SLA_GRAINS``): ``hourly`` (app, topic, hour), ``daily`` (app, topic, day),
``topics`` (app, topic over the window), ``hours`` and ``days`` (all apps and topics),
``totals``. The histogram grains (``DISTRIBUTIONS``) group the messages by their number of
check-backs and of deliveries.
"""

from __future__ import annotations

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

