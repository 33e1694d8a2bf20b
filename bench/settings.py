"""Settings of the daphne process the HTTP bench starts: the product's, with the bench URLconf."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
