WITH input AS (
    SELECT given.*,
        coalesce(deliver_at, now() + make_interval(secs => delay_seconds)) AS deliver_after
    FROM (
        SELECT *
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::int[], $10::float8[], $11::int[], $12::text[], $13::text[], $14::bool[], $15::text[], $16::int[], $17::timestamptz[], $18::float8[]) AS u(message_id, app, topic, key, payload, headers, check_url, check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, traceparent, tracestate, ordered, transaction_id, transaction_position, deliver_at, delay_seconds)) AS given ),
    inserted AS (
    INSERT INTO messages (message_id, app, topic, key, payload, headers, check_url, check_after_seconds, max_checks, traceparent, tracestate, ordered, transaction_id, transaction_position, deliver_after, state, confirmed_at, subscribers, delivery_count, next_delivery_at, max_deliveries, ack_timeout_seconds, confirm_seq)
    SELECT message_id,
        app,
        topic,
        key,
        payload::jsonb,
        headers::jsonb,
        check_url,
        check_after_seconds,
        max_checks,
        traceparent,
        tracestate,
        ordered,
        transaction_id,
        transaction_position,
        deliver_after,
        'sent',
        now(),
        (
        SELECT array_agg(apps.name ORDER BY apps.name) AS array_agg_1
        FROM apps
        WHERE (input.topic ~ apps.consume_regex)
            AND apps.consume_regex_of = apps.consume_topics),
        CASE WHEN input.ordered THEN 0 ELSE CASE WHEN coalesce(input.deliver_after > now(), false) THEN 0
            ELSE 1 END END,
        CASE WHEN coalesce(input.deliver_after > now(), false) THEN input.deliver_after
            ELSE CASE WHEN input.ordered THEN now() ELSE now() + make_interval(0, 0, 0, 0, 0, 0, coalesce((SELECT max(coalesce(apps.ack_timeout_seconds, input.ack_timeout_seconds)) AS max_1 FROM apps WHERE (input.topic ~ apps.consume_regex) AND apps.consume_regex_of = apps.consume_topics), input.ack_timeout_seconds)) END END,
        coalesce((
            SELECT max(coalesce(apps.max_deliveries, input.max_deliveries)) AS max_1
            FROM apps
            WHERE (input.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), input.max_deliveries),
        coalesce((
            SELECT max(coalesce(apps.ack_timeout_seconds, input.ack_timeout_seconds)) AS max_1
            FROM apps
            WHERE (input.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), input.ack_timeout_seconds),
        CASE WHEN input.ordered THEN nextval('messages_confirm_seq') END
    FROM input
    ON CONFLICT (message_id) DO NOTHING
    RETURNING * ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id,
        'sent',
        'app:' || app,
        CASE WHEN transaction_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('transaction_id', transaction_id) END
    FROM inserted
    UNION ALL
    SELECT message_id,
        'publishing',
        'app:' || app,
        jsonb_build_object('delivery', delivery_count)
    FROM inserted
    WHERE delivery_count > delivery_base )
SELECT *
FROM inserted
