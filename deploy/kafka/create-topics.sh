#!/usr/bin/env bash
# Create (or check) the topics RMS uses, with the durability RMS relies on:
# replication factor 3 and min.insync.replicas 2, so that with the producer's acks=all a
# published message survives the loss of any one broker. Safe to run again: existing
# topics are left alone (their settings are then printed for you to compare).
#
#   BOOTSTRAP_SERVERS=kafka-1:9092 TOPICS="rms.acks orders.paid" ./create-topics.sh
#
# Environment:
#   BOOTSTRAP_SERVERS           required
#   TOPICS                      required: space-separated names (include the ack topic,
#                               RMS_ACK_TOPIC, default rms.acks)
#   TOPIC_PARTITIONS            default 12 (>= the number of consumers you will run)
#   TOPIC_REPLICATION_FACTOR    default 3
#   TOPIC_MIN_INSYNC_REPLICAS   default 2
#   TOPIC_RETENTION_MS          default 604800000 (7 days)
#   KAFKA_CLIENT_CONFIG         optional client properties file (TLS/SASL)
#   KAFKA_BIN                   directory of kafka-topics.sh (default /opt/kafka/bin)
set -euo pipefail

: "${BOOTSTRAP_SERVERS:?set BOOTSTRAP_SERVERS}"
: "${TOPICS:?set TOPICS (space-separated topic names)}"
partitions="${TOPIC_PARTITIONS:-12}"
replicas="${TOPIC_REPLICATION_FACTOR:-3}"
min_isr="${TOPIC_MIN_INSYNC_REPLICAS:-2}"
retention_ms="${TOPIC_RETENTION_MS:-604800000}"
topics_cli="${KAFKA_BIN:-/opt/kafka/bin}/kafka-topics.sh"

client=(--bootstrap-server "$BOOTSTRAP_SERVERS")
if [[ -n "${KAFKA_CLIENT_CONFIG:-}" ]]; then
    client+=(--command-config "$KAFKA_CLIENT_CONFIG")
fi

for topic in $TOPICS; do
    "$topics_cli" "${client[@]}" --create --if-not-exists --topic "$topic" \
        --partitions "$partitions" --replication-factor "$replicas" \
        --config min.insync.replicas="$min_isr" \
        --config retention.ms="$retention_ms" \
        --config unclean.leader.election.enable=false
    description="$("$topics_cli" "${client[@]}" --describe --topic "$topic")"
    printf '%s\n' "${description%%$'\n'*}"
done
