//! Matching URIs against RFC 6570 level-1 templates (`test://item/{id}/data`),
//! the form resource templates use. A variable matches one or more characters
//! other than `/`.

/// Returns the variables if `uri` matches `template`.
pub(crate) fn match_uri(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let mut vars = Vec::new();
    let mut rest_t = template;
    let mut rest_u = uri;
    loop {
        match rest_t.find('{') {
            None => return (rest_t == rest_u).then_some(vars),
            Some(open) => {
                let literal = &rest_t[..open];
                rest_u = rest_u.strip_prefix(literal)?;
                let close = open + rest_t[open..].find('}')?;
                let name = &rest_t[open + 1..close];
                rest_t = &rest_t[close + 1..];
                // The variable runs to the next literal character (or `/`, or the end).
                let stop = rest_t.chars().next();
                let end =
                    rest_u.char_indices().find(|(_, c)| *c == '/' || Some(*c) == stop).map_or(rest_u.len(), |(i, _)| i);
                if end == 0 {
                    return None;
                }
                vars.push((name.to_owned(), rest_u[..end].to_owned()));
                rest_u = &rest_u[end..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_simple_templates() {
        assert_eq!(
            match_uri("test://template/{id}/data", "test://template/123/data"),
            Some(vec![("id".into(), "123".into())])
        );
        assert_eq!(match_uri("test://template/{id}/data", "test://template//data"), None);
        assert_eq!(match_uri("test://template/{id}/data", "test://template/1/2/data"), None);
        assert_eq!(match_uri("test://template/{id}/data", "test://other/1/data"), None);
        assert_eq!(
            match_uri("file:///{a}.{b}", "file:///x.json"),
            Some(vec![("a".into(), "x".into()), ("b".into(), "json".into())])
        );
    }
}
