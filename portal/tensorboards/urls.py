from django.urls import path
from django.views.generic import RedirectView

from portal.tensorboards import views

app_name = "tensorboards"
urlpatterns = [
    path("", RedirectView.as_view(pattern_name="webapps:list"), name="list"),
    path("open/", views.tensorboard_open_view, name="open"),
]
