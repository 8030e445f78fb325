from django.urls import path

from portal.containers import views

app_name = "containers"
urlpatterns = [
    path("", views.catalog_view, name="catalog"),
    path("<id:image_id>/pull/", views.pull_view, name="pull"),
    path("keys/", views.key_store_view, name="key-store"),
    path("keys/<id:credential_id>/delete/", views.key_delete_view, name="key-delete"),
]
