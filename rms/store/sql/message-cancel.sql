WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(message_id, app, actor, detail) ),
    changed AS (
    UPDATE messages m
    SET state = 'deleted',
        dead = false,
        dead_reason = NULL,
        claim_token = NULL,
        deleted_at = now(),
        next_check_at = NULL
    FROM input u
    WHERE m.message_id = u.message_id
        AND m.state = 'pending-send'
        AND m.transaction_id IS NULL
        AND (u.app IS NULL OR m.app = u.app)
    RETURNING m.*,
        u.actor AS event_actor,
        u.detail AS event_detail ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id,
        'cancelled',
        event_actor,
        event_detail::jsonb
    FROM changed )
SELECT *
FROM changed
