"""The confirm service (design sections 2 step 4, 5 and 7): asks producers about pending-send
messages they never confirmed or cancelled, and applies their answers.

``store`` work lives in :mod:`rms.store.checks`; this package holds the worker tick
(:mod:`confirm_service.worker`), the HTTP call (:mod:`confirm_service.caller`) over a pinned
keep-alive HTTP/1.1 pool (:mod:`confirm_service.http11`: connections go to the address the
SSRF guard checked, never to a fresh DNS answer) and the ``rms confirm-worker``
command (:mod:`confirm_service.cli`).
"""
