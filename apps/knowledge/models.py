"""The knowledge graph of an agent: entities (people, organisations, projects, concepts, …) and the
typed relations between them.

An entity belongs to one agent of one tenant and to one user (``user_id``) or to the agent's shared
graph (``user_id == ""``). It is identified by its type and its normalised name (case-folded, runs of
whitespace collapsed): "Acme  Corp" and "acme corp" of type ``organization`` are one entity. A relation
links two entities of the same agent; it belongs to the scope of its endpoints (a user's when either
endpoint is that user's, else the shared graph's), and there is one per (source, type, target).
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models.functions import Cast

from apps.tenants.scoping import TenantScoped

MAX_NAME_CHARS = 200
MAX_TYPE_CHARS = 64
MAX_DESCRIPTION_CHARS = 4000
MAX_ALIASES = 20
MAX_USER_ID_CHARS = 255


class Source(models.TextChoices):
    API = "api"
    DASHBOARD = "dashboard"
    EXTRACTION = "extraction"


class Entity(TenantScoped):
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=MAX_USER_ID_CHARS, blank=True, default="")  # "" = shared
    name = models.CharField(max_length=MAX_NAME_CHARS)
    name_key = models.CharField(max_length=MAX_NAME_CHARS)  # the name case-folded, whitespace collapsed
    entity_type = models.CharField(max_length=MAX_TYPE_CHARS)
    description = models.TextField(blank=True, default="", max_length=MAX_DESCRIPTION_CHARS)
    properties = models.JSONField(default=dict, blank=True)
    aliases = models.JSONField(default=list, blank=True)  # as written
    alias_keys = models.JSONField(default=list, blank=True)  # normalised like name_key, for exact matches
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.API)
    updated_by = models.CharField(max_length=255, blank=True, default="")
    # 'simple': names and types are matched as written (no stemming turns "Acme Labs" into "acm lab").
    search_vector = models.GeneratedField(
        expression=SearchVector("name", weight="A", config="simple")
        + SearchVector(Cast("aliases", models.TextField()), weight="A", config="simple")
        + SearchVector("entity_type", weight="B", config="simple")
        + SearchVector("description", weight="C", config="simple"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "agent", "user_id", "entity_type", "name_key"],
                name="knowledge_entity_unique",
            )
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="knowledge_entity_search"),
            GinIndex(fields=["alias_keys"], name="knowledge_entity_aliases"),
            models.Index(fields=["tenant", "agent", "user_id", "name_key"], name="knowledge_entity_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.name} [{self.entity_type}]"


class Relation(TenantScoped):
    agent = models.ForeignKey("tenants.Agent", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=MAX_USER_ID_CHARS, blank=True, default="")  # its endpoints' scope
    source = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="relations_out")
    relation_type = models.CharField(max_length=MAX_TYPE_CHARS)
    target = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="relations_in")
    properties = models.JSONField(default=dict, blank=True)
    weight = models.FloatField(null=True, blank=True)  # 0..1, how strong or certain
    origin = models.CharField(max_length=12, choices=Source.choices, default=Source.API)
    updated_by = models.CharField(max_length=255, blank=True, default="")
    search_vector = models.GeneratedField(
        expression=SearchVector("relation_type", config="simple"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "source", "relation_type", "target"], name="knowledge_relation_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(weight__isnull=True) | models.Q(weight__gte=0, weight__lte=1),
                name="knowledge_relation_weight_range",
            ),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="knowledge_relation_search"),
            models.Index(fields=["tenant", "agent", "user_id"], name="knowledge_relation_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} -{self.relation_type}-> {self.target_id}"
