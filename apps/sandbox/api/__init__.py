"""REST API of the exec sandbox: the engine's state and the tenant's containers."""
