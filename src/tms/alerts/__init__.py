"""Alerts to the operators' webhook: the background delivery rounds the scheduler starts.

The alerts themselves are raised in the transactions that see their reason (an operation
ending FAILED, `application.attempt_end`) or by a round's sweep (tables silent for too
long), through `alerts.outcomes`, which also decides what each try makes of an alert and
counts it; this package POSTs them and records each try.
"""

from tms.alerts.delivery import AlertDelivery, post_alert

__all__ = ["AlertDelivery", "post_alert"]
