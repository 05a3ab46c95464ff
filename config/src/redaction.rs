//! What of a message may reach statuses, Events, logs and `/readyz`: bounded, and without values where a rule
//! reads Secrets.

/// Longest message Ruleplane writes into a status condition, an Event or a log line about a parent.
pub const MAX_MESSAGE_CHARS: usize = 1024;

/// `message` as it may be shown: at most [`MAX_MESSAGE_CHARS`] characters, and with every double-quoted value
/// (the way the apiserver quotes a rejected field's value: `Invalid value: "…"`) replaced by `"<value>"` when
/// `hide_values` — the rule reads Secrets, so any value may be one.
pub fn shown_message(message: &str, hide_values: bool) -> String {
    let text = if hide_values {
        hide_quoted(message)
    } else {
        message.to_string()
    };
    truncate(&text, MAX_MESSAGE_CHARS)
}

/// At most `limit` characters of `text`, with `…` where it was cut.
pub fn truncate(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

fn hide_quoted(message: &str) -> String {
    let mut shown = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('"') {
        shown.push_str(&rest[..=open]);
        let after = &rest[open + 1..];
        // The closing quote, skipping escaped ones (`\"` inside a Go-quoted value).
        let mut escaped = false;
        let close = after.char_indices().find_map(|(index, c)| {
            let found = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            found.then_some(index)
        });
        match close {
            Some(close) => {
                shown.push_str("<value>\"");
                rest = &after[close + 1..];
            }
            None => {
                shown.push_str("<value>");
                rest = "";
            }
        }
    }
    shown.push_str(rest);
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_hidden_only_when_asked() {
        let message = r#"ConfigMap "web" is invalid: data[password]: Invalid value: "hunter\"2": must be short"#;
        assert_eq!(
            shown_message(message, true),
            r#"ConfigMap "<value>" is invalid: data[password]: Invalid value: "<value>": must be short"#
        );
        assert_eq!(shown_message(message, false), message);
        assert_eq!(shown_message("unterminated \"secret", true), "unterminated \"<value>");
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let shown = shown_message(&long, false);
        assert_eq!(shown.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(shown.ends_with('…'));
    }
}
