from django.urls import path

from portal.sessions import views

app_name = "servers"
urlpatterns = [
    path("", views.server_list_view, name="list"),
    path("cards/", views.server_cards_view, name="cards"),
    path("timing.csv", views.server_timing_csv_view, name="timing-csv"),
    path("<slug:name>/open/", views.server_open_view, name="open"),
    path("<slug:name>/stop/", views.server_stop_view, name="stop"),
]
