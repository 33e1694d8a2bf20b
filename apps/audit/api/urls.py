from rest_framework.routers import SimpleRouter

from apps.audit.api.views import AuditEventViewSet, ToolCallViewSet

router = SimpleRouter()
router.register("audit/events", AuditEventViewSet, basename="audit-event")
router.register("tool-calls", ToolCallViewSet, basename="tool-call")
urlpatterns = router.urls
