"""JupyterHub behind the portal: settings only (behaviour is in spawners.slurm_spawner).

Started by spawners/hub.sh, which exports the values read here; everything listens on loopback.
"""

import json
import os
import sys

# Importing the spawner also registers batchspawner's port hand-back API (limited to the port).
from spawners.slurm_spawner import PortalSlurmSpawner

env = os.environ.get
c = get_config()  # noqa: F821 (provided by JupyterHub when it loads this file)

state_dir = env("HUB_STATE_DIR", "/var/lib/gpuportal/hub")
portal_url = env("PORTAL_URL", "http://127.0.0.1:8000").rstrip("/")
public_url = f"http://127.0.0.1:{env('HUB_PROXY_PORT', '8001')}"
hub_url = f"http://127.0.0.1:{env('HUB_PORT', '8081')}"

# --- the hub, its state and the proxy (started separately, so routes survive a hub restart) ---
c.JupyterHub.bind_url = public_url
c.JupyterHub.hub_bind_url = hub_url
c.JupyterHub.db_url = f"sqlite:///{state_dir}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{state_dir}/cookie_secret"
c.JupyterHub.pid_file = f"{state_dir}/jupyterhub.pid"
c.ConfigurableHTTPProxy.should_start = False
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('HUB_PROXY_API_PORT', '8002')}"
# Servers are Slurm jobs: they outlive a hub restart, and the hub picks them up again.
c.JupyterHub.cleanup_servers = False
c.JupyterHub.cleanup_proxy = False
c.JupyterHub.allow_named_servers = True
c.JupyterHub.named_server_limit_per_user = int(env("HUB_SERVERS_PER_USER", "3"))
# The hub's own "Start My Server" starts the portal's default named server, which the portal lists.
c.JupyterHub.default_server_name = "my-server"

# --- one login: the portal is the OAuth2 provider; the username is the LDAP uid ---
c.JupyterHub.authenticator_class = "generic-oauth"
c.GenericOAuthenticator.client_id = env("JUPYTERHUB_OAUTH_CLIENT_ID", "jupyterhub")
c.GenericOAuthenticator.client_secret = env("JUPYTERHUB_OAUTH_CLIENT_SECRET", "dev-only-hub-oauth-secret")
c.GenericOAuthenticator.oauth_callback_url = f"{public_url}/hub/oauth_callback"
c.GenericOAuthenticator.authorize_url = f"{portal_url}/oauth/authorize/"
c.GenericOAuthenticator.token_url = f"{portal_url}/oauth/token/"
c.GenericOAuthenticator.userdata_url = f"{portal_url}/oauth/userinfo/"
c.GenericOAuthenticator.login_service = "gpuportal"
c.GenericOAuthenticator.scope = ["profile"]
c.GenericOAuthenticator.username_claim = "preferred_username"
c.GenericOAuthenticator.auth_state_groups_key = "oauth_user.groups"
c.GenericOAuthenticator.manage_groups = True  # hub groups follow the portal's (LDAP) groups
c.GenericOAuthenticator.allowed_groups = {env("LDAP_USER_GROUP", "portal-users")}
c.GenericOAuthenticator.admin_groups = {env("LDAP_ADMIN_GROUP", "portal-admins")}
c.GenericOAuthenticator.auto_login = True
c.GenericOAuthenticator.logout_redirect_url = f"{portal_url}/"
# The access token is re-checked against the portal this often: a portal logout revokes it.
c.GenericOAuthenticator.enable_auth_state = True
c.GenericOAuthenticator.auth_refresh_age = int(env("HUB_AUTH_REFRESH_AGE", "60"))
c.GenericOAuthenticator.refresh_pre_spawn = True

# --- the portal drives the hub through a service token; the idle culler is a hub service ---
c.JupyterHub.services = [
    {"name": "portal", "api_token": env("JUPYTERHUB_API_TOKEN", "dev-only-hub-api-token")},
    # Run by spawners/hub.sh next to the hub (not by it): it outlives a hub restart, never orphaned.
    {"name": "idle-culler", "api_token": env("HUB_CULLER_TOKEN", "dev-only-hub-culler-token")},
]
c.JupyterHub.load_roles = [
    {"name": "portal", "services": ["portal"], "scopes": [
        "admin:users", "admin:servers", "admin:server_state", "tokens", "list:users", "read:users",
    ]},
    {"name": "idle-culler", "services": ["idle-culler"], "scopes": [
        "list:users", "read:users:activity", "read:servers", "delete:servers",
    ]},
]

# --- servers: Slurm jobs run as the user, JupyterLab on loopback of the (single) node ---
c.JupyterHub.spawner_class = PortalSlurmSpawner
c.PortalSlurmSpawner.slurm_bin_dir = env("SLURM_BIN_DIR", "/usr/bin")
c.PortalSlurmSpawner.exec_prefix = env("HUB_EXEC_PREFIX", "/usr/sbin/runuser -u {username} --")
c.PortalSlurmSpawner.state_exechost_exp = env("HUB_EXEC_HOST", "127.0.0.1")
c.PortalSlurmSpawner.templates_dir = env("HUB_TEMPLATES_DIR", "/var/lib/gpuportal/notebook-templates")
c.PortalSlurmSpawner.data_dir = env("GPUPORTAL_DATA_DIR", "/data")
# Per partition: max_gpus, max_hours, max_nodes, cpus_per_gpu, mem_gb_per_gpu (JSON to override).
c.PortalSlurmSpawner.partitions = json.loads(env(
    "HUB_PARTITIONS", '{"gpu": {"max_gpus": 4}, "debug": {"max_gpus": 4, "max_hours": 1}}'))
c.PortalSlurmSpawner.max_gpus_per_user = int(env("HUB_MAX_GPUS_PER_USER", "4"))
c.PortalSlurmSpawner.start_timeout = int(env("HUB_START_TIMEOUT", "1800"))  # a queued server waits
c.PortalSlurmSpawner.http_timeout = 120
# Each server is polled this often, all of them from one shared squeue (2 slurmctld RPCs) per
# interval: at 60 s and 50 servers, 2.4 RPCs per server-hour (bench/README.md).
c.PortalSlurmSpawner.poll_interval = int(env("HUB_POLL_INTERVAL", "60"))
c.PortalSlurmSpawner.queue_max_age = float(env("HUB_POLL_INTERVAL", "60"))
c.Spawner.default_url = "/lab"
c.Spawner.args = [
    "--ServerApp.ip=127.0.0.1",
    # A server re-checks a browser's token with the hub this often: revoked at portal logout.
    f"--HubOAuth.cache_max_age={env('HUB_SERVER_AUTH_CACHE', '60')}",
]
c.Spawner.environment = {"PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin"}
