-- Input requests during a task: what the task waits for and what the client
-- answered so far (JSON: round, pending, answered, state), and a version that
-- grows on every change so concurrent tasks/update calls on several replicas
-- cannot lose an answer.

ALTER TABLE tasks ADD COLUMN input TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
