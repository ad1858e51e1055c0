SELECT EXTRACT(epoch FROM now() - min(oldest.due)) AS anon_1
FROM (
    SELECT min(messages.next_check_at) AS due
    FROM messages
    WHERE messages.state = $1::VARCHAR
        AND NOT messages.dead
        AND messages.next_check_at <= now()
    UNION ALL
    SELECT min(transactions.next_check_at) AS due
    FROM transactions
    WHERE transactions.state = $2::VARCHAR
        AND NOT transactions.dead
        AND transactions.next_check_at <= now()) AS oldest
