"""The confirm service (design sections 2 step 4, 5 and 7): asks producers about pending-send
messages they never confirmed or cancelled, and applies their answers.

The use case (claim, ask, apply each answer) is :mod:`rms.usecases.checkbacks` and its SQL
:mod:`rms.store.checks`; this package holds the HTTP call (:mod:`confirm_service.caller`) over
a pinned keep-alive HTTP/1.1 pool (:mod:`confirm_service.http11`: connections go to the address
the SSRF guard checked, never to a fresh DNS answer), the wiring of one worker
(:mod:`confirm_service.runtime`) and the ``rms confirm-worker`` command
(:mod:`confirm_service.cli`).
"""
