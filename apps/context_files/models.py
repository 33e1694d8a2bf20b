"""Context file models."""
