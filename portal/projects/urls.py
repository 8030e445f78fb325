from django.urls import path

from portal.projects import views

app_name = "projects"

urlpatterns = [
    path("budgets.csv", views.budgets_csv_view, name="budgets-csv"),
]
