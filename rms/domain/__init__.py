"""Pure domain: states, transitions, policies, errors. No I/O here."""
