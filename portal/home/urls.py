from django.urls import path

from portal.home import views

# No app_name: the page keeps the global name `home` that base.html and other pages reverse.
urlpatterns = [
    path("", views.home_view, name="home"),
    path("home/part/", views.home_part_view, name="home-part"),
]
