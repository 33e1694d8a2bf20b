"""``make bench``: how much each API endpoint costs compared with a bare DRF view, in the same run.

Approach: Django's in-process test client against a bench-only URLconf (``bench.urls``), on a
throwaway ``toolgate_bench`` database that the harness creates, fills and drops (see ``bench.db``).

Why in-process rather than a real daphne:

* The question this harness answers is "what does *our* code add per request" — authentication,
  tenant scoping, permission checks, queries, serialization. The in-process client runs the full
  middleware stack, DRF and the real PostgreSQL (over its Unix socket), without the ASGI server, the
  HTTP parser and the client's own cost, which are the same for every endpoint and, on a small
  machine where client and server share the cores, would dominate and blur the differences.
* It allows counting the queries of each request (``CaptureQueriesContext``), the number most
  likely to regress.
* The baseline (a DRF ``APIView`` with no authentication and no permission classes, returning a
  constant) is measured the same way in the same run, so the ratios cancel machine speed and load.

What it therefore does not show: the daphne/ASGI overhead (a thread hop per sync view) and the
per-request database connect that ``CONN_MAX_AGE=0`` (the default) costs under daphne — the test
client keeps one connection for the whole run. The harness measures that connect separately and
prints it, so it can be added to every row by hand. Requests run one at a time, so requests/s is
``1 / mean latency`` of a single worker, not a server's throughput under concurrency.
"""
