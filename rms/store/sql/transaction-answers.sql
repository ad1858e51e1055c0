WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[]) AS u(transaction_id, token, action, actor, detail, checked, delay) ),
    changed_confirm AS (
    UPDATE transactions t
    SET next_check_at = NULL,
        claim_token = NULL,
        dead = false,
        dead_reason = NULL,
        state = 'confirmed',
        confirmed_at = now()
    FROM input u
    WHERE t.transaction_id = u.transaction_id
        AND t.state = 'pending'
        AND t.claim_token = u.token
        AND u.action = 'confirm'
    RETURNING t.*,
        u.actor AS event_actor,
        u.detail AS event_detail ),
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
        AND t.claim_token = u.token
        AND u.action = 'cancel'
    RETURNING t.*,
        u.actor AS event_actor,
        u.detail AS event_detail ),
    changed_retry_check AS (
    UPDATE transactions t
    SET claim_token = NULL,
        next_check_at = now() + make_interval(0, 0, 0, 0, 0, 0, u.delay)
    FROM input u
    WHERE t.transaction_id = u.transaction_id
        AND t.state = 'pending'
        AND t.claim_token = u.token
        AND u.action = 'retry-check'
    RETURNING t.*,
        u.actor AS event_actor,
        u.detail AS event_detail ),
    changed_check_exhausted AS (
    UPDATE transactions t
    SET next_check_at = NULL,
        claim_token = NULL,
        dead = true,
        dead_reason = 'check-exhausted'
    FROM input u
    WHERE t.transaction_id = u.transaction_id
        AND t.state = 'pending'
        AND t.claim_token = u.token
        AND u.action = 'check-exhausted'
    RETURNING t.*,
        u.actor AS event_actor,
        u.detail AS event_detail ),
    numbered_confirm AS MATERIALIZED (
    SELECT m.message_id,
        CASE WHEN m.ordered THEN nextval('messages_confirm_seq') END AS seq
    FROM messages m
    JOIN changed_confirm c ON m.transaction_id = c.transaction_id
    WHERE m.state = 'pending-send'
    ORDER BY m.transaction_id,
        m.transaction_position ),
    moved_confirm AS (
    UPDATE messages m
    SET state = 'sent',
        dead = false,
        dead_reason = NULL,
        claim_token = 'confirm:' || c.transaction_id,
        confirmed_at = now(),
        next_check_at = NULL,
        delivery_count = CASE WHEN m.ordered THEN m.delivery_count ELSE CASE WHEN coalesce(m.deliver_after > now(), false) THEN m.delivery_count
            ELSE m.delivery_count + 1 END END,
        next_delivery_at = CASE WHEN coalesce(m.deliver_after > now(), false) THEN m.deliver_after
            ELSE CASE WHEN m.ordered THEN now() ELSE now() + make_interval(0, 0, 0, 0, 0, 0, coalesce((SELECT max(coalesce(apps.ack_timeout_seconds, m.ack_timeout_seconds)) AS max_1 FROM apps WHERE (m.topic ~ apps.consume_regex) AND apps.consume_regex_of = apps.consume_topics), m.ack_timeout_seconds)) END END,
        max_deliveries = coalesce((
            SELECT max(coalesce(apps.max_deliveries, m.max_deliveries)) AS max_1
            FROM apps
            WHERE (m.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), m.max_deliveries),
        ack_timeout_seconds = coalesce((
            SELECT max(coalesce(apps.ack_timeout_seconds, m.ack_timeout_seconds)) AS max_1
            FROM apps
            WHERE (m.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), m.ack_timeout_seconds),
        subscribers = (
        SELECT array_agg(apps.name ORDER BY apps.name) AS array_agg_1
        FROM apps
        WHERE (m.topic ~ apps.consume_regex)
            AND apps.consume_regex_of = apps.consume_topics),
        confirm_seq = n.seq
    FROM numbered_confirm n, changed_confirm c
    WHERE m.message_id = n.message_id
        AND m.transaction_id = c.transaction_id
        AND m.state = 'pending-send'
    RETURNING m.* ),
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
    numbered_check_exhausted AS MATERIALIZED (
    SELECT m.message_id,
        NULL AS seq
    FROM messages m
    JOIN changed_check_exhausted c ON m.transaction_id = c.transaction_id
    WHERE m.state = 'pending-send'
    ORDER BY m.transaction_id,
        m.transaction_position ),
    moved_check_exhausted AS (
    UPDATE messages m
    SET dead = true,
        dead_reason = 'check-exhausted',
        next_check_at = NULL,
        claim_token = NULL
    FROM numbered_check_exhausted n, changed_check_exhausted c
    WHERE m.message_id = n.message_id
        AND m.transaction_id = c.transaction_id
        AND m.state = 'pending-send'
    RETURNING m.* ),
    changed AS (
    SELECT *
    FROM changed_confirm
    UNION ALL
    SELECT *
    FROM changed_cancel
    UNION ALL
    SELECT *
    FROM changed_retry_check
    UNION ALL
    SELECT *
    FROM changed_check_exhausted ),
    moved AS (
    SELECT *
    FROM moved_confirm
    UNION ALL
    SELECT *
    FROM moved_cancel
    UNION ALL
    SELECT *
    FROM moved_check_exhausted ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT e.message_id,
        e.event,
        e.actor,
        e.detail
    FROM (
        SELECT m.message_id,
            0 AS ord,
            m.transaction_id,
            m.transaction_position,
            'checked' AS event,
            u.actor,
            u.checked::jsonb || jsonb_build_object('transaction_id', u.transaction_id) || CASE
                WHEN c.transaction_id IS NULL THEN '{"stale": true}'::jsonb ELSE '{}'::jsonb END AS detail
        FROM input u
        JOIN messages m ON m.transaction_id = u.transaction_id
        LEFT JOIN changed c ON c.transaction_id = u.transaction_id
        UNION ALL
        SELECT mv.message_id,
            1 AS ord,
            mv.transaction_id,
            mv.transaction_position,
            'confirmed' AS event,
            c.event_actor AS actor,
            c.event_detail::jsonb AS detail
        FROM moved_confirm mv
        JOIN changed_confirm c ON mv.transaction_id = c.transaction_id
        UNION ALL
        SELECT mv.message_id,
            2 AS ord,
            mv.transaction_id,
            mv.transaction_position,
            'publishing' AS event,
            c.event_actor AS actor,
            jsonb_build_object('delivery', mv.delivery_count) AS detail
        FROM moved_confirm mv
        JOIN changed_confirm c ON mv.transaction_id = c.transaction_id
        WHERE mv.delivery_count > mv.delivery_base
        UNION ALL
        SELECT mv.message_id,
            1 AS ord,
            mv.transaction_id,
            mv.transaction_position,
            'cancelled' AS event,
            c.event_actor AS actor,
            c.event_detail::jsonb AS detail
        FROM moved_cancel mv
        JOIN changed_cancel c ON mv.transaction_id = c.transaction_id
        UNION ALL
        SELECT mv.message_id,
            1 AS ord,
            mv.transaction_id,
            mv.transaction_position,
            'dead' AS event,
            c.event_actor AS actor,
            c.event_detail::jsonb AS detail
        FROM moved_check_exhausted mv
        JOIN changed_check_exhausted c ON mv.transaction_id = c.transaction_id ) e
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
