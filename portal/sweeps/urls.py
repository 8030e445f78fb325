from django.urls import path

from portal.sweeps import views

app_name = "sweeps"
urlpatterns = [
    path("", views.sweep_list_view, name="list"),
    path("new/<slug:template>/", views.sweep_new_view, name="new"),
    path("<id:sweep_id>/", views.sweep_detail_view, name="detail"),
    path("<id:sweep_id>/cancel/", views.sweep_cancel_view, name="cancel"),
]
