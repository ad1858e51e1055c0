DELETE FROM message_events AS e
WHERE e.message_id = ANY($1::text[]) OR e.id = ANY(ARRAY(
        SELECT o.id
        FROM message_events AS o
        WHERE o.id = ANY($2::bigint[])
            AND NOT EXISTS (
            SELECT 1
            FROM messages AS m
            WHERE m.message_id = o.message_id)))
