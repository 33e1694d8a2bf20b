"""Agents' context files (SOUL.md, IDENTITY.md, AGENTS.md, TOOLS.md, HEARTBEAT.md, USER.md, BOOTSTRAP.md),
stored by Toolgate per agent and per user, and reached through the normal file tools."""
