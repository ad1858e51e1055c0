DELETE FROM ordering_keys
WHERE ordering_keys.lease_token = $1::VARCHAR
