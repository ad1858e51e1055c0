WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS u(message_id, app, actor, detail, created_at)
), changed AS (
    UPDATE messages m SET state = 'done', dead = false, dead_reason = NULL, claim_token = NULL, done_at = now(), next_delivery_at = NULL
    FROM input u
    WHERE m.message_id = u.message_id AND m.state = 'sent'
      AND (u.app IS NULL OR m.app = u.app) AND m.created_at = u.created_at
    RETURNING m.message_id, u.actor AS event_actor, u.detail AS event_detail
), history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id, 'acked', event_actor, event_detail::jsonb FROM changed
)
SELECT * FROM changed
