"""The toolkit: what every tool and every app that runs tools builds on (the call context, results, the
tool registry and providers, tool definitions as clients see them (flat or as the STRAP domain
tools, and the catalog document), the scrubber, the SSRF guard and URL checks, workspaces and the VFS, shell
parsing, the safeguard and the deny groups, and running processes in the jail). It imports nothing of
the gateway (``apps.runtime``) or of the domain apps: only the foundation (tenants, audit, realtime, the
tools catalog)."""
