from __future__ import annotations

from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST


class LoginView(auth_views.LoginView):
    template_name = "dashboard/login.html"
    redirect_authenticated_user = True


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect("dashboard:login")


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/home.html")
