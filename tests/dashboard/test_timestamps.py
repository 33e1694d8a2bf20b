"""One timestamp format: templates render every timestamp with ``{% when %}`` as
``<time datetime="<ISO UTC>" title="<Y-m-d H:M:S> UTC"><Y-m-d H:M:S> UTC</time>`` (static/js/when.js turns
the text to local time), and no template formats a timestamp with ``|date:`` any more."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.template import Context, Template
from django.urls import reverse

from apps.teams import board
from apps.teams.models import Task
from apps.tenants.models import Tenant
from tests.teams.conftest import make_crew

TEMPLATES = Path(settings.BASE_DIR) / "templates"
# The sandbox's age cell shows a relative age ("3 minutes") with the UTC time on hover in its title; a
# title attribute cannot hold a <time> element.
RELATIVE_AGE = "templates/dashboard/sandbox/_containers.html"


def render(source: str, **context: object) -> str:
    return Template(source).render(Context(context))


def test_the_tag_renders_a_time_element_with_utc_in_datetime_and_title() -> None:
    tokyo = dt.timezone(dt.timedelta(hours=9))
    moment = dt.datetime(2026, 11, 28, 23, 3, 5, 123456, tzinfo=tokyo)
    assert render("{% when at %}", at=moment) == (
        '<time datetime="2026-11-28T14:03:05Z" title="2026-11-28 14:03:05 UTC">2026-11-28 14:03:05 UTC</time>'
    )
    assert render('{% when at css_class="small muted" %}', at=moment).startswith(
        '<time datetime="2026-11-28T14:03:05Z" title="2026-11-28 14:03:05 UTC" class="small muted">'
    )
    assert render('{% when at "never" %}', at=None) == "never"
    assert render("{% when at %}", at=None) == "—"
    assert render("{% when at fallback %}", at="", fallback="<b>") == "&lt;b&gt;"
    assert render("{% when at %}", at=dt.date(2026, 1, 2)) == '<time datetime="2026-01-02">2026-01-02</time>'


@pytest.mark.django_db
def test_a_page_renders_its_timestamps_as_time_elements(member, tenant_a: Tenant) -> None:
    crew = make_crew(tenant_a)
    task = board.create_task(crew.team, actor=crew.as_lead, subject="Count the rows")
    Task.objects.for_tenant(tenant_a).filter(pk=task.pk).update(
        created_at=dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    )
    page = member.get(reverse("dashboard:team_task", args=[crew.team.pk, task.pk])).content.decode()
    assert (
        '<time datetime="2026-03-04T05:06:07Z" title="2026-03-04 05:06:07 UTC">2026-03-04 05:06:07 UTC</time>'
        in page
    )
    times = re.findall(r"<time [^>]*>", page)
    assert times
    assert all(re.fullmatch(r'<time datetime="[^"]+Z" title="[^"]+ UTC"( class="[^"]*")?>', t) for t in times)
    assert page.count("js/when.js") == 1


def test_no_template_formats_a_timestamp_with_the_date_filter() -> None:
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        relative = str(path.relative_to(settings.BASE_DIR))
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "naturaltime" in line or ("|date:" in line and relative != RELATIVE_AGE):
                offenders.append(f"{relative}:{number}")
            if relative == RELATIVE_AGE and "|date:" in line:
                assert 'title="{{ row.created_at|date:' in line, f"{relative}:{number}"
    assert offenders == []


def test_base_loads_when_js_before_the_page_scripts() -> None:
    base = (TEMPLATES / "dashboard" / "base.html").read_text()
    assert base.count("js/when.js") == 1
    assert base.index("js/when.js") < base.index("{% block scripts %}")
