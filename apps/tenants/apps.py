from django.apps import AppConfig
from django.conf import settings


class TenantsConfig(AppConfig):
    name = "apps.tenants"
    label = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_execute

        from apps.tenants import metrics, schema  # noqa: F401  (schema registers the OpenAPI auth extensions)

        post_execute.connect(_job_finished, dispatch_uid="toolgate-metrics-jobs")
        if settings.TOOLGATE_TRACING:
            from apps.tenants import tracing

            tracing.start()


def _job_finished(sender: object, task: dict[str, object], **kwargs: object) -> None:
    """django-q2's monitor saved a finished job: count it by function and outcome."""
    from apps.tenants import metrics

    metrics.background_job(func=str(task.get("func") or ""), success=bool(task.get("success")))
