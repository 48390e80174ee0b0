//! `tools/list`, `prompts/list`, `resources/list` and
//! `resources/templates/list`: one page at a time, of what the caller may use.

use serde_json::json;

use super::Server;
use crate::caching::CacheScope;
use crate::catalog::{Item, Snapshot};
use crate::cursor;
use crate::error::Error;
use crate::policy::Caller;
use crate::request::Answer;

impl Server {
    /// One page of a list, holding only what the caller may use. The answer
    /// is `private` when the list holds anything gated by scopes and the
    /// caller is authenticated: another caller may see a different list.
    pub(super) fn list(
        &self,
        cursor: &Option<String>,
        caller: &Caller,
        items: &[impl Item],
        member: &str,
        snapshot: &Snapshot,
    ) -> Result<Answer, Error> {
        let after = match cursor {
            None => None,
            Some(cursor) => cursor::decode(cursor).map_err(|()| Error::InvalidCursor)?,
        };
        let mut gated = false;
        let visible: Vec<_> = items
            .iter()
            .filter(|item| {
                let scopes = self.config.policy.needed_by(*item);
                gated |= !scopes.is_empty();
                caller.may_use(&scopes)
            })
            .collect();
        let (page, next) = cursor::page(&visible, |item| item.key(), after.as_deref(), self.config.page_size);
        let mut result = json!({ member: page.iter().map(|item| item.definition().clone()).collect::<Vec<_>>() });
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        let mut policy = snapshot.list_policy;
        if gated && caller.is_scoped() {
            policy.scope = CacheScope::Private;
        }
        Ok(Answer::cached(result, policy))
    }
}
