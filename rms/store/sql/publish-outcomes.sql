WITH batch AS 
(SELECT rows.message_id AS message_id, rows.delivery AS delivery, rows.ok AS ok, rows.due AS due, rows.retry AS retry, rows.error AS error, rows.reason AS reason, rows.actor AS actor 
FROM unnest($7::TEXT[], $8::INTEGER[], $9::BOOLEAN[], $10::FLOAT[], $11::FLOAT[], $12::TEXT[], $13::TEXT[], $14::TEXT[]) AS rows(message_id, delivery, ok, due, retry, error, reason, actor)), 
history AS 
(INSERT INTO message_events (message_id, event, actor, detail) SELECT batch.message_id AS message_id, CASE WHEN batch.ok THEN $1::VARCHAR ELSE $2::VARCHAR END AS anon_1, batch.actor AS actor, CASE WHEN batch.ok THEN jsonb_build_object($3::VARCHAR, batch.delivery) ELSE jsonb_build_object($4::VARCHAR, batch.delivery, $5::VARCHAR, batch.error, $6::VARCHAR, batch.reason) END AS anon_2 
FROM batch), 
rescheduled AS 
(UPDATE messages SET next_delivery_at=(now() + make_interval($15::INTEGER, $16::INTEGER, $17::INTEGER, $18::INTEGER, $19::INTEGER, $20::INTEGER, batch.due)), claim_token=$21::VARCHAR FROM batch WHERE messages.message_id = batch.message_id AND messages.state = $22::VARCHAR AND messages.delivery_count = batch.delivery AND batch.ok AND batch.due IS NOT NULL RETURNING messages.message_id), 
given_back AS 
(UPDATE messages SET delivery_count=(messages.delivery_count + $23::INTEGER), next_delivery_at=(now() + make_interval($24::INTEGER, $25::INTEGER, $26::INTEGER, $27::INTEGER, $28::INTEGER, $29::INTEGER, batch.retry)), claim_token=$30::VARCHAR FROM batch WHERE messages.message_id = batch.message_id AND messages.state = $22::VARCHAR AND messages.delivery_count = batch.delivery AND NOT batch.ok RETURNING messages.message_id)
 SELECT rescheduled.message_id 
FROM rescheduled UNION ALL SELECT given_back.message_id 
FROM given_back
