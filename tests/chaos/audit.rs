//! The kube-apiserver's audit log (JSON lines; cluster.sh's policy records every write but Leases and Events) read
//! as the soak's witness: who wrote which child, which pod was bound by whom, and when the request arrived.

use std::path::Path;

use k8s_openapi::jiff::Timestamp;

/// One completed write as the audit log tells it.
#[derive(Debug, Clone)]
pub struct Write {
    pub verb: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The replica's identity, from the user agent `ruleplane/<version> (<identity>)`; `None` for other clients.
    pub replica: Option<String>,
    pub code: u16,
    /// When the apiserver received the request.
    pub received: Timestamp,
}

impl Write {
    pub fn succeeded(&self) -> bool {
        self.code < 300
    }
}

/// Every completed write in `namespace`. The apiserver appends to the same file across restarts, and flushes its
/// batches every second: read it a couple of seconds after the last write that matters.
pub fn writes(audit_log: &Path, namespace: &str) -> Vec<Write> {
    let text = std::fs::read_to_string(audit_log).expect("read the apiserver's audit log");
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete" && event["objectRef"]["namespace"] == namespace)
        .filter_map(|event| {
            let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_owned();
            let replica = event["userAgent"]
                .as_str()
                .and_then(|agent| agent.strip_prefix("ruleplane/"))
                .and_then(|rest| rest.split_once(" ("))
                .map(|(_, identity)| identity.trim_end_matches(')').to_owned());
            Some(Write {
                verb: text(&event["verb"]),
                resource: text(&event["objectRef"]["resource"]),
                subresource: text(&event["objectRef"]["subresource"]),
                name: text(&event["objectRef"]["name"]),
                replica,
                code: u16::try_from(event["responseStatus"]["code"].as_u64()?).ok()?,
                received: event["requestReceivedTimestamp"].as_str()?.parse().ok()?,
            })
        })
        .collect()
}
