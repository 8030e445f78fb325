"""The apps gateway's database role (#33): it reads the app rows it serves and their owners' sign-in
state (active, app generation), notes last_access, and records redeemed grants; nothing else, so a
gateway taken over reads no session, API token, job or password hash, and deletes no app.

Its grants are applied by the database admin (`manage.py apps_gateway_grants`, after every migrate),
as the audit seal is: only the admin may revoke on every table (the sealed audit tables are not the
portal's), and the role is the admin's to create, its password the gateway's alone. Column
privileges: the gateway's queries name their columns (gateway/store.py). Every statement is
idempotent."""

import psycopg
from psycopg import sql

from portal.accounts.models import User
from portal.webapps.models import App, GrantUse

# What the gateway loads (gateway/store.py: `.only()` of these, by field name).
APP_FIELDS = ("id", "uuid", "user", "state", "host", "port", "reason", "secret", "time_limit_minutes")
USER_FIELDS = ("id", "is_active", "app_generation")
TOUCHED = "last_access"  # the only column it writes
GRANT_USE_PRIVILEGES = ("SELECT", "INSERT", "DELETE")  # grant_redeem: prune, insert, conflict


def _columns(model: type, fields: tuple[str, ...]) -> list[str]:
    return [model._meta.get_field(name).column for name in fields]


def grants() -> list[tuple[str, str, list[str] | None]]:
    """(table, privilege, columns or None for the whole table): everything the role may do."""
    app, user, use = App._meta.db_table, User._meta.db_table, GrantUse._meta.db_table
    return [
        (app, "SELECT", _columns(App, APP_FIELDS)),
        (app, "UPDATE", _columns(App, (TOUCHED,))),
        (user, "SELECT", _columns(User, USER_FIELDS)),
        *[(use, privilege, None) for privilege in GRANT_USE_PRIVILEGES],
    ]


def grant(admin: psycopg.Connection, *, role: str) -> None:
    """Give `role` (which must exist: its password is the gateway's alone) exactly grants() in the
    database `admin` is connected to, in one transaction: whatever it held there before is revoked."""
    name = sql.Identifier(role)
    with admin.transaction(), admin.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
        if cursor.fetchone() is None:
            raise LookupError(f"role {role} does not exist: create it (LOGIN, a password of its own) first")
        # Revoking a table's privileges revokes its columns' too.
        cursor.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {}").format(name))
        cursor.execute(sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {}").format(name))
        cursor.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(admin.info.dbname), name))
        cursor.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(name))
        for table, privilege, columns in grants():
            listed = sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Identifier, columns or [])))
            cursor.execute(sql.SQL("GRANT {} {} ON {} TO {}").format(
                sql.SQL(privilege), listed if columns else sql.SQL(""), sql.Identifier(table), name))


def problems(connection: psycopg.Connection, *, role: str) -> list[str]:
    """What `role` may do beyond grants(), or lacks of them, in this database, read from the catalog
    (any role may ask); [] when it has exactly them."""
    found: list[str] = []
    expected = {(table, privilege) for table, privilege, _ in grants()}
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls OR rolcreaterole OR rolcreatedb, "
                       "ARRAY(SELECT b.rolname FROM pg_auth_members m JOIN pg_roles b ON b.oid = m.roleid "
                       "WHERE m.member = r.oid) FROM pg_roles r WHERE rolname = %s", [role])
        row = cursor.fetchone()
        if row is None:
            return [f"role {role} does not exist"]
        if row[0]:
            found.append(f"{role} is a superuser, bypasses row security, or may create roles or databases")
        if row[1]:
            found.append(f"{role} is a member of {', '.join(row[1])}")
        # Column privileges exist for these four only; a sequence's USAGE is nextval().
        cursor.execute(
            "SELECT c.relname, p.privilege FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, "
            "unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) "
            "AS p(privilege) WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND CASE "
            "WHEN has_table_privilege(%(role)s, c.oid, p.privilege) THEN true "
            "WHEN p.privilege IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES') "
            "THEN has_any_column_privilege(%(role)s, c.oid, p.privilege) ELSE false END "
            "UNION ALL SELECT c.relname, 'USAGE' FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND CASE "
            "WHEN c.relkind = 'S' THEN has_sequence_privilege(%(role)s, c.oid, 'USAGE, SELECT, UPDATE') END "
            "ORDER BY 1, 2",
            {"role": role})
        for table, privilege in cursor.fetchall():
            if (table, privilege) not in expected:
                found.append(f"{role} may {privilege} {table}")
        for table, privilege, columns in grants():
            if columns is None:
                cursor.execute("SELECT has_table_privilege(%s, %s, %s)", [role, table, privilege])
                if not cursor.fetchone()[0]:
                    found.append(f"{role} may not {privilege} {table}")
                continue
            cursor.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
                           "AND table_name = %s AND has_column_privilege(%s, %s, column_name, %s)",
                           [table, role, table, privilege])
            held = {name for (name,) in cursor.fetchall()}
            if missing := sorted(set(columns) - held):
                found.append(f"{role} may not {privilege} {table} ({', '.join(missing)})")
            if extra := sorted(held - set(columns)):
                found.append(f"{role} may {privilege} {table} ({', '.join(extra)})")
    return found
