from django.urls import path

from portal.webapps import shell_views

app_name = "shells"
urlpatterns = [
    path("", shell_views.shell_list_view, name="list"),
    path("start/", shell_views.shell_start_view, name="start"),
    path("<id:shell_id>/open/", shell_views.shell_open_view, name="open"),
    path("<id:shell_id>/stop/", shell_views.shell_stop_view, name="stop"),
]
