"""Settings (tms.config). Lives with the store tests until tests/test_config.py exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tms.config import (
    DEFAULT_CALLBACK_KEY,
    Role,
    Settings,
    SettingsError,
    describe_settings,
    get_settings,
    load_settings,
)

CONF = Path(__file__).resolve().parents[1] / "conf" / "tms.toml"


def bare(**overrides: object) -> Settings:
    return load_settings(config_file=False, environ={}, **overrides)


def test_defaults(tmp_path: Path) -> None:
    s = bare(data_dir=tmp_path)
    assert s.database_url is None
    assert (s.host, s.port, s.public_url) == ("127.0.0.1", 9091, "http://127.0.0.1:9091")
    assert s.callback_keys == ()  # Hudi's default key, while auth is off:
    assert [k.key.get_secret_value() for k in s.accepted_callback_keys] == [DEFAULT_CALLBACK_KEY]
    assert (s.max_request_bytes, s.max_callback_bytes) == (1024 * 1024, 32 * 1024 * 1024)
    assert s.auth_tokens == () and not s.auth_enabled
    assert (s.auto_register, s.spark_master, s.spark_home) == (True, "local[*]", None)
    assert (s.scheduler_interval_seconds, s.max_running_per_instance, s.queue_limits) == (
        1.0,
        2,
        {},
    )
    assert (s.lease_seconds, s.heartbeat_interval_seconds) == (60, 10)
    assert (s.retry_base_seconds, s.retry_factor, s.retry_max_seconds, s.retry_jitter) == (
        5,
        2,
        600,
        0.1,
    )
    assert (s.default_max_retries, s.compaction_delta_commits, s.clean_commits) == (3, 5, 10)
    assert s.clustering_commits == 0
    assert s.log_dir == tmp_path / "logs"
    assert bare().data_dir == Path.cwd() / ".tms"


def test_config_file_documents_every_setting_with_its_default(tmp_path: Path) -> None:
    body = CONF.read_text()
    defaults = bare()
    uncommented = []
    for doc in describe_settings():
        match = re.search(rf"^# {doc.name} = (.*)$", body, re.MULTILINE)
        assert match, f"conf/tms.toml does not document {doc.name}"
        if Settings.model_fields[doc.name].default is not None:
            uncommented.append(f"{doc.name} = {match.group(1)}")
    path = tmp_path / "defaults.toml"
    path.write_text("\n".join(uncommented) + "\n")
    assert load_settings(config_file=path, environ={}) == defaults
    assert load_settings(config_file=CONF, environ={}) == defaults


def test_environment_wins_over_file_over_defaults(tmp_path: Path) -> None:
    conf = tmp_path / "tms.toml"
    conf.write_text('port = 9000\nhost = "0.0.0.0"\nqueue_limits = { etl = 4 }\n')
    from_file = load_settings(environ={"TMS_CONFIG": str(conf)})
    assert (from_file.port, from_file.host, from_file.queue_limits) == (9000, "0.0.0.0", {"etl": 4})
    assert from_file.public_url == "http://127.0.0.1:9000"
    both = load_settings(environ={"TMS_CONFIG": str(conf), "TMS_PORT": "9100"})
    assert both.port == 9100 and both.host == "0.0.0.0"
    assert load_settings(config_file=conf, environ={}, port=1).port == 1  # explicit wins


def test_missing_or_wrong_config_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"TMS_CONFIG: .*does not exist"):
        load_settings(environ={"TMS_CONFIG": str(tmp_path / "nope.toml")})
    conf = tmp_path / "tms.toml"
    conf.write_text("prot = 1\n")
    with pytest.raises(SettingsError, match="prot: unknown setting"):
        load_settings(config_file=conf, environ={})


def test_lists_from_env_and_toml(tmp_path: Path) -> None:
    s = load_settings(
        config_file=False,
        environ={
            "TMS_QUEUE_LIMITS": "default:2, etl:4",
            "TMS_CALLBACK_KEYS": "k1,k2@/lake/a, k2@s3://b@x/lake",
            "TMS_AUTH_TOKENS": "admin:a-secret,viewer:v-secret",
            "TMS_DATABASE_URL": "postgres://tms:pw@db:5432/tms",
            "TMS_PUBLIC_URL": "https://tms.example/",
        },
    )
    assert s.queue_limits == {"default": 2, "etl": 4}
    assert [(k.key.get_secret_value(), k.prefixes) for k in s.callback_keys] == [
        ("k1", ()),
        ("k2", ("/lake/a", "s3://b@x/lake")),
    ]
    assert "k2" not in repr(s)
    assert s.database_url == "postgresql+psycopg://tms:pw@db:5432/tms"
    assert s.public_url == "https://tms.example"
    assert s.auth_enabled and "a-secret" not in repr(s)
    assert (s.role_for_token("a-secret"), s.role_for_token("v-secret")) == (
        Role.ADMIN,
        Role.VIEWER,
    )
    assert s.role_for_token("nope") is None
    conf = tmp_path / "tms.toml"
    conf.write_text('callback_keys = ["x"]\nauth_tokens = ["writer:w-secret"]\n')
    t = load_settings(config_file=conf, environ={})
    assert [k.key.get_secret_value() for k in t.callback_keys] == ["x"]
    assert t.role_for_token("w-secret") is Role.WRITER


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TMS_PORT": "70000"}, "TMS_PORT .*less than or equal to 65535"),
        ({"TMS_PORT": "http"}, "TMS_PORT .*valid integer"),
        ({"TMS_QUEUE_LIMITS": "etl:many"}, "TMS_QUEUE_LIMITS .*name:limit"),
        ({"TMS_AUTH_TOKENS": "root:x"}, "TMS_AUTH_TOKENS .*unknown role 'root'"),
        ({"TMS_AUTH_TOKENS": "admin:changeme"}, "TMS_AUTH_TOKENS .*placeholder"),
        ({"TMS_AUTH_TOKENS": "admin:t,viewer:t"}, "TMS_AUTH_TOKENS .*two different roles"),
        ({"TMS_CALLBACK_KEYS": "k@lake/a"}, "TMS_CALLBACK_KEYS .*not an absolute path"),
        ({"TMS_CALLBACK_KEYS": "k,k@/lake"}, "TMS_CALLBACK_KEYS .*both for any base path"),
        ({"TMS_MAX_REQUEST_BYTES": "0"}, "TMS_MAX_REQUEST_BYTES .*greater than or equal to 1"),
        ({"TMS_DATABASE_URL": "mysql://db/tms"}, "TMS_DATABASE_URL .*not supported"),
        ({"TMS_SPARK_MASTER": "cluster"}, "TMS_SPARK_MASTER .*expected local"),
        ({"TMS_SPARK_HOME": "/no/such/spark"}, "TMS_SPARK_HOME .*not a directory"),
        ({"TMS_PUBLIC_URL": "tms:9091"}, "TMS_PUBLIC_URL .*http"),
        ({"TMS_RETRY_JITTER": "1.5"}, "TMS_RETRY_JITTER .*less than 1"),
        ({"TMS_LEASE_SECONDS": "5"}, "TMS_HEARTBEAT_INTERVAL_SECONDS .*TMS_LEASE_SECONDS"),
        ({"TMS_RETRY_MAX_SECONDS": "1"}, "TMS_RETRY_MAX_SECONDS .*TMS_RETRY_BASE_SECONDS"),
    ],
)
def test_bad_values_fail_naming_the_setting(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(config_file=False, environ=env)


def test_get_settings_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMS_PORT", "9123")
    get_settings.cache_clear()
    try:
        assert get_settings() is get_settings()
        assert get_settings().port == 9123
    finally:
        get_settings.cache_clear()
