SELECT messages.message_id,
    messages.topic,
    messages.created_at
FROM messages
WHERE messages.message_id = ANY ($1::TEXT[])
