WITH input AS (
    SELECT given.*,
        coalesce(deliver_at, now() + make_interval(secs => delay_seconds)) AS deliver_after
    FROM (
        SELECT *
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::int[], $10::float8[], $11::int[], $12::text[], $13::text[], $14::bool[], $15::text[], $16::int[], $17::timestamptz[], $18::float8[]) AS u(message_id, app, topic, key, payload, headers, check_url, check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, traceparent, tracestate, ordered, transaction_id, transaction_position, deliver_at, delay_seconds)) AS given ),
    asked AS (
    SELECT *
    FROM unnest($19::text[], $20::text[], $21::text[], $22::float8[], $23::int[]) AS t(transaction_id, app, check_url, check_after_seconds, max_checks) ),
    fresh AS (
    SELECT a.*
    FROM asked a
    WHERE NOT EXISTS (
        SELECT 1
        FROM input i
        JOIN messages m ON m.message_id = i.message_id
        WHERE i.transaction_id = a.transaction_id) ),
    created AS (
    INSERT INTO transactions (transaction_id, app, check_url, check_after_seconds, max_checks, message_ids, state, next_check_at)
    SELECT f.transaction_id,
        f.app,
        f.check_url,
        f.check_after_seconds,
        f.max_checks,
        ARRAY(
        SELECT i.message_id
        FROM input i
        WHERE i.transaction_id = f.transaction_id
        ORDER BY i.transaction_position),
        'pending',
        now() + make_interval(0, 0, 0, 0, 0, 0, f.check_after_seconds)
    FROM fresh f
    ON CONFLICT (transaction_id) DO NOTHING
    RETURNING * ),
    members AS (
    SELECT i.*
    FROM input i
    WHERE i.transaction_id IN (
        SELECT transaction_id
        FROM created) ),
    inserted AS (
    INSERT INTO messages (message_id, app, topic, key, payload, headers, check_url, check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, traceparent, tracestate, ordered, transaction_id, transaction_position, deliver_after, state)
    SELECT message_id,
        app,
        topic,
        key,
        payload::jsonb,
        headers::jsonb,
        check_url,
        check_after_seconds,
        max_checks,
        ack_timeout_seconds,
        max_deliveries,
        traceparent,
        tracestate,
        ordered,
        transaction_id,
        transaction_position,
        deliver_after,
        'pending-send'
    FROM members
    RETURNING * ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id,
        'prepared',
        'app:' || app,
        CASE WHEN transaction_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('transaction_id', transaction_id) END
    FROM inserted )
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
FROM created c
LEFT JOIN inserted mm ON mm.transaction_id = c.transaction_id
ORDER BY c.transaction_id,
    mm.transaction_position
