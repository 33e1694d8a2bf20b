from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "apps.runs"
    label = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def schedules(self) -> list[tuple[str, str, int]]:
        """Recurring jobs (apps.toolkit.schedules): archiving ended subagents, every 10 minutes; queuing
        again the work of runs whose job was lost, every minute."""
        from apps.runs import tasks

        return [
            (tasks.ARCHIVE_SCHEDULE, "apps.runs.tasks.archive_subagents", 10),
            (tasks.RECOVER_SCHEDULE, "apps.runs.tasks.recover_runs", 1),
        ]

    def ready(self) -> None:
        # Importing the module registers the cron and spawn tools (apps.toolkit.registry).
        from apps.runs import agent_tools, teamwork  # noqa: F401
        from apps.teams import hooks

        hooks.on_dispatch(teamwork.on_dispatch)
        hooks.on_cancel_runs(teamwork.on_cancel_runs)

        from apps.policy.approval_services import call_result_stored

        call_result_stored.connect(_approval_result, dispatch_uid="runs.approval_result")


def _approval_result(sender: object, *, tenant_id: object, approval_id: object, **_: object) -> None:
    from apps.runs import runner

    runner.approval_result(tenant_id=str(tenant_id), approval_id=str(approval_id))
