WITH input AS (
    SELECT given.*,
        coalesce(deliver_at, now() + make_interval(secs => delay_seconds)) AS deliver_after
    FROM (
        SELECT *
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::int[], $10::float8[], $11::int[], $12::text[], $13::text[], $14::bool[], $15::text[], $16::int[], $17::timestamptz[], $18::float8[]) AS u(message_id, app, topic, key, payload, headers, check_url, check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, traceparent, tracestate, ordered, transaction_id, transaction_position, deliver_at, delay_seconds)) AS given ),
    inserted AS (
    INSERT INTO messages (message_id, app, topic, key, payload, headers, check_url, check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, traceparent, tracestate, ordered, transaction_id, transaction_position, deliver_after, state, next_check_at)
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
        'pending-send',
        now() + make_interval(0, 0, 0, 0, 0, 0, input.check_after_seconds)
    FROM input
    ON CONFLICT (message_id) DO NOTHING
    RETURNING * ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id,
        'prepared',
        'app:' || app,
        CASE WHEN transaction_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('transaction_id', transaction_id) END
    FROM inserted )
SELECT *
FROM inserted
