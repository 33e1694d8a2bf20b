"""The approvals inbox and the allow-always rules pages, through the Django test client.

Personas: an owner and admin of tenant A (who decide), a member and viewer (refused), and tenant B's
approvals, which never show up and cannot be decided from A.
"""

from __future__ import annotations

from datetime import UTC

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts import services
from apps.policy import approval_services
from apps.policy.approval_models import ApprovalRule, PendingApproval
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.tenants.roles import Role
from tests import factories
from tests.api.tenant_state import tenant_state

pytestmark = pytest.mark.django_db


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def member(tenant_a: Tenant) -> Client:
    return login(factories.make_user(tenant_a, Role.MEMBER))


def make_agent(tenant: Tenant, key: str = "bot") -> Agent:
    return services.agent_create(actor=Actor.system(tenant), key=key, name=key)


def ask(tenant: Tenant, command: str = "touch report.txt", agent: Agent | None = None) -> PendingApproval:
    agent = agent or make_agent(tenant)
    return approval_services.approval_request(
        actor=Actor.system(tenant),
        agent=agent,
        call_id="c" * 32,
        tool="exec",
        command=command,
        cwd="",
        shapes=[
            {"command": command, "binary_path": "/usr/bin/touch", "shape": "/usr/bin/touch *", "safe": False}
        ],
        reason="approval required for 'touch report.txt' (security: full, ask: on-miss)",
        package_install=False,
        origin="user",
        session_key="s-9",
        user_id="u-1",
        wait=True,
    )


def test_the_inbox_lists_pending_approvals_with_their_actions(admin, tenant_a, tenant_b):
    mine = ask(tenant_a)
    ask(tenant_b, "touch b-secret")

    body = admin.get(reverse("dashboard:approvals")).content.decode()

    assert f'data-id="{mine.pk}"' in body
    assert "touch report.txt" in body
    assert "b-secret" not in body
    assert reverse("dashboard:approval_decide", args=[mine.pk]) in body
    assert reverse("dashboard:approval_deny", args=[mine.pk]) in body
    assert 'value="allow-once"' in body
    assert 'value="allow-always"' in body
    assert "data-approvals-live" in body
    assert "approvals-live.js" in body


def test_the_navigation_has_the_section_and_its_live_badge_for_admins(admin, member, tenant_a):
    body = admin.get(reverse("dashboard:home")).content.decode()
    nav = body[body.index('<nav class="sidenav"') : body.index("</nav>")]
    assert reverse("dashboard:approvals") in nav
    assert 'data-nav-badge="approvals"' in nav
    assert "approvals-badge.js" in body
    member_body = member.get(reverse("dashboard:home")).content.decode()
    assert reverse("dashboard:approvals") not in member_body
    assert "approvals-badge.js" not in member_body


def test_the_count_is_the_tenants_pending_approvals(admin, tenant_a, tenant_b):
    approval = ask(tenant_a)
    ask(tenant_b, "touch b")
    assert admin.get(reverse("dashboard:approval_count")).json() == {"pending": 1}
    approval_services.approval_decide(actor=Actor.system(tenant_a), approval=approval, decision="deny")
    assert admin.get(reverse("dashboard:approval_count")).json() == {"pending": 0}


def test_allow_once_from_the_inbox(admin, tenant_a):
    approval = ask(tenant_a)
    response = admin.post(
        reverse("dashboard:approval_decide", args=[approval.pk]), {"decision": "allow-once", "reason": "ok"}
    )
    assert response.status_code == 302
    approval.refresh_from_db()
    assert (approval.status, approval.decision, approval.decision_reason) == ("allowed", "allow-once", "ok")
    assert approval.decided_by_label == "admin@a.test"


def test_allow_always_from_the_inbox_stores_a_rule_listed_on_the_rules_page(admin, tenant_a):
    approval = ask(tenant_a)
    admin.post(reverse("dashboard:approval_decide", args=[approval.pk]), {"decision": "allow-always"})
    rule = ApprovalRule.objects.for_tenant(tenant_a).get()
    body = admin.get(reverse("dashboard:approval_rules")).content.decode()
    assert "/usr/bin/touch *" in body
    assert reverse("dashboard:approval_rule_revoke", args=[rule.pk]) in body


def test_deny_is_confirmed_first_with_a_reason(admin, tenant_a):
    approval = ask(tenant_a)
    url = reverse("dashboard:approval_deny", args=[approval.pk])
    before = tenant_state(tenant_a)
    page = admin.get(url)
    assert page.status_code == 200
    assert "touch report.txt" in page.content.decode()
    assert tenant_state(tenant_a) == before

    admin.post(url, {"reason": "not on a Friday"})
    approval.refresh_from_db()
    assert (approval.status, approval.decision_reason) == ("denied", "not on a Friday")


def test_the_decide_route_does_not_deny_without_the_confirmation(admin, tenant_a):
    approval = ask(tenant_a)
    admin.post(reverse("dashboard:approval_decide", args=[approval.pk]), {"decision": "deny"})
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_a_resolved_approval_cannot_be_decided_again(admin, tenant_a):
    approval = ask(tenant_a)
    url = reverse("dashboard:approval_decide", args=[approval.pk])
    admin.post(url, {"decision": "allow-once"})
    before = tenant_state(tenant_a)
    response = admin.post(url, {"decision": "allow-always"}, follow=True)
    assert "not found or already resolved" in response.content.decode()
    assert tenant_state(tenant_a) == before


def expire(approval: PendingApproval) -> None:
    """Its time ran out while no process watched it (nothing has marked it timed out yet)."""
    from datetime import timedelta

    from django.utils import timezone

    PendingApproval.objects.for_tenant(approval.tenant).filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )


def test_an_expired_approval_is_not_offered_in_the_inbox(admin, tenant_a):
    fresh = ask(tenant_a, "touch fresh.txt")
    stale = ask(tenant_a, "touch stale.txt", agent=fresh.agent)
    expire(stale)
    page = admin.get(reverse("dashboard:approvals")).content.decode()
    pending, _, recent = page.partition("Recently resolved")
    assert "touch fresh.txt" in pending
    assert "touch stale.txt" not in pending
    assert "touch stale.txt" in recent
    assert "Timed out" in recent
    assert reverse("dashboard:approval_decide", args=[stale.pk]) not in page
    # The page's clock reference lets the inbox disable a row at its expiry before the server says so.
    assert '"server_now"' in page


def test_deciding_an_expired_approval_says_it_expired_and_refuses_its_call(admin, tenant_a):
    approval = ask(tenant_a)
    expire(approval)
    response = admin.post(
        reverse("dashboard:approval_decide", args=[approval.pk]), {"decision": "allow-once"}, follow=True
    )
    text = response.content.decode()
    assert "expired at" in text
    assert "its call was refused and nothing ran" in text
    assert "not found" not in text
    approval.refresh_from_db()
    assert (approval.status, approval.decision) == ("timed_out", "")


def test_the_deny_confirmation_of_an_expired_approval_goes_back_to_the_inbox(admin, tenant_a):
    approval = ask(tenant_a)
    expire(approval)
    before = tenant_state(tenant_a)
    response = admin.get(reverse("dashboard:approval_deny", args=[approval.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("dashboard:approvals")
    assert "expired at" in response.content.decode()
    assert tenant_state(tenant_a) == before


def test_revoking_a_rule_is_confirmed(admin, tenant_a):
    approval = ask(tenant_a)
    approval_services.approval_decide(
        actor=Actor.system(tenant_a), approval=approval, decision="allow-always"
    )
    rule = ApprovalRule.objects.for_tenant(tenant_a).get()
    url = reverse("dashboard:approval_rule_revoke", args=[rule.pk])
    before = tenant_state(tenant_a)
    assert admin.get(url).status_code == 200
    assert tenant_state(tenant_a) == before
    admin.post(url)
    rule.refresh_from_db()
    assert rule.revoked_at is not None
    assert rule.revoked_by_label == "admin@a.test"


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "dashboard:approvals", None),
        ("get", "dashboard:approval_rules", None),
        ("get", "dashboard:approval_count", None),
        ("post", "dashboard:approval_decide", {"decision": "allow-once"}),
        ("post", "dashboard:approval_deny", {"reason": "x"}),
        ("get", "dashboard:approval_allow_always", None),
        ("post", "dashboard:approval_allow_always", {"reason": "x"}),
    ],
)
def test_members_are_refused_and_nothing_changes(member, tenant_a, method, name, data):
    approval = ask(tenant_a)
    with_id = {"dashboard:approval_decide", "dashboard:approval_deny", "dashboard:approval_allow_always"}
    args = [approval.pk] if name in with_id else []
    before = tenant_state(tenant_a)
    response = getattr(member, method)(reverse(name, args=args), data)
    assert response.status_code == 403
    assert tenant_state(tenant_a) == before


def test_another_tenants_approval_and_rule_are_not_found(admin, tenant_a, tenant_b):
    theirs = ask(tenant_b)
    other = ask(tenant_b, "touch x", make_agent(tenant_b, "other"))
    approval_services.approval_decide(actor=Actor.system(tenant_b), approval=other, decision="allow-always")
    rule = ApprovalRule.objects.for_tenant(tenant_b).get()
    before = tenant_state(tenant_b)
    assert (
        admin.post(
            reverse("dashboard:approval_decide", args=[theirs.pk]), {"decision": "allow-once"}
        ).status_code
        == 404
    )
    assert (
        admin.post(reverse("dashboard:approval_deny", args=[theirs.pk]), {"reason": "x"}).status_code == 404
    )
    assert admin.post(reverse("dashboard:approval_rule_revoke", args=[rule.pk])).status_code == 404
    assert admin.get(reverse("dashboard:approval_allow_always", args=[theirs.pk])).status_code == 404
    assert (
        admin.post(reverse("dashboard:approval_allow_always", args=[theirs.pk]), {"reason": "x"}).status_code
        == 404
    )
    assert tenant_state(tenant_b) == before


def test_allow_always_in_the_inbox_goes_to_a_confirmation_of_its_rule_first(admin, tenant_a):
    approval = ask(tenant_a)
    always = reverse("dashboard:approval_allow_always", args=[approval.pk])
    inbox = admin.get(reverse("dashboard:approvals")).content.decode()
    assert f'formaction="{always}"' in inbox
    before = tenant_state(tenant_a)

    # The inbox's button posts its form here: the page shows the exact rule and changes nothing.
    page = admin.post(always, {"decision": "allow-always", "reason": "a build step"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "confirm the rule" in text
    assert "/usr/bin/touch *" in text  # the pattern
    assert "<code>/usr/bin/touch</code>" in text  # the binary
    assert "agent <code>bot</code>" in text  # who it applies to
    assert "every session and user" in text
    assert "admin@a.test" in text  # who creates it
    assert "new rule" in text
    assert 'value="a build step"' in text
    assert reverse("dashboard:approval_decide", args=[approval.pk]) in text
    assert tenant_state(tenant_a) == before
    assert admin.get(always).status_code == 200
    assert tenant_state(tenant_a) == before
    approval.refresh_from_db()
    assert approval.status == "pending"

    # Confirming it (the page's form) allows the call and stores the rule.
    admin.post(
        reverse("dashboard:approval_decide", args=[approval.pk]),
        {"decision": "allow-always", "reason": "a build step"},
    )
    approval.refresh_from_db()
    assert (approval.status, approval.decision) == ("allowed", "allow-always")
    assert ApprovalRule.objects.for_tenant(tenant_a).get().shape == "/usr/bin/touch *"


def test_the_confirmation_says_when_an_active_rule_already_covers_the_command(admin, tenant_a):
    first = ask(tenant_a)
    approval_services.approval_decide(actor=Actor.system(tenant_a), approval=first, decision="allow-always")
    second = ask(tenant_a, agent=first.agent)
    text = admin.get(reverse("dashboard:approval_allow_always", args=[second.pk])).content.decode()
    assert "already allowed by an active rule" in text
    assert "new rule" not in text


def test_the_allow_always_confirmation_of_an_expired_approval_says_it_expired(admin, tenant_a):
    approval = ask(tenant_a)
    expire(approval)
    before = tenant_state(tenant_a)
    response = admin.post(
        reverse("dashboard:approval_allow_always", args=[approval.pk]), {"reason": "x"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("dashboard:approvals")
    assert "expired at" in response.content.decode()
    assert tenant_state(tenant_a) == before


def test_a_decision_after_expiry_names_the_time_in_the_pages_format_never_an_internal_id(admin, tenant_a):
    approval = ask(tenant_a)
    expire(approval)
    approval.refresh_from_db()
    for url, data in (
        (reverse("dashboard:approval_decide", args=[approval.pk]), {"decision": "allow-once"}),
        (reverse("dashboard:approval_deny", args=[approval.pk]), {"reason": "late"}),
    ):
        text = admin.post(url, data, follow=True).content.decode()
        shown = text[
            text.index('<ul class="messages"') : text.index("</ul>", text.index('<ul class="messages"'))
        ]
        iso = approval.expires_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        when = approval.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        # A <time> like every timestamp of the pages (when.js shows it in local time, UTC on hover).
        assert f'expired at <time datetime="{iso}" title="{when} UTC">{when} UTC</time>' in shown
        assert "was refused" in shown
        assert str(approval.pk) not in shown


def test_each_outcome_has_its_colour_icon_and_word(admin, tenant_a):
    agent = make_agent(tenant_a)
    allowed, denied, expired = (ask(tenant_a, f"touch {n}", agent) for n in ("a", "b", "c"))
    system = Actor.system(tenant_a)
    approval_services.approval_decide(actor=system, approval=allowed, decision="allow-once")
    approval_services.approval_decide(actor=system, approval=denied, decision="deny")
    expire(expired)
    body = admin.get(reverse("dashboard:approvals")).content.decode()
    recent = body.partition("Recently resolved")[2]
    for status, icon, word in (
        ("allowed", "✓", "Allowed"),
        ("denied", "✕", "Denied"),
        ("timed_out", "⊘", "Timed out"),
    ):
        assert (
            f'<span class="outcome outcome-{status}" data-outcome="{status}">'
            f'<span class="outcome-icon" aria-hidden="true">{icon}</span> {word}</span>'
        ) in recent
    assert "css/approvals.css" in body


def test_pending_rows_carry_a_countdown_and_a_polite_announcer(admin, tenant_a):
    ask(tenant_a)
    body = admin.get(reverse("dashboard:approvals")).content.decode()
    assert "data-countdown" in body
    assert 'aria-live="polite" data-approvals-announce' in body
    assert '"always_url"' in body
