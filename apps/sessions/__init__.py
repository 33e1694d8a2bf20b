"""Sessions: an agent's conversations (one per session key) and their message history, written by agent
runs and by API clients, read through the API, the dashboard and the sessions tools."""
