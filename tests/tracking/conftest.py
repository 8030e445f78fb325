import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from tests.factories import UserFactory


class Mlflow:
    """What the MLflow client sends: JSON bodies to POST paths, query strings to GET paths, a Bearer token."""

    def __init__(self, token: str) -> None:
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(self, path: str, body: Any, status: int = 200) -> dict[str, Any]:
        response = self.client.post(f"/api/2.0/mlflow/{path}", data=json.dumps(body),
                                    content_type="application/json")
        assert response.status_code == status, response.content
        return response.json()

    def get(self, path: str, params: dict[str, Any], status: int = 200) -> dict[str, Any]:
        response = self.client.get(f"/api/2.0/mlflow/{path}", params)
        assert response.status_code == status, response.content
        return response.json()

    def run(self, experiment_id: str = "0", **body: Any) -> str:
        created = self.post("runs/create", {"experiment_id": experiment_id, "start_time": 1000, **body})
        return created["run"]["info"]["run_id"]


def _mlflow_of(username: str) -> Mlflow:
    _, key = api_token_create(user=UserFactory(username=username), name="mlflow")
    return Mlflow(key)


@pytest.fixture
def alice(db) -> Mlflow:
    return _mlflow_of("alice")


@pytest.fixture
def bob(db) -> Mlflow:
    return _mlflow_of("bob")
