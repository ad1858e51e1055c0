INSERT INTO ordering_keys (app, topic, key)
SELECT DISTINCT due.app,
    due.topic,
    due.key
FROM (
    SELECT messages.app AS app,
        messages.topic AS topic,
        messages.key AS key
    FROM messages
    WHERE messages.ordered
        AND messages.state = $1::VARCHAR
        AND NOT messages.dead
        AND messages.next_delivery_at <= now()
        AND NOT (EXISTS (
            SELECT *
            FROM messages AS earlier
            WHERE earlier.transaction_id = messages.transaction_id
                AND earlier.transaction_position < messages.transaction_position
                AND earlier.state = $2::VARCHAR
                AND NOT (EXISTS (
                    SELECT *
                    FROM message_events
                    WHERE message_events.message_id = earlier.message_id
                        AND message_events.event = $3::VARCHAR))))
    ORDER BY messages.next_delivery_at
    LIMIT $4) AS due
ON CONFLICT DO NOTHING
