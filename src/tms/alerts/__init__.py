"""Alerts to the operators' webhook: the background delivery rounds the scheduler starts.

The alerts themselves are raised by `tms.store` in the transactions that see their reason
(an operation ending FAILED) or by a round's sweep (tables silent for too long); this
package POSTs them and records each try.
"""

from tms.alerts.delivery import AlertDelivery, post_alert

__all__ = ["AlertDelivery", "post_alert"]
