"""Dashboard routes of custom tools."""

from django.urls import URLPattern, path

from apps.dashboard.views import custom_tools

urlpatterns: list[URLPattern] = [
    path("custom-tools/", custom_tools.tool_list, name="custom_tools"),
    path("custom-tools/new/", custom_tools.tool_create, name="custom_tool_create"),
    path("custom-tools/<uuid:id>/", custom_tools.tool_detail, name="custom_tool"),
    path("custom-tools/<uuid:id>/edit/", custom_tools.tool_edit, name="custom_tool_edit"),
    path("custom-tools/<uuid:id>/enabled/", custom_tools.tool_enable, name="custom_tool_enable"),
    path("custom-tools/<uuid:id>/delete/", custom_tools.tool_delete, name="custom_tool_delete"),
    path("custom-tools/<uuid:id>/test/", custom_tools.tool_test, name="custom_tool_test"),
]
