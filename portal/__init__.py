"""The gpuportal Django project. Nothing is imported here: the hub's spawner imports plain modules
of the portal (portal.policy.rules, portal.containers.runtimes) without Django or Celery. The Celery
app is portal.celery_app, loaded by portal.core's AppConfig in web processes."""
