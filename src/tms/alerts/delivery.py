"""Delivering alerts: a background round, started from the scheduler's tick, that raises
the alerts of silent tables and POSTs due alerts to `TMS_ALERT_WEBHOOK_URL`.

Every instance runs rounds; the store's claim (`FOR UPDATE SKIP LOCKED` and a lease) gives
each alert to one of them at a time. A try is one POST of the alert's JSON; a 2xx answer
delivers it, anything else is retried after the `retry_*` backoff until
`alert_max_deliveries` tries failed (`alerts.outcomes` decides, the store records). A
webhook that does not answer ends the round early: the other due alerts wait for the next
round rather than for one timeout each. Without a webhook URL alerts are only recorded
(shown by the API) and stay PENDING.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from tms.alerts.outcomes import Delivery, alert_silent_tables, record_try
from tms.backoff import Backoff
from tms.rounds import BackgroundRound
from tms.store import Alert, AlertStatus, claim_due_alerts, session_scope

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = ["AlertDelivery", "post_alert"]

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_SECONDS = 10.0
"""One POST to the webhook, connect to last byte."""
LEASE_SLACK_SECONDS = 20.0
"""A claimed alert is left alone this long past the request timeout before another
instance may try it (this one died mid-try)."""
ROUND_LIMIT = 100
"""Alerts one round tries at most; the rest wait for the next round."""
MAX_ERROR_BODY = 300
"""Characters of a refusing webhook's answer kept in `last_error`."""


def post_alert(client: httpx.Client, url: str, alert: Alert) -> Delivery:
    """One try: POST the alert's payload (with its id) as JSON; the webhook's answer as a
    `Delivery` (raises `httpx.HTTPError` when there was none). The id is also in the
    `Idempotency-Key` and `X-Tms-Alert-Id` headers, so a receiver can drop a repeat (a try
    whose answer was lost is tried again)."""
    body: dict[str, Any] = {**alert.payload, "alert_id": alert.id}
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "tms",
        "Idempotency-Key": f"tms-alert-{alert.id}",
        "X-Tms-Alert-Id": str(alert.id),
    }
    response = client.post(url, json=body, headers=headers)
    if response.is_success:
        return Delivery()
    answer = " ".join(response.text.split())[:MAX_ERROR_BODY]
    return Delivery(f"HTTP {response.status_code}" + (f": {answer}" if answer else ""))


class AlertDelivery:
    """Runs alert rounds in the background for one instance (see the module doc)."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        settings: Settings,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_seconds: float = 1.0,
        sweep_interval_seconds: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._factory = session_factory
        self._settings = settings
        self._backoff = Backoff.from_settings(settings)
        self._clock = clock
        self.sweep_interval_seconds = sweep_interval_seconds
        self._transport = transport
        self._swept_at: float | None = None
        self._round = BackgroundRound(
            "tms-alerts", self.run, interval_seconds=interval_seconds, clock=clock
        )

    def maybe_start(self) -> bool:
        """Start a round in the background when one is due and none is running (the tick
        never waits on the webhook); whether one was started."""
        return self._round.maybe_start()

    def join(self, timeout: float | None = REQUEST_TIMEOUT_SECONDS + 5) -> None:
        """Wait for a round started in the background to end (by default about as long as
        one webhook try may take)."""
        self._round.join(timeout)

    def run(self, now: datetime | None = None) -> int:
        """One round: raise the alerts of silent tables (every `sweep_interval_seconds`),
        then try the due alerts. The number of tries made. `now` pins the database clock
        (tests)."""
        self._sweep(now)
        url = self._settings.alert_webhook_url
        if url is None:
            return 0
        tries = 0
        with httpx.Client(
            timeout=REQUEST_TIMEOUT_SECONDS, transport=self._transport, follow_redirects=False
        ) as client:
            while tries < ROUND_LIMIT:
                with session_scope(self._factory) as session:
                    claimed = claim_due_alerts(
                        session,
                        limit=1,
                        lease_seconds=REQUEST_TIMEOUT_SECONDS + LEASE_SLACK_SECONDS,
                        now=now,
                    )
                if not claimed:
                    break
                alert = claimed[0]
                tries += 1
                try:
                    delivery = post_alert(client, url, alert)
                except httpx.HTTPError as exc:  # no answer: the others wait for the next round
                    self._record(alert, Delivery(f"{type(exc).__name__}: {exc}".strip()), now)
                    break
                self._record(alert, delivery, now)
        return tries

    def _sweep(self, now: datetime | None) -> None:
        mono = self._clock()
        if self._swept_at is not None and mono - self._swept_at < self.sweep_interval_seconds:
            return
        self._swept_at = mono
        with session_scope(self._factory) as session:
            raised = alert_silent_tables(
                session,
                timeout_seconds=self._settings.notification_timeout_seconds,
                silent_timeouts=self._settings.alert_silent_timeouts,
                now=now,
            )
        for alert in raised:
            table = alert.payload["table"]
            log.warning(
                "alert %s: table %s.%s silent for %.0fs (no notification, no pulled commit)",
                alert.id,
                table["db_name"],
                table["table_name"],
                alert.payload["silent_seconds"],
            )

    def _record(self, alert: Alert, delivery: Delivery, now: datetime | None) -> None:
        with session_scope(self._factory) as session:
            recorded = record_try(
                session,
                alert,
                delivery,
                max_deliveries=self._settings.alert_max_deliveries,
                backoff=self._backoff,
                now=now,
            )
        if recorded is None:
            log.info("alert %s: a try was recorded elsewhere meanwhile", alert.id)
        elif recorded.status is AlertStatus.DELIVERED:
            log.info("alert %s (%s) delivered, try %d", alert.id, alert.kind, recorded.deliveries)
        elif recorded.status is AlertStatus.FAILED:
            log.error(
                "alert %s (%s) not delivered after %d tries: %s",
                alert.id,
                alert.kind,
                recorded.deliveries,
                delivery.error,
            )
        else:
            log.warning(
                "alert %s (%s) try %d failed, next at %s: %s",
                alert.id,
                alert.kind,
                recorded.deliveries,
                recorded.next_attempt_at,
                delivery.error,
            )
