"""Hudi's Spark bundle as the service obtains it for the jobs it launches: where it is kept
and fetched from (the settings), with a log line and a metric for each fetch. One fetcher
per process, shared by the engine, `/readyz` and the resident workers' start."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tms import metrics
from tms.spark_runtime.hudi_bundle import (
    HUDI_COORDINATES,
    UNAVAILABLE_HINT,
    BundleFetcher,
    BundleSource,
    fetcher,
)

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = ["bundle_fetcher", "bundle_source"]

log = logging.getLogger(__name__)


def bundle_source(settings: Settings) -> BundleSource:
    """Where the settings keep and fetch the bundle."""
    return BundleSource(
        cache=settings.hudi_cache,
        repositories=settings.hudi_repositories,
        ivy_settings=str(settings.hudi_ivy_settings) if settings.hudi_ivy_settings else None,
        fetch=settings.hudi_fetch,
        spark_home=settings.spark_home,
    )


def _observe(succeeded: bool, seconds: float, what: str) -> None:
    if succeeded:
        log.info("fetched Hudi's Spark bundle %s in %.1f s: %s", HUDI_COORDINATES, seconds, what)
    else:
        log.error(
            "could not fetch Hudi's Spark bundle %s (%.1f s): %s; %s",
            HUDI_COORDINATES,
            seconds,
            what,
            UNAVAILABLE_HINT,
        )
    metrics.HUDI_BUNDLE_FETCHES.labels("fetched" if succeeded else "failed").inc()
    metrics.HUDI_EXECUTOR_AVAILABLE.set(1 if succeeded else 0)


def bundle_fetcher(settings: Settings) -> BundleFetcher:
    """This process's fetcher for the settings' source, logging and counting its fetches."""
    return fetcher(bundle_source(settings), _observe)
