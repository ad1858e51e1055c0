DELETE FROM message_events AS e
WHERE e.id = ANY($2::bigint[])
    AND (e.message_id = ANY($1::text[]) OR NOT EXISTS (
        SELECT 1
        FROM messages AS m
        WHERE m.message_id = e.message_id))
