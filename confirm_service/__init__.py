"""The check-back worker's process (design sections 2 step 4, 5 and 7): it asks producers
about the pending-send messages and transactions they never confirmed or cancelled, and
applies their answers.

The worker's logic is the use case :mod:`rms.usecases.checkback` (one loop for messages and
transactions) and its SQL :mod:`rms.store.checkback` and :mod:`rms.store.transactions`; this
package is the process around it: the HTTP call (:mod:`confirm_service.caller`) over a pinned
keep-alive HTTP/1.1 pool (:mod:`confirm_service.http11`: connections go to the address the
SSRF guard checked, never to a fresh DNS answer), the runtime that builds one worker with its
stores, dispatcher and caller (:mod:`confirm_service.runtime`), and the ``rms confirm-worker``
command (:mod:`confirm_service.cli`).
"""
