"""The ops dashboard: a static page (``GET /dashboard``) that calls the admin JSON API, plus the
one endpoint only it needs, the latest SLA report summary."""
