from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from apps.tenants.models import ApiKey, Membership, Tenant
from tests import factories

pytestmark = pytest.mark.django_db


def test_create_tenant_with_owner_and_api_key_printed_last():
    out = StringIO()
    call_command(
        "create_tenant",
        "globex",
        "--name",
        "Globex",
        "--owner-email",
        "boss@globex.test",
        "--owner-password",
        factories.PASSWORD,
        stdout=out,
    )
    tenant = Tenant.objects.get(slug="globex")
    assert tenant.name == "Globex"
    owner = get_user_model().objects.get(email="boss@globex.test")
    assert Membership.objects.for_tenant(tenant).get(user=owner).role == "owner"

    out = StringIO()
    call_command("create_api_key", "--tenant", "globex", "--name", "ci", "--role", "admin", stdout=out)
    raw = out.getvalue().strip().splitlines()[-1]
    assert raw.startswith("tgk_")
    assert ApiKey.objects.for_tenant(tenant).get(name="ci").role == "admin"
    assert factories.key_client(raw).get("/api/v1/me/").json()["tenant"]["slug"] == "globex"


def test_create_tenant_refuses_duplicates_and_bad_slugs_writing_nothing():
    call_command("create_tenant", "dup", stdout=StringIO())
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_tenant", "dup", stdout=StringIO())
    with pytest.raises(CommandError, match="slug"):
        call_command("create_tenant", "Not A Slug!", stdout=StringIO())
    with pytest.raises(CommandError, match="password"):
        call_command(
            "create_tenant",
            "weak",
            "--owner-email",
            "x@weak.test",
            "--owner-password",
            "1",
            stdout=StringIO(),
        )
    assert list(Tenant.objects.order_by("slug").values_list("slug", flat=True)) == ["dup"]


def test_create_api_key_for_unknown_tenant():
    with pytest.raises(CommandError, match="No tenant with slug 'nope'"):
        call_command("create_api_key", "--tenant", "nope", "--name", "x", stdout=StringIO())


def test_seed_demo_is_idempotent(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    first, second = StringIO(), StringIO()
    call_command("seed_demo", stdout=first)
    call_command("seed_demo", stdout=second)
    assert "Demo API key (admin, shown once" in first.getvalue()
    assert "tgk_" not in second.getvalue()
    login = [line for line in first.getvalue().splitlines() if line.startswith("Dashboard login:")]
    assert login
    assert login[0] in second.getvalue()
    tenant = Tenant.objects.get(slug="demo")
    assert ApiKey.objects.for_tenant(tenant).count() == 1
    assert Membership.objects.for_tenant(tenant).count() == 1
    email, password = login[0].split(": ", 1)[1].split(" / ")
    assert get_user_model().objects.get(email=email).check_password(password)
