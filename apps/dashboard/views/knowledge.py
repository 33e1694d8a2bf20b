"""An agent's knowledge graph: everyone reads its entities (by type, by words) and their relations;
administrators create, edit and delete entities and add and delete relations.

The agent is found inside the tenant the page acts in: another tenant's is 404 whatever the method.
Changes go through ``apps.knowledge.services`` (audited, published on the ``knowledge`` topic); an
administrator's pages show live when the graph changes elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from apps.dashboard.actor import READ_ONLY, DashboardRequest, dashboard_view
from apps.dashboard.forms import add_service_error, parse_json_object
from apps.dashboard.views.confirm import confirm_action
from apps.knowledge import selectors, services
from apps.knowledge.access import access_entity, access_relation
from apps.knowledge.models import (
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_TYPE_CHARS,
    MAX_USER_ID_CHARS,
    Entity,
    Source,
)
from apps.knowledge.validation import EntityRef, RelationInput, clean_name, clean_type, parse_entity
from apps.tenants.access import access_agent
from apps.tenants.errors import ServiceError
from apps.tenants.models import Agent
from apps.tenants.roles import Role

PAGE_SIZE = 50
DETAIL_RELATIONS = 200


class EntityForm(forms.Form):
    name = forms.CharField(max_length=MAX_NAME_CHARS, label="Name")
    type = forms.CharField(
        max_length=MAX_TYPE_CHARS,
        label="Type",
        help_text="person, organization, project, concept, … (letters, digits and _).",
    )
    description = forms.CharField(
        required=False,
        max_length=MAX_DESCRIPTION_CHARS,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="Description",
    )
    aliases = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Aliases",
        help_text="Other names, one a line (at most 20).",
    )
    properties = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "mono"}),
        label="Properties",
        help_text='A JSON object, e.g. {"founded": 1949}.',
    )

    def clean_description(self) -> str:
        # A browser sends a textarea's lines with CRLF; the graph keeps them as the API does, with LF.
        return str(self.cleaned_data["description"]).replace("\r\n", "\n")

    def clean_aliases(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["aliases"].splitlines() if line.strip()]

    def clean_properties(self) -> dict[str, Any]:
        return parse_json_object(self.cleaned_data["properties"], example='{"founded": 1949}')

    def payload(self, *, keep_empty: bool = True) -> dict[str, Any]:
        """The entity as the API takes it; without ``keep_empty``, fields left empty are not given (an
        upsert then keeps what a merged entity has)."""
        data = self.cleaned_data
        payload = {"type": data["type"], "name": data["name"]}
        for name in ("description", "aliases", "properties"):
            if keep_empty or data[name]:
                payload[name] = data[name]
        return payload


class NewEntityForm(EntityForm):
    user_id = forms.CharField(
        required=False,
        max_length=MAX_USER_ID_CHARS,
        label="User id",
        help_text="The user whose graph it joins; empty for the agent's shared graph. An entity of the "
        "same type and name there is merged into.",
    )


class RelationForm(forms.Form):
    type = forms.CharField(max_length=MAX_TYPE_CHARS, label="Relation", help_text="works_at, depends_on, …")
    direction = forms.ChoiceField(
        choices=[("out", "from this entity to the other"), ("in", "from the other entity to this one")],
        label="Direction",
    )
    other_type = forms.CharField(max_length=MAX_TYPE_CHARS, label="Other entity's type")
    other_name = forms.CharField(max_length=MAX_NAME_CHARS, label="Other entity's name")
    weight = forms.FloatField(required=False, min_value=0, max_value=1, label="Weight", help_text="0 to 1.")
    create_missing = forms.BooleanField(
        required=False, label="Create the other entity when the graph has none of that type and name"
    )


def _list_url(agent: Agent) -> str:
    return reverse("dashboard:knowledge", args=[agent.key])


def _entity_url(agent: Agent, entity: Entity) -> str:
    return reverse("dashboard:knowledge_entity", args=[agent.key, entity.pk])


def _live(request: DashboardRequest, agent: Agent, entity: Entity | None = None) -> dict[str, Any]:
    """What static/js/knowledge-live.js needs (administrators only: the topic is theirs)."""
    if not request.actor.can(Role.ADMIN):
        return {"live": False}
    return {"live": True, "live_config": {"agent": agent.key, "entity": str(entity.pk) if entity else ""}}


def _initial(entity: Entity) -> dict[str, Any]:
    return {
        "name": entity.name,
        "type": entity.entity_type,
        "description": entity.description,
        "aliases": "\n".join(entity.aliases),
        "properties": json.dumps(entity.properties, indent=2, ensure_ascii=False)
        if entity.properties
        else "",
    }


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def entity_list(request: DashboardRequest, key: str) -> HttpResponse:
    """The agent's entities by name; ``?type=`` one type, ``?q=`` words of a name, alias or description,
    ``?user=`` one user's graph ("-" the shared one)."""
    agent = access_agent(actor=request.actor, key=key)
    tenant = request.actor.tenant
    types = selectors.entity_types(tenant=tenant, agent=agent)
    chosen = request.GET.get("type", "").strip()[:MAX_TYPE_CHARS]
    q = request.GET.get("q", "").strip()[:MAX_NAME_CHARS]
    user = request.GET.get("user", "").strip()[:MAX_USER_ID_CHARS]
    try:
        entity_type = clean_type(chosen, "type") if chosen else None
    except ServiceError:
        entity_type = None
        chosen = ""
    rows = selectors.entity_list(
        tenant=tenant,
        agent=agent,
        entity_type=entity_type,
        q=q,
        user_id=None if not user else ("" if user == "-" else user),
    )
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    can_edit = request.actor.can(Role.ADMIN)
    return render(
        request,
        "dashboard/knowledge/list.html",
        {
            "agent": agent,
            "page": page,
            "types": types,
            "chosen": chosen,
            "q": q,
            "user": user,
            "filtered": bool(chosen or q or user),
            "can_edit": can_edit,
            "form": NewEntityForm() if can_edit else None,
            **_live(request, agent),
        },
    )


@dashboard_view(Role.VIEWER, methods=READ_ONLY)
def entity_detail(request: DashboardRequest, key: str, pk: str) -> HttpResponse:
    """One entity: its description, aliases and properties, its relations out and in; for administrators
    the edit form and the form to add a relation."""
    agent = access_agent(actor=request.actor, key=key)
    entity = access_entity(tenant=request.actor.tenant, agent=agent, id=pk)
    can_edit = request.actor.can(Role.ADMIN)
    form = EntityForm(initial=_initial(entity)) if can_edit else None
    relation_form = RelationForm() if can_edit else None
    return _detail(request, agent, entity, form, relation_form, status=200)


def _detail(
    request: DashboardRequest,
    agent: Agent,
    entity: Entity,
    form: EntityForm | None,
    relation_form: RelationForm | None,
    *,
    status: int,
) -> HttpResponse:
    outgoing, incoming = selectors.bounded_relations(
        tenant=request.actor.tenant, agent=agent, ids=[entity.pk], limit=DETAIL_RELATIONS
    )
    out, into = outgoing.get(entity.pk), incoming.get(entity.pk)
    return render(
        request,
        "dashboard/knowledge/detail.html",
        {
            "agent": agent,
            "entity": entity,
            "outgoing": out.relations if out else [],
            "outgoing_total": out.total if out else 0,
            "incoming": into.relations if into else [],
            "incoming_total": into.total if into else 0,
            "form": form,
            "relation_form": relation_form,
            "can_edit": request.actor.can(Role.ADMIN),
            **_live(request, agent, entity),
        },
        status=status,
    )


@dashboard_view(Role.ADMIN, methods=("POST",))
def entity_create(request: DashboardRequest, key: str) -> HttpResponse:
    """Create an entity, or merge into the one of the same type and name in that graph."""
    agent = access_agent(actor=request.actor, key=key)
    form = NewEntityForm(request.POST)
    if form.is_valid():
        try:
            entity, created = services.entity_upsert(
                actor=request.actor,
                agent=agent,
                user_id=form.cleaned_data["user_id"].strip(),
                item=parse_entity(form.payload(keep_empty=False)),
                source=Source.DASHBOARD,
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            verb = "created" if created else "merged into the existing one"
            messages.success(request, f"{entity.entity_type} {entity.name} {verb}.")
            return redirect(_entity_url(agent, entity))
    return render(request, "dashboard/knowledge/form.html", {"agent": agent, "form": form}, status=400)


@dashboard_view(Role.ADMIN, methods=("POST",))
def entity_edit(request: DashboardRequest, key: str, pk: str) -> HttpResponse:
    """Set an entity's name, type, description, aliases and properties (replaced, not merged)."""
    agent = access_agent(actor=request.actor, key=key)
    entity = access_entity(tenant=request.actor.tenant, agent=agent, id=pk)
    form = EntityForm(request.POST)
    if form.is_valid():
        data = form.payload()
        try:
            entity = services.entity_update(
                actor=request.actor,
                agent=agent,
                entity=entity,
                name=data["name"],
                entity_type=data["type"],
                description=data["description"],
                properties=data["properties"],
                aliases=data["aliases"],
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"{entity.entity_type} {entity.name} saved.")
            return redirect(_entity_url(agent, entity))
    return _detail(request, agent, entity, form, RelationForm(), status=400)


@dashboard_view(Role.ADMIN, methods=("POST",))
def relation_add(request: DashboardRequest, key: str, pk: str) -> HttpResponse:
    """Add (or update) a relation between this entity and another, named by type and name."""
    agent = access_agent(actor=request.actor, key=key)
    entity = access_entity(tenant=request.actor.tenant, agent=agent, id=pk)
    form = RelationForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        here = EntityRef(entity.entity_type, entity.name)
        try:
            other = EntityRef(
                clean_type(data["other_type"], "other_type"), clean_name(data["other_name"], "other_name")
            )
            source, target = (here, other) if data["direction"] == "out" else (other, here)
            services.relation_upsert(
                actor=request.actor,
                agent=agent,
                user_id=entity.user_id,
                item=RelationInput(
                    source=source,
                    relation_type=clean_type(data["type"], "type"),
                    target=target,
                    weight=data["weight"],
                    weight_given=data["weight"] is not None,
                ),
                create_missing=data["create_missing"],
                source=Source.DASHBOARD,
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, f"Relation {data['type']} saved.")
            return redirect(_entity_url(agent, entity))
    return _detail(request, agent, entity, EntityForm(initial=_initial(entity)), form, status=400)


@dashboard_view(Role.ADMIN)
def entity_delete(request: DashboardRequest, key: str, pk: str) -> HttpResponse:
    """Ask for confirmation (GET), then delete an entity with its relations (POST)."""
    agent = access_agent(actor=request.actor, key=key)
    entity = access_entity(tenant=request.actor.tenant, agent=agent, id=pk)

    def perform() -> tuple[str, str]:
        removed = services.entity_delete(actor=request.actor, agent=agent, entity=entity)
        return f"{entity.entity_type} {entity.name} deleted with {removed} relations.", _list_url(agent)

    return confirm_action(
        request,
        title=f"Delete {entity.entity_type} {entity.name} ({agent.key})?",
        body="Its relations are deleted with it, and knowledge_graph_search no longer finds it. "
        "This cannot be undone.",
        action=f"Delete {entity.name}",
        back=_entity_url(agent, entity),
        perform=perform,
    )


@dashboard_view(Role.ADMIN)
def relation_delete(request: DashboardRequest, key: str, pk: str) -> HttpResponse:
    """Ask for confirmation (GET), then delete one relation (POST); back to the entity it was opened
    from (``?from=<id>``, its source by default)."""
    agent = access_agent(actor=request.actor, key=key)
    relation = access_relation(tenant=request.actor.tenant, agent=agent, id=pk)
    back_to = relation.target if request.GET.get("from") == str(relation.target.pk) else relation.source
    label = f"{relation.source.name} --{relation.relation_type}--> {relation.target.name}"

    def perform() -> str:
        services.relation_delete(actor=request.actor, agent=agent, relation=relation)
        return f"Relation {label} deleted."

    return confirm_action(
        request,
        title=f"Delete the relation {label}?",
        body="The entities stay; only this relation goes. This cannot be undone.",
        action="Delete the relation",
        back=_entity_url(agent, back_to),
        perform=perform,
    )
