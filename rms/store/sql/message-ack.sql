WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS u(message_id, consumer, via, created_at) ),
    changed AS (
    UPDATE messages m
    SET acks = (coalesce(m.acks, CAST('{}' AS JSONB)) || jsonb_build_object(u.consumer, jsonb_build_object('at', to_char(timezone('UTC', now()), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'via', u.via))),
        (state, dead, dead_reason, claim_token, done_at, next_delivery_at) = (
        SELECT CASE WHEN last_ack.holds THEN 'done' ELSE m.state END,
            CASE WHEN last_ack.holds THEN false ELSE m.dead END,
            CASE WHEN last_ack.holds THEN NULL ELSE m.dead_reason END,
            CASE WHEN last_ack.holds THEN NULL ELSE m.claim_token END,
            CASE WHEN last_ack.holds THEN now() ELSE m.done_at END,
            CASE WHEN last_ack.holds THEN NULL ELSE m.next_delivery_at END
        FROM (
            SELECT (m.subscribers IS NULL OR (coalesce(m.acks, CAST('{}' AS JSONB)) ?& array_remove(m.subscribers, u.consumer)))) AS last_ack(holds))
    FROM input u
    JOIN apps a ON a.name = u.consumer
    WHERE a.name = u.consumer
        AND m.message_id = u.message_id
        AND (m.topic ~ a.consume_regex)
        AND a.consume_regex_of = a.consume_topics
        AND (u.created_at IS NULL OR m.created_at = u.created_at)
        AND m.state = 'sent'
        AND (m.subscribers IS NULL OR coalesce(u.consumer = any(m.subscribers), false) AND NOT (coalesce(m.acks, CAST('{}' AS JSONB)) ? u.consumer))
    RETURNING m.*,
        u.consumer AS ack_consumer,
        u.via AS ack_via,
        m.state = 'done' AS ack_done ),
    ignored AS (
    SELECT m.message_id,
        u.consumer,
        u.via
    FROM input u
    JOIN apps a ON a.name = u.consumer
    JOIN messages m ON m.message_id = u.message_id
    WHERE a.name = u.consumer
        AND m.message_id = u.message_id
        AND (m.topic ~ a.consume_regex)
        AND a.consume_regex_of = a.consume_topics
        AND (u.created_at IS NULL OR m.created_at = u.created_at)
        AND m.state = 'sent'
        AND m.subscribers IS NOT NULL
        AND NOT coalesce(u.consumer = any(m.subscribers), false)
        AND NOT EXISTS (
        SELECT 1
        FROM message_events e
        WHERE e.message_id = m.message_id
            AND e.event = 'ack-ignored'
            AND e.actor = 'app:' || u.consumer) ),
    last_ack AS (
    UPDATE apps
    SET last_ack_at = now()
    WHERE name IN (
        SELECT ack_consumer
        FROM changed)
        AND (last_ack_at IS NULL OR last_ack_at < now() - interval '1 second') ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id,
        'acked',
        'app:' || ack_consumer,
        jsonb_build_object('via', ack_via, 'done', ack_done)
    FROM changed
    UNION ALL
    SELECT message_id,
        'ack-ignored',
        'app:' || consumer,
        jsonb_build_object('via', via, 'reason', 'not-a-subscriber')
    FROM ignored )
SELECT *
FROM changed
