"""Pages: /usage/efficiency/ (reports)."""


app_name = "efficiency"

urlpatterns: list = []
