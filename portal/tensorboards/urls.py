from django.urls import path

from portal.tensorboards import views

app_name = "tensorboards"
urlpatterns = [
    path("", views.tensorboard_list_view, name="list"),
    path("open/", views.tensorboard_open_view, name="open"),
    path("<id:board_id>/", views.tensorboard_detail_view, name="detail"),
    path("<id:board_id>/stop/", views.tensorboard_stop_view, name="stop"),
    path("<id:board_id>/proxy", views.tensorboard_proxy_view, name="proxy-root"),
    path("<id:board_id>/proxy/<path:path>", views.tensorboard_proxy_view, name="proxy"),
    path("<id:board_id>/proxy/", views.tensorboard_proxy_view, name="proxy-index"),
]
