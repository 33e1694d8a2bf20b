"""The toolkit: what every tool and every app that runs tools builds on (the call context, results, the
tool registry and providers, tool definitions as clients see them (flat or as the STRAP domain
tools, and the catalog document), the scrubber, the SSRF guard and URL checks, workspaces and the VFS,
shell parsing, the safeguard and the deny groups, running processes in the jail, and a tenant's runtime
and sandbox settings: ``runtime_settings`` and ``sandbox_config``). It imports nothing of the gateway
(``apps.runtime``) or of the domain apps: only the foundation (tenants, audit, realtime, the tools
catalog)."""
