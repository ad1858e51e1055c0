"""A rolling upgrade from the previous release under the fault suite's mixed load, as the
operations guide says to do it, and the previous release's own tests on this release's
schema. Whatever migrations this release has are the ones tried."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.faults.cluster import THIS_RELEASE, Infra, running_stack
from tests.system.faults.load import Mix
from tests.system.faults.release import Release, ReleaseMissing, previous_release
from tests.system.faults.scenario import Scenario, run
from tests.system.faults.test_scenarios import assert_clean
from tests.system.faults.upgrade import RollingUpgrade, previous_schema

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("tasks_dumped_before_the_timeout")]

# the previous release's own tests of its API, its walkthrough and its workers' rounds, the
# quick ones (those that start no processes of their own and do not race a wall clock)
PREVIOUS_TESTS = ("tests/test_smoke_api.py", "tests/api/test_state_machine.py",
                  "tests/api/test_transactions.py", "tests/confirm/test_claims.py",
                  "tests/recovery/test_workers.py", "tests/recovery/test_delayed.py")
PLUGIN = Path(__file__).parent / "previous_release"


@pytest.fixture(scope="module")
def release() -> Release:
    try:
        return previous_release()
    except ReleaseMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def previous_infra(tmp_path_factory: pytest.TempPathFactory, release: Release
                   ) -> Iterator[Infra]:
    """A single broker and a database the previous release migrated."""
    own = Infra(tmp_path_factory.mktemp("faults-upgrade"), brokers=1, migrate=False)
    own.start()
    try:
        previous_schema(own, release)
        yield own
    finally:
        own.stop()


@pytest.mark.timeout(420)
async def test_rolling_upgrade_from_the_previous_release_under_load_loses_nothing(
        previous_infra: Infra, release: Release) -> None:
    upgrade = RollingUpgrade()
    mix = Mix(transactions=0.3, ordered=0.3, delayed=0.2)
    async with running_stack(previous_infra, command=(str(release.rms),)) as stack:
        report = await run(stack, Scenario("rolling-upgrade", [upgrade], seconds=4.0,
                                           gap=(3.0, 4.0), at_least=1, mix=mix), seed=14)
        assert all(p.command == THIS_RELEASE for p in stack.processes), stack.processes
    assert_clean(report, "rolling-upgrade", "migrations-under-load")
    assert not upgrade.old_killed, upgrade.old_killed  # SIGTERM ended every old process
    [timeline] = upgrade.timelines
    print(f"upgrade took {timeline.seconds:.1f}s (migrations "
          f"{timeline.migrated - timeline.started:.1f}s); the previous release alone on the "
          f"new schema: {dict(timeline.alone)}")
    # only the previous release ran between the migrations and the first new process: it
    # answered prepares and confirms, and its workers published
    alone = timeline.alone
    assert alone["prepare"] + alone["txn-prepare"], timeline
    assert alone["confirm"] + alone["txn-confirm"], timeline
    assert alone["kafka-record"], timeline


@pytest.mark.timeout(600)
def test_the_previous_release_passes_its_own_tests_on_this_schema(
        release: Release, tmp_path: Path) -> None:
    """The previous release's own API, walkthrough and worker-round tests, unchanged, with
    the schema their fixtures build made by this release's ``rms migrate``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")} | {
        "PYTHONPATH": str(PLUGIN), "NEW_RELEASE_MIGRATE": shlex.join(THIS_RELEASE)}
    done = subprocess.run(
        [str(release.python), "-m", "pytest", *PREVIOUS_TESTS, "-p", "rms_new_schema", "-q",
         "-x", "-m", "not slow", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'old'}"],
        cwd=release.tree, env=env, capture_output=True, text=True, timeout=540, check=False)
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-2000:]
