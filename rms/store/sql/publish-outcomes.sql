WITH batch AS (
    SELECT rows.message_id AS message_id,
        rows.delivery AS delivery,
        rows.ok AS ok,
        rows.due AS due,
        rows.retry AS retry,
        rows.error AS error,
        rows.reason AS reason,
        rows.actor AS actor
    FROM unnest($7::TEXT[], $8::INTEGER[], $9::BOOLEAN[], $10::FLOAT[], $11::FLOAT[], $12::TEXT[], $13::TEXT[], $14::TEXT[]) AS rows(message_id, delivery, ok, due, retry, error, reason, actor)),
    completed AS (
    UPDATE message_events
    SET event=CASE WHEN batch.ok THEN $1::VARCHAR ELSE $2::VARCHAR END,
        actor=batch.actor,
        detail=CASE WHEN batch.ok THEN jsonb_build_object($3::VARCHAR, batch.delivery)
            ELSE jsonb_build_object($4::VARCHAR, batch.delivery, $5::VARCHAR, batch.error, $6::VARCHAR, batch.reason) END
    FROM batch
    WHERE message_events.message_id = batch.message_id
        AND message_events.event = $15::VARCHAR
        AND CAST((message_events.detail ->> $16::TEXT) AS INTEGER) = batch.delivery
    RETURNING message_events.message_id,
        CAST(message_events.detail ->> $17::TEXT AS INTEGER) AS delivery),
    appended AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT batch.message_id AS message_id,
        CASE WHEN batch.ok THEN $1::VARCHAR ELSE $2::VARCHAR END AS anon_1,
        batch.actor AS actor,
        CASE WHEN batch.ok THEN jsonb_build_object($3::VARCHAR, batch.delivery) ELSE jsonb_build_object($4::VARCHAR, batch.delivery, $5::VARCHAR, batch.error, $6::VARCHAR, batch.reason) END AS anon_2
    FROM batch
    WHERE NOT (EXISTS (
            SELECT *
            FROM completed
            WHERE completed.message_id = batch.message_id
                AND completed.delivery = batch.delivery))),
    rescheduled AS (
    UPDATE messages
    SET next_delivery_at=(now() + make_interval($18::INTEGER, $19::INTEGER, $20::INTEGER, $21::INTEGER, $22::INTEGER, $23::INTEGER, batch.due)),
        claim_token=$24::VARCHAR,
        publish_failure=$25::VARCHAR,
        published_delivery=messages.delivery_count
    FROM batch
    WHERE messages.message_id = batch.message_id
        AND messages.state = $26::VARCHAR
        AND messages.delivery_count = batch.delivery
        AND batch.ok
        AND batch.due IS NOT NULL
    RETURNING messages.message_id),
    given_back AS (
    UPDATE messages
    SET delivery_count=(messages.delivery_count + $27::INTEGER),
        next_delivery_at=(now() + make_interval($28::INTEGER, $29::INTEGER, $30::INTEGER, $31::INTEGER, $32::INTEGER, $33::INTEGER, batch.retry)),
        claim_token=$34::VARCHAR,
        publish_failure=coalesce(batch.reason, $35::VARCHAR),
        published_delivery=$36::INTEGER
    FROM batch
    WHERE messages.message_id = batch.message_id
        AND messages.state = $26::VARCHAR
        AND messages.delivery_count = batch.delivery
        AND NOT batch.ok
    RETURNING messages.message_id)
SELECT outcomes.message_id
FROM (
    SELECT rescheduled.message_id AS message_id
    FROM rescheduled
    UNION ALL
    SELECT given_back.message_id AS message_id
    FROM given_back) AS outcomes
