WITH batch AS 
(SELECT rows.message_id AS message_id, rows.delivery AS delivery, rows.ok AS ok, rows.due AS due, rows.retry AS retry, rows.error AS error, rows.reason AS reason, rows.actor AS actor 
FROM unnest($8::TEXT[], $9::INTEGER[], $10::BOOLEAN[], $11::FLOAT[], $12::FLOAT[], $13::TEXT[], $14::TEXT[], $15::TEXT[]) AS rows(message_id, delivery, ok, due, retry, error, reason, actor)), 
taken AS 
(SELECT messages.message_id AS message_id, messages.state AS state, messages.done_at AS done_at, messages.acks AS acks 
FROM messages 
WHERE messages.message_id IN (SELECT batch.message_id 
FROM batch 
WHERE batch.ok) FOR SHARE SKIP LOCKED), 
history AS 
(INSERT INTO message_events (message_id, event, actor, detail, at) SELECT batch.message_id AS message_id, CASE WHEN batch.ok THEN $1::VARCHAR ELSE $2::VARCHAR END AS anon_1, batch.actor AS actor, CASE WHEN batch.ok THEN jsonb_build_object($3::VARCHAR, batch.delivery) ELSE jsonb_build_object($4::VARCHAR, batch.delivery, $5::VARCHAR, batch.error, $6::VARCHAR, batch.reason) END AS anon_2, CASE WHEN (taken.state = $7::VARCHAR) THEN least(now(), taken.done_at) ELSE now() END AS anon_3 
FROM batch LEFT OUTER JOIN taken ON taken.message_id = batch.message_id), 
rescheduled AS 
(UPDATE messages SET next_delivery_at=(now() + make_interval($19::INTEGER, $20::INTEGER, $21::INTEGER, $22::INTEGER, $23::INTEGER, $24::INTEGER, batch.due)), claim_token=$25::VARCHAR, publish_failure=$26::VARCHAR, published_delivery=messages.delivery_count FROM batch WHERE messages.message_id = batch.message_id AND messages.state = $27::VARCHAR AND messages.delivery_count = batch.delivery AND batch.ok AND batch.due IS NOT NULL RETURNING messages.message_id), 
given_back AS 
(UPDATE messages SET delivery_count=(messages.delivery_count + $30::INTEGER), next_delivery_at=(now() + make_interval($31::INTEGER, $32::INTEGER, $33::INTEGER, $34::INTEGER, $35::INTEGER, $36::INTEGER, batch.retry)), claim_token=$37::VARCHAR, publish_failure=coalesce(batch.reason, $38::VARCHAR), published_delivery=$39::INTEGER FROM batch WHERE messages.message_id = batch.message_id AND messages.state = $27::VARCHAR AND messages.delivery_count = batch.delivery AND NOT batch.ok RETURNING messages.message_id)
 SELECT outcomes.message_id, outcomes.settle, outcomes.held 
FROM (SELECT batch.message_id AS message_id, $16::BOOLEAN AS settle, taken.message_id IS NULL AS held 
FROM batch LEFT OUTER JOIN taken ON taken.message_id = batch.message_id 
WHERE batch.ok AND (taken.message_id IS NULL OR taken.state = $7::VARCHAR OR taken.acks IS NOT NULL) UNION ALL SELECT rescheduled.message_id AS message_id, $17::BOOLEAN AS settle, $18::BOOLEAN AS held 
FROM rescheduled UNION ALL SELECT given_back.message_id AS message_id, $28::BOOLEAN AS anon_4, $29::BOOLEAN AS anon_5 
FROM given_back) AS outcomes
