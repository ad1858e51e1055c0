WITH heads AS (
    SELECT DISTINCT ON (messages.app, messages.topic, messages.key) messages.message_id AS message_id,
        messages.app AS app,
        messages.topic AS topic,
        messages.key AS key,
        messages.dead AS dead,
        messages.delivery_count AS delivery_count,
        messages.delivery_base AS delivery_base,
        messages.max_deliveries AS max_deliveries,
        messages.next_delivery_at AS next_delivery_at,
        messages.deliver_after AS deliver_after,
        messages.claim_token AS claim_token,
        messages.ordered AS ordered,
        messages.confirm_seq AS confirm_seq,
        messages.transaction_id AS transaction_id,
        messages.transaction_position AS transaction_position,
        messages.published_delivery AS published_delivery
    FROM messages
    WHERE messages.ordered
        AND messages.state = $11::VARCHAR
        AND NOT (NOT messages.dead AND messages.delivery_count > messages.delivery_base AND coalesce(messages.published_delivery = messages.delivery_count, false) AND messages.claim_token IS NULL AND messages.next_delivery_at > now())
    ORDER BY messages.app,
        messages.topic,
        messages.key,
        messages.confirm_seq),
    classified AS (
    SELECT heads.message_id AS message_id,
        heads.app AS app,
        heads.topic AS topic,
        heads.key AS key,
        heads.dead AS dead,
        heads.delivery_count AS delivery_count,
        heads.delivery_base AS delivery_base,
        heads.max_deliveries AS max_deliveries,
        heads.next_delivery_at AS next_delivery_at,
        heads.deliver_after AS deliver_after,
        heads.claim_token AS claim_token,
        heads.ordered AS ordered,
        heads.confirm_seq AS confirm_seq,
        heads.transaction_id AS transaction_id,
        heads.transaction_position AS transaction_position,
        heads.published_delivery AS published_delivery,
        CASE WHEN heads.dead THEN $2::VARCHAR WHEN (heads.claim_token IS NOT NULL AND heads.next_delivery_at > now()) THEN NULL
            WHEN (heads.delivery_count > heads.delivery_base AND heads.next_delivery_at <= now()) THEN $3::VARCHAR
            WHEN (heads.delivery_count <= heads.delivery_base AND coalesce(heads.deliver_after > now(), false)) THEN $4::VARCHAR
            WHEN (heads.delivery_count <= heads.delivery_base AND (EXISTS (SELECT * FROM messages AS earlier WHERE earlier.transaction_id = heads.transaction_id AND earlier.transaction_position < heads.transaction_position AND earlier.state = $5::VARCHAR AND NOT (EXISTS (SELECT * FROM message_events WHERE message_events.message_id = earlier.message_id AND message_events.event = $6::VARCHAR))))) THEN $7::VARCHAR
            WHEN ((SELECT message_events.event FROM message_events WHERE message_events.message_id = heads.message_id ORDER BY message_events.id DESC LIMIT $8::INTEGER) = $9::VARCHAR) THEN $10::VARCHAR
            ELSE NULL END AS reason
    FROM heads)
SELECT blocked.topic,
    blocked.key,
    blocked.app,
    blocked.message_id,
    blocked.reason,
    blocked.waiting
FROM (
    SELECT classified.topic AS topic,
        classified.key AS key,
        classified.app AS app,
        classified.message_id AS message_id,
        classified.reason AS reason,
        (
        SELECT count(*) AS count_1
        FROM messages AS later
        WHERE later.ordered
            AND later.state = $1::VARCHAR
            AND later.app = classified.app
            AND later.topic = classified.topic
            AND later.key = classified.key
            AND later.confirm_seq > classified.confirm_seq
            AND later.delivery_count <= later.delivery_base) AS waiting
    FROM classified
    WHERE classified.reason IS NOT NULL) AS blocked
WHERE blocked.reason = $12::VARCHAR OR blocked.waiting > $13::INTEGER
ORDER BY blocked.app,
    blocked.topic,
    blocked.key
LIMIT $14
