
ALTER TABLE api_keys ADD COLUMN restrictions TEXT;
