WITH released AS (
    UPDATE messages m SET subscribers = array_remove(m.subscribers, $1::text), state = CASE WHEN (m.subscribers IS NULL OR coalesce(m.acks, '{}'::jsonb) ?& array_remove(m.subscribers, $1::text)) THEN 'done' ELSE m.state END, dead = CASE WHEN (m.subscribers IS NULL OR coalesce(m.acks, '{}'::jsonb) ?& array_remove(m.subscribers, $1::text)) THEN false ELSE m.dead END, dead_reason = CASE WHEN (m.subscribers IS NULL OR coalesce(m.acks, '{}'::jsonb) ?& array_remove(m.subscribers, $1::text)) THEN NULL ELSE m.dead_reason END, claim_token = CASE WHEN (m.subscribers IS NULL OR coalesce(m.acks, '{}'::jsonb) ?& array_remove(m.subscribers, $1::text)) THEN NULL ELSE m.claim_token END, done_at = CASE WHEN (m.subscribers IS NULL OR coalesce(m.acks, '{}'::jsonb) ?& array_remove(m.subscribers, $1::text)) THEN now() ELSE m.done_at END, next_delivery_at = CASE WHEN (m.subscribers IS NULL OR coalesce(m.acks, '{}'::jsonb) ?& array_remove(m.subscribers, $1::text)) THEN NULL ELSE m.next_delivery_at END
    WHERE m.state = 'sent' AND (coalesce($1::text = ANY(m.subscribers), false) AND NOT (coalesce(m.acks, '{}'::jsonb) ? $1::text)) AND NOT (coalesce(m.topic ~ $3::text, false))
      AND EXISTS (SELECT 1 FROM apps WHERE name = $1::text)
    RETURNING m.message_id, m.state = 'done' AS finished
), released_history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id, 'released', 'rms',
           jsonb_build_object('consumer', $1::text, 'reason', 'unsubscribed', 'done', finished)
    FROM released
), changed AS (
    UPDATE apps SET consume_topics = $2::text[], consume_regex = $3::text,
                    consume_regex_of = $2::text[] WHERE name = $1::text
    RETURNING name
)
SELECT changed.name, (SELECT count(*) FROM released) AS released FROM changed
