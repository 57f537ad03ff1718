"""Service settings: one object read from `TMS_*` environment variables and `conf/tms.toml`.

Precedence, highest first: explicit keyword arguments, environment variables, the TOML file
(`TMS_CONFIG`, else `conf/tms.toml` when it exists), the defaults in `settings`. Every value is
checked when the settings are loaded, so a bad setting stops the service at start-up with a
message that names the environment variable, instead of failing later in a request or a job.
The model and its checks live in `settings`, the sources in `sources`, building them in
`loading`.
"""

from tms.config.loading import SettingDoc, describe_settings, get_settings, load_settings
from tms.config.settings import DEFAULT_CALLBACK_KEY, AuthToken, CallbackKey, Role, Settings
from tms.config.sources import DEFAULT_CONFIG_FILE, ENV_PREFIX, SettingsError

__all__ = [
    "DEFAULT_CALLBACK_KEY",
    "DEFAULT_CONFIG_FILE",
    "ENV_PREFIX",
    "AuthToken",
    "CallbackKey",
    "Role",
    "SettingDoc",
    "Settings",
    "SettingsError",
    "describe_settings",
    "get_settings",
    "load_settings",
]
