from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config import embedded_db


class Command(BaseCommand):
    help = "Start, stop or show the embedded PostgreSQL server (used when DATABASE_URL is not set)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["start", "stop", "status"])

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.EMBEDDED_DATABASE:
            raise CommandError("DATABASE_URL is set: Toolgate is not using the embedded server.")
        action = options["action"]
        if action == "stop":
            self.stdout.write("stopped" if embedded_db.stop() else "not running")
            return
        info = embedded_db.ensure_running() if action == "start" else embedded_db.running_info()
        if info is None:
            self.stdout.write(f"not running (data in {embedded_db.pgdata_dir()})")
        else:
            self.stdout.write(f"running: pid {info.pid}, socket {info.host}, data {embedded_db.pgdata_dir()}")
