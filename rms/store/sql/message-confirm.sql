WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(message_id, app, actor, detail) ),
    changed AS (
    UPDATE messages m
    SET state = 'sent',
        dead = false,
        dead_reason = NULL,
        claim_token = NULL,
        confirmed_at = now(),
        next_check_at = NULL,
        next_delivery_at = CASE WHEN coalesce(m.deliver_after > now(), false) THEN m.deliver_after
            ELSE CASE WHEN m.ordered THEN now() ELSE now() + make_interval(0, 0, 0, 0, 0, 0, coalesce((SELECT max(coalesce(apps.ack_timeout_seconds, m.ack_timeout_seconds)) AS max_1 FROM apps WHERE (m.topic ~ apps.consume_regex) AND apps.consume_regex_of = apps.consume_topics), m.ack_timeout_seconds)) END END,
        max_deliveries = coalesce((
            SELECT max(coalesce(apps.max_deliveries, m.max_deliveries)) AS max_1
            FROM apps
            WHERE (m.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), m.max_deliveries),
        ack_timeout_seconds = coalesce((
            SELECT max(coalesce(apps.ack_timeout_seconds, m.ack_timeout_seconds)) AS max_1
            FROM apps
            WHERE (m.topic ~ apps.consume_regex)
                AND apps.consume_regex_of = apps.consume_topics), m.ack_timeout_seconds),
        subscribers = (
        SELECT array_agg(apps.name ORDER BY apps.name) AS array_agg_1
        FROM apps
        WHERE (m.topic ~ apps.consume_regex)
            AND apps.consume_regex_of = apps.consume_topics),
        (delivery_count, confirm_seq) = (
        SELECT CASE WHEN ordered.holds THEN m.delivery_count ELSE CASE WHEN coalesce(m.deliver_after > now(), false) THEN m.delivery_count
                ELSE m.delivery_count + 1 END END,
            CASE WHEN ordered.holds THEN nextval('messages_confirm_seq') ELSE NULL END
        FROM (
            SELECT m.ordered) AS ordered(holds))
    FROM input u
    WHERE m.message_id = u.message_id
        AND m.state = 'pending-send'
        AND m.transaction_id IS NULL
        AND (u.app IS NULL OR m.app = u.app)
    RETURNING m.*,
        u.actor AS event_actor,
        u.detail AS event_detail ),
    history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id,
        'confirmed',
        event_actor,
        event_detail::jsonb
    FROM changed
    UNION ALL
    SELECT message_id,
        'publishing',
        event_actor,
        jsonb_build_object('delivery', delivery_count)
    FROM changed
    WHERE delivery_count > delivery_base )
SELECT *
FROM changed
