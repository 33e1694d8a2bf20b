"""The dashboard's pages, one module per section."""
