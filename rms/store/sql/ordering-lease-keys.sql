WITH due AS (
    SELECT DISTINCT due.app AS app,
        due.topic AS topic,
        due.key AS key
    FROM (
        SELECT messages.app AS app,
            messages.topic AS topic,
            messages.key AS key
        FROM messages
        WHERE messages.ordered
            AND messages.state = $9::VARCHAR
            AND NOT messages.dead
            AND messages.next_delivery_at <= now()
            AND NOT (EXISTS (
                SELECT *
                FROM messages AS earlier
                WHERE earlier.transaction_id = messages.transaction_id
                    AND earlier.transaction_position < messages.transaction_position
                    AND earlier.state = $10::VARCHAR
                    AND NOT (EXISTS (
                        SELECT *
                        FROM message_events
                        WHERE message_events.message_id = earlier.message_id
                            AND message_events.event = $11::VARCHAR))))
        ORDER BY messages.next_delivery_at
        LIMIT $12) AS due),
    chosen AS MATERIALIZED (
    SELECT ordering_keys.app AS app,
        ordering_keys.topic AS topic,
        ordering_keys.key AS key
    FROM ordering_keys
    JOIN due ON ordering_keys.app = due.app
        AND ordering_keys.topic = due.topic
        AND ordering_keys.key = due.key
    WHERE ordering_keys.lease_until IS NULL OR ordering_keys.lease_until <= now()
    LIMIT $13
    FOR UPDATE OF ordering_keys SKIP LOCKED)
UPDATE ordering_keys
SET lease_token=$1::VARCHAR,
    lease_until=(now() + make_interval($2::INTEGER, $3::INTEGER, $4::INTEGER, $5::INTEGER, $6::INTEGER, $7::INTEGER, $8))
FROM chosen
WHERE ordering_keys.app = chosen.app
    AND ordering_keys.topic = chosen.topic
    AND ordering_keys.key = chosen.key
RETURNING ordering_keys.app,
    ordering_keys.topic,
    ordering_keys.key
