"""Agents' memory: documents stored by Toolgate (MEMORY.md, memory/…), chunked and indexed for hybrid
(full-text + vector) search, and the embedders behind the vectors."""
