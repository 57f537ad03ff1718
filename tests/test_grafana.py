"""The Grafana provisioning in conf/grafana: every panel's query names metrics the service
really exports (as `/metrics` writes them: a counter's `_total`, a histogram's `_bucket`,
`_sum` and `_count`), and every exported metric is on some panel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tms import metrics

ROOT = Path(__file__).resolve().parents[1]
GRAFANA = ROOT / "conf" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "tms.json"
_METRIC = re.compile(r"\btms_[a-z0-9_]+")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_families() -> dict[str, set[str]]:
    """Per metric family, the sample names `/metrics` writes for it."""
    return {
        family.name: {family.name + suffix for suffix in _SUFFIXES[family.type]}
        for family in metrics.REGISTRY.collect()
    }


def panel_queries(dashboard: dict[str, Any]) -> dict[str, list[str]]:
    queries: dict[str, list[str]] = {}
    for panel in dashboard["panels"]:
        for nested in [panel, *panel.get("panels", [])]:
            for target in nested.get("targets", []):
                queries.setdefault(nested["title"], []).append(target["expr"])
    return queries


def test_every_query_names_an_exported_metric_and_every_metric_is_shown() -> None:
    families = exported_families()
    samples = set().union(*families.values())
    queries = panel_queries(json.loads(DASHBOARD.read_text()))
    named = {name for exprs in queries.values() for expr in exprs for name in _METRIC.findall(expr)}
    unknown = sorted(named - samples)
    assert not unknown, f"panels query metrics the service does not export: {unknown}"
    missing = sorted(f for f, names in families.items() if not names & named)
    assert not missing, f"exported metrics no panel shows: {missing}"
    assert all(queries.values()), "a panel without a query"


def test_the_suffix_rules_are_what_prometheus_client_writes() -> None:
    """`exported_families` assumes how each type is written: checked against the library's
    own output for one metric of each type."""
    registry = CollectorRegistry()
    Counter("tms_probe", "c", registry=registry).inc()
    Histogram("tms_probe_seconds", "h", registry=registry).observe(1.0)
    Gauge("tms_probe_gauge", "g", registry=registry).set(1)
    written = set(re.findall(r"^(tms_[a-z0-9_]+)", generate_latest(registry).decode(), re.M))
    expected = {
        family.name + suffix for family in registry.collect() for suffix in _SUFFIXES[family.type]
    }
    assert expected <= written
    assert written - expected <= {"tms_probe_created", "tms_probe_seconds_created"}


def test_the_datasource_and_the_dashboard_folder_are_provisioned() -> None:
    datasources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    [source] = datasources["datasources"]
    assert (source["type"], source["uid"], source["url"]) == (
        "prometheus",
        "prometheus",
        "http://prometheus:9090",
    )
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "tms.yml").read_text())
    [provider] = providers["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    dashboard = json.loads(DASHBOARD.read_text())
    uids = {t["datasource"]["uid"] for p in dashboard["panels"] for t in p.get("targets", [])}
    assert uids == {source["uid"]}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
