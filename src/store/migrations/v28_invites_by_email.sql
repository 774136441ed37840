
CREATE INDEX invites_by_email ON invites(email, created_at);
CREATE INDEX audit_events_by_action ON audit_events(tenant_id, action, at_us);
