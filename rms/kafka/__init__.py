"""The Kafka adapter: record format (design section 6), publisher, ack-topic consumer."""
