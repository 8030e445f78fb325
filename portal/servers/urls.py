from django.urls import path

from portal.servers import views

app_name = "servers"
urlpatterns = [
    path("", views.server_list_view, name="list"),
    path("<slug:name>/stop/", views.server_stop_view, name="stop"),
]
