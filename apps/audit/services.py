"""The one way to write the audit log and the tool-call records."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models.sql import InsertQuery

from apps.audit import context, export
from apps.audit.export import EXPORT_LIMIT
from apps.audit.models import AuditEvent, ToolCall
from apps.audit.selectors import audit_event_list, tool_call_list
from apps.realtime import events

if TYPE_CHECKING:
    from django.db.models import QuerySet
    from django.http import StreamingHttpResponse

    from apps.tenants.actors import Actor


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))  # type: ignore[no-any-return]


def record(
    *, actor: Actor, verb: str, target_type: str, target_id: str = "", data: dict[str, Any] | None = None
) -> AuditEvent:
    """Append one audit event for ``actor``'s tenant.

    Call it inside the transaction of the change it describes, so that both commit or neither does.
    The live ``audit`` event is sent only after that transaction commits. ``data`` must never hold a
    secret (the raw API key, passwords, credentials).
    """
    ctx = context.current()
    with transaction.atomic():
        event = AuditEvent(
            tenant=actor.tenant,
            actor_kind=actor.kind,
            actor_id=actor.id,
            actor_label=actor.label[:300],
            verb=verb,
            target_type=target_type,
            target_id=str(target_id),
            data=_jsonable(data or {}),
            request_id=ctx.request_id,
            ip=ctx.ip,
        )
        event.full_clean()
        event.save()
        events.publish(tenant=actor.tenant, topic="audit", type="audit.event", data=serialize(event))
    return event


def serialize(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "created_at": event.created_at.isoformat(),
        "actor": {"kind": event.actor_kind, "id": event.actor_id, "label": event.actor_label},
        "verb": event.verb,
        "target": {"type": event.target_type, "id": event.target_id},
        "data": event.data,
        "request_id": event.request_id,
        "ip": event.ip,
    }


def record_and_publish(
    *, actor: Actor, topic: str, verb: str, target_type: str, target_id: str, data: dict[str, Any]
) -> AuditEvent:
    """Audit ``verb`` on the target (see :func:`record`) and publish ``data`` as a ``verb`` event on the
    tenant's ``topic`` once the current transaction commits. ``data`` must never hold a secret."""
    event = record(actor=actor, verb=verb, target_type=target_type, target_id=target_id, data=data)
    events.publish(tenant=actor.tenant, topic=topic, type=verb, data=data)
    return event


def record_tool_call(*, actor: Actor, **fields: Any) -> None:
    """Append the record of one tool call by ``actor`` (the pipeline's, with its arguments already
    scrubbed and bounded) and publish it live as a ``tool_call`` event.

    One round trip: the row's ``INSERT`` and the event's message are one statement
    (``events.write_and_publish``), since a call's latency is mostly round trips to the database. The
    record lands whatever happens to its live event: should the event's part fail, the row is written
    alone. ``fields`` are :class:`ToolCall`'s (by name, or a foreign key's by its column: ``agent_id``)."""
    row = _tool_call_row(
        tenant_id=actor.tenant.pk,
        actor_kind=actor.kind,
        actor_id=actor.id,
        request_id=context.current().request_id,
        **fields,
    )
    statement, params = _insert(row)
    events.write_and_publish(
        statement,
        params,
        tenant=actor.tenant,
        topic="tool_calls",
        type="tool_call",
        data=serialize_tool_call(row),
    )


_INSERT_SQL: dict[str, str] = {}  # per database vendor: the INSERT's text (its values vary, never its text)
_FIELD_NAMES: dict[str, str] = {}  # ToolCall's field names and columns -> the attribute its value is kept in


def _tool_call_row(**fields: Any) -> SimpleNamespace:
    """One tool call's values by attribute (``agent_id`` for ``agent``), as a ``ToolCall`` would hold them
    before its first save (every field not given: its default), without making the model instance (a
    tenth of a millisecond of every call). An unknown name is an error, as for the model."""
    if not _FIELD_NAMES:
        for field in ToolCall._meta.local_concrete_fields:
            _FIELD_NAMES[field.name] = _FIELD_NAMES[field.attname] = field.attname
    values: dict[str, Any] = {}
    for name, value in fields.items():
        attname = _FIELD_NAMES.get(name)
        if attname is None:
            raise TypeError(f"ToolCall has no field {name!r}")
        if attname != name and value is not None:  # a related object given for its foreign key
            value = value.pk
        values[attname] = value
    for field in ToolCall._meta.local_concrete_fields:
        if field.attname not in values:
            values[field.attname] = field.get_default()
    return SimpleNamespace(**values)


def _insert(row: SimpleNamespace) -> tuple[str, list[Any]]:
    """The INSERT that saving ``row`` as a new ``ToolCall`` runs (``save(force_insert=True)``), and its
    parameters (preparing them sets ``created_at``). Django's compiler builds the statement's text once
    per process; each call only prepares its values as the compiler does (``pre_save``, then
    ``get_db_prep_save``)."""
    connection = connections[DEFAULT_DB_ALIAS]
    fields = ToolCall._meta.local_concrete_fields
    values = [
        field.get_db_prep_save(field.pre_save(row, add=True), connection=connection)  # type: ignore[arg-type]
        for field in fields
    ]
    statement = _INSERT_SQL.get(connection.vendor)
    if statement is None:
        query = InsertQuery(ToolCall)
        query.insert_values(fields, [ToolCall(**{f.attname: getattr(row, f.attname) for f in fields})])
        [(statement, params)] = query.get_compiler(using=DEFAULT_DB_ALIAS).as_sql()
        if statement.count("%s") != len(fields) or len(params) != len(fields):
            return statement, list(params)  # not one plain placeholder per field: the compiler's, each time
        _INSERT_SQL[connection.vendor] = statement
    return statement, values


def serialize_tool_call(call: ToolCall | SimpleNamespace) -> dict[str, Any]:
    return {
        "id": str(call.id),
        "created_at": call.created_at.isoformat() if call.created_at else None,
        "agent": call.agent_key,
        "tool": call.tool,
        "resolved_tool": call.resolved_tool,
        "args": call.args,
        "decision": call.decision,
        "status": call.status,
        "error": call.error,
        "duration_ms": call.duration_ms,
        "for_llm_bytes": call.for_llm_bytes,
        "for_user_bytes": call.for_user_bytes,
        "session_key": call.session_key,
        "run": str(call.run_id) if call.run_id else None,
        "user_id": call.user_id,
        "channel": call.channel,
        "origin": call.origin,
        "actor": {"kind": call.actor_kind, "id": call.actor_id},
    }


def audited_export(
    *, actor: Actor, log: str, fmt: str, filters: dict[str, Any], asynchronous: bool
) -> StreamingHttpResponse:
    """``log``'s rows of ``actor``'s tenant with ``filters`` (an audit log export leaves its own start
    event out: it is not one of the rows exported), streamed in ``fmt``; audited as it starts
    (:func:`record_export`) and, once its last row is written, with how many rows it held
    (``<log>.export_finished``, pointing at the start)."""
    started = record_export(actor=actor, log=log, fmt=fmt, filters=filters)
    tenant = actor.tenant
    rows: QuerySet[Any] = (
        audit_event_list(tenant=tenant, **filters).exclude(pk=started.pk)
        if log == "audit"
        else tool_call_list(tenant=tenant, **filters)
    )

    def finished(count: int, truncated: bool) -> None:
        record(
            actor=actor,
            verb=f"{log}.export_finished",
            target_type=log,
            data={"started": str(started.pk), "rows": count, "truncated": truncated},
        )

    return export.response(rows, log=log, fmt=fmt, asynchronous=asynchronous, on_finish=finished)


def record_export(*, actor: Actor, log: str, fmt: str, filters: dict[str, Any]) -> AuditEvent:
    """Audit an export of ``log`` ("audit" or "tool_calls") as it starts: its format, its filters and
    the row limit (the count is not known until the stream has been read, so it is not recorded)."""
    return record(
        actor=actor,
        verb=f"{log}.exported",
        target_type=log,
        data={"format": fmt, "filters": filters, "limit": EXPORT_LIMIT},
    )
