"""audit_prune(keep_days): the one way to delete audit events (#33). SECURITY DEFINER, so once
`manage.py audit_seal` gives it and the event tables to the audit role, the portal's role may call it
and nothing else deletes; it refuses to delete the last 30 days (portal.audit.services.RETENTION_FLOOR_DAYS).
Days, not a cutoff time: the database's clock decides, so a skewed portal host cannot reach further.
The event tables' own triggers are disabled around each DELETE, never bypassed with pgtrigger.ignore: that
would run the portal-owned _pgtrigger_should_ignore() with the audit role's rights."""

from django.db import migrations

PRUNE = r"""
CREATE OR REPLACE FUNCTION public.audit_prune(keep_days integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    event_table regclass;
    n bigint;
    total bigint := 0;
BEGIN
    IF keep_days IS NULL OR keep_days < 30 THEN
        RAISE EXCEPTION 'audit_prune: the events of the last 30 days are kept (asked: %)', keep_days
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- The event tables this function's owner owns: the audit role's once sealed, the portal's before.
    FOR event_table IN
        SELECT c.oid::regclass FROM pg_class c
          JOIN pg_namespace s ON s.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'pgh_created_at' AND NOT a.attisdropped
         WHERE s.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'audit\_%event'
           AND c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
         ORDER BY c.relname
    LOOP
        -- Held until commit: nobody sees the table without its triggers.
        EXECUTE format('ALTER TABLE %s DISABLE TRIGGER USER', event_table);
        EXECUTE format('DELETE FROM %s WHERE pgh_created_at < $1', event_table)
            USING now() - make_interval(days => keep_days);
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
        EXECUTE format('ALTER TABLE %s ENABLE TRIGGER USER', event_table);
    END LOOP;
    RETURN total;
END
$$;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0003_scrapetokenevent"),
    ]

    operations = [
        migrations.RunSQL(PRUNE, "DROP FUNCTION IF EXISTS public.audit_prune(integer);"),
    ]
