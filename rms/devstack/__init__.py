"""The dev stack behind ``rms dev``: embedded PostgreSQL (:mod:`.embedded`), Apache Kafka from
Maven Central (:mod:`.kafka_broker`), the demo business services (:mod:`.demo`), the
process reaper (:mod:`.reaper`) and the command that runs them all (:mod:`.dev`). The test
suite starts its PostgreSQL and Kafka through the same modules."""
