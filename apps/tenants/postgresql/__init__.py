"""Toolgate's PostgreSQL backend: Django's, with a connection pool that fails fast while the server is
unreachable (``apps.tenants.database``)."""
