"""The sealed audit trail against the real PostgreSQL (#33): a database and a portal-like login role of
its own, migrated as that role, sealed by `manage.py audit_seal` over a superuser's connection; then, as
the portal's role, every way to rewrite the trail fails with a PostgreSQL error, while an audited change
still records its event and audit_prune() still deletes old events (and only those).

Not the shared test database: pytest-django flushes it with TRUNCATE, which the seal refuses."""

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import errors

from portal.audit.sealing import TRUNCATE_TRIGGER
from tests.conftest import ROOT
from tests.deploy.bed import _postgres_admin, database_of_its_own

pytestmark = pytest.mark.integration
NAME = f"gpuportal_sealed_{os.getpid()}"
OWNER, ADMIN = f"{NAME}_owner", f"{NAME}_admin"


@dataclass
class Sealed:
    portal: str  # the portal-like role's DATABASE_URL
    admin: str  # a superuser's, to the same database
    seal_output: str


def _manage(database_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "portal.settings.test"}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def sealed() -> Iterator[Sealed]:
    if os.geteuid() != 0:
        pytest.skip("needs the bed's PostgreSQL superuser (runuser -u postgres): run as root")
    password = secrets.token_hex(24)
    _postgres_admin(f"CREATE ROLE \"{ADMIN}\" LOGIN SUPERUSER PASSWORD '{password}';\n")
    try:
        with database_of_its_own(NAME) as portal_url:
            bed = urlsplit(portal_url)
            admin_url = f"postgres://{ADMIN}:{password}@{bed.hostname}:{bed.port}/{NAME}"
            migrated = _manage(portal_url, "migrate", "--noinput")
            assert migrated.returncode == 0, migrated.stderr
            unsealed = _manage(portal_url, "audit_seal", "--check", "--owner", OWNER)
            assert unsealed.returncode == 1 and "run audit_seal" in unsealed.stdout
            assert _manage(portal_url, "audit_seal", "--owner", OWNER).returncode == 1  # no admin URL
            for _ in range(2):  # idempotent
                seal = _manage(portal_url, "audit_seal", "--owner", OWNER, "--database-url", admin_url)
                assert seal.returncode == 0, seal.stdout + seal.stderr
            yield Sealed(portal_url, admin_url, seal.stdout)
    finally:
        _postgres_admin(f'DROP ROLE IF EXISTS "{ADMIN}";\nDROP ROLE IF EXISTS "{OWNER}";\n')


def _refused(database_url: str, *statements: str) -> Exception:
    """Run statements as one transaction; the PostgreSQL error that stops them."""
    with psycopg.connect(database_url) as connection, pytest.raises(psycopg.Error) as refused:
        for statement in statements:
            connection.execute(statement)
    return refused.value


def _one(database_url: str, query: str) -> object:
    with psycopg.connect(database_url, autocommit=True) as connection:
        return connection.execute(query).fetchone()[0]


def _login_event(database_url: str, username: str) -> None:
    """An audited change: a login attempt's row, whose insert trigger writes a LoginEvent."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("INSERT INTO audit_login (username, succeeded, created_at) "
                           "VALUES (%s, true, now())", [username])


def test_the_portals_role_cannot_rewrite_the_sealed_trail(sealed):
    portal = sealed.portal
    assert "the audit trail is sealed" in sealed.seal_output
    _login_event(portal, "alice")
    assert _one(portal, "SELECT count(*) FROM audit_loginevent WHERE username = 'alice'") == 1
    privilege = errors.InsufficientPrivilege
    attempts = {
        "TRUNCATE audit_loginevent": privilege,
        "DELETE FROM audit_loginevent": privilege,
        "UPDATE audit_loginevent SET username = 'bob'": privilege,
        "DROP TRIGGER pgtrigger_append_only_cf469 ON audit_loginevent": privilege,
        f"DROP TRIGGER {TRUNCATE_TRIGGER} ON audit_loginevent": privilege,
        "ALTER TABLE audit_loginevent DISABLE TRIGGER USER": privilege,
        "ALTER TABLE audit_loginevent OWNER TO CURRENT_USER": privilege,
        "DROP TABLE audit_loginevent": privilege,
        "DROP SCHEMA public CASCADE": privilege,
        "ALTER SCHEMA public RENAME TO gone": privilege,
        f'SET ROLE "{OWNER}"': privilege,
        "CREATE OR REPLACE FUNCTION audit_prune(keep_days integer) RETURNS bigint LANGUAGE sql "
        "AS 'SELECT 0::bigint'": privilege,
        "SELECT audit_prune(29)": privilege,  # the function's own refusal, with that code
    }
    failures = {statement: type(_refused(portal, statement)) for statement in attempts}
    assert failures == attempts
    # pgtrigger.ignore lets a statement past the append-only trigger, not past the missing privilege.
    ignore = "SET pgtrigger.ignore = '{pgtrigger_append_only_cf469}'"
    assert isinstance(_refused(portal, ignore, "DELETE FROM audit_loginevent"), privilege)
    assert isinstance(_refused(portal, ignore, "UPDATE audit_loginevent SET username = 'x'"), privilege)
    elsewhere_url = urlsplit(portal)._replace(path="/postgres").geturl()  # the portal may connect there
    with psycopg.connect(elsewhere_url, autocommit=True) as elsewhere, \
            pytest.raises(privilege):
        elsewhere.execute(f'DROP DATABASE "{NAME}"')
    # Not even the owner truncates: the statement trigger (as the superuser, standing in for the owner).
    assert "cannot be truncated" in str(_refused(sealed.admin, "TRUNCATE audit_loginevent"))
    assert _one(portal, "SELECT count(*) FROM audit_loginevent WHERE username = 'alice'") == 1
    check = _manage(portal, "audit_seal", "--check", "--owner", OWNER)
    assert check.returncode == 0, check.stdout + check.stderr


def test_audit_prune_deletes_only_events_past_the_floor(sealed):
    _login_event(sealed.portal, "old")
    _login_event(sealed.portal, "recent")
    with psycopg.connect(sealed.admin) as admin:  # backdating is the test's, as the superuser
        admin.execute("ALTER TABLE audit_loginevent DISABLE TRIGGER USER")
        admin.execute("UPDATE audit_loginevent SET pgh_created_at = now() - interval '40 days' "
                      "WHERE username = 'old'")
        admin.execute("ALTER TABLE audit_loginevent ENABLE TRIGGER USER")
    assert _one(sealed.portal, "SELECT audit_prune(30)") == 1
    names = _one(sealed.portal, "SELECT array_agg(username ORDER BY username) FROM audit_loginevent")
    assert "old" not in names and "recent" in names
    assert _one(sealed.portal, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'audit_loginevent'::regclass "
                               "AND tgenabled = 'D'") == 0  # the prune re-enabled them


def test_check_names_a_dropped_audit_trigger_on_a_tracked_table(sealed):
    """The portal owns the tracked tables: it can stop future recording, and --check says so."""
    with psycopg.connect(sealed.portal) as portal:
        name = portal.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs_job'::regclass "
                              "AND tgname LIKE 'pgtrigger_create_insert_%'").fetchone()[0]
        portal.execute(f"ALTER TABLE jobs_job DISABLE TRIGGER {name}")
    try:
        check = _manage(sealed.portal, "audit_seal", "--check", "--owner", OWNER)
        assert check.returncode == 1 and "jobs_job lost its audit trigger create_insert" in check.stdout
    finally:
        with psycopg.connect(sealed.portal) as portal:
            portal.execute(f"ALTER TABLE jobs_job ENABLE TRIGGER {name}")


def test_check_names_a_portal_role_that_could_make_itself_the_owner(sealed):
    with psycopg.connect(sealed.admin, autocommit=True) as admin:
        admin.execute(f'ALTER ROLE "{NAME}" CREATEROLE')
        try:
            check = _manage(sealed.portal, "audit_seal", "--check", "--owner", OWNER)
        finally:
            admin.execute(f'ALTER ROLE "{NAME}" NOCREATEROLE')
    assert check.returncode == 1 and f"{NAME} has CREATEROLE" in check.stdout


def test_the_session_rename_runs_under_the_seal(sealed):
    """#32: servers 0013 (NotebookServer becomes Session) changes no event table: the portal's own role
    runs it back and forth with the trail sealed, and the renamed table keeps its audit triggers."""
    for target in ("0012_server_uuid_unique", "0013_session"):
        migrated = _manage(sealed.portal, "migrate", "servers", target, "--noinput")
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    check = _manage(sealed.portal, "audit_seal", "--check", "--owner", OWNER)
    assert check.returncode == 0, check.stdout + check.stderr
    assert _one(sealed.portal, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'servers_session'::regclass "
                               "AND tgname LIKE 'pgtrigger_%'") == 3


def test_unsealed_for_a_migration_then_sealed_again(sealed):
    """Last: a migration that changes an event table runs between --unseal and audit_seal."""
    unsealed = _manage(sealed.portal, "audit_seal", "--unseal", "--database-url", sealed.admin)
    assert unsealed.returncode == 0, unsealed.stderr
    with psycopg.connect(sealed.portal) as portal:  # what such a migration does
        portal.execute("ALTER TABLE audit_loginevent ADD COLUMN migrated boolean")
    check = _manage(sealed.portal, "audit_seal", "--check", "--owner", OWNER)
    assert check.returncode == 1 and f"audit_loginevent is owned by {NAME}, not {OWNER}" in check.stdout
    resealed = _manage(sealed.portal, "audit_seal", "--owner", OWNER, "--database-url", sealed.admin)
    assert resealed.returncode == 0, resealed.stdout + resealed.stderr
    assert isinstance(_refused(sealed.portal, "ALTER TABLE audit_loginevent DROP COLUMN migrated"),
                      errors.InsufficientPrivilege)
