DELETE FROM transactions AS t
WHERE NOT t.dead
    AND ((t.state = 'cancelled' AND t.cancelled_at < $1) OR (t.state = 'confirmed' AND t.confirmed_at < $1))
    AND NOT EXISTS (
    SELECT 1
    FROM messages AS m
    WHERE m.transaction_id = t.transaction_id)
