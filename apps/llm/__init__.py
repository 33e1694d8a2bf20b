"""LLM and media providers per tenant (OpenAI-compatible endpoints reached through the SSRF guard),
and the tools that need them."""
