"""Agent runs: a turn of an agent against its provider's chat model, every tool call going through the
pipeline, recorded with status, transcript (the session's messages), usage and timing."""
