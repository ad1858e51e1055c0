WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(transaction_id, app, actor, detail) ),
    changed_cancel AS (
    UPDATE transactions t
    SET next_check_at = NULL,
        claim_token = NULL,
        dead = false,
        dead_reason = NULL,
        state = 'cancelled',
        cancelled_at = now()
    FROM input u
    WHERE t.transaction_id = u.transaction_id
        AND t.state = 'pending'
        AND (u.app IS NULL OR t.app = u.app)
    RETURNING t.*,
        u.actor AS event_actor,
        u.detail AS event_detail ),
    numbered_cancel AS MATERIALIZED (
    SELECT m.message_id,
        NULL AS seq
    FROM messages m
    JOIN changed_cancel c ON m.transaction_id = c.transaction_id
    WHERE m.state = 'pending-send'
    ORDER BY m.transaction_id,
        m.transaction_position ),
    moved_cancel AS (
    UPDATE messages m
    SET state = 'deleted',
        dead = false,
        dead_reason = NULL,
        claim_token = NULL,
        deleted_at = now(),
        next_check_at = NULL
    FROM numbered_cancel n, changed_cancel c
    WHERE m.message_id = n.message_id
        AND m.transaction_id = c.transaction_id
        AND m.state = 'pending-send'
    RETURNING m.* ),
    changed AS (
    SELECT *
    FROM changed_cancel ),
    moved AS (
    SELECT *
    FROM moved_cancel ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT e.message_id,
        e.event,
        e.actor,
        e.detail
    FROM (
        SELECT mv.message_id,
            1 AS ord,
            mv.transaction_id,
            mv.transaction_position,
            'cancelled' AS event,
            c.event_actor AS actor,
            c.event_detail::jsonb AS detail
        FROM moved_cancel mv
        JOIN changed_cancel c ON mv.transaction_id = c.transaction_id ) e
    ORDER BY e.ord,
        e.transaction_id,
        e.transaction_position )
SELECT c.transaction_id AS t_transaction_id,
    c.app AS t_app,
    c.check_url AS t_check_url,
    c.message_ids AS t_message_ids,
    c.state AS t_state,
    c.dead AS t_dead,
    c.dead_reason AS t_dead_reason,
    c.check_count AS t_check_count,
    c.check_after_seconds AS t_check_after_seconds,
    c.max_checks AS t_max_checks,
    c.created_at AS t_created_at,
    c.confirmed_at AS t_confirmed_at,
    c.cancelled_at AS t_cancelled_at,
    c.next_check_at AS t_next_check_at,
    c.claim_token AS t_claim_token,
    mm.*
FROM changed c
LEFT JOIN LATERAL (
    SELECT *
    FROM moved mv
    WHERE mv.transaction_id = c.transaction_id
    UNION ALL
    SELECT *
    FROM messages m
    WHERE m.transaction_id = c.transaction_id
        AND NOT EXISTS (
        SELECT 1
        FROM moved mv
        WHERE mv.message_id = m.message_id) ) mm ON true
ORDER BY c.transaction_id,
    mm.transaction_position
