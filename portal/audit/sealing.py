"""Sealing the audit trail (#33): the event tables and audit_prune() belong to a NOLOGIN role of their
own, and so do the database and its schema public (their owners may drop the tables). The portal's role
keeps SELECT and INSERT (pghistory's triggers insert as the invoker) and EXECUTE on audit_prune(),
nothing else; a statement trigger refuses TRUNCATE, even to the owner.

Only a superuser (the database admin) can seal: giving tables to another role from the portal's role
would need membership in it, which would let the portal SET ROLE to it. Every statement is idempotent."""

import pgtrigger
import psycopg
from psycopg import sql

from portal.audit.selectors import event_models

AUDIT_OWNER = "gpuportal_audit"
TRUNCATE_TRIGGER = "audit_refuse_truncate"
PRUNE = "public.audit_prune(integer)"
_REFUSE_TRUNCATE = """
CREATE OR REPLACE FUNCTION public.audit_refuse_truncate() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail cannot be truncated (%)', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def event_tables() -> list[str]:
    return sorted(m._meta.db_table for m in event_models())


def seal(admin: psycopg.Connection, *, portal_role: str, owner: str = AUDIT_OWNER) -> None:
    """Seal the database `admin` is connected to, in one transaction."""
    portal, audit = sql.Identifier(portal_role), sql.Identifier(owner)
    with admin.transaction(), admin.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [owner])
        if cursor.fetchone() is None:
            cursor.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(audit))
        # Whoever owns the schema may drop any table in it, and the database's owner may drop it all:
        # both go to the audit role; the portal keeps what its migrations need.
        cursor.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
            sql.Identifier(admin.info.dbname), audit))
        cursor.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(audit))
        cursor.execute(sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
            sql.Identifier(admin.info.dbname), portal))
        cursor.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(portal))
        cursor.execute(_REFUSE_TRUNCATE)
        cursor.execute(sql.SQL("ALTER FUNCTION public.audit_refuse_truncate() OWNER TO {}").format(audit))
        for name in event_tables():
            table = sql.Identifier(name)
            cursor.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(table, audit))  # its sequence too
            cursor.execute(sql.SQL("REVOKE ALL ON {} FROM PUBLIC, {}").format(table, portal))
            cursor.execute(sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(table, portal))
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'pgh_id')", [name])
            (sequence,) = cursor.fetchone()
            cursor.execute(sql.SQL("REVOKE ALL ON SEQUENCE {} FROM PUBLIC, {}").format(
                sql.SQL(sequence), portal))
            cursor.execute(sql.SQL("GRANT USAGE ON SEQUENCE {} TO {}").format(sql.SQL(sequence), portal))
            cursor.execute(sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(
                sql.Identifier(TRUNCATE_TRIGGER), table))
            cursor.execute(sql.SQL("CREATE TRIGGER {} BEFORE TRUNCATE ON {} FOR EACH STATEMENT "
                                   "EXECUTE FUNCTION public.audit_refuse_truncate()").format(
                sql.Identifier(TRUNCATE_TRIGGER), table))
        cursor.execute(sql.SQL(f"ALTER FUNCTION {PRUNE} OWNER TO {{}}").format(audit))
        cursor.execute(sql.SQL(f"REVOKE ALL ON FUNCTION {PRUNE} FROM PUBLIC, {{}}").format(portal))
        cursor.execute(sql.SQL(f"GRANT EXECUTE ON FUNCTION {PRUNE} TO {{}}").format(portal))


def unseal(admin: psycopg.Connection, *, portal_role: str) -> None:
    """Give the trail back to the portal's role, for a migration that changes the event tables; seal
    again right after it. The TRUNCATE triggers stay."""
    portal, database = sql.Identifier(portal_role), sql.Identifier(admin.info.dbname)
    with admin.transaction(), admin.cursor() as cursor:
        cursor.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(database, portal))
        cursor.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(portal))
        for name in event_tables():
            cursor.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(sql.Identifier(name), portal))
        cursor.execute(sql.SQL(f"ALTER FUNCTION {PRUNE} OWNER TO {{}}").format(portal))


def problems(connection: psycopg.Connection, *, portal_role: str, owner: str = AUDIT_OWNER) -> list[str]:
    """What keeps the trail from being sealed, read from the catalog (any role may ask); [] when sealed.
    Also the tracked tables' triggers, which the portal owns and could drop: that stops recording,
    though it cannot erase what was recorded."""
    found: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper, pg_has_role(rolname, %s, 'MEMBER'), rolcreaterole FROM pg_roles "
                       "WHERE rolname = %s AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)",
                       [owner, portal_role, owner])
        row = cursor.fetchone()
        if row is None:
            return [f"role {owner} (or {portal_role}) does not exist: run audit_seal"]
        if row[0]:
            found.append(f"{portal_role} is a superuser")
        elif row[1]:
            found.append(f"{portal_role} is a member of {owner} (it could SET ROLE)")
        elif row[2]:
            found.append(f"{portal_role} has CREATEROLE (it could make itself a member of {owner})")
        cursor.execute("SELECT pg_has_role(%s, datdba, 'MEMBER') FROM pg_database "
                       "WHERE datname = current_database()", [portal_role])
        if cursor.fetchone()[0]:
            found.append(f"{portal_role} owns the database (it could drop it)")
        cursor.execute("SELECT pg_has_role(%s, nspowner, 'MEMBER') FROM pg_namespace "
                       "WHERE nspname = 'public'", [portal_role])
        if cursor.fetchone()[0]:
            found.append(f"{portal_role} owns the schema public (it could drop any table in it)")
        for table in event_tables():
            cursor.execute(
                "SELECT pg_get_userbyid(relowner), "
                "has_table_privilege(%s, oid, 'SELECT') AND has_table_privilege(%s, oid, 'INSERT'), "
                "has_table_privilege(%s, oid, 'UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'), "
                "EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = c.oid AND tgname = %s "
                "AND tgenabled <> 'D') FROM pg_class c WHERE oid = %s::regclass",
                [portal_role, portal_role, portal_role, TRUNCATE_TRIGGER, table])
            table_owner, reads_and_inserts, more, refuses_truncate = cursor.fetchone()
            if table_owner != owner:
                found.append(f"{table} is owned by {table_owner}, not {owner}")
            if not reads_and_inserts:
                found.append(f"{portal_role} cannot SELECT and INSERT {table}")
            if more:
                found.append(f"{portal_role} may change, delete or truncate {table}")
            if not refuses_truncate:
                found.append(f"{table} has no {TRUNCATE_TRIGGER} trigger")
        cursor.execute("SELECT pg_get_userbyid(proowner), prosecdef FROM pg_proc WHERE oid = "
                       "%s::regprocedure", [PRUNE])
        prune_owner, definer = cursor.fetchone()
        if prune_owner != owner or not definer:
            found.append(f"audit_prune() is owned by {prune_owner}, not {owner}, or not SECURITY DEFINER")
        for model, trigger in pgtrigger.registered():
            if model._meta.db_table in event_tables():  # append_only, useless once sealed
                continue
            cursor.execute("SELECT tgenabled <> 'D' FROM pg_trigger WHERE tgrelid = %s::regclass "
                           "AND tgname = %s", [model._meta.db_table, trigger.get_pgid(model)])
            enabled = cursor.fetchone()
            if not enabled or not enabled[0]:
                found.append(f"{model._meta.db_table} lost its audit trigger {trigger.name}")
    return found
