"""JupyterHub behind the portal: settings only (behaviour is in spawners.slurm_spawner and the
modules it names).

Started by spawners/hub.sh, which exports the values read here; everything listens on loopback.
"""

import os
import sys

# Importing the spawner also registers batchspawner's port hand-back API (limited to the port).
from spawners.batch_script import SINGLEUSER_CONFIG_DIR
from spawners.slurm_spawner import PortalSlurmSpawner

env = os.environ.get
c = get_config()  # noqa: F821 (provided by JupyterHub when it loads this file)

# Secrets have no defaults: spawners/hub.sh generates them (or the deployment's environment file
# holds them). Without them the hub refuses to start, rather than run on values anybody can know.
SECRETS = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET", "HUB_CULLER_TOKEN",
           "CONFIGPROXY_AUTH_TOKEN", "JUPYTERHUB_CRYPT_KEY")
_unusable = [name for name in SECRETS
             if len(env(name, "")) < 32 or env(name, "").lower().startswith(("dev-only", "change"))]
if _unusable:
    # SystemExit, not an exception: JupyterHub would log an exception in its config and go on.
    sys.exit(f"jupyterhub_config: refusing to start: {', '.join(_unusable)} missing, shorter than 32 "
             "characters or a placeholder (spawners/hub.sh secrets generates them)")

state_dir = env("HUB_STATE_DIR", "/var/lib/gpuportal/hub")
# The hub's own writable state (database, cookie secret), owned by the account it runs as.
data_dir = env("HUB_DATA_DIR", f"{state_dir}/data")
portal_url = env("PORTAL_URL", "http://127.0.0.1:8000").rstrip("/")
proxy_url = f"http://127.0.0.1:{env('HUB_PROXY_PORT', '8001')}"
# Where browsers reach the hub: the proxy itself locally, the TLS front end (nginx) in production.
# The portal registers the same address (its JUPYTERHUB_URL) as the OAuth callback.
public_url = env("HUB_PUBLIC_URL", proxy_url).rstrip("/")
hub_url = f"http://127.0.0.1:{env('HUB_PORT', '8081')}"

# --- the hub, its state and the proxy (started separately, so routes survive a hub restart) ---
c.JupyterHub.bind_url = proxy_url
# A service node apart from the compute nodes: servers there reach the hub's API (batchspawner's
# port callback, their OAuth checks) at HUB_CONNECT_URL, so it must listen beyond loopback, e.g.
# HUB_BIND_URL=http://0.0.0.0:8081 (docs/deploy.md). Locally everything stays on loopback.
c.JupyterHub.hub_bind_url = env("HUB_BIND_URL", hub_url)
if env("HUB_CONNECT_URL"):
    c.JupyterHub.hub_connect_url = env("HUB_CONNECT_URL")
c.JupyterHub.db_url = f"sqlite:///{data_dir}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{data_dir}/cookie_secret"
c.JupyterHub.pid_file = f"{data_dir}/jupyterhub.pid"
c.ConfigurableHTTPProxy.should_start = False
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('HUB_PROXY_API_PORT', '8002')}"
# Servers are Slurm jobs: they outlive a hub restart, and the hub picks them up again.
c.JupyterHub.cleanup_servers = False
c.JupyterHub.cleanup_proxy = False
c.JupyterHub.allow_named_servers = True
c.JupyterHub.named_server_limit_per_user = int(env("HUB_SERVERS_PER_USER", "3"))
# The hub's own "Start My Server" starts the portal's default named server, which the portal lists.
c.JupyterHub.default_server_name = "my-server"
# Logging in to the hub lands on its home page: servers start when somebody asks for one (the
# portal's form, the API, the hub's Start button), never as a side effect of a login.
c.JupyterHub.redirect_to_server = False

# --- one login: the portal is the OAuth2 provider; the username is the LDAP uid ---
c.JupyterHub.authenticator_class = "generic-oauth"
c.GenericOAuthenticator.client_id = env("JUPYTERHUB_OAUTH_CLIENT_ID", "jupyterhub")
c.GenericOAuthenticator.client_secret = env("JUPYTERHUB_OAUTH_CLIENT_SECRET")
c.GenericOAuthenticator.oauth_callback_url = f"{public_url}/hub/oauth_callback"
c.GenericOAuthenticator.authorize_url = f"{portal_url}/oauth/authorize/"
c.GenericOAuthenticator.token_url = f"{portal_url}/oauth/token/"
c.GenericOAuthenticator.userdata_url = f"{portal_url}/oauth/userinfo/"
c.GenericOAuthenticator.login_service = "gpuportal"
c.GenericOAuthenticator.scope = ["profile"]
c.GenericOAuthenticator.username_claim = "preferred_username"
# Hub users are Unix accounts the spawner runs `sudo -u <name>` for, in a shell command line
# (batchspawner): only POSIX account names, as the portal's own login allows.
c.Authenticator.username_pattern = r"^[a-z_][a-z0-9_.-]{0,31}$"
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
    {"name": "portal", "api_token": env("JUPYTERHUB_API_TOKEN")},
    # Run by spawners/hub.sh next to the hub (not by it): it outlives a hub restart, never orphaned.
    {"name": "idle-culler", "api_token": env("HUB_CULLER_TOKEN")},
]
c.JupyterHub.load_roles = [
    {"name": "portal", "services": ["portal"], "scopes": [
        "admin:users", "admin:servers", "admin:server_state", "tokens", "list:users", "read:users",
    ]},
    {"name": "idle-culler", "services": ["idle-culler"], "scopes": [
        "list:users", "read:users:activity", "read:servers", "delete:servers",
    ]},
]

# --- servers: Slurm jobs run as the user; JupyterLab on the first node of the job ---
c.JupyterHub.spawner_class = PortalSlurmSpawner
c.PortalSlurmSpawner.slurm_bin_dir = env("SLURM_BIN_DIR", "/usr/bin")
# The hub runs as the unprivileged account jupyterhub; deploy/sudoers.d/gpuportal lets it run
# exactly sbatch and scancel as members of gpuportal-users, keeping the job's environment (-E:
# batchspawner hands the server its token that way). -n: fail at once, never ask for a password.
c.PortalSlurmSpawner.exec_prefix = env("HUB_EXEC_PREFIX", "/usr/bin/sudo -E -n -u {username} --")
# The address the proxy routes a server to: fixed loopback on the local cluster (its nodes share this
# host); empty on a real cluster, where the proxy goes to the node the server's callback came from.
c.PortalSlurmSpawner.state_exechost_exp = env("HUB_EXEC_HOST", "127.0.0.1")
c.PortalSlurmSpawner.templates_dir = env("HUB_TEMPLATES_DIR", "/var/lib/gpuportal/notebook-templates")
c.PortalSlurmSpawner.data_dir = env("GPUPORTAL_DATA_DIR", "/data")
c.PortalSlurmSpawner.portal_url = env("HUB_PORTAL_URL_FOR_SERVERS", portal_url)
# The clusters servers may run on (#38): the portal's own CLUSTERS_DIR, one file per cluster, read at
# the first spawn; without files, the one cluster named SLURM_CLUSTER_NAME. One hub serves them all:
# the `cluster` option picks the sbatch/squeue/scancel `-M` (only where several are configured).
c.PortalSlurmSpawner.clusters_dir = env("CLUSTERS_DIR", "/etc/gpuportal/clusters.d")
c.PortalSlurmSpawner.cluster_name = env("SLURM_CLUSTER_NAME", "gpuportal")
# Software environments the portal offers must live here (the portal's ENVIRONMENTS_DIR).
c.PortalSlurmSpawner.environments_dir = env("ENVIRONMENTS_DIR", "/opt/gpuportal/envs")
# Limits (partitions, GPUs per node, group maxima, profiles) are the portal's one policy, which the
# portal publishes as this file (its POLICY_FILE; portal/policy/services.py): the hub has none of its own.
c.PortalSlurmSpawner.policy_file = env(
    "GPUPORTAL_POLICY_FILE", f"{env('GPUPORTAL_STATE', '/var/lib/gpuportal')}/policy/policy.json")
# The portal's squeue of each poll cycle (its SERVERS_QUEUE_FILE): running servers are polled from it,
# so Slurm is asked once per cycle for portal and hub; starting and stopping servers still squeue.
c.PortalSlurmSpawner.queue_file = env(
    "GPUPORTAL_QUEUE_FILE", f"{env('GPUPORTAL_STATE', '/var/lib/gpuportal')}/policy/queue.json")
c.PortalSlurmSpawner.start_timeout = int(env("HUB_START_TIMEOUT", "1800"))  # a queued server waits
c.PortalSlurmSpawner.http_timeout = 120
# Each server is polled this often, all of them from one shared squeue (2 slurmctld RPCs) per
# interval: at 60 s and 50 servers, 2.4 RPCs per server-hour (bench/README.md).
c.PortalSlurmSpawner.poll_interval = int(env("HUB_POLL_INTERVAL", "60"))
# The portal's squeue comes every SLURM_POLL_SECONDS (60 s): accepting two cycles' age, the hub's routine
# polls never ask Slurm themselves while the portal's cycle runs.
c.PortalSlurmSpawner.queue_max_age = float(env("HUB_QUEUE_MAX_AGE", "120"))
c.Spawner.default_url = "/lab"
c.Spawner.args = [
    # Loopback on the local cluster; a real cluster's proxy reaches the node (HUB_SERVER_IP=0.0.0.0).
    f"--ServerApp.ip={env('HUB_SERVER_IP', '127.0.0.1')}",
    # A server re-checks a browser's token with the hub this often: revoked at portal logout.
    f"--HubOAuth.cache_max_age={env('HUB_SERVER_AUTH_CACHE', '60')}",
]
c.Spawner.environment = {
    "PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
    # The servers' own settings: TensorBoard through jupyter-server-proxy (spawners/singleuser/).
    "JUPYTER_CONFIG_PATH": str(SINGLEUSER_CONFIG_DIR),
    # How often a server tells the hub when it was last used (a running cell counts), which the
    # idle culler goes by: keep it well under HUB_CULL_TIMEOUT.
    "JUPYTERHUB_ACTIVITY_INTERVAL": env("HUB_SERVER_ACTIVITY_INTERVAL", "300"),
}
