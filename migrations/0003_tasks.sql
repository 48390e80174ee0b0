-- Tasks (the io.modelcontextprotocol/tasks extension): stored before the client
-- hears of them, so any replica answers tasks/get and tasks/cancel.

CREATE TABLE tasks (
    id              TEXT    PRIMARY KEY,   -- tsk_ and 128 random bits
    principal       TEXT    NOT NULL,      -- issuer and subject; '' when authorization is off
    status          TEXT    NOT NULL,      -- working, input_required, completed, failed, cancelled
    status_message  TEXT    NOT NULL,      -- '' for none
    result          TEXT    NOT NULL,      -- CallToolResult JSON of a completed task; '' otherwise
    error           TEXT    NOT NULL,      -- JSON-RPC error JSON of a failed task; '' otherwise
    created_at      BIGINT  NOT NULL,      -- Unix milliseconds
    updated_at      BIGINT  NOT NULL,
    ttl_ms          BIGINT  NOT NULL,
    owner           TEXT    NOT NULL,      -- the replica running it
    lease_until     BIGINT  NOT NULL       -- the owner vouches for it until then
);

CREATE INDEX tasks_expiry ON tasks (created_at);
