//! Signed children: proof that Ruleplane wrote an object for a rule and a parent, which labels alone are not.
//!
//! Labels and annotations are easy to copy: whoever reads a parent sees its UID and can create an object in their
//! own namespace that carries this rule's labels and names the parent. Such an object must never be read as a child,
//! pruned, released or overwritten. So every child Ruleplane applies carries [`SIGNATURE_ANNOTATION`]: an HMAC-SHA256
//! of its identity (rule, parent UID, apiVersion, kind, namespace, name) under a key only the manager reads (a Secret
//! in its own namespace). An object is a child only if its signature checks out ([`Provenance::Signed`]), or it
//! carries no signature and was created before the key existed ([`Provenance::Legacy`]: written by a version that did
//! not sign; the apiserver sets `creationTimestamp`, nobody can forge it; the next apply signs it).

use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::ownership::{PARENT_UID_LABEL, RULE_LABEL};

/// Annotation on every child: `v1.` and the hex of the first 16 bytes of the HMAC of its identity.
pub const SIGNATURE_ANNOTATION: &str = "ruleplane.dev/signature";
/// Name of the Secret (in the manager's namespace) holding the signing key, under [`SIGNING_KEY_DATA`].
pub const SIGNING_KEY_SECRET: &str = "ruleplane-child-signing-key";
/// The Secret's data key of the signing key.
pub const SIGNING_KEY_DATA: &str = "key";
/// Fewest bytes of key accepted (HMAC-SHA256's block of entropy).
pub const SIGNING_KEY_MIN_BYTES: usize = 32;

const SIGNATURE_PREFIX: &str = "v1.";
/// Bytes of the HMAC kept in the annotation: 128 bits, out of reach of guessing.
const SIGNATURE_BYTES: usize = 16;

/// Lower-case hex (what [`SigningKey::sign`] writes) as bytes; anything else is no signature.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            let pair = text.get(i..i + 2)?;
            pair.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                .then(|| u8::from_str_radix(pair, 16).ok())
                .flatten()
        })
        .collect()
}

/// A signing key that is not one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigningKeyError {
    #[error("the signing key has {0} bytes; at least {SIGNING_KEY_MIN_BYTES} are needed")]
    TooShort(usize),
}

impl SigningKeyError {
    /// Short category for logs and metrics.
    pub fn category(&self) -> &'static str {
        "signing-key"
    }
}

/// The key children are signed with, and when it was created (the Secret's `creationTimestamp`).
#[derive(Clone)]
pub struct SigningKey {
    secret: Vec<u8>,
    created: Option<String>,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key's bytes: this type ends up in logs through the structs that hold it.
        f.debug_struct("SigningKey")
            .field("bytes", &self.secret.len())
            .field("created", &self.created)
            .finish()
    }
}

impl SigningKey {
    /// A key of at least [`SIGNING_KEY_MIN_BYTES`] bytes; `created` is the RFC 3339 time the apiserver stored it.
    pub fn new(secret: Vec<u8>, created: Option<String>) -> Result<Self, SigningKeyError> {
        if secret.len() < SIGNING_KEY_MIN_BYTES {
            return Err(SigningKeyError::TooShort(secret.len()));
        }
        Ok(SigningKey { secret, created })
    }

    /// The signature of a child with this identity.
    pub fn sign(&self, identity: &ChildIdentity<'_>) -> String {
        let digest = self.mac(identity).finalize().into_bytes();
        let hex: String = digest
            .iter()
            .take(SIGNATURE_BYTES)
            .map(|byte| format!("{byte:02x}"))
            .collect();
        format!("{SIGNATURE_PREFIX}{hex}")
    }

    fn mac(&self, identity: &ChildIdentity<'_>) -> Hmac<Sha256> {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.secret) else {
            unreachable!("HMAC takes keys of any length")
        };
        // Each field with its length first: no two identities share a message (`a`+`bc` vs `ab`+`c`).
        for field in [
            identity.rule,
            identity.parent_uid,
            identity.api_version,
            identity.kind,
            identity.namespace.unwrap_or(""),
            identity.name,
        ] {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac
    }

    fn verifies(&self, identity: &ChildIdentity<'_>, signature: &str) -> bool {
        let Some(tag) = signature.strip_prefix(SIGNATURE_PREFIX).and_then(decode_hex) else {
            return false;
        };
        // hmac's own comparison, in constant time: it must not tell a forger how many leading bytes match.
        tag.len() == SIGNATURE_BYTES && self.mac(identity).verify_truncated_left(&tag).is_ok()
    }

    /// Whether an object created at `created` was created before this key (strictly; both as the apiserver
    /// writes them, `YYYY-MM-DDTHH:MM:SSZ`, which sort as text). Anything else is not known to be older.
    fn predates(&self, created: Option<&str>) -> bool {
        let apiserver_time = |t: &str| t.len() == 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T';
        match (created, self.created.as_deref()) {
            (Some(object), Some(key)) if apiserver_time(object) && apiserver_time(key) => object < key,
            _ => false,
        }
    }
}

/// What a signature covers: everything that says whose child an object is and where it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildIdentity<'a> {
    pub rule: &'a str,
    pub parent_uid: &'a str,
    pub api_version: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

/// An observed object's identity with what proves it: its signature annotation and its creation time.
#[derive(Clone, Copy, Debug)]
pub struct ObservedIdentity<'a> {
    pub identity: ChildIdentity<'a>,
    pub signature: Option<&'a str>,
    pub created: Option<&'a str>,
}

impl<'a> ObservedIdentity<'a> {
    /// Read from an object as JSON (`None` when it lacks the rule or parent labels, a kind or a name).
    pub fn of(object: &'a Value) -> Option<Self> {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let labels = object.pointer("/metadata/labels")?;
        let annotations = object.pointer("/metadata/annotations");
        Some(ObservedIdentity {
            identity: ChildIdentity {
                rule: labels.get(RULE_LABEL)?.as_str()?,
                parent_uid: labels.get(PARENT_UID_LABEL)?.as_str()?,
                api_version: text("/apiVersion")?,
                kind: text("/kind")?,
                namespace: text("/metadata/namespace"),
                name: text("/metadata/name")?,
            },
            signature: annotations
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                .and_then(Value::as_str),
            created: text("/metadata/creationTimestamp"),
        })
    }
}

/// What an observed object's signature says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Signed with our key for exactly this identity.
    Signed,
    /// Unsigned, created before the key: written by a version of Ruleplane that did not sign.
    Legacy,
    /// Not shown to be ours: a wrong or missing signature, or no rule/parent labels.
    Unproven,
    /// Nothing was checked: no key (offline tools on objects the rule author wrote, e.g. `ruleplane test` cases).
    Unchecked,
}

impl Provenance {
    /// Whether the object may be treated as the child its labels say it is.
    pub fn is_proven(self) -> bool {
        self != Provenance::Unproven
    }
}

/// Signs children and judges observed ones: with the manager's key, or, offline, not at all.
#[derive(Clone, Debug)]
pub enum ChildSigner {
    Key(Arc<SigningKey>),
    /// No key: children are not signed and observed ones are taken as their labels say (offline tools).
    Unsigned,
}

impl ChildSigner {
    /// Adds the signature annotation to a rendered child (already labelled, named and placed). Without a key, or
    /// on an object without the rule's labels, nothing changes.
    pub fn sign(&self, child: &mut Value) {
        let ChildSigner::Key(key) = self else { return };
        let Some(signature) = ObservedIdentity::of(child).map(|observed| key.sign(&observed.identity)) else {
            return;
        };
        let Some(metadata) = child.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(SIGNATURE_ANNOTATION.into(), Value::String(signature));
        }
    }

    /// What proves (or not) that an object with this identity is ours.
    pub fn provenance(&self, observed: &ObservedIdentity<'_>) -> Provenance {
        let ChildSigner::Key(key) = self else {
            return Provenance::Unchecked;
        };
        match observed.signature {
            Some(signature) if key.verifies(&observed.identity, signature) => Provenance::Signed,
            Some(_) => Provenance::Unproven,
            None if key.predates(observed.created) => Provenance::Legacy,
            None => Provenance::Unproven,
        }
    }

    /// [`ChildSigner::provenance`] of an object as JSON (unproven when it lacks the rule or parent labels).
    pub(crate) fn provenance_of(&self, object: &Value) -> Provenance {
        match ObservedIdentity::of(object) {
            Some(observed) => self.provenance(&observed),
            None if matches!(self, ChildSigner::Unsigned) => Provenance::Unchecked,
            None => Provenance::Unproven,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(created: &str) -> ChildSigner {
        ChildSigner::Key(Arc::new(
            SigningKey::new(vec![7; 32], Some(created.to_owned())).unwrap(),
        ))
    }

    fn child(namespace: &str, name: &str, created: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": name, "namespace": namespace, "creationTimestamp": created,
                "labels": { RULE_LABEL: "web", PARENT_UID_LABEL: "uid-1" },
                "annotations": { "ruleplane.dev/parent": "team-a/shop" }
            }
        })
    }

    #[test]
    fn a_signed_child_is_proven_and_any_change_of_its_identity_breaks_the_signature() {
        let signer = key("2026-01-01T00:00:00Z");
        let mut signed = child("team-a", "shop-config", "2026-06-01T00:00:00Z");
        signer.sign(&mut signed);
        let signature = signed["metadata"]["annotations"][SIGNATURE_ANNOTATION]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(signature.starts_with("v1.") && signature.len() == 3 + 32, "{signature}");
        assert_eq!(signer.provenance_of(&signed), Provenance::Signed);
        // The signature copied onto an object that differs in any part of the identity.
        for (pointer, value) in [
            ("/metadata/name", "other"),
            ("/metadata/namespace", "team-b"),
            ("/kind", "Secret"),
            ("/apiVersion", "v2"),
            ("/metadata/labels/ruleplane.dev~1rule", "other-rule"),
            ("/metadata/labels/ruleplane.dev~1parent-uid", "uid-2"),
        ] {
            let mut forged = signed.clone();
            *forged.pointer_mut(pointer).unwrap() = json!(value);
            assert_eq!(signer.provenance_of(&forged), Provenance::Unproven, "{pointer}");
        }
    }

    #[test]
    fn another_key_signs_differently() {
        let mut signed = child("team-a", "shop-config", "2026-06-01T00:00:00Z");
        key("2026-01-01T00:00:00Z").sign(&mut signed);
        let other = ChildSigner::Key(Arc::new(SigningKey::new(vec![8; 32], None).unwrap()));
        assert_eq!(other.provenance_of(&signed), Provenance::Unproven);
    }

    #[test]
    fn an_unsigned_child_is_legacy_only_when_created_strictly_before_the_key() {
        let signer = key("2026-06-01T00:00:00Z");
        assert_eq!(
            signer.provenance_of(&child("a", "b", "2026-05-31T23:59:59Z")),
            Provenance::Legacy
        );
        for created in ["2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z", "yesterday", ""] {
            assert_eq!(
                signer.provenance_of(&child("a", "b", created)),
                Provenance::Unproven,
                "{created}"
            );
        }
        let mut no_time = child("a", "b", "");
        no_time["metadata"].as_object_mut().unwrap().remove("creationTimestamp");
        assert_eq!(signer.provenance_of(&no_time), Provenance::Unproven);
        // A key whose creation is unknown vouches for no unsigned object.
        let timeless = ChildSigner::Key(Arc::new(SigningKey::new(vec![7; 32], None).unwrap()));
        assert_eq!(
            timeless.provenance_of(&child("a", "b", "2000-01-01T00:00:00Z")),
            Provenance::Unproven
        );
    }

    #[test]
    fn a_wrong_signature_is_not_rescued_by_an_old_creation_time() {
        let signer = key("2026-06-01T00:00:00Z");
        let mut forged = child("a", "b", "2020-01-01T00:00:00Z");
        forged["metadata"]["annotations"][SIGNATURE_ANNOTATION] = json!("v1.00000000000000000000000000000000");
        assert_eq!(signer.provenance_of(&forged), Provenance::Unproven);
    }

    #[test]
    fn only_the_exact_written_form_of_a_signature_verifies() {
        let signer = key("2026-01-01T00:00:00Z");
        let mut signed = child("a", "b", "2026-06-01T00:00:00Z");
        signer.sign(&mut signed);
        let good = signed["metadata"]["annotations"][SIGNATURE_ANNOTATION]
            .as_str()
            .unwrap()
            .to_owned();
        let hex = good.strip_prefix("v1.").unwrap();
        for bad in [
            good.to_uppercase(),
            format!("v2.{hex}"),
            hex.to_owned(),
            good[..good.len() - 2].to_owned(),
            format!("{good}00"),
            format!("v1.{}", &hex[..hex.len() - 1]),
            format!("v1.{}zz", &hex[..hex.len() - 2]),
            format!("v1.+{}", &hex[1..]),
            String::new(),
        ] {
            let mut forged = signed.clone();
            forged["metadata"]["annotations"][SIGNATURE_ANNOTATION] = json!(bad);
            assert_eq!(signer.provenance_of(&forged), Provenance::Unproven, "{bad:?}");
        }
    }

    #[test]
    fn without_a_key_nothing_is_signed_and_everything_is_unchecked() {
        let mut object = child("a", "b", "2026-06-01T00:00:00Z");
        ChildSigner::Unsigned.sign(&mut object);
        assert!(object["metadata"]["annotations"].get(SIGNATURE_ANNOTATION).is_none());
        assert_eq!(ChildSigner::Unsigned.provenance_of(&object), Provenance::Unchecked);
        assert!(Provenance::Unchecked.is_proven());
    }

    #[test]
    fn identities_with_the_same_concatenation_sign_differently() {
        let signer = SigningKey::new(vec![1; 32], None).unwrap();
        let identity = |rule, parent_uid| ChildIdentity {
            rule,
            parent_uid,
            api_version: "v1",
            kind: "ConfigMap",
            namespace: None,
            name: "x",
        };
        assert_ne!(signer.sign(&identity("ab", "c")), signer.sign(&identity("a", "bc")));
    }

    #[test]
    fn keys_are_long_enough_and_never_printed() {
        assert_eq!(
            SigningKey::new(vec![1; 31], None).unwrap_err(),
            SigningKeyError::TooShort(31)
        );
        let printed = format!("{:?}", SigningKey::new(vec![0xab; 32], None).unwrap());
        assert!(!printed.contains("171") && !printed.contains("ab, "), "{printed}");
    }
}
