"""``python -m rms.devstack.kafka_broker``: resolve the pinned Apache Kafka now (Maven downloads it into
``~/.m2`` the first time), so that a later start is offline and quick."""

from __future__ import annotations

import os
import sys

from rms.devstack.kafka_broker.install import KafkaUnavailable, kafka_classpath, kafka_version
from rms.domain.counts import counted


def main() -> int:
    try:
        jars = kafka_classpath().split(os.pathsep)
    except KafkaUnavailable as exc:
        print(f"rms: {exc}", file=sys.stderr)
        return 1
    print(f"Apache Kafka {kafka_version()}: {counted(len(jars), 'jar')} resolved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
