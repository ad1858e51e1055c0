WITH batch AS (
    SELECT rows.message_id AS message_id,
        rows.token AS token,
        rows.actor AS actor,
        rows.action AS action,
        rows.attempt AS attempt,
        rows.outcome AS outcome,
        rows.error AS error,
        rows.delay AS delay
    FROM unnest($9::TEXT[], $10::TEXT[], $11::TEXT[], $12::TEXT[], $13::INTEGER[], $14::TEXT[], $15::TEXT[], $16::FLOAT[]) AS rows(message_id, token, actor, action, attempt, outcome, error, delay)),
    resolved_confirm AS (
    UPDATE messages
    SET state=$18::VARCHAR,
        dead=$19::BOOLEAN,
        dead_reason=$20::VARCHAR,
        delivery_count=CASE WHEN messages.ordered THEN messages.delivery_count ELSE CASE
            WHEN coalesce(messages.deliver_after > now(), false) THEN messages.delivery_count
            ELSE messages.delivery_count + $21::INTEGER END END,
        ack_timeout_seconds=coalesce((
            SELECT max(coalesce(apps.ack_timeout_seconds, messages.ack_timeout_seconds)) AS max_1
            FROM apps
            WHERE (messages.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), messages.ack_timeout_seconds),
        max_deliveries=coalesce((
            SELECT max(coalesce(apps.max_deliveries, messages.max_deliveries)) AS max_2
            FROM apps
            WHERE (messages.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), messages.max_deliveries),
        confirmed_at=now(),
        next_check_at=$22::TIMESTAMP
    WITH TIME ZONE,
        next_delivery_at=CASE WHEN coalesce(messages.deliver_after > now(), false) THEN messages.deliver_after
            ELSE CASE WHEN messages.ordered THEN now() ELSE now() + make_interval($23::INTEGER, $24::INTEGER, $25::INTEGER, $26::INTEGER, $27::INTEGER, $28::INTEGER, coalesce((SELECT max(coalesce(apps.ack_timeout_seconds, messages.ack_timeout_seconds)) AS max_3 FROM apps WHERE (messages.topic ~ apps.consume_regex) AND apps.consume_regex_of = apps.consume_topics), messages.ack_timeout_seconds)) END END,
        claim_token=$29::VARCHAR,
        confirm_seq=CASE WHEN messages.ordered THEN nextval($30::VARCHAR) END,
        subscribers=(
        SELECT array_agg(apps.name ORDER BY apps.name) AS array_agg_1
        FROM apps
        WHERE (messages.topic ~ apps.consume_regex)
            AND apps.consume_regex_of = apps.consume_topics)
    FROM batch
    WHERE messages.message_id = batch.message_id
        AND batch.action = $31::VARCHAR
        AND messages.state = $32::VARCHAR
        AND messages.claim_token = batch.token
    RETURNING messages.message_id,
        messages.app,
        messages.topic,
        messages.key,
        messages.payload,
        messages.headers,
        messages.check_url,
        messages.state,
        messages.dead,
        messages.dead_reason,
        messages.check_count,
        messages.delivery_count,
        messages.delivery_base,
        messages.check_after_seconds,
        messages.max_checks,
        messages.ack_timeout_seconds,
        messages.max_deliveries,
        messages.created_at,
        messages.confirmed_at,
        messages.done_at,
        messages.deleted_at,
        messages.next_check_at,
        messages.next_delivery_at,
        messages.deliver_after,
        messages.claim_token,
        messages.traceparent,
        messages.tracestate,
        messages.ordered,
        messages.confirm_seq,
        messages.transaction_id,
        messages.transaction_position,
        messages.publish_failure,
        messages.published_delivery,
        messages.subscribers,
        messages.acks,
        messages.exhausted,
        batch.token AS resolved_token),
    resolved_cancel AS (
    UPDATE messages
    SET state=$34::VARCHAR,
        dead=$35::BOOLEAN,
        dead_reason=$36::VARCHAR,
        deleted_at=now(),
        next_check_at=$37::TIMESTAMP
    WITH TIME ZONE,
        claim_token=$38::VARCHAR
    FROM batch
    WHERE messages.message_id = batch.message_id
        AND batch.action = $39::VARCHAR
        AND messages.state = $40::VARCHAR
        AND messages.claim_token = batch.token
    RETURNING messages.message_id,
        batch.token AS resolved_token),
    resolved_retry AS (
    UPDATE messages
    SET next_check_at=(now() + make_interval($42::INTEGER, $43::INTEGER, $44::INTEGER, $45::INTEGER, $46::INTEGER, $47::INTEGER, batch.delay)),
        claim_token=$48::VARCHAR
    FROM batch
    WHERE messages.message_id = batch.message_id
        AND batch.action = $49::VARCHAR
        AND messages.state = $50::VARCHAR
        AND messages.claim_token = batch.token
    RETURNING messages.message_id,
        batch.token AS resolved_token),
    resolved_exhaust AS (
    UPDATE messages
    SET dead=$52::BOOLEAN,
        dead_reason=$53::VARCHAR,
        next_check_at=$54::TIMESTAMP
    WITH TIME ZONE,
        claim_token=$55::VARCHAR
    FROM batch
    WHERE messages.message_id = batch.message_id
        AND batch.action = $56::VARCHAR
        AND messages.state = $57::VARCHAR
        AND messages.claim_token = batch.token
    RETURNING messages.message_id,
        batch.token AS resolved_token),
    changed AS (
    SELECT resolved_confirm.message_id AS message_id,
        resolved_confirm.resolved_token AS resolved_token,
        $17::VARCHAR AS action
    FROM resolved_confirm
    UNION ALL
    SELECT resolved_cancel.message_id AS message_id,
        resolved_cancel.resolved_token AS resolved_token,
        $33::VARCHAR AS action
    FROM resolved_cancel
    UNION ALL
    SELECT resolved_retry.message_id AS message_id,
        resolved_retry.resolved_token AS resolved_token,
        $41::VARCHAR AS action
    FROM resolved_retry
    UNION ALL
    SELECT resolved_exhaust.message_id AS message_id,
        resolved_exhaust.resolved_token AS resolved_token,
        $51::VARCHAR AS action
    FROM resolved_exhaust),
    changed_by AS (
    SELECT changed.message_id AS message_id,
        changed.resolved_token AS resolved_token,
        changed.action AS action,
        batch.actor AS actor
    FROM changed
    JOIN batch ON changed.message_id = batch.message_id
        AND batch.token = changed.resolved_token),
    answers_history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT new_events.message_id AS message_id,
        new_events.event AS event,
        new_events.actor AS actor,
        new_events.detail AS detail
    FROM (
        SELECT batch.message_id AS message_id,
            $1::INTEGER AS ord,
            $2::VARCHAR AS event,
            batch.actor AS actor,
            (jsonb_build_object($3::VARCHAR, batch.attempt, $4::VARCHAR, batch.outcome) || CASE
                    WHEN (batch.error IS NULL) THEN CAST($5::VARCHAR AS JSONB) ELSE jsonb_build_object($6::VARCHAR, batch.error) END) || CASE
                WHEN (changed_by.message_id IS NULL) THEN CAST($7::VARCHAR AS JSONB)
                ELSE CAST($8::VARCHAR AS JSONB) END AS detail
        FROM batch
        LEFT OUTER JOIN changed_by ON changed_by.message_id = batch.message_id
            AND changed_by.resolved_token = batch.token
        UNION ALL
        SELECT changed_by.message_id AS message_id,
            $58::INTEGER AS anon_1,
            $59::VARCHAR AS anon_2,
            changed_by.actor AS actor,
            CAST($60::VARCHAR AS JSONB) AS anon_3
        FROM changed_by
        WHERE changed_by.action = $61::VARCHAR
        UNION ALL
        SELECT changed_by.message_id AS message_id,
            $62::INTEGER AS anon_4,
            $63::VARCHAR AS anon_5,
            changed_by.actor AS actor,
            CAST($64::VARCHAR AS JSONB) AS anon_6
        FROM changed_by
        WHERE changed_by.action = $65::VARCHAR
        UNION ALL
        SELECT changed_by.message_id AS message_id,
            $66::INTEGER AS anon_7,
            $67::VARCHAR AS anon_8,
            changed_by.actor AS actor,
            CAST($68::VARCHAR AS JSONB) AS anon_9
        FROM changed_by
        WHERE changed_by.action = $69::VARCHAR
        UNION ALL
        SELECT resolved_confirm.message_id AS message_id,
            $70::INTEGER AS anon_10,
            $71::VARCHAR AS anon_11,
            batch.actor AS actor,
            jsonb_build_object($72::VARCHAR, resolved_confirm.delivery_count) AS jsonb_build_object_4
        FROM resolved_confirm
        JOIN batch ON resolved_confirm.message_id = batch.message_id
            AND batch.token = resolved_confirm.resolved_token
        WHERE resolved_confirm.delivery_count > resolved_confirm.delivery_base) AS new_events
    ORDER BY new_events.message_id,
        new_events.ord)
SELECT changed.message_id AS resolved_id,
    changed.action,
    resolved_confirm.message_id,
    resolved_confirm.app,
    resolved_confirm.topic,
    resolved_confirm.key,
    resolved_confirm.payload,
    resolved_confirm.headers,
    resolved_confirm.check_url,
    resolved_confirm.state,
    resolved_confirm.dead,
    resolved_confirm.dead_reason,
    resolved_confirm.check_count,
    resolved_confirm.delivery_count,
    resolved_confirm.delivery_base,
    resolved_confirm.check_after_seconds,
    resolved_confirm.max_checks,
    resolved_confirm.ack_timeout_seconds,
    resolved_confirm.max_deliveries,
    resolved_confirm.created_at,
    resolved_confirm.confirmed_at,
    resolved_confirm.done_at,
    resolved_confirm.deleted_at,
    resolved_confirm.next_check_at,
    resolved_confirm.next_delivery_at,
    resolved_confirm.deliver_after,
    resolved_confirm.claim_token,
    resolved_confirm.traceparent,
    resolved_confirm.tracestate,
    resolved_confirm.ordered,
    resolved_confirm.confirm_seq,
    resolved_confirm.transaction_id,
    resolved_confirm.transaction_position,
    resolved_confirm.publish_failure,
    resolved_confirm.published_delivery,
    resolved_confirm.subscribers,
    resolved_confirm.acks,
    resolved_confirm.exhausted
FROM changed
LEFT OUTER JOIN resolved_confirm ON resolved_confirm.message_id = changed.message_id
