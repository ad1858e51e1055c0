NOT m.dead AND ((m.state = 'deleted' AND m.deleted_at < $1) OR (m.state = 'done' AND m.done_at < $1))
