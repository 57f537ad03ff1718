"""The operator console in a real browser: sign in, find a table, open its timeline, retry a
failed operation, cancel a running one, filter by the service's own list of table services,
see the viewer role refused a retry, make, be refused and remove savepoints by role, and see
what a partition TTL would delete, what completed ones deleted and what an archival would
move, bad input refused naming the field, each checked on the page and against the API. With
`TMS_SCREENSHOTS=1` the pages are saved to `docs/console/` (the README's pictures)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import (
    ADMIN,
    FAILURE,
    NATIVE_DECLINED,
    SCREENSHOTS,
    VIEWER,
    WRITER,
    Scenario,
    batch,
    bearer,
    write_table,
)
from tests.e2e.conftest import Service
from tests.services.test_partition_ttl import Clock, frozen_clock
from tms.hudi.actions import TABLE_SERVICE_ACTIONS

pytestmark = pytest.mark.browser

T = TypeVar("T")
WAIT = 20.0


def wait(driver: WebDriver, what: str, condition: Callable[[WebDriver], T]) -> T:
    """Poll `condition` until it returns something truthy (a generous deadline, no sleep
    that must be long enough)."""

    def check(d: WebDriver) -> T | bool:
        try:
            return condition(d)
        except (StaleElementReferenceException, WebDriverException):
            return False

    result: T = WebDriverWait(driver, WAIT, poll_frequency=0.1).until(check, f"waiting for {what}")
    return result


def css(driver: WebDriver, selector: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, selector)


def messages(driver: WebDriver, kind: str) -> list[str]:
    return [m.text for m in css(driver, f"#messages .message.{kind}")]


def screenshot(driver: WebDriver, name: str) -> None:
    """With `TMS_SCREENSHOTS=1`, the whole page (the window grown to its height) as
    `docs/console/<name>.png`."""
    if os.environ.get("TMS_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width, height = driver.get_window_size()["width"], driver.get_window_size()["height"]
    page = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, max(height, min(int(page) + 120, 2400)))
    try:
        driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    finally:
        driver.set_window_size(width, height)


def open_view(driver: WebDriver, console: Service, fragment: str, ready: str) -> None:
    """Go to `/ui#fragment` and wait until the view's `ready` element is drawn."""
    driver.get(f"{console.url}/ui#{fragment}")
    view = "/".join(p for p in fragment.split("?")[0].split("/") if p)
    wait(driver, ready, lambda d: css(d, f'#view[data-view="{view}"] {ready}'))


def sign_in(driver: WebDriver, console: Service, token: str) -> None:
    driver.get(f"{console.url}/ui")
    driver.execute_script("sessionStorage.clear(); location.hash = '#/overview'")
    driver.refresh()
    field = wait(driver, "the sign-in form", lambda d: d.find_element(By.ID, "token"))
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait(driver, "the overview", lambda d: css(d, "#view #instances"))


def row_of(driver: WebDriver, operation_id: int) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, f'tr[data-operation-id="{operation_id}"]')


def test_sign_in_refuses_an_unknown_token(browser: WebDriver, console: Service) -> None:
    driver = browser
    driver.get(f"{console.url}/ui")
    driver.execute_script("sessionStorage.clear(); location.hash = '#/tables'")
    driver.refresh()
    field = wait(driver, "the sign-in form", lambda d: d.find_element(By.ID, "token"))
    field.send_keys("not-a-token")
    driver.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    shown = wait(driver, "the refusal", lambda d: messages(d, "error"))
    assert "unknown bearer token" in shown[0]
    assert css(driver, "#login"), "the sign-in form stays"
    assert not driver.find_element(By.ID, "nav").is_displayed()


def test_overview_shows_queues_instances_and_throughput(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    driver = browser
    sign_in(driver, console, ADMIN)
    assert driver.find_element(By.ID, "who").text == "role: admin"
    queue = wait(driver, "the queue row", lambda d: css(d, "#queues tbody tr"))
    assert [c.text for c in queue[0].find_elements(By.TAG_NAME, "td")] == ["default", "1", "0"]
    instances = css(driver, "#instances tbody tr")
    assert len(instances) == 1 and "alive" in instances[0].text
    assert "console-test-worker" in driver.find_element(By.ID, "workers").text
    # The failed attempt finished within the hour: one red bar, and the rate says so.
    assert driver.find_element(By.ID, "chart-hour-summary").text.startswith("0 succeeded, 1 failed")
    assert len(css(driver, '#chart-hour rect[fill="#cf222e"]')) == 1
    screenshot(driver, "overview")


def test_find_a_table_and_open_its_timeline(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    driver = browser
    sign_in(driver, console, WRITER)
    open_view(driver, console, "/tables", "#tables")
    names = [r.find_element(By.TAG_NAME, "a").text for r in css(driver, "#tables tbody tr")]
    assert names == ["lake.rides", "lake.trips", "sales.orders"]
    # Sorted by backlog: trips has 3 delta commits since compaction, rides 1, orders none.
    driver.find_element(By.CSS_SELECTOR, 'th[data-sort="delta_commits_since_compaction"]').click()
    wait(driver, "the sorted list", lambda d: "sort=delta" in d.current_url)
    wait(driver, "the list", lambda d: css(d, "#view #tables tbody tr"))
    ordered = [r.find_element(By.TAG_NAME, "a").text for r in css(driver, "#tables tbody tr")]
    assert ordered == ["lake.trips", "lake.rides", "sales.orders"]
    failures = css(driver, "#tables tbody tr")[0].find_elements(By.TAG_NAME, "td")[7]
    assert failures.text == "1", "trips' failed attempt counts in the last 24 h"
    screenshot(driver, "tables")
    search = driver.find_element(By.ID, "table-search")
    search.clear()
    search.send_keys("trip\n")
    wait(driver, "the search", lambda d: "search=trip" in d.current_url)
    rows = wait(
        driver, "one match", lambda d: (r := css(d, "#view #tables tbody tr")) and len(r) == 1 and r
    )
    assert driver.find_element(By.ID, "tables-count").text == "1–1 of 1"

    rows[0].find_element(By.LINK_TEXT, "lake.trips").click()
    wait(driver, "the timeline", lambda d: css(d, "#timeline tbody tr"))
    wait(driver, "the file groups", lambda d: css(d, "#file-groups tbody tr"))
    timeline = console.get(f"/v1/tables/{scenario.trips_id}/timeline")["instants"]
    assert len(css(driver, "#timeline tbody tr")) == len(timeline) == 4
    bars = css(driver, "#timeline-strip rect[data-instant]")
    assert sorted(b.get_attribute("data-instant") for b in bars) == sorted(
        i["instant"] for i in timeline
    )
    assert {b.get_attribute("data-state") for b in bars} == {"COMPLETED"}
    summary = driver.find_element(By.ID, "files-summary").text
    assert summary.startswith("3 file groups in 3 partitions"), summary
    assert len(css(driver, "#file-groups tbody tr")) == 3
    trips = console.get(f"/v1/tables/{scenario.trips_id}")
    facts = driver.find_element(By.ID, "table-facts").text.splitlines()
    # No count threshold (0): the page says no trigger is set, not "6 of never".
    delta = facts[facts.index("Delta commits since compaction") + 1]
    assert delta == (
        f"{trips['delta_commits_since_compaction']} (no policy trigger: compaction runs when "
        "submitted)"
    ), facts
    clustering = facts[facts.index("Commits since clustering") + 1]
    assert clustering == (
        f"{trips['commits_since_clustering']} (no policy trigger: clustering runs when submitted)"
    ), facts
    # A writer may not pause or delete: the page says so instead of offering the buttons.
    actions = driver.find_element(By.ID, "table-actions")
    assert not css(driver, "#pause") and "need the admin role" in actions.text
    assert not {"null", "undefined", "NaN"} & set(driver.find_element(By.ID, "view").text.split())
    ops = {int(r.get_attribute("data-operation-id")) for r in css(driver, "#operations tbody tr")}
    assert ops == {scenario.failed_id, scenario.running_id}
    screenshot(driver, "table")


def test_attempts_show_outcome_error_and_log(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    driver = browser
    sign_in(driver, console, WRITER)
    open_view(driver, console, f"/operations/{scenario.failed_id}", "#attempts")
    attempt = driver.find_element(By.CSS_SELECTOR, "#attempts tbody tr")
    assert attempt.get_attribute("data-outcome") == "FAILED"
    assert FAILURE in attempt.find_element(By.CSS_SELECTOR, "pre.attempt-error").text
    assert driver.find_element(By.ID, "executor").text == "hudi (asked: auto)"
    assert driver.find_element(By.ID, "native-declined").text == NATIVE_DECLINED
    screenshot(driver, "operation")
    attempt.find_element(By.CSS_SELECTOR, "a.log-link").click()
    log = wait(driver, "the log", lambda d: d.find_element(By.ID, "log"))
    assert log.text.splitlines() == ["compaction of lake.trips starting", FAILURE]
    open_view(driver, console, f"/operations/{scenario.running_id}", "#attempts")
    running = driver.find_element(By.CSS_SELECTOR, "#attempts tbody tr")
    assert running.get_attribute("data-outcome") == "RUNNING"
    assert driver.find_element(By.ID, "executor").text == "auto (no job has reported yet)"
    assert not css(driver, "#native-declined")
    assert "cleaning\n1/3 file groups" in running.text
    bar = running.find_element(By.CSS_SELECTOR, ".progress > span")
    assert bar.get_attribute("style").startswith("width: 33.3")


def test_the_action_filter_offers_the_services_table_services(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    """The choices are the service's (`/v1/overview/actions`, the list the registry
    follows), not the page's own; a chosen one filters the operations."""
    driver = browser
    sign_in(driver, console, VIEWER)
    open_view(driver, console, "/operations?action=clean", "#filter-action")
    options = css(driver, "#filter-action option")
    assert [o.get_attribute("value") for o in options] == ["", *TABLE_SERVICE_ACTIONS]
    assert [o.get_attribute("value") for o in options if o.is_selected()] == ["clean"]
    rows = css(driver, "#operations tbody tr")
    shown = {int(str(r.get_attribute("data-operation-id"))) for r in rows}
    cleans = console.http.get("/v1/operations", params={"action": "clean"}).json()["items"]
    assert shown == {o["id"] for o in cleans} and scenario.running_id in shown


def test_retry_a_failed_and_cancel_a_running_operation(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    driver = browser
    sign_in(driver, console, WRITER)
    open_view(driver, console, "/operations?table_id=" + str(scenario.trips_id), "#operations")
    failed = row_of(driver, scenario.failed_id)
    assert failed.get_attribute("data-status") == "FAILED"
    assert FAILURE[:60] in failed.text
    assert not row_of(driver, scenario.running_id).find_elements(By.CSS_SELECTOR, ".op-retry")
    screenshot(driver, "operations")

    failed.find_element(By.CSS_SELECTOR, "button.op-retry").click()
    shown = wait(driver, "the retry's message", lambda d: messages(d, "info"))
    assert shown == [f"Operation {scenario.failed_id} retried (now SCHEDULED)"]
    wait(
        driver,
        "the row redrawn",
        lambda d: row_of(d, scenario.failed_id).get_attribute("data-status") == "SCHEDULED",
    )
    assert console.operation(scenario.failed_id)["status"] == "SCHEDULED"

    row_of(driver, scenario.running_id).find_element(By.CSS_SELECTOR, "button.op-cancel").click()
    expected = [f"Cancel of operation {scenario.running_id} requested (now RUNNING)"]
    wait(driver, "the cancel's message", lambda d: messages(d, "info") == expected)
    running = console.operation(scenario.running_id)
    assert running["status"] == "RUNNING" and running["cancel_requested"] is True
    wait(
        driver,
        "cancel requested shown",
        lambda d: "cancel requested" in row_of(d, scenario.running_id).text,
    )
    assert not row_of(driver, scenario.running_id).find_elements(By.CSS_SELECTOR, ".op-cancel")


def test_the_viewer_is_refused_a_retry(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    # The retried operation waits again: cancelled, it offers a retry once more.
    if console.operation(scenario.failed_id)["status"] == "SCHEDULED":
        console.post(f"/v1/operations/{scenario.failed_id}/cancel")
    before = console.operation(scenario.failed_id)["status"]
    assert before in {"FAILED", "CANCELLED"}
    driver = browser
    sign_in(driver, console, VIEWER)
    assert driver.find_element(By.ID, "who").text == "role: viewer"
    open_view(driver, console, "/operations", "#operations")
    button = row_of(driver, scenario.failed_id).find_element(By.CSS_SELECTOR, "button.op-retry")
    assert button.get_attribute("disabled") is not None
    assert button.get_attribute("title") == "needs the writer role (you are viewer)"
    # The server refuses whatever the page offers: a click the page would not allow, sent
    # anyway, is answered 403 and the refusal shown.
    driver.execute_script("arguments[0].disabled = false; arguments[0].click()", button)
    shown = wait(driver, "the refusal", lambda d: messages(d, "error"))
    assert shown == ["Refused: the viewer role may not do this; it needs writer (HTTP 403)"]
    direct = console.http.post(f"/v1/operations/{scenario.failed_id}/retry", headers=bearer(VIEWER))
    assert direct.status_code == 403
    assert console.operation(scenario.failed_id)["status"] == before


def test_api_errors_are_messages_not_blank_pages(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    driver = browser
    sign_in(driver, console, VIEWER)
    driver.get(f"{console.url}/ui#/tables/987654")
    shown = wait(driver, "the error", lambda d: messages(d, "error"))
    assert "987654" in shown[0] and shown[0].endswith("(HTTP 404)"), shown
    assert "could not be shown" in driver.find_element(By.ID, "view").text
    # Storage that shows no table: the table's page says so in its panels, the rest stands.
    ghost = console.http.post(
        "/v1/tables",
        params={"pending": "true"},
        json={"db_name": "lake", "table_name": "ghost", "base_path": "/nonexistent/ghost"},
    )
    assert ghost.status_code == 201, ghost.text
    open_view(driver, console, f"/tables/{ghost.json()['id']}", "#table-facts")
    panel = wait(
        driver,
        "the timeline's error",
        lambda d: d.find_element(By.CSS_SELECTOR, "#timeline-panel .message.error"),
    )
    assert panel.text == (
        "The timeline could not be read: no Hudi table on storage at /nonexistent/ghost"
    )
    files = wait(
        driver,
        "the file groups' error",
        lambda d: d.find_element(By.CSS_SELECTOR, "#files-panel .message.error"),
    )
    assert "no Hudi table on storage at /nonexistent/ghost" in files.text
    # A token revoked mid-session (here: removed from the tab) is a 401: back to sign in.
    driver.execute_script("sessionStorage.setItem('tms.console.token', 'revoked')")
    driver.get(f"{console.url}/ui#/operations")
    wait(driver, "the sign-in form", lambda d: d.find_element(By.ID, "token"))
    assert "unknown bearer token" in messages(driver, "error")[0]


def test_the_admin_pauses_resumes_and_deletes_a_table(
    browser: WebDriver, console: Service, scenario: Scenario
) -> None:
    driver = browser
    sign_in(driver, console, ADMIN)
    orders = next(
        t
        for t in console.get("/v1/overview/tables", search="sales.orders")["items"]
        if t["table_name"] == "orders"
    )
    open_view(driver, console, f"/tables/{orders['id']}", "#pause")
    driver.find_element(By.ID, "pause").click()
    wait(driver, "paused", lambda d: messages(d, "info") == ["Paused"])
    assert console.get(f"/v1/tables/{orders['id']}")["paused"] is True
    button = wait(driver, "the resume button", lambda d: d.find_element(By.ID, "pause"))
    assert button.text == "Resume"
    button.click()
    wait(driver, "resumed", lambda d: messages(d, "info") == ["Resumed"])
    assert console.get(f"/v1/tables/{orders['id']}")["paused"] is False

    wait(driver, "the delete button", lambda d: d.find_element(By.ID, "delete")).click()
    alert = driver.switch_to.alert
    assert alert.text.startswith("Forget sales.orders and its history?")
    alert.accept()
    wait(driver, "the deletion", lambda d: messages(d, "info") == ["Deleted sales.orders"])
    wait(driver, "the tables list", lambda d: css(d, '#view[data-view="tables"] #tables'))
    assert console.http.get(f"/v1/tables/{orders['id']}").status_code == 404


def savepoint_status(driver: WebDriver, kind: str) -> WebElement | None:
    """What the savepoints panel says next to its form, when it is shown and of `kind`."""
    found = css(driver, f'#savepoint-status[data-kind="{kind}"]:not([hidden])')
    return found[0] if found else None


def status_text(driver: WebDriver, kind: str) -> str:
    shown = savepoint_status(driver, kind)
    assert shown is not None, f"no {kind} next to the savepoint form"
    return shown.text


def test_savepoints_are_made_refused_and_removed_as_the_role_allows(
    browser: WebDriver, console: Service
) -> None:
    """A table of its own (the others' timelines stay as their tests expect), forgotten by the
    registry at the end: a writer savepoints its first commit through the form and is refused
    an instant that is no commit, a viewer sees the list only, an admin removes it."""
    table_id, _ = write_table(
        console, console.data_dir.parent / "lake", "lake", "kept", "COPY_ON_WRITE", upserts=1
    )
    try:
        first = console.get(f"/v1/tables/{table_id}/timeline")["instants"][0]["instant"]
        driver = browser
        sign_in(driver, console, WRITER)
        open_view(driver, console, f"/tables/{table_id}", "#savepoint-form")
        assert driver.find_element(By.ID, "savepoints").text == "none"
        driver.find_element(By.ID, "savepoint-instant").send_keys(first)
        driver.find_element(By.ID, "savepoint-comment").send_keys("before the backfill")
        driver.find_element(By.CSS_SELECTOR, "#savepoint-form button[type=submit]").click()
        row = wait(
            driver,
            "the savepoint listed",
            lambda d: d.find_element(By.CSS_SELECTOR, f'#savepoints tr[data-instant="{first}"]'),
        )
        made = console.get(f"/v1/tables/{table_id}/savepoints")["items"]
        assert [m["instant"] for m in made] == [first] and made[0]["files"] > 0
        at = datetime.fromtimestamp(made[0]["savepointed_at"] / 1000, UTC)
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == first and cells[2:] == [
            "tms",
            at.strftime("%Y-%m-%d %H:%M:%SZ"),
            "before the backfill",
            str(made[0]["files"]),
        ], cells
        assert status_text(driver, "info") == f"Savepointed {first}"
        assert not css(driver, ".savepoint-remove"), "removing one needs the admin role"

        # No such commit: the service's refusal is shown next to the form, the list stands.
        instant = driver.find_element(By.ID, "savepoint-instant")
        instant.send_keys("20200101000000000")
        driver.find_element(By.CSS_SELECTOR, "#savepoint-form button[type=submit]").click()
        refusal = wait(driver, "the refusal", lambda d: savepoint_status(d, "error"))
        assert refusal.text == (
            "Refused: 20200101000000000 is not a completed commit, delta commit or "
            "replacecommit on the active timeline; only a completed write can be "
            "savepointed (HTTP 409)"
        )
        assert instant.get_attribute("value") == "20200101000000000", "what was typed stays"
        assert [r.get_attribute("data-instant") for r in css(driver, "#savepoints tbody tr")] == [
            first
        ]
        assert not messages(driver, "error"), "shown in the panel, not on top of the page"

        # A viewer sees the list, and neither the form nor a remove button.
        sign_in(driver, console, VIEWER)
        open_view(driver, console, f"/tables/{table_id}", "#savepoints tbody tr")
        assert not css(driver, "#savepoint-form") and not css(driver, ".savepoint-remove")
        panel = driver.find_element(By.ID, "savepoints-panel").text
        assert "Making a savepoint needs the writer role (you are viewer)." in panel

        sign_in(driver, console, ADMIN)
        open_view(driver, console, f"/tables/{table_id}", "#savepoints tbody tr")
        row = driver.find_element(By.CSS_SELECTOR, f'#savepoints tr[data-instant="{first}"]')
        row.find_element(By.CSS_SELECTOR, "button.savepoint-remove").click()
        alert = driver.switch_to.alert
        assert alert.text.startswith(f"Remove the savepoint at {first}?")
        alert.accept()
        wait(driver, "none", lambda d: d.find_element(By.ID, "savepoints").text == "none")
        assert status_text(driver, "info") == f"Removed the savepoint at {first}"
        assert console.get(f"/v1/tables/{table_id}/savepoints")["items"] == []
    finally:  # not asserted: a failure above is the one to report
        console.http.delete(f"/v1/tables/{table_id}")


TTL_QUEUE = "console-ttl"
ODD_PARTITION = "region=<img src=x onerror=alert(1)>"


def completed_partition_ttl(console: Service, name: str, figures: Mapping[str, object]) -> int:
    """A partition TTL of `lake.<name>` that a resident worker of its own queue claimed and
    reported done with `figures` as its result."""
    worker = "console-ttl-worker"
    made = console.post(
        "/v1/hoodie/service/partition_ttl/submit",
        {
            "db_name": "lake",
            "table_name": name,
            "queue": TTL_QUEUE,
            "max_retries": 0,
            "execution_engine": "spark-worker",
            "extra_params": {"ttl_days": "30"},
        },
    )
    console.post(
        "/v1/workers",
        {
            "id": worker,
            "host": "console-test",
            "pid": os.getpid(),
            "spark_master": "local[1]",
            "queues": [TTL_QUEUE],
            "slots": 1,
        },
    )
    claimed = console.post(
        f"/v1/workers/{worker}/claim", {"free": 1, "busy": 0, "wait_seconds": 5}
    )["attempts"]
    assert [c["operation_id"] for c in claimed] == [made["id"]], claimed
    done = httpx.post(
        f"{console.url}/v1/jobs/attempts/{claimed[0]['attempt_id']}/result",
        json={"outcome": "SUCCEEDED", "figures": figures},
        headers=bearer(claimed[0]["token"]),
    )
    assert done.status_code == 200 and done.json()["operation_status"] == "COMPLETED", done.text
    operation_id: int = made["id"]
    return operation_id


def panel_status(driver: WebDriver, panel: str, kind: str) -> WebElement | None:
    """What a dry-run panel (`ttl`, `archival`) says under its form, when shown and of `kind`."""
    found = css(driver, f'#{panel}-status[data-kind="{kind}"]:not([hidden])')
    return found[0] if found else None


def dry_run(driver: WebDriver, panel: str, **fields: str) -> None:
    """Type `fields` (input id suffix: value; the rest emptied) and press the panel's Dry run."""
    for element in css(driver, f"#{panel}-form input"):
        element.clear()
    for name, value in fields.items():
        driver.find_element(By.ID, f"{panel}-{name}").send_keys(value)
    driver.find_element(By.CSS_SELECTOR, f"#{panel}-form button[type=submit]").click()


def shown_partitions(driver: WebDriver) -> list[list[str]]:
    """The TTL dry run's rows as shown: partition, verdict, last commit, reason."""
    rows = css(driver, "#ttl-verdicts tbody tr")
    return [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows]


def shown_instant(instant: str) -> str:
    """An instant time as the console writes it under the instant (UTC, milliseconds)."""
    at = datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    return f"{at:%Y-%m-%d %H:%M:%S}.{instant[14:17] or '000'}"


def test_a_viewer_sees_what_a_partition_ttl_would_delete_and_what_went(
    browser: WebDriver, console: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table written on 2020-01-01 (regions eu, us and apac) and into eu again now: a
    viewer's dry run of 30 days marks apac and us to delete and keeps eu, patterns narrow it,
    a days value of 0 is refused naming the field, and the partitions a completed partition
    TTL deleted are listed as text, whatever their names."""
    with monkeypatch.context() as patched:
        frozen_clock(patched, Clock.at("2020-01-01"))
        table_id, writer = write_table(
            console, console.data_dir.parent / "lake", "lake", "aged", "COPY_ON_WRITE", upserts=0
        )
    writer.insert(batch(range(40, 46), 5, ("eu",)))
    try:
        figures = {
            "partitions_deleted": ["apac", ODD_PARTITION],
            "file_groups_by_partition": {"apac": 2, ODD_PARTITION: 1},
        }
        operation_id = completed_partition_ttl(console, "aged", figures)
        finished = datetime.fromisoformat(console.operation(operation_id)["finished_at"])
        driver = browser
        sign_in(driver, console, VIEWER)
        open_view(driver, console, f"/tables/{table_id}", "#ttl-form")
        went = driver.find_element(
            By.CSS_SELECTOR, f'#ttl-history tr[data-operation-id="{operation_id}"]'
        )
        cells = went.find_elements(By.TAG_NAME, "td")
        assert cells[1].text == finished.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        assert [li.text for li in cells[3].find_elements(By.TAG_NAME, "li")] == [
            "apac (2 file groups)",
            f"{ODD_PARTITION} (1 file group)",
        ]
        assert not css(driver, "#ttl-panel img"), "a partition's name is text, never markup"

        dry_run(driver, "ttl", days="30")
        wait(driver, "the verdicts", lambda d: len(shown_partitions(d)) == 3)
        rows = shown_partitions(driver)
        expected = console.get(f"/v1/tables/{table_id}/partition-ttl", days=30)
        old = {v["partition"]: v["last_commit_time"] for v in expected["expired"]}
        assert sorted(old) == ["apac", "us"] and all(t.startswith("20200101") for t in old.values())
        assert rows[:2] == [
            [
                v["partition"],
                "would delete",
                f"{old[v['partition']]}\n{shown_instant(old[v['partition']])}",
                "expired",
            ]
            for v in expected["expired"]
        ], rows
        assert rows[2][:2] == ["eu", "kept"] and rows[2][3] == "last commit within 30 days"
        marked = [
            r.get_attribute("data-partition") for r in css(driver, "#ttl-verdicts tr.would-delete")
        ]
        assert marked == [v["partition"] for v in expected["expired"]]
        summary = driver.find_element(By.ID, "ttl-summary").text
        assert summary.startswith("A partition TTL of 30 days as of ")
        assert summary.endswith(" would delete 2 partitions and keep 1."), summary

        dry_run(driver, "ttl", days="30", partitions="a*")
        wait(driver, "apac alone", lambda d: [r[0] for r in shown_partitions(d)] == ["apac"])
        assert driver.find_element(By.ID, "ttl-summary").text.endswith(
            " would delete 1 partition and keep 0 among the partitions a* select (2 not selected)."
        )

        dry_run(driver, "ttl", days="0")
        refusal = wait(driver, "the refusal", lambda d: panel_status(d, "ttl", "error"))
        assert refusal is not None
        error = console.http.get(
            f"/v1/tables/{table_id}/partition-ttl", params={"days": "0"}, headers=bearer(VIEWER)
        ).json()["error"]
        assert error["field"] == "query.days"
        assert refusal.text == f"Refused: {error['message']} (HTTP 422)"
        assert refusal.text.startswith("Refused: query.days: "), refusal.text
        days = driver.find_element(By.ID, "ttl-days")
        assert days.get_attribute("aria-invalid") == "true" and days.get_attribute("value") == "0"
        assert not css(driver, "#ttl-verdicts"), "no verdicts shown for a refused request"
        assert not messages(driver, "error"), "shown in the panel, not on top of the page"
    finally:  # not asserted: a failure above is the one to report
        console.http.delete(f"/v1/tables/{table_id}")


def test_the_archival_panel_shows_what_an_archival_would_move_and_where_it_stops(
    browser: WebDriver, console: Service
) -> None:
    """A merge-on-read table of seven delta commits: with Hudi's keep settings nothing is due;
    with keep.min 1 and keep.max 2 the two oldest would go, the compaction rule keeping the
    five a compaction counts; keep.max not above keep.min is refused naming keep_max."""
    table_id, _ = write_table(
        console, console.data_dir.parent / "lake", "lake", "busy", "MERGE_ON_READ", upserts=6
    )
    try:
        commits = [i["instant"] for i in console.get(f"/v1/tables/{table_id}/timeline")["instants"]]
        assert len(commits) == 7
        driver = browser
        sign_in(driver, console, VIEWER)
        open_view(driver, console, f"/tables/{table_id}", "#archival-facts")
        summary = driver.find_element(By.ID, "archival-summary").text
        assert summary == "Nothing to archive now (7 completed commits on the active timeline)."
        assert driver.find_element(By.ID, "archival-stop").text.startswith("keep_max: ")
        assert not css(driver, "#archival-instants")

        dry_run(driver, "archival", **{"keep-min": "1", "keep-max": "2"})
        rows = wait(driver, "the instants", lambda d: css(d, "#archival-instants tbody tr"))
        plan = console.get(f"/v1/tables/{table_id}/archival", keep_min=1, keep_max=2)
        assert [r.get_attribute("data-instant") for r in rows] == commits[:2]
        assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == ["deltacommit"] * 2
        assert driver.find_element(By.ID, "archival-summary").text == (
            f"Would archive 2 instants ({plan['commits_archived']} of the 7 completed commits)."
        )
        facts = driver.find_element(By.ID, "archival-facts").text.splitlines()
        assert facts[facts.index("Earliest kept") + 1] == commits[2]
        assert facts[facts.index("Stops at") + 1] == f"compaction: {plan['reason']}"
        limits = css(driver, "#archival-limits tbody tr")
        assert [r.get_attribute("data-rule") for r in limits] == ["compaction"]

        dry_run(driver, "archival", **{"keep-min": "5", "keep-max": "5"})
        refusal = wait(driver, "the refusal", lambda d: panel_status(d, "archival", "error"))
        assert refusal is not None
        assert (
            refusal.text == "Refused: query.keep_max: must be greater than keep_min (5) (HTTP 422)"
        )
        keep_max = driver.find_element(By.ID, "archival-keep-max")
        assert keep_max.get_attribute("aria-invalid") == "true"
        assert driver.find_element(By.ID, "archival-keep-min").get_attribute("aria-invalid") is None
        assert not css(driver, "#archival-instants") and not messages(driver, "error")
    finally:  # not asserted: a failure above is the one to report
        console.http.delete(f"/v1/tables/{table_id}")
