from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.dashboard import health
from apps.tenants import metrics

api_v1 = [
    path("", include("apps.accounts.api.urls")),
    path("", include("apps.audit.api.urls")),
    path("", include("apps.runtime.api.urls")),
    path("", include("apps.policy.api.urls")),
    path("", include("apps.policy.approvals_api.urls")),
    path("", include("apps.teams.api.urls")),
    path("", include("apps.mcp_grants.api.urls")),
    path("", include("apps.custom_tools.api.urls")),
    path("", include("apps.secure_cli.api.urls")),
    path("", include("apps.sandbox.api.urls")),
    path("", include("apps.context_files.api.urls")),
    path("", include("apps.memory.api.urls")),
    path("", include("apps.memory.embedding_api")),
    path("", include("apps.knowledge.api.urls")),
    path("", include("apps.skills.api.urls")),
    path("", include("apps.llm.api.urls")),
    path("", include("apps.sessions.api.urls")),
    path("", include("apps.messaging.api.urls")),
    path("", include("apps.runs.api.urls")),
]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.view, name="metrics"),  # scrapers only (TOOLGATE_METRICS_TOKEN / _ALLOW_NETS)
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page's <link rel="icon"> says.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("", include("apps.dashboard.urls")),
]

handler404 = "apps.dashboard.errors.not_found"
handler500 = "apps.dashboard.errors.server_error"
