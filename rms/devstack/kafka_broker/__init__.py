"""Apache Kafka, resolved with Maven and started in KRaft mode on free loopback ports.

Used by ``rms dev``, the test suite, the fault suite and the benchmark. Production never imports
this package: it points RMS at a Kafka cluster by configuration."""

from rms.devstack.kafka_broker.cluster import EmbeddedKafka, KafkaCluster, broker_settings
from rms.devstack.kafka_broker.install import KafkaUnavailable, kafka_classpath, kafka_version

__all__ = ["EmbeddedKafka", "KafkaCluster", "KafkaUnavailable", "broker_settings",
           "kafka_classpath", "kafka_version"]
