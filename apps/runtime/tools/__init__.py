"""Built-in tool implementations; importing this package registers them (see apps/runtime/apps.py)."""
