"""RMS, the reliable message service: shared domain, store, Kafka adapter and CLI."""

__version__ = "0.2.0"
