SELECT apps.name,
    apps.api_key_hash,
    apps.signing_secret,
    apps.previous_signing_secret_expires_at,
    apps.produce_topics,
    apps.consume_topics,
    apps.check_url_prefixes,
    apps.default_check_url,
    apps.created_at,
    apps.key_rotated_at,
    apps.ordered_topics,
    apps.consume_regex,
    apps.consume_regex_of,
    apps.last_ack_at,
    apps.max_deliveries,
    apps.ack_timeout_seconds,
    CASE WHEN (apps.previous_signing_secret_expires_at IS NULL OR apps.previous_signing_secret_expires_at > now()) THEN apps.previous_signing_secret END AS previous_signing_secret
FROM apps
WHERE apps.name = ANY ($1::TEXT[])
