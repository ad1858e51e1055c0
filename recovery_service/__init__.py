"""The recovery service (design sections 2.6, 3 and 7): re-delivery until acknowledged, dead
letters and the operator tools around them.

``rms recovery-worker`` runs :class:`recovery_service.redeliverer.RecoveryWorker` every
``RMS_WORKER_INTERVAL_SECONDS``. Any number of workers may share one database.

How deliveries are counted (see also :mod:`rms.store.deliveries`):

* A delivery number is reserved (``delivery_count + 1``) by the statement that makes a message
  due for publishing: confirm, one-shot send, the recovery claim, an admin resend.
* Only publishes the broker **accepted** count toward ``max_deliveries``. A refused or timed-out
  publish gives its number back and makes the message due again after
  ``RMS_PUBLISH_RETRY_SECONDS``, so a broker outage never dead-letters anything early: it only
  stops publishing, and everything is delivered once the broker is back.
* A worker killed between the reservation and the broker's answer cannot know whether the
  record went out, so that number stays counted (the message is published again when the
  claim's lease, ``RMS_WORKER_LEASE_SECONDS``, runs out). In the worst case such a crash costs
  one attempt of the budget; it never loses a message.
* After the last allowed delivery the worker still waits for that delivery's ack deadline; only
  then is the message flagged dead (``delivery-exhausted``). A late ack of a dead message still
  marks it ``done`` and clears ``dead``.
* Ack deadlines grow as ``ack_timeout_seconds * 2**(n-1)``, capped at
  ``RMS_DELIVERY_BACKOFF_CAP_SECONDS``, where ``n`` counts deliveries since the budget started
  (an admin resend restarts it).
* While the broker is unreachable the worker does not claim at all (nor flag anything dead),
  and after a round in which every publish failed it sends a single probe per tick until one
  succeeds, so an outage does not fill the event history with ``publish-failed`` rows.
"""
