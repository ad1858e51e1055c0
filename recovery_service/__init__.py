"""The redelivery worker's process (design sections 2.6, 3 and 7) and the dead-letter CLI: it
holds no service logic of its own.

``rms recovery-worker`` (:mod:`recovery_service.cli`) runs
:class:`rms.usecases.redelivery.RedeliveryWorker`, built in :mod:`recovery_service.runtime`,
every ``RMS_WORKER_INTERVAL_SECONDS`` (the rules of counting deliveries are there; the worker
also runs the ordering sequencer). Any number of workers may share one database. ``rms dead``
(:mod:`recovery_service.dead_cli`) lists and resends dead letters through the API.
"""
