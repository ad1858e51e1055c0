"""The recovery service (design sections 2.6, 3 and 7): re-delivery until acknowledged, dead
letters and the operator tools around them.

``rms recovery-worker`` runs :class:`rms.usecases.redelivery.RecoveryWorker` every
``RMS_WORKER_INTERVAL_SECONDS`` (the rules of counting deliveries are there). Any number of
workers may share one database. ``rms dead`` lists and resends dead letters through the API.
"""
