from django.urls import path

from apps.dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("", views.home, name="home"),
]
