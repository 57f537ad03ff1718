"""`/docs` in a real browser: the Swagger UI served from the package renders the service's
OpenAPI 3.1 document (its operations listed), not "Unable to render this definition"."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.conftest import Service

pytestmark = pytest.mark.browser

WAIT = 30.0


def _rendered(driver: WebDriver) -> bool:
    """The UI has drawn either operations or its error box."""
    found = driver.find_elements(By.CSS_SELECTOR, ".opblock-summary, .errors-wrapper")
    return bool(found) or "Unable to render" in driver.find_element(By.TAG_NAME, "body").text


def test_docs_render_the_operations_of_the_openapi_document(
    browser: WebDriver, console: Service
) -> None:
    browser.get(f"{console.url}/docs")
    WebDriverWait(browser, WAIT, poll_frequency=0.1).until(_rendered, "waiting for /docs")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Unable to render" not in body, body[:500]
    paths = {
        (e.get_attribute("data-path") or e.text).replace("\u200b", "")
        for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    }
    assert {"/v1/tables", "/v1/tables/{table_id}", "/v1/operations"} <= paths, sorted(paths)
    listing = browser.find_element(
        By.CSS_SELECTOR, "#operations-tables-list_tables_route_v1_tables_get"
    )
    assert "GET" in listing.text and "/v1/tables" in listing.text.replace("\u200b", "")
    version = browser.find_element(By.CSS_SELECTOR, ".info .title").text
    assert "OAS 3.1" in version, version
