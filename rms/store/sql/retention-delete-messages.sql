DELETE FROM messages AS m
WHERE m.message_id = ANY($1::text[])
    AND NOT m.dead
    AND m.state IN ('deleted', 'done')
RETURNING m.message_id
