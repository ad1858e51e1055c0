"""PostgreSQL access shared by the API and the workers: one home for every SQL statement."""
