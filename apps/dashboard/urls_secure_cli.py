"""Dashboard routes of credentialed CLIs: binaries, their agents' grants and users' own credentials."""

from django.urls import URLPattern, path

from apps.dashboard.views import secure_cli

BINARY = "secure-cli/<uuid:id>"

urlpatterns: list[URLPattern] = [
    path("secure-cli/", secure_cli.binary_list, name="secure_clis"),
    path("secure-cli/new/", secure_cli.binary_create, name="secure_cli_create"),
    path(f"{BINARY}/", secure_cli.binary_detail, name="secure_cli"),
    path(f"{BINARY}/edit/", secure_cli.binary_edit, name="secure_cli_edit"),
    path(f"{BINARY}/enabled/", secure_cli.binary_enable, name="secure_cli_enable"),
    path(f"{BINARY}/delete/", secure_cli.binary_delete, name="secure_cli_delete"),
    path(f"{BINARY}/test/", secure_cli.binary_test, name="secure_cli_test"),
    path(f"{BINARY}/grants/new/", secure_cli.grant_create, name="secure_cli_grant_create"),
    path(f"{BINARY}/grants/<str:key>/edit/", secure_cli.grant_edit, name="secure_cli_grant_edit"),
    path(f"{BINARY}/grants/<str:key>/delete/", secure_cli.grant_delete, name="secure_cli_grant_delete"),
    path(f"{BINARY}/credentials/new/", secure_cli.credential_edit, name="secure_cli_credential_create"),
    path(
        f"{BINARY}/credentials/<str:user_id>/edit/",
        secure_cli.credential_edit,
        name="secure_cli_credential_edit",
    ),
    path(
        f"{BINARY}/credentials/<str:user_id>/delete/",
        secure_cli.credential_delete,
        name="secure_cli_credential_delete",
    ),
]
