"""Bad input at scale: schemathesis generates requests from the served OpenAPI document of a
real API (PostgreSQL + broker) and checks every answer: never a 5xx, status code, content
type, headers and body as documented, schema-violating input rejected; and without or with a
wrong token every /v1 operation answers 401."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, served

EXAMPLES = {GenerationMode.POSITIVE: 100, GenerationMode.NEGATIVE: 60}
UNAUTHENTICATED_EXAMPLES = 5
CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance,
               response_headers_conformance, response_schema_conformance]
SKIPPED = {"/metrics"}  # Prometheus text, not JSON: covered by tests/integration/api/test_openapi.py


@pytest.fixture
def base_url(settings: Settings) -> Iterator[str]:
    with served(settings.model_copy(update={"ack_consumer_enabled": False})) as url:
        yield url


@pytest.fixture
def schema(base_url: str) -> Any:
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


def _operations(schema: Any) -> list[Any]:
    found = [result.ok() for result in schema.get_all_operations()]
    return [op for op in found if op.path not in SKIPPED]


def _fuzz(operation: Any, mode: GenerationMode, examples: int,
          exercise: Callable[[Case[Any]], None]) -> None:
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Case[Any]) -> None:
        exercise(case)

    try:
        run()
    except Unsatisfiable:
        # nothing to violate: no input at all (GET /v1/admin/stats) or only free-form
        # strings (GET /v1/admin/apps/{name})
        assert mode is GenerationMode.NEGATIVE, operation.label


def _auth_for(path: str, app_key: str) -> dict[str, str]:
    token = ADMIN_TOKEN if path.startswith("/v1/admin/") else app_key
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_generated_requests_get_documented_answers(base_url: str, schema: Any,
                                                   unique: str) -> None:
    app = create_app_keys(base_url, ADMIN_TOKEN, f"fuzz-{unique}")
    operations = _operations(schema)
    assert len(operations) >= 25
    for operation in operations:
        headers = _auth_for(operation.path, app["api_key"])
        for mode, examples in EXAMPLES.items():
            checks = CONFORMANCE + ([negative_data_rejection]
                                    if mode is GenerationMode.NEGATIVE else [])

            def exercise(case: Case[Any], headers: dict[str, str] = headers,
                         checks: list[Any] = checks) -> None:
                response = case.call(base_url=base_url, headers=headers)
                case.validate_response(response, checks=checks, headers=headers)

            _fuzz(operation, mode, examples, exercise)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_v1_refuses_missing_and_wrong_tokens(base_url: str, schema: Any, unique: str) -> None:
    app = create_app_keys(base_url, ADMIN_TOKEN, f"fuzz-{unique}")
    protected = [op for op in _operations(schema) if op.path.startswith("/v1/")]
    for operation in protected:
        other = ("Bearer " + app["api_key"]) if operation.path.startswith("/v1/admin/") \
            else f"Bearer {ADMIN_TOKEN}"
        for authorization in (None, "Bearer rms_wrong", other, "Basic x"):
            headers = {"Authorization": authorization} if authorization else {}

            def exercise(case: Case[Any], headers: dict[str, str] = headers) -> None:
                if case.headers:  # nothing but ours may authenticate the call
                    case.headers.pop("Authorization", None)
                response = case.call(base_url=base_url, headers=headers)
                assert response.status_code == 401, (case.method, case.formatted_path,
                                                     response.status_code, response.text)
                assert response.headers["content-type"][0].startswith("application/problem+json")

            _fuzz(operation, GenerationMode.POSITIVE, UNAUTHENTICATED_EXAMPLES, exercise)
