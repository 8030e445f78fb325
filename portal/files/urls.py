from django.urls import path

from portal.files import views

app_name = "files"
urlpatterns = [
    path("", views.browse_view, name="browse"),
    path("view/", views.view_view, name="view"),
    path("edit/", views.edit_view, name="edit"),
    path("action/", views.action_view, name="action"),
]
