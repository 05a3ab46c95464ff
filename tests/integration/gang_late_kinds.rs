//! Gang kinds served after the manager started, on a real apiserver: scheduler-plugins' PodGroup CRD installed later is picked up without a restart, and until then its members wait, never bound alone.

use std::time::Duration;

use serde_json::json;

use crate::gangs::{
    bound_members, create_labelled_member, create_pod_group, delete_pods, gang_nodes, install_pod_group_crd,
    pod_scheduled_message, policy,
};
use crate::support::cluster_nodes::{create_node, delete_nodes, node, nodes_lock};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, eventually, kubectl, test_namespace, write_rule_file as write};

/// The PodGroup CRD applied after the manager started: before it, three labelled members are told Coscheduling's
/// text for a missing PodGroup and none is bound; after it, a 3-member gang on room for 2 places none, and once room
/// is added all three are bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_crd_installed_after_the_start_is_picked_up_and_its_members_never_go_alone() {
    // The node lock also keeps the other PodGroup tests (which install the CRD) from running meanwhile.
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    kubectl(&[
        "delete",
        "crd",
        "podgroups.scheduling.x-k8s.io",
        "--ignore-not-found",
        "--wait=true",
    ]);
    let ns = test_namespace(&client, "gang-late").await;
    let id = format!("l{}", std::process::id());
    let scheduler = format!("gang-late-{id}");
    // Room for two members of 1 cpu.
    let mut names = gang_nodes(&client, &id, 1, "2").await;
    let dir = temp_dir("gang-late");
    write(&dir, "policy.yaml", &policy(&scheduler));
    let manager = ManagerProcess::start(&dir, &ns, "gang-late", &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    // No PodGroup kind yet: each member is tried, then given back as Coscheduling's Permit gives back a member
    // whose PodGroup does not exist.
    for i in 0..3 {
        create_labelled_member(&client, &ns, &format!("late-{i}"), "late", &scheduler, &id).await;
    }
    for i in 0..3 {
        let name = format!("late-{i}");
        eventually(
            Duration::from_secs(30),
            &format!("{name} told its PodGroup is missing"),
            || async {
                let message = pod_scheduled_message(&client, &ns, &name).await?;
                message.contains("PodGroup not found").then_some(())
            },
        )
        .await;
    }
    assert!(
        bound_members(&client, &ns, "late").await.is_empty(),
        "no member bound alone"
    );

    // The CRD, then the PodGroup: the gang of three on room for two is placed not at all.
    install_pod_group_crd();
    create_pod_group(&client, &ns, "late", 3).await;
    eventually(Duration::from_secs(30), "the gang rejected as a whole", || async {
        let message = pod_scheduled_message(&client, &ns, "late-0").await?;
        (!message.contains("PodGroup not found")).then_some(message)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        bound_members(&client, &ns, "late").await.is_empty(),
        "none of a gang that does not fit is bound"
    );

    // Room for the third: all three are bound.
    names.push(
        create_node(
            &client,
            node(
                &format!("gang-{id}-more"),
                "2",
                "64Gi",
                json!({"gang-test": id}),
                json!([]),
            ),
        )
        .await,
    );
    eventually(Duration::from_secs(30), "the gang placed whole", || async {
        (bound_members(&client, &ns, "late").await.len() == 3).then_some(())
    })
    .await;
    drop(manager);
    delete_pods(&client, &ns).await;
    delete_nodes(&client, &names).await;
}
