"""Keeping apps written by an earlier release usable: a process of an earlier release creates
apps, or changes their consume topics, without the regular expression this release derives from
them (``consume_regex``, the form in which the statements that fix subscribers and check acks
read an app's topics). Every process of this release repairs such apps at start and then every
``RMS_APPS_REPAIR_SECONDS``, so during a rolling update an app created or changed through an old
instance consumes its topics again within seconds (design section 3)."""

from __future__ import annotations

import asyncio

import structlog

from rms.outage import OutageLog
from rms.store.apps import AppStore

log = structlog.get_logger(__name__)


async def repair_consume_regexes(apps: AppStore) -> list[str]:
    """Repair now; the names of the apps repaired (logged)."""
    repaired = await apps.repair_consume_regexes()
    if repaired:
        log.info("apps.consume_regex_repaired", apps=repaired)
    return repaired


async def keep_consume_regexes(apps: AppStore, every: float) -> None:
    """Repair at once and then every ``every`` seconds, until cancelled; an outage of the
    database is logged once (:class:`~rms.outage.OutageLog`) and the repair goes on after it."""
    outage = OutageLog("apps-repair")
    while True:
        try:
            await repair_consume_regexes(apps)
        except Exception as exc:
            outage.failed(exc)
        else:
            outage.succeeded()
        await asyncio.sleep(every)
