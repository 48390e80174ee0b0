-- Plugin records, their artifacts, and the catalog version every replica polls.

CREATE TABLE plugins (
    id          TEXT    PRIMARY KEY,
    namespace   TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    spec        TEXT    NOT NULL,      -- JSON
    enabled     BIGINT  NOT NULL,      -- 0 or 1: BOOLEAN decodes differently on each database through the Any driver
    version     BIGINT  NOT NULL,      -- grows on every change; optimistic concurrency
    created_at  BIGINT  NOT NULL,      -- Unix milliseconds
    updated_at  BIGINT  NOT NULL,
    updated_by  TEXT    NOT NULL
);

CREATE UNIQUE INDEX plugins_namespace ON plugins (namespace);

CREATE TABLE plugin_artifacts (
    sha256      TEXT    PRIMARY KEY,   -- hex digest of bytes
    bytes       BYTEA   NOT NULL,
    size        BIGINT  NOT NULL,
    created_at  BIGINT  NOT NULL
);

CREATE TABLE catalog (
    id          BIGINT  PRIMARY KEY CHECK (id = 1),
    version     BIGINT  NOT NULL
);

INSERT INTO catalog (id, version) VALUES (1, 0);
