//! Builds the Kubernetes client from a kubeconfig flag, $KUBECONFIG, ~/.kube/config or in-cluster config.

use std::path::Path;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

pub async fn connect(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => Config::infer()
            .await
            .context("no kubeconfig and not running in a cluster")?,
    };
    Client::try_from(config).context("building the Kubernetes client")
}
