UPDATE messages
SET next_delivery_at=(now() + make_interval($1::INTEGER, $2::INTEGER, $3::INTEGER, $4::INTEGER, $5::INTEGER, $6::INTEGER, $7))
WHERE messages.ordered
    AND messages.state = $8::VARCHAR
    AND NOT messages.dead
    AND messages.delivery_count <= messages.delivery_base
    AND messages.claim_token IS NULL
    AND messages.next_delivery_at <= now()
    AND messages.app = $9::VARCHAR
    AND messages.topic = $10::VARCHAR
    AND messages.key = $11::VARCHAR
    AND messages.confirm_seq > $12::BIGINT
