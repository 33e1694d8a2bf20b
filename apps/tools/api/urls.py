from django.urls import path

from apps.tools.api.views import CatalogView

urlpatterns = [path("tools/catalog/", CatalogView.as_view(), name="tool-catalog")]
