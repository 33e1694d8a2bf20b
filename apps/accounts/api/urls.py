from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.accounts.api import views

router = SimpleRouter()
router.register("agents", views.AgentViewSet, basename="agent")
router.register("api-keys", views.ApiKeyViewSet, basename="api-key")
router.register("memberships", views.MembershipViewSet, basename="membership")

urlpatterns = [
    path("me/", views.MeView.as_view(), name="me"),
    path("tenant/", views.TenantView.as_view(), name="tenant"),
    *router.urls,
]
