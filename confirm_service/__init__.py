"""The confirm service (design sections 2 step 4, 5 and 7): asks producers about pending-send
messages they never confirmed or cancelled, and applies their answers.

``store`` work lives in :mod:`rms.store.checks`; this package holds the worker tick
(:mod:`confirm_service.worker`), the HTTP call (:mod:`confirm_service.caller`), connection
pinning against DNS rebinding (:mod:`confirm_service.pinning`) and the ``rms confirm-worker``
command (:mod:`confirm_service.cli`).
"""
