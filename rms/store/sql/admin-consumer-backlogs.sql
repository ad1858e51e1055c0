SELECT owed.consumer,
    owed.n,
    owed.age,
    apps.last_ack_at,
    EXTRACT(epoch FROM now() - coalesce(apps.last_ack_at, apps.created_at)) AS since_ack
FROM (
    SELECT anon_1.consumer AS consumer,
        count(*) AS n,
        EXTRACT(epoch FROM now() - min(messages.confirmed_at)) AS age
    FROM messages
    JOIN unnest(messages.subscribers) AS anon_1(consumer) ON true
    WHERE messages.state = $1::VARCHAR
        AND coalesce(anon_1.consumer = any(messages.subscribers), false)
        AND NOT (coalesce(messages.acks, CAST($2::VARCHAR AS JSONB)) ? anon_1.consumer)
    GROUP BY anon_1.consumer) AS owed
LEFT OUTER JOIN apps ON apps.name = owed.consumer
ORDER BY owed.consumer
