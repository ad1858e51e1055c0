WITH due AS MATERIALIZED (
    SELECT transactions.transaction_id AS transaction_id,
        transactions.check_count >= transactions.max_checks AS spent
    FROM transactions
    WHERE transactions.state = $14::VARCHAR
        AND NOT transactions.dead
        AND transactions.next_check_at <= now()
    ORDER BY transactions.next_check_at
    LIMIT $15
    FOR UPDATE SKIP LOCKED),
    exhausted AS (
    UPDATE transactions
    SET dead=$10::BOOLEAN,
        dead_reason=$11::VARCHAR,
        next_check_at=$12::TIMESTAMP
    WITH TIME ZONE,
        claim_token=$13::VARCHAR
    FROM due
    WHERE transactions.transaction_id = due.transaction_id
        AND due.spent
    RETURNING transactions.transaction_id,
        transactions.app,
        transactions.check_url,
        transactions.message_ids,
        transactions.state,
        transactions.dead,
        transactions.dead_reason,
        transactions.check_count,
        transactions.check_after_seconds,
        transactions.max_checks,
        transactions.created_at,
        transactions.confirmed_at,
        transactions.cancelled_at,
        transactions.next_check_at,
        transactions.claim_token),
    flagged AS (
    UPDATE messages
    SET dead=$6::BOOLEAN,
        dead_reason=$7::VARCHAR,
        next_check_at=$8::TIMESTAMP
    WITH TIME ZONE,
        claim_token=$9::VARCHAR
    FROM exhausted
    WHERE messages.transaction_id = exhausted.transaction_id
        AND messages.state = $16::VARCHAR
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
        messages.exhausted),
    dead_history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT flagged.message_id AS message_id,
        $1::VARCHAR AS anon_1,
        $2 AS anon_2,
        jsonb_build_object($3::VARCHAR, $4::VARCHAR, $5::VARCHAR, flagged.transaction_id) AS jsonb_build_object_1
    FROM flagged),
    claimed AS (
    UPDATE transactions
    SET check_count=(transactions.check_count + $18::INTEGER),
        next_check_at=(now() + make_interval($19::INTEGER, $20::INTEGER, $21::INTEGER, $22::INTEGER, $23::INTEGER, $24::INTEGER, $25)),
        claim_token=$26::VARCHAR
    FROM due
    WHERE transactions.transaction_id = due.transaction_id
        AND NOT due.spent
    RETURNING transactions.transaction_id,
        transactions.app,
        transactions.check_url,
        transactions.message_ids,
        transactions.state,
        transactions.dead,
        transactions.dead_reason,
        transactions.check_count,
        transactions.check_after_seconds,
        transactions.max_checks,
        transactions.created_at,
        transactions.confirmed_at,
        transactions.cancelled_at,
        transactions.next_check_at,
        transactions.claim_token)
SELECT claimed.transaction_id,
    claimed.app,
    claimed.check_url,
    claimed.message_ids,
    claimed.state,
    claimed.dead,
    claimed.dead_reason,
    claimed.check_count,
    claimed.check_after_seconds,
    claimed.max_checks,
    claimed.created_at,
    claimed.confirmed_at,
    claimed.cancelled_at,
    claimed.next_check_at,
    claimed.claim_token,
    $17::BOOLEAN AS was_exhausted
FROM claimed
UNION ALL
SELECT exhausted.transaction_id,
    exhausted.app,
    exhausted.check_url,
    exhausted.message_ids,
    exhausted.state,
    exhausted.dead,
    exhausted.dead_reason,
    exhausted.check_count,
    exhausted.check_after_seconds,
    exhausted.max_checks,
    exhausted.created_at,
    exhausted.confirmed_at,
    exhausted.cancelled_at,
    exhausted.next_check_at,
    exhausted.claim_token,
    $27::BOOLEAN AS was_exhausted
FROM exhausted
