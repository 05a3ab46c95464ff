//! The key children are signed with: read from its Secret in the manager's namespace, made there by the first
//! replica that finds none.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use ruleplane_config::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_UID_LABEL, RULE_LABEL};
use ruleplane_config::provenance::{
    ChildIdentity, ChildSigner, ObservedIdentity, SIGNATURE_ANNOTATION, SIGNING_KEY_DATA, SIGNING_KEY_MIN_BYTES,
    SIGNING_KEY_SECRET, SigningKey, SigningKeyError,
};
use tracing::{info, warn};

use crate::health::Health;
use crate::watch_hub::Admission;

/// Why the signing key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SigningKeyLoadError {
    #[error("reading or creating Secret {namespace}/{SIGNING_KEY_SECRET}: {source}")]
    Api {
        namespace: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "Secret {namespace}/{SIGNING_KEY_SECRET} holds no usable `{SIGNING_KEY_DATA}`: {reason}; restore it, or delete \
         it to have a new key made (children signed with the old key then count as someone else's)"
    )]
    Unusable { namespace: String, reason: String },
    #[error("the operating system gave no random bytes for a new key: {0}")]
    Random(String),
}

impl SigningKeyLoadError {
    /// Short category for logs.
    pub fn category(&self) -> &'static str {
        match self {
            SigningKeyLoadError::Api { .. } => "api",
            SigningKeyLoadError::Unusable { .. } => "signing-key",
            SigningKeyLoadError::Random(_) => "random",
        }
    }
}

/// The signing key in `namespace`'s Secret, made first if there is none. Replicas starting together race to create
/// it: the loser's create answers 409 and it reads the winner's key.
pub async fn load_or_create(client: &Client, namespace: &str) -> Result<SigningKey, SigningKeyLoadError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let api_error = |source| SigningKeyLoadError::Api {
        namespace: namespace.to_owned(),
        source: Box::new(source),
    };
    if let Some(key) = read_key(client, namespace).await? {
        return Ok(key);
    }
    let mut bytes = vec![0u8; SIGNING_KEY_MIN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| SigningKeyLoadError::Random(e.to_string()))?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(SIGNING_KEY_SECRET.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY_VALUE.to_owned())].into()),
            ..ObjectMeta::default()
        },
        immutable: Some(true),
        data: Some([(SIGNING_KEY_DATA.to_owned(), ByteString(bytes))].into()),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(created) => {
            info!(secret = %format!("{namespace}/{SIGNING_KEY_SECRET}"), "created the child signing key");
            key_of(&created, namespace)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = api.get(SIGNING_KEY_SECRET).await.map_err(api_error)?;
            key_of(&secret, namespace)
        }
        Err(source) => Err(api_error(source)),
    }
}

/// The signing key in `namespace`'s Secret, if there is one; never makes one (`ruleplane diff` reads only).
pub async fn read_key(client: &Client, namespace: &str) -> Result<Option<SigningKey>, SigningKeyLoadError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(SIGNING_KEY_SECRET).await {
        Ok(Some(secret)) => key_of(&secret, namespace).map(Some),
        Ok(None) => Ok(None),
        Err(source) => Err(SigningKeyLoadError::Api {
            namespace: namespace.to_owned(),
            source: Box::new(source),
        }),
    }
}

fn key_of(secret: &Secret, namespace: &str) -> Result<SigningKey, SigningKeyLoadError> {
    let unusable = |reason: String| SigningKeyLoadError::Unusable {
        namespace: namespace.to_owned(),
        reason,
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(SIGNING_KEY_DATA))
        .ok_or_else(|| unusable("no such data key".to_owned()))?;
    let created = secret
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|time| serde_json::to_value(time).ok())
        .and_then(|value| value.as_str().map(str::to_owned));
    SigningKey::new(bytes.0.clone(), created).map_err(|e: SigningKeyError| unusable(e.to_string()))
}

/// The signer of this process: tries until the key is had (reporting why not in `/readyz`), backing off to 30 s.
pub async fn wait_for_signer(client: &Client, namespace: &str, health: &Health) -> ChildSigner {
    let mut delay = Duration::from_secs(1);
    loop {
        match load_or_create(client, namespace).await {
            Ok(key) => {
                health.set_signing_key(Ok(()));
                return ChildSigner::Key(Arc::new(key));
            }
            Err(error) => {
                warn!(category = error.category(), %error, "no child signing key yet; workers wait for it");
                health.set_signing_key(Err(error.to_string()));
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Whether an object of `api_version`/`kind` with this metadata is proven a child Ruleplane wrote for the rule and
/// parent its labels name ([`ruleplane_config::provenance`]): signed with this process's key, or unsigned and older
/// than the key. Without a key (offline), whatever its labels say.
pub fn proves_child(signer: &ChildSigner, api_version: &str, kind: &str, meta: &ObjectMeta) -> bool {
    let ChildSigner::Key(_) = signer else {
        return true;
    };
    let labels = meta.labels.as_ref();
    let label = |key: &str| labels.and_then(|labels| labels.get(key)).map(String::as_str);
    let (Some(rule), Some(parent_uid), Some(name)) = (label(RULE_LABEL), label(PARENT_UID_LABEL), meta.name.as_deref())
    else {
        return false;
    };
    let signature = meta
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(SIGNATURE_ANNOTATION))
        .map(String::as_str);
    // The creation time matters only to an unsigned object (is it older than the key?): formatted only then.
    let created = signature
        .is_none()
        .then_some(meta.creation_timestamp.as_ref())
        .flatten()
        .and_then(|time| serde_json::to_value(time).ok())
        .and_then(|value| value.as_str().map(str::to_owned));
    let observed = ObservedIdentity {
        identity: ChildIdentity {
            rule,
            parent_uid,
            api_version,
            kind,
            namespace: meta.namespace.as_deref(),
            name,
        },
        signature,
        created: created.as_deref(),
    };
    signer.provenance(&observed).is_proven()
}

/// What the Reconciler's child watches keep: objects [`proves_child`] proves (a tenant's labelled copies cost no
/// memory and wake no worker).
pub fn child_admission(signer: ChildSigner) -> Admission {
    Arc::new(move |object: &DynamicObject| {
        let (api_version, kind) = object
            .types
            .as_ref()
            .map(|types| (types.api_version.as_str(), types.kind.as_str()))
            .unwrap_or_default();
        proves_child(&signer, api_version, kind, &object.metadata)
    })
}

#[cfg(test)]
mod tests {
    use kube::api::ApiResource;

    use super::*;

    fn signer(created: &str) -> ChildSigner {
        ChildSigner::Key(Arc::new(
            SigningKey::new(vec![5; 32], Some(created.to_owned())).expect("key"),
        ))
    }

    fn config_map(name: &str, created: &str) -> DynamicObject {
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let mut object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": "team-a", "creationTimestamp": created,
                          "labels": { RULE_LABEL: "web", PARENT_UID_LABEL: "u-1" } }
        }))
        .expect("object");
        object.types = Some(kube::api::TypeMeta {
            api_version: resource.api_version,
            kind: resource.kind,
        });
        object
    }

    #[test]
    fn the_watch_admits_what_the_plan_signed_and_older_unsigned_children_only() {
        let signer = signer("2026-06-01T00:00:00Z");
        let admits = child_admission(signer.clone());
        let mut signed = serde_json::to_value(config_map("web", "2026-07-01T00:00:00Z")).expect("json");
        signer.sign(&mut signed);
        let signed: DynamicObject = serde_json::from_value(signed).expect("object");
        assert!(admits(&signed), "signed by the same function that checks it");
        assert!(
            admits(&config_map("old", "2026-05-01T00:00:00Z")),
            "legacy: older than the key"
        );
        assert!(
            !admits(&config_map("forged", "2026-07-01T00:00:00Z")),
            "unsigned and newer: forged"
        );
        let mut copied = signed.clone();
        copied.metadata.name = Some("elsewhere".into());
        assert!(!admits(&copied), "a signature does not travel to another name");
        assert!(child_admission(ChildSigner::Unsigned)(&copied), "no key: labels decide");
    }
}
