"""What the browser tests share: how Chromium is started, screenshots, logging in."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Page, expect

from tests import factories

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SCREENSHOTS = Path(os.environ.get("DASHBOARD_SCREENSHOT_DIR", "/tmp"))


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"dashboard-{name}.png"), full_page=True)


def log_in(page: Page, base: str, email: str) -> None:
    page.goto("/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(factories.PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base}/")
