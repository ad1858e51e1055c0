WITH released AS (
    UPDATE messages m
    SET subscribers = array_remove(m.subscribers, $1::text),
        (state, dead, dead_reason, claim_token, done_at, next_delivery_at) = (
        SELECT CASE WHEN last_ack.holds THEN 'done' ELSE m.state END,
            CASE WHEN last_ack.holds THEN false ELSE m.dead END,
            CASE WHEN last_ack.holds THEN NULL ELSE m.dead_reason END,
            CASE WHEN last_ack.holds THEN NULL ELSE m.claim_token END,
            CASE WHEN last_ack.holds THEN now() ELSE m.done_at END,
            CASE WHEN last_ack.holds THEN NULL ELSE m.next_delivery_at END
        FROM (
            SELECT (m.subscribers IS NULL OR (coalesce(m.acks, CAST('{}' AS JSONB)) ?& array_remove(m.subscribers, $1::text)))) AS last_ack(holds))
    WHERE m.state = 'sent'
        AND coalesce($1::text = any(m.subscribers), false)
        AND NOT (coalesce(m.acks, CAST('{}' AS JSONB)) ? $1::text)
        AND NOT (false)
        AND EXISTS (
        SELECT 1
        FROM apps
        WHERE name = $1::text)
    RETURNING m.message_id,
        m.state = 'done' AS finished ),
    released_history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id,
        'released',
        'rms',
        jsonb_build_object('consumer', $1::text, 'reason', 'app-deleted', 'done', finished)
    FROM released ),
    deleted AS (
    DELETE FROM apps
    WHERE name = $1::text
    RETURNING name )
SELECT deleted.name,
    (
    SELECT count(*)
    FROM released) AS released
FROM deleted
