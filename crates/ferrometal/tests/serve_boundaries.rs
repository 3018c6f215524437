//! The attacks of a namespace-scoped user on other namespaces, through kubectl as that user
//! against `ferrometal serve`: a Rufio Machine naming another namespace's BMC Secret, a Rufio
//! Job naming another namespace's Machine, a claim naming an infrastructure Secret for its
//! registry credentials, a malformed ServiceAccount name to impersonate, and a remote claim's
//! kubeconfig aimed at local services. Each is refused, saying why, and nothing is stored.

mod serve_common;

use std::path::Path;

use serve_common::*;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// kubectl as the owner of `kc`, which must fail; returns stderr.
fn fails_as(s: &Serve, kc: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let o = s.kubectl_with(kc, args, stdin);
    assert!(
        !o.status.success(),
        "kubectl {args:?} unexpectedly succeeded: {}",
        stdout(&o)
    );
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn ok_as(s: &Serve, kc: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let o = s.kubectl_with(kc, args, stdin);
    assert!(
        o.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

/// `user` bound to `role` in `ns` only; their kubeconfig.
fn bound(s: &Serve, user: &str, role: &str, ns: &str) -> std::path::PathBuf {
    s.ok(&[
        "create",
        "rolebinding",
        &format!("{user}-{role}"),
        "-n",
        ns,
        &format!("--clusterrole={role}"),
        &format!("--user={user}"),
    ]);
    s.user_kubeconfig(user, &[], ns)
}

const INFRA: &str = "apiVersion: v1\nkind: Secret\nmetadata: {name: node-0-bmc, namespace: infra}\nstringData: {username: admin, password: infra-secret-pw}\n---\n\
apiVersion: bmc.tinkerbell.org/v1alpha1\nkind: Machine\nmetadata: {name: m3, namespace: infra}\n\
spec: {connection: {host: 10.0.0.3, authSecretRef: {name: node-0-bmc, namespace: infra}}}\n";

#[test]
fn namespace_scoped_roles_cannot_use_another_namespaces_bmcs() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    for ns in ["infra", "team-x", "ops"] {
        s.ok(&["create", "namespace", ns]);
    }
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(INFRA));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // A fleet admin of team-x: a Machine whose Secret is infra's, at an address of theirs.
    let fleet = bound(&s, "fx", "ferrometal-fleet-admin", "team-x");
    let machine = |ns: &str| {
        format!(
            "apiVersion: bmc.tinkerbell.org/v1alpha1\nkind: Machine\nmetadata: {{name: steal, namespace: team-x}}\n\
             spec: {{connection: {{host: \"http://127.0.0.1:33655\", authSecretRef: {{name: node-0-bmc, namespace: {ns}}}}}}}\n"
        )
    };
    let e = fails_as(&s, &fleet, &["create", "-f", "-"], Some(&machine("infra")));
    assert!(
        e.contains("spec.connection.authSecretRef.namespace")
            && e.contains("\"infra\"")
            && e.contains("cross-namespace references are not allowed"),
        "{e}"
    );
    // The same through a Task, which carries a connection too.
    let task = "apiVersion: bmc.tinkerbell.org/v1alpha1\nkind: Task\nmetadata: {name: t, namespace: team-x}\n\
spec: {task: {powerAction: \"on\"}, connection: {host: 127.0.0.1, authSecretRef: {name: node-0-bmc, namespace: infra}}}\n";
    let e = fails_as(&s, &fleet, &["create", "-f", "-"], Some(task));
    assert!(e.contains("spec.connection.authSecretRef.namespace"), "{e}");
    // Its own namespace's Secret is fine.
    ok_as(&s, &fleet, &["create", "-f", "-"], Some(&machine("team-x")));
    // Nor can it change a stored Machine's reference to another namespace.
    let e = fails_as(
        &s,
        &fleet,
        &[
            "patch",
            "machine.bmc.tinkerbell.org",
            "steal",
            "--type=merge",
            "-p",
            r#"{"spec":{"connection":{"authSecretRef":{"namespace":"infra"}}}}"#,
        ],
        None,
    );
    assert!(e.contains("cross-namespace"), "{e}");

    // A BMC operator of ops: a Job on infra's Machine.
    let operator = bound(&s, "op", "ferrometal-bmc-operator", "ops");
    let job = "apiVersion: bmc.tinkerbell.org/v1alpha1\nkind: Job\nmetadata: {name: on3, namespace: ops}\n\
spec: {machineRef: {name: m3, namespace: infra}, tasks: [{powerAction: \"on\"}]}\n";
    let e = fails_as(&s, &operator, &["create", "-f", "-"], Some(job));
    assert!(
        e.contains("spec.machineRef.namespace") && e.contains("cross-namespace"),
        "{e}"
    );
    // Nothing of it was stored, and ops holds no Task with infra's connection.
    for (kind, ns) in [
        ("jobs.bmc.tinkerbell.org", "ops"),
        ("tasks.bmc.tinkerbell.org", "ops"),
        ("tasks.bmc.tinkerbell.org", "team-x"),
    ] {
        let listed = s.ok(&["get", kind, "-n", ns, "-o", "name"]);
        assert!(listed.trim().is_empty(), "{kind} in {ns}: {listed}");
    }
    let listed = s.ok(&[
        "get",
        "machines.bmc.tinkerbell.org",
        "-n",
        "team-x",
        "-o",
        "yaml",
    ]);
    assert!(!listed.contains("infra"), "{listed}");
}

#[test]
fn a_claim_cannot_name_infrastructure_secrets_and_impersonation_needs_real_names() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    for ns in ["infra", "tenant", "dev"] {
        s.ok(&["create", "namespace", ns]);
    }
    let tenant = bound(&s, "tina", "ferrometal-tenant", "tenant");
    let claim = "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {name: c, namespace: tenant}\n\
spec: {poweredOn: true, image: {url: \"oci://registry.example/os:1\", ociAuthSecretName: node-2-bmc}}\n";
    let e = fails_as(&s, &tenant, &["create", "-f", "-"], Some(claim));
    assert!(
        e.contains("spec.image.ociAuthSecretName") && e.contains("node-2-bmc"),
        "{e}"
    );
    assert!(
        s.ok(&["get", "hostclaims", "-n", "tenant", "-o", "name"])
            .trim()
            .is_empty()
    );

    // Impersonation of ServiceAccounts only: a well-formed name gets its groups; a name with a
    // third part or an empty one is not a ServiceAccount, and impersonating users is not
    // granted.
    s.ok(&[
        "create",
        "clusterrole",
        "sa-impersonator",
        "--verb=impersonate",
        "--resource=serviceaccounts",
    ]);
    s.ok(&[
        "create",
        "clusterrolebinding",
        "imp",
        "--clusterrole=sa-impersonator",
        "--user=imp",
    ]);
    let imp = s.user_kubeconfig("imp", &[], "default");
    let who = ok_as(
        &s,
        &imp,
        &[
            "auth",
            "whoami",
            "--as=system:serviceaccount:dev:robot",
            "-o",
            "json",
        ],
        None,
    );
    assert!(who.contains("system:serviceaccounts:dev"), "{who}");
    for bad in [
        "system:serviceaccount:dev:x:y",
        "system:serviceaccount:dev:",
    ] {
        let e = fails_as(
            &s,
            &imp,
            &["get", "configmaps", "-n", "dev", &format!("--as={bad}")],
            None,
        );
        assert!(
            e.contains("cannot impersonate resource \"users\""),
            "{bad}: {e}"
        );
    }
}

/// A kubeconfig for `server` with a token, as a tenant would write it.
fn kubeconfig_for(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{server}\", insecure-skip-tls-verify: true}}\n\
         users:\n- name: u\n  user: {{token: t0k3n}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u, namespace: far}}\ncurrent-context: x\n"
    )
}

/// The messages of the claim's conditions, once one names the remote link.
fn remote_message(s: &Serve, claim: &str) -> String {
    for _ in 0..600 {
        let out = s.ok(&[
            "get",
            "hostclaim",
            claim,
            "-n",
            "tenant",
            "-o",
            "jsonpath={.status.conditions[*].message}",
        ]);
        if out.contains("remote") || out.contains("kubeconfig") {
            return out;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("claim {claim} never reported on its remote link");
}

fn remote_claim(s: &Serve, tenant: &Path, name: &str, server: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, kubeconfig_for(server)).unwrap();
    ok_as(
        s,
        tenant,
        &[
            "create",
            "secret",
            "generic",
            &format!("{name}-link"),
            &format!("--from-file=kubeconfig={}", path.display()),
        ],
        None,
    );
    let claim = format!(
        "apiVersion: metal3.io/v1alpha1\nkind: HostClaim\nmetadata: {{name: {name}, namespace: tenant, annotations: {{ferrometal.io/remote-kubeconfig: {name}-link}}}}\nspec: {{poweredOn: false}}\n"
    );
    ok_as(s, tenant, &["create", "-f", "-"], Some(&claim));
}

#[test]
fn remote_claim_kubeconfigs_cannot_scan_this_machine() {
    // A port that refuses, and one that accepts and says nothing a Kubernetes API would.
    let closed = free_port();
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in open.incoming() {
            drop(c);
        }
    });

    // By default: never plain HTTP, never loopback.
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &[]);
    s.ok(&["create", "namespace", "tenant"]);
    let tenant = bound(&s, "tina", "ferrometal-tenant", "tenant");
    remote_claim(
        &s,
        &tenant,
        "plain",
        &format!("http://127.0.0.1:{open_port}/x?y=1"),
    );
    let m = remote_message(&s, "plain");
    assert!(m.contains("only https://"), "{m}");
    remote_claim(
        &s,
        &tenant,
        "local",
        &format!("https://127.0.0.1:{open_port}"),
    );
    let m = remote_message(&s, "local");
    assert!(m.contains("loopback"), "{m}");
    remote_claim(&s, &tenant, "meta", "https://169.254.169.254");
    let m = remote_message(&s, "meta");
    assert!(m.contains("link-local"), "{m}");
    drop(s);

    // Allowed by the installation: a refused port and a silent one read the same.
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        free_port(),
        &["--remote-claim-servers", "127.0.0.1"],
    );
    s.ok(&["create", "namespace", "tenant"]);
    let tenant = bound(&s, "tina", "ferrometal-tenant", "tenant");
    remote_claim(
        &s,
        &tenant,
        "closed",
        &format!("https://127.0.0.1:{closed}"),
    );
    remote_claim(
        &s,
        &tenant,
        "open",
        &format!("https://127.0.0.1:{open_port}"),
    );
    let closed_msg = remote_message(&s, "closed").replace(&closed.to_string(), "PORT");
    let open_msg = remote_message(&s, "open").replace(&open_port.to_string(), "PORT");
    assert_eq!(closed_msg, open_msg);
    assert!(
        closed_msg.contains("cannot reach the remote cluster"),
        "{closed_msg}"
    );
}
