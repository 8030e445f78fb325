from django.urls import path

from portal.webapps import views

app_name = "webapps"
urlpatterns = [
    path("", views.app_list_view, name="list"),
    path("start/", views.app_start_view, name="start"),
    path("<id:app_id>/", views.app_detail_view, name="detail"),
    path("<id:app_id>/open/", views.app_open_view, name="open"),
    path("<id:app_id>/stop/", views.app_stop_view, name="stop"),
]
