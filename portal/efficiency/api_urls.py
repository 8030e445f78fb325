"""REST endpoints under /api/v1/: a job's and a session's efficiency, a template's suggested
resources, and the efficiency reports."""


urlpatterns: list = []
