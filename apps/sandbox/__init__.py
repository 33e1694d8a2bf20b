"""The exec sandbox, a domain app: Docker containers per tenant and scope, and where a tool call's
processes run (the jail, the call's container, or the host where the operator allows it).

:mod:`apps.toolkit.sandbox_config` holds the settings (in the toolkit, free of the engine, so the runtime
settings and every app may read them); :mod:`apps.sandbox.manager` the containers and the runs in them;
:mod:`apps.sandbox.placement` where a call's processes run; :mod:`apps.sandbox.models` the record of each
container; :mod:`apps.sandbox.api` its REST API (``/api/v1/sandbox/…``)."""
