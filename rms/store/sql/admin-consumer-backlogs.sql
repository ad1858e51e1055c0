SELECT anon_1.consumer,
    count(*) AS n,
    EXTRACT(epoch FROM now() - min(messages.confirmed_at)) AS age
FROM messages
JOIN unnest(messages.subscribers) AS anon_1(consumer) ON true
WHERE messages.state = $1::VARCHAR
    AND coalesce(anon_1.consumer = any(messages.subscribers), false)
    AND NOT (coalesce(messages.acks, CAST($2::VARCHAR AS JSONB)) ? anon_1.consumer)
GROUP BY anon_1.consumer
ORDER BY anon_1.consumer
