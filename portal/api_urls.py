"""Every REST endpoint, under /api/v1/."""

from django.urls import path

from portal.accounts import api as accounts_api
from portal.cluster import api as cluster_api

urlpatterns = [
    path("me/", accounts_api.MeApi.as_view(), name="me"),
    path("tokens/", accounts_api.TokenListCreateApi.as_view(), name="tokens"),
    path("tokens/<int:token_id>/", accounts_api.TokenDetailApi.as_view(), name="token-detail"),
    path("cluster/", cluster_api.ClusterApi.as_view(), name="cluster"),
]
