//! Tinkerbell Rufio's Machine, Job and Task served by ferrometal, against real peers: every
//! action kind over Redfish (sushy-tools) and over IPMI (ipmi_sim), checked on the peer, with
//! Rufio's conditions, times and Task names.

mod stack;

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::rufio::{Job, Machine, Task, is_true};
use ferrometal_provisioner::fixture::FixtureProvisioner;
use ferrometal_test_support::peers;
use ferrometal_test_support::poll::{Patience, object};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use stack::{NS, Stack};

const PATIENCE: Patience = Patience {
    tries: 600,
    every: Duration::from_millis(200),
};

async fn create<K>(api: &Api<K>, doc: Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let o: K = serde_json::from_value(doc).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap();
}

fn job_done(j: &Job) -> bool {
    j.status
        .as_ref()
        .is_some_and(|s| is_true(&s.conditions, "Completed") || is_true(&s.conditions, "Failed"))
}

async fn machine_and_job(stack: &Stack, connection: Value, tasks: Value) -> (Machine, Job) {
    stack.secret("bmc", "password").await;
    let machines: Api<Machine> = Api::namespaced(stack.client.clone(), NS);
    let jobs: Api<Job> = Api::namespaced(stack.client.clone(), NS);
    create(
        &machines,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Machine",
               "metadata": {"name": "m0"}, "spec": {"connection": connection}}),
    )
    .await;
    let machine = object(&machines, PATIENCE, "m0", "contactable", |m| {
        m.status
            .as_ref()
            .is_some_and(|s| is_true(&s.conditions, "Contactable"))
    })
    .await;
    create(
        &jobs,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Job",
               "metadata": {"name": "j0"},
               "spec": {"machineRef": {"name": "m0", "namespace": NS}, "tasks": tasks}}),
    )
    .await;
    let job = object(&jobs, PATIENCE, "j0", "finished", job_done).await;
    (machine, job)
}

async fn task(stack: &Stack, n: usize) -> Task {
    let tasks: Api<Task> = Api::namespaced(stack.client.clone(), NS);
    tasks.get(&format!("j0-task-{n}")).await.unwrap()
}

/// The built-in Redfish emulator with one system, `sys-0`.
async fn one_system_emulator() -> ferrometal_emulator::Emulator {
    ferrometal_emulator::Emulator::start(
        ferrometal_emulator::EmulatorConfig {
            systems: 1,
            ..Default::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// The host controller is not involved: a fixture provisioner stands in for it.
async fn rufio_stack() -> Stack {
    Stack::start(Arc::new(FixtureProvisioner::new())).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rufio_machine_and_job_over_redfish() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let files = peers::FileServer::start();
    let stack = rufio_stack().await;
    let iso = files.url("live.iso");
    let (machine, job) = machine_and_job(
        &stack,
        json!({"host": "http://127.0.0.1", "port": sushy.port,
               "authSecretRef": {"name": "bmc", "namespace": NS},
               "insecureTLS": true,
               "providerOptions": {"redfish": {"systemName": peers::SUSHY_SYSTEM_0}}}),
        json!([
            {"powerAction": "on"},
            {"oneTimeBootDeviceAction": {"device": ["pxe"], "efiBoot": true}},
            {"virtualMediaAction": {"mediaURL": iso, "kind": "CD"}},
            {"powerAction": "status"},
        ]),
    )
    .await;
    assert_eq!(machine.status.unwrap().power, "off");
    let st = job.status.unwrap();
    assert!(is_true(&st.conditions, "Completed"), "{st:#?}");
    assert!(!is_true(&st.conditions, "Running"));
    assert!(st.start_time.is_some() && st.completion_time.is_some());
    for n in 0..4 {
        let t = task(&stack, n).await;
        let ts = t.status.unwrap();
        assert!(is_true(&ts.conditions, "Completed"), "task {n}: {ts:#?}");
        assert!(ts.start_time.is_some() && ts.completion_time.is_some());
        // Owned by the Job, as Rufio's are.
        assert_eq!(t.metadata.owner_references.unwrap()[0].name, "j0");
    }
    // On the peer: on, PXE once, our image in the CD; nothing restored (Rufio's semantics).
    let system = sushy.system(peers::SUSHY_SYSTEM_0);
    assert_eq!(system["PowerState"], "On");
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Pxe");
    let cd = sushy.virtual_cd(peers::SUSHY_SYSTEM_0);
    assert_eq!(
        (cd["Inserted"].clone(), cd["Image"].clone()),
        (json!(true), json!(iso))
    );
    // Each action sent once.
    let changes = sushy.changes();
    assert_eq!(
        changes.iter().filter(|l| l.contains("InsertMedia")).count(),
        1
    );
    assert_eq!(
        changes
            .iter()
            .filter(|l| l.contains("ComputerSystem.Reset"))
            .count(),
        1
    );
    // The machine's power follows.
    let machines: Api<Machine> = Api::namespaced(stack.client.clone(), NS);
    object(&machines, PATIENCE, "m0", "power on", |m| {
        m.status.as_ref().is_some_and(|s| s.power == "on")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rufio_machine_and_job_over_ipmi() {
    let sim = peers::IpmiSim::start();
    let stack = rufio_stack().await;
    let (_machine, job) = machine_and_job(
        &stack,
        json!({"host": "127.0.0.1", "port": sim.port,
               "authSecretRef": {"name": "bmc", "namespace": NS},
               "providerOptions": {"ipmitool": {"cipherSuite": "3"}}}),
        json!([
            {"powerAction": "on"},
            {"oneTimeBootDeviceAction": {"device": ["pxe"], "efiBoot": false}},
            {"virtualMediaAction": {"mediaURL": "http://images.example/x.iso", "kind": "CD"}},
            {"powerAction": "off"},
        ]),
    )
    .await;
    assert_eq!(sim.chassis("power"), "1");
    assert_eq!(sim.chassis("boot"), "pxe");
    // IPMI has no virtual media: that task fails by name, and the job stops there.
    let st = job.status.unwrap();
    assert!(is_true(&st.conditions, "Failed"), "{st:#?}");
    let failed = st.conditions.iter().find(|c| c.type_ == "Failed").unwrap();
    assert!(
        failed.message.starts_with("Task j0-task-2 failed:"),
        "{}",
        failed.message
    );
    assert!(
        failed.message.contains("virtual media"),
        "{}",
        failed.message
    );
    let tasks: Api<Task> = Api::namespaced(stack.client.clone(), NS);
    assert!(
        tasks.get_opt("j0-task-3").await.unwrap().is_none(),
        "no task after the failure"
    );
    // A Machine with a provider ferrometal does not speak says so.
    let machines: Api<Machine> = Api::namespaced(stack.client.clone(), NS);
    create(
        &machines,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Machine",
               "metadata": {"name": "amt"},
               "spec": {"connection": {"host": "10.0.0.9", "authSecretRef": {"name": "bmc", "namespace": NS},
                        "insecureTLS": false,
                        "providerOptions": {"preferredOrder": ["IntelAMT"]}}}}),
    )
    .await;
    let m = object(&machines, PATIENCE, "amt", "not contactable", |m| {
        m.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Contactable" && c.status == "False")
        })
    })
    .await;
    let s = m.status.unwrap();
    assert_eq!(s.power, "unknown");
    assert!(
        s.conditions[0]
            .message
            .contains("provider intelamt is not supported")
    );
}

/// In a cluster no admission stands in front of the controllers, so they keep the namespace
/// boundary themselves: a Machine naming another namespace's Secret never has it read or sent
/// (to an address its author chose), and a Job naming another namespace's Machine fails
/// without a Task or a BMC call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rufio_objects_never_reach_into_another_namespace() {
    let sushy = peers::Sushy::start(1, "admin:password");
    let stack = rufio_stack().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(stack.client.clone());
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "infra"}}),
    )
    .await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(stack.client.clone(), "infra");
    create(
        &secrets,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc"},
               "stringData": {"username": "admin", "password": "password"}}),
    )
    .await;
    let infra_machines: Api<Machine> = Api::namespaced(stack.client.clone(), "infra");
    create(
        &infra_machines,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Machine",
               "metadata": {"name": "m3"},
               "spec": {"connection": {"host": "http://127.0.0.1", "port": sushy.port,
                        "authSecretRef": {"name": "bmc", "namespace": "infra"},
                        "providerOptions": {"redfish": {"systemName": peers::SUSHY_SYSTEM_0}}}}}),
    )
    .await;
    object(&infra_machines, PATIENCE, "m3", "contactable", |m| {
        m.status
            .as_ref()
            .is_some_and(|s| is_true(&s.conditions, "Contactable"))
    })
    .await;

    // The attacker's BMC address: a listener that must never see a connection.
    let trap = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let trap_port = trap.local_addr().unwrap().port();
    let machines: Api<Machine> = Api::namespaced(stack.client.clone(), NS);
    create(
        &machines,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Machine",
               "metadata": {"name": "steal"},
               "spec": {"connection": {"host": format!("http://127.0.0.1:{trap_port}"),
                        "authSecretRef": {"name": "bmc", "namespace": "infra"},
                        "providerOptions": {"redfish": {}}}}}),
    )
    .await;
    let m = object(&machines, PATIENCE, "steal", "refused", |m| {
        m.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Contactable" && c.status == "False")
        })
    })
    .await;
    let message = &m.status.unwrap().conditions[0].message;
    assert!(
        message.contains("\"infra\"") && message.contains("never read"),
        "{message}"
    );
    // The refusal is decided before any connection, so none was made.
    assert!(
        trap.accept().is_err(),
        "the controller connected to the trap"
    );

    let jobs: Api<Job> = Api::namespaced(stack.client.clone(), NS);
    let before = sushy.changes().len();
    create(
        &jobs,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Job",
               "metadata": {"name": "on3"},
               "spec": {"machineRef": {"name": "m3", "namespace": "infra"},
                        "tasks": [{"powerAction": "on"}]}}),
    )
    .await;
    let job = object(&jobs, PATIENCE, "on3", "finished", job_done).await;
    let st = job.status.unwrap();
    assert!(is_true(&st.conditions, "Failed"), "{st:#?}");
    let failed = st.conditions.iter().find(|c| c.type_ == "Failed").unwrap();
    assert!(failed.message.contains("never used"), "{}", failed.message);
    let tasks: Api<Task> = Api::namespaced(stack.client.clone(), NS);
    assert!(tasks.get_opt("on3-task-0").await.unwrap().is_none());
    assert_eq!(sushy.changes().len(), before, "a BMC change was made");
    assert_eq!(sushy.system(peers::SUSHY_SYSTEM_0)["PowerState"], "Off");
}

/// Issue 28 (10): a Machine's POWER follows a Job that changed it, instead of waiting for the
/// next poll (10 minutes here; it said `off` for minutes after a Job powered it on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_power_follows_a_job_at_once() {
    let emu = one_system_emulator().await;
    let stack = Stack::start_with(
        Arc::new(FixtureProvisioner::new()),
        ferrometal_controller::ControllerConfig {
            power_poll_interval: Duration::from_secs(600),
            ..stack::fast_config()
        },
    )
    .await;
    let (machine, job) = machine_and_job(
        &stack,
        json!({"host": "http://127.0.0.1", "port": emu.addr().port(),
               "authSecretRef": {"name": "bmc", "namespace": NS},
               "providerOptions": {"redfish": {"systemName": "sys-0"}}}),
        json!([{"powerAction": "on"}]),
    )
    .await;
    assert_eq!(machine.status.unwrap().power, "off");
    assert!(is_true(&job.status.unwrap().conditions, "Completed"));
    assert_eq!(emu.state(0).power_state.as_str(), "On");
    let machines: Api<Machine> = Api::namespaced(stack.client.clone(), NS);
    let soon = Patience {
        tries: 150,
        every: Duration::from_millis(200),
    };
    object(&machines, soon, "m0", "POWER on", |m| {
        m.status.as_ref().is_some_and(|s| s.power == "on")
    })
    .await;
}

/// Issue 28 (8): a Machine reaching an HTTP-only BMC over HTTPS says so, with the fix in
/// Rufio's words (it said "received corrupt message of type InvalidContentType", which also
/// hid a wrong password); once fixed, the wrong password is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_speaking_https_to_a_plain_http_bmc_is_told_the_fix() {
    let emu = one_system_emulator().await;
    let stack = rufio_stack().await;
    stack.secret("bmc", "wrong").await;
    let machines: Api<Machine> = Api::namespaced(stack.client.clone(), NS);
    let port = emu.addr().port();
    create(
        &machines,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Machine",
               "metadata": {"name": "m1"}, "spec": {"connection": {
                   "host": "127.0.0.1", "port": port, "insecureTLS": true,
                   "authSecretRef": {"name": "bmc", "namespace": NS},
                   "providerOptions": {"redfish": {"systemName": "sys-0"}}}}}),
    )
    .await;
    let contactable = |m: &Machine| {
        m.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Contactable")
                .map(|c| (c.status.clone(), c.message.clone()))
        })
    };
    let m = object(&machines, PATIENCE, "m1", "not contactable", |m| {
        contactable(m).is_some_and(|(s, _)| s == "False")
    })
    .await;
    let (_, message) = contactable(&m).unwrap();
    assert!(
        message.ends_with(
            "the BMC answered plain HTTP to HTTPS; write connection.host as http://HOST"
        ),
        "{message}"
    );
    assert!(!message.contains("InvalidContentType"), "{message}");
    machines
        .patch(
            "m1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"connection": {"host": "http://127.0.0.1"}}})),
        )
        .await
        .unwrap();
    object(&machines, PATIENCE, "m1", "the wrong password named", |m| {
        contactable(m).is_some_and(|(s, m)| s == "False" && m.contains("rejected the credentials"))
    })
    .await;
}

/// A BMC that accepts connections and never answers holds no worker: with one worker per
/// kind, a Machine created after the hanging one is read (and a Job on it completes) while
/// the hanging Machine's read is still waiting for its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_bmc_holds_no_worker() {
    // Connections queue in the backlog; nothing is ever read or written.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let emu = one_system_emulator().await;
    let stack = Stack::start_with(
        Arc::new(FixtureProvisioner::new()),
        ferrometal_controller::ControllerConfig {
            concurrency: 1,
            ..stack::fast_config()
        },
    )
    .await;
    stack.secret("bmc", "password").await;
    let machines: Api<Machine> = Api::namespaced(stack.client.clone(), NS);
    create(
        &machines,
        json!({"apiVersion": "bmc.tinkerbell.org/v1alpha1", "kind": "Machine",
               "metadata": {"name": "stuck"},
               "spec": {"connection": {"host": "http://127.0.0.1", "port": silent_port,
                        "authSecretRef": {"name": "bmc", "namespace": NS},
                        "providerOptions": {"redfish": {"systemName": "sys-0"}}}}}),
    )
    .await;
    // The hanging read is under way before the good Machine exists.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (machine, job) = machine_and_job(
        &stack,
        json!({"host": "http://127.0.0.1", "port": emu.addr().port(),
               "authSecretRef": {"name": "bmc", "namespace": NS},
               "providerOptions": {"redfish": {"systemName": "sys-0"}}}),
        json!([{"powerAction": "on"}]),
    )
    .await;
    assert!(is_true(&machine.status.unwrap().conditions, "Contactable"));
    assert!(is_true(&job.status.unwrap().conditions, "Completed"));
    assert_eq!(emu.state(0).power_state.as_str(), "On");
    let stuck = machines.get("stuck").await.unwrap();
    assert!(
        stuck
            .status
            .as_ref()
            .is_none_or(|s| s.conditions.iter().all(|c| c.type_ != "Contactable")),
        "the hanging BMC's read ended first: {:?}",
        stuck.status
    );
    drop(silent);
}
