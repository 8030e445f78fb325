from django.urls import path

from portal.provenance import views

app_name = "provenance"
urlpatterns = [
    path("<id:job_id>/differs/", views.differs_pick_view, name="differs-pick"),
    path("<id:job_id>/differs/<id:other_id>/", views.differs_view, name="differs"),
]
