"""Input and output of the knowledge API.

Entity and relation bodies are checked by ``apps.knowledge.validation`` (so that an error names the
field and, in a bulk payload, the item: ``relations[4].target.name``); the ``*Body`` serializers below
describe those bodies for the OpenAPI document. Query parameters are checked here.
"""

from __future__ import annotations

from rest_framework import serializers

from apps.knowledge.models import MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_TYPE_CHARS, MAX_USER_ID_CHARS
from apps.knowledge.search import MAX_LIMIT, MAX_QUERY_CHARS
from apps.knowledge.validation import MAX_BULK_ENTITIES, MAX_BULK_RELATIONS
from apps.tenants.api.base import StrictSerializer

USER_ID_HELP = 'The user whose graph it is; "" (the default) for the agent\'s shared graph.'


class EntityRefOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    type = serializers.CharField()
    name = serializers.CharField()


class RelationOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    type = serializers.CharField()
    source = EntityRefOutput()  # type: ignore[assignment]
    target = EntityRefOutput()
    properties = serializers.JSONField()
    weight = serializers.FloatField(allow_null=True)
    user_id = serializers.CharField(help_text='The graph it belongs to: its endpoints\' ("" = shared).')
    origin = serializers.CharField(help_text="api, dashboard or extraction.")
    updated_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class EntityOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    type = serializers.CharField()
    name = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField()
    properties = serializers.JSONField()
    user_id = serializers.CharField(help_text='The user whose graph it is; "" for the shared graph.')
    source = serializers.CharField(help_text="api, dashboard or extraction.")  # type: ignore[assignment]
    updated_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class EntityDetailOutput(EntityOutput):
    outgoing = RelationOutput(many=True, help_text="Relations from it, strongest first (at most 200).")
    outgoing_total = serializers.IntegerField()
    incoming = RelationOutput(many=True, help_text="Relations to it, strongest first (at most 200).")
    incoming_total = serializers.IntegerField()


class EntityBody(serializers.Serializer):  # type: ignore[type-arg]
    type = serializers.CharField(
        max_length=MAX_TYPE_CHARS, help_text="person, organization, project, concept, … (letters, digits, _)."
    )
    name = serializers.CharField(max_length=MAX_NAME_CHARS)
    description = serializers.CharField(
        max_length=MAX_DESCRIPTION_CHARS, required=False, help_text="Replaces the old one when given."
    )
    properties = serializers.JSONField(
        required=False, help_text="Merged into the old ones key by key; a key set to null is removed."
    )
    aliases = serializers.ListField(
        child=serializers.CharField(max_length=MAX_NAME_CHARS),
        required=False,
        max_length=20,
        help_text="Added to the old ones.",
    )


class EntityCreateBody(EntityBody):
    user_id = serializers.CharField(max_length=MAX_USER_ID_CHARS, required=False, help_text=USER_ID_HELP)


class EntityPatchBody(serializers.Serializer):  # type: ignore[type-arg]
    type = serializers.CharField(max_length=MAX_TYPE_CHARS, required=False)
    name = serializers.CharField(max_length=MAX_NAME_CHARS, required=False)
    description = serializers.CharField(max_length=MAX_DESCRIPTION_CHARS, required=False)
    properties = serializers.JSONField(required=False, help_text="Replaces the old ones.")
    aliases = serializers.ListField(
        child=serializers.CharField(max_length=MAX_NAME_CHARS),
        required=False,
        help_text="Replaces the old ones.",
    )


class EntityRefBody(serializers.Serializer):  # type: ignore[type-arg]
    type = serializers.CharField(max_length=MAX_TYPE_CHARS)
    name = serializers.CharField(max_length=MAX_NAME_CHARS)


class RelationBody(serializers.Serializer):  # type: ignore[type-arg]
    source = EntityRefBody()  # type: ignore[assignment]
    type = serializers.CharField(max_length=MAX_TYPE_CHARS, help_text="works_at, depends_on, …")
    target = EntityRefBody()
    properties = serializers.JSONField(required=False, help_text="Merged into the old ones key by key.")
    weight = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)


class RelationCreateBody(RelationBody):
    user_id = serializers.CharField(
        max_length=MAX_USER_ID_CHARS,
        required=False,
        help_text="Whose graph the names are looked up in (that user's, then the shared one).",
    )
    create_missing = serializers.BooleanField(
        required=False, help_text="Create an endpoint that does not exist yet (else 400 naming it)."
    )


class KnowledgeUpsertBody(serializers.Serializer):  # type: ignore[type-arg]
    user_id = serializers.CharField(max_length=MAX_USER_ID_CHARS, required=False, help_text=USER_ID_HELP)
    entities = EntityBody(many=True, required=False, help_text=f"At most {MAX_BULK_ENTITIES}.")
    relations = RelationBody(many=True, required=False, help_text=f"At most {MAX_BULK_RELATIONS}.")


class WrittenEntityOutput(EntityRefOutput):
    created = serializers.BooleanField()


class WrittenRelationOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    type = serializers.CharField()
    source = EntityRefOutput()  # type: ignore[assignment]
    target = EntityRefOutput()
    created = serializers.BooleanField()


class KnowledgeUpsertOutput(serializers.Serializer):  # type: ignore[type-arg]
    entities_created = serializers.IntegerField()
    entities_updated = serializers.IntegerField()
    relations_created = serializers.IntegerField()
    relations_updated = serializers.IntegerField()
    entities = WrittenEntityOutput(many=True)
    relations = WrittenRelationOutput(many=True)


class KnowledgeSearchInput(StrictSerializer):
    query = serializers.CharField(max_length=MAX_QUERY_CHARS)
    entity_type = serializers.CharField(max_length=MAX_TYPE_CHARS, required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=10)
    depth = serializers.IntegerField(required=False, min_value=1, max_value=2, default=1)
    user_id = serializers.CharField(
        max_length=MAX_USER_ID_CHARS,
        required=False,
        allow_blank=True,
        default="",
        help_text='Search as this user (their graph and the shared one); "" (the default): the shared one.',
    )


class KnowledgeSearchOutput(serializers.Serializer):  # type: ignore[type-arg]
    query = serializers.CharField()
    type = serializers.CharField(allow_null=True)
    depth = serializers.IntegerField()
    entities_in_scope = serializers.IntegerField()
    hits = serializers.ListField(child=serializers.JSONField())


class EntityFilterInput(StrictSerializer):
    type = serializers.CharField(max_length=MAX_TYPE_CHARS, required=False)
    q = serializers.CharField(max_length=MAX_NAME_CHARS, required=False, help_text="Part of a name or alias.")
    user_id = serializers.CharField(
        max_length=MAX_USER_ID_CHARS, required=False, allow_blank=True, help_text='"" for the shared graph.'
    )
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)


class RelationFilterInput(StrictSerializer):
    type = serializers.CharField(max_length=MAX_TYPE_CHARS, required=False)
    entity = serializers.UUIDField(required=False, help_text="Relations from or to this entity.")
    user_id = serializers.CharField(
        max_length=MAX_USER_ID_CHARS, required=False, allow_blank=True, help_text='"" for the shared graph.'
    )
    page = serializers.IntegerField(required=False, min_value=1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=200)
