from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Prepare the database for serving: migrate, create the cache table, seed the demo (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        # One process instead of three: start-up time is dominated by Python and Django imports.
        call_command("migrate", interactive=False, verbosity=0)
        call_command("createcachetable", verbosity=0)
        call_command("seed_demo", stdout=self.stdout)
