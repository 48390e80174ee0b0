-- Scopes a caller's token needs for every tool, resource and prompt of a plugin
-- (a JSON array of strings; empty: the plugin is open to every authenticated caller).

ALTER TABLE plugins ADD COLUMN scopes TEXT NOT NULL DEFAULT '[]';
