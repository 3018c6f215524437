//! Identities and RBAC in `ferrometal serve`, driven with kubectl as the users themselves:
//! minted client-certificate kubeconfigs, ServiceAccount tokens, the project's roles, the 403
//! texts, `auth can-i` / `whoami`, impersonation, escalation prevention and the audit log.

mod serve_common;

use std::path::Path;

use serve_common::*;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// kubectl as the owner of `kc`, which must succeed.
fn ok_as(s: &Serve, kc: &Path, args: &[&str]) -> String {
    let o = s.kubectl_with(kc, args, None);
    assert!(
        o.status.success(),
        "kubectl {args:?} failed: {}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// kubectl as the owner of `kc`, which must fail; returns stderr.
fn fails_as(s: &Serve, kc: &Path, args: &[&str]) -> String {
    let o = s.kubectl_with(kc, args, None);
    assert!(
        !o.status.success(),
        "kubectl {args:?} unexpectedly succeeded: {}",
        stdout(&o)
    );
    stderr(&o)
}

fn can_i(s: &Serve, kc: &Path, args: &[&str]) -> bool {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let o = s.kubectl_with(kc, &all, None);
    match stdout(&o).trim() {
        "yes" => true,
        "no" => false,
        other => panic!("can-i {args:?}: {other} {}", stderr(&o)),
    }
}

#[test]
fn users_roles_and_service_accounts_through_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    for ns in ["infra", "tenant-a", "tenant-b"] {
        s.ok(&["create", "namespace", ns]);
    }
    s.ok(&[
        "create",
        "secret",
        "generic",
        "bmc-creds",
        "-n",
        "infra",
        "--from-literal=password=s3cr3t-bmc-password",
    ]);

    // A minted user: authenticated, but nothing granted yet.
    let alice = s.user_kubeconfig("alice", &["team-a"], "tenant-a");
    let who = ok_as(&s, &alice, &["auth", "whoami"]);
    assert!(who.contains("alice") && who.contains("team-a"), "{who}");
    let e = fails_as(&s, &alice, &["get", "secrets"]);
    assert!(
        e.contains(r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "tenant-a""#),
        "{e}"
    );

    // The tenant role in her namespace.
    s.ok(&[
        "create",
        "rolebinding",
        "alice-tenant",
        "-n",
        "tenant-a",
        "--clusterrole=ferrometal-tenant",
        "--user=alice",
    ]);
    ok_as(
        &s,
        &alice,
        &[
            "create",
            "secret",
            "generic",
            "web-ud",
            "--from-literal=k=v",
        ],
    );
    assert!(ok_as(&s, &alice, &["get", "secrets"]).contains("web-ud"));
    let e = fails_as(&s, &alice, &["get", "secret", "bmc-creds", "-n", "infra"]);
    assert!(
        e.contains(r#"secrets "bmc-creds" is forbidden: User "alice" cannot get resource "secrets" in API group "" in the namespace "infra""#),
        "{e}"
    );
    let e = fails_as(&s, &alice, &["get", "baremetalhosts", "-n", "tenant-a"]);
    assert!(
        e.contains(r#"cannot list resource "baremetalhosts" in API group "metal3.io""#),
        "{e}"
    );
    let e = fails_as(&s, &alice, &["get", "secrets", "-A"]);
    assert!(e.contains("at the cluster scope"), "{e}");
    let e = fails_as(&s, &alice, &["get", "secrets", "-n", "tenant-b"]);
    assert!(e.contains(r#"in the namespace "tenant-b""#), "{e}");

    // `auth can-i` agrees with what happened, and with the role's definition.
    let matrix: &[(&[&str], bool)] = &[
        (&["get", "hardwaredata.metal3.io"], true),
        (&["delete", "hardwaredata.metal3.io"], false),
        (&["create", "secrets"], true),
        (&["get", "secrets", "-n", "infra"], false),
        (&["list", "baremetalhosts.metal3.io"], false),
        (&["list", "baremetalhosts.metal3.io", "-n", "infra"], false),
        (&["create", "bmcjobs.ferrometal.io"], false),
        (&["create", "rolebindings"], false),
        (&["list", "secrets", "-A"], false),
        (&["get", "hardwaredata.metal3.io", "-n", "tenant-b"], false),
    ];
    for (args, want) in matrix {
        assert_eq!(can_i(&s, &alice, args), *want, "alice can-i {args:?}");
    }
    let list = ok_as(&s, &alice, &["auth", "can-i", "--list"]);
    assert!(list.contains("hostclaims.metal3.io"), "{list}");
    assert!(!list.contains("baremetalhosts"), "{list}");

    // SubjectAccessReview: the admin asks about alice.
    for (ns, want) in [("tenant-a", "true"), ("infra", "false")] {
        let sar = format!(
            "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: alice\n  groups: [team-a]\n  resourceAttributes: {{namespace: {ns}, verb: get, resource: secrets}}\n"
        );
        let o = s.kubectl_stdin(
            &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
            Some(&sar),
        );
        assert_eq!(stdout(&o).trim(), want, "SAR in {ns}: {}", stderr(&o));
    }

    // The admin's view through impersonation; alice may not impersonate.
    let o = s.kubectl(&[
        "auth", "can-i", "get", "secrets", "-n", "infra", "--as", "alice",
    ]);
    assert_eq!(stdout(&o).trim(), "no");
    let o = s.kubectl(&[
        "auth", "can-i", "get", "secrets", "-n", "tenant-a", "--as", "alice",
    ]);
    assert_eq!(stdout(&o).trim(), "yes");
    let e = s.fails(&["get", "secrets", "-n", "infra", "--as", "alice"]);
    assert!(
        e.contains(r#"User "alice" cannot list resource "secrets""#),
        "{e}"
    );
    let who = s.ok(&["auth", "whoami", "--as", "bob", "--as-group", "ops"]);
    assert!(who.contains("bob") && who.contains("ops"), "{who}");
    let e = fails_as(&s, &alice, &["get", "secrets", "--as", "bob"]);
    assert!(e.contains("cannot impersonate"), "{e}");

    // Escalation: an admin of tenant-b may grant what it holds, not more.
    let bob = s.user_kubeconfig("bob", &[], "tenant-b");
    s.ok(&[
        "create",
        "rolebinding",
        "bob-admin",
        "-n",
        "tenant-b",
        "--clusterrole=admin",
        "--user=bob",
    ]);
    ok_as(
        &s,
        &bob,
        &[
            "create",
            "role",
            "cm-reader",
            "--verb=get,list",
            "--resource=configmaps",
        ],
    );
    ok_as(
        &s,
        &bob,
        &[
            "create",
            "rolebinding",
            "carol-cm",
            "--role=cm-reader",
            "--user=carol",
        ],
    );
    let e = fails_as(
        &s,
        &bob,
        &[
            "create",
            "rolebinding",
            "bob-root",
            "--clusterrole=cluster-admin",
            "--user=bob",
        ],
    );
    assert!(
        e.contains("is attempting to grant RBAC permissions not currently held"),
        "{e}"
    );
    let e = fails_as(
        &s,
        &bob,
        &[
            "create",
            "role",
            "node-admin",
            "--verb=*",
            "--resource=baremetalhosts.metal3.io",
        ],
    );
    assert!(
        e.contains("is attempting to grant RBAC permissions not currently held"),
        "{e}"
    );
    let e = fails_as(
        &s,
        &bob,
        &[
            "create",
            "clusterrolebinding",
            "bob-global",
            "--clusterrole=view",
            "--user=bob",
        ],
    );
    assert!(
        e.contains("cannot create resource \"clusterrolebindings\""),
        "{e}"
    );

    // A ServiceAccount with `view` in tenant-a: a TokenRequest token works until the
    // ServiceAccount is deleted; `view` cannot read Secrets.
    s.ok(&["create", "serviceaccount", "robot", "-n", "tenant-a"]);
    s.ok(&[
        "create",
        "rolebinding",
        "robot-view",
        "-n",
        "tenant-a",
        "--clusterrole=view",
        "--serviceaccount=tenant-a:robot",
    ]);
    let token = s.ok(&[
        "create",
        "token",
        "robot",
        "-n",
        "tenant-a",
        "--duration=1h",
    ]);
    let robot = s.token_kubeconfig("robot", token.trim());
    let who = ok_as(&s, &robot, &["auth", "whoami"]);
    assert!(
        who.contains("system:serviceaccount:tenant-a:robot"),
        "{who}"
    );
    assert!(who.contains("system:serviceaccounts:tenant-a"), "{who}");
    ok_as(&s, &robot, &["get", "configmaps", "-n", "tenant-a"]);
    let e = fails_as(&s, &robot, &["get", "secrets", "-n", "tenant-a"]);
    assert!(
        e.contains(r#"User "system:serviceaccount:tenant-a:robot" cannot list resource "secrets""#),
        "{e}"
    );
    let e = fails_as(&s, &robot, &["get", "configmaps", "-n", "tenant-b"]);
    assert!(e.contains("Forbidden"), "{e}");
    // A token for another audience is not for this server.
    let other = s.ok(&[
        "create",
        "token",
        "robot",
        "-n",
        "tenant-a",
        "--audience=https://vault.example",
    ]);
    let other = s.token_kubeconfig("robot-other", other.trim());
    let e = fails_as(&s, &other, &["get", "configmaps", "-n", "tenant-a"]);
    assert!(e.contains("Unauthorized"), "{e}");
    s.ok(&["delete", "serviceaccount", "robot", "-n", "tenant-a"]);
    let e = fails_as(&s, &robot, &["get", "configmaps", "-n", "tenant-a"]);
    assert!(e.contains("Unauthorized"), "{e}");
    // A forged token (signed by nobody) is refused too.
    let forged = s.token_kubeconfig("forged", "eyJhbGciOiJIUzI1NiJ9.e30.c2ln");
    let e = fails_as(&s, &forged, &["get", "namespaces"]);
    assert!(e.contains("Unauthorized"), "{e}");

    // The default roles and the project's roles are installed.
    let roles = s.ok(&["get", "clusterroles", "-o", "name"]);
    for r in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "ferrometal-tenant",
        "ferrometal-bmc-operator",
        "ferrometal-fleet-admin",
    ] {
        assert!(
            roles.contains(&format!("clusterrole.rbac.authorization.k8s.io/{r}\n")),
            "{r}: {roles}"
        );
    }

    // The audit log names who did what, and never a Secret's data.
    let audit = std::fs::read_to_string(dir.path().join("audit/audit.log")).unwrap();
    let denied = audit.lines().any(|l| {
        l.contains(r#""user":"alice""#)
            && l.contains(r#""verb":"get""#)
            && l.contains(r#""name":"bmc-creds""#)
            && l.contains(r#""code":403"#)
    });
    assert!(denied, "no audit line for alice's denied get");
    assert!(audit.contains(r#""user":"ferrometal:admin""#));
    for secret in [
        "s3cr3t-bmc-password",
        "czNjcjN0LWJtYy1wYXNzd29yZA",
        token.trim(),
    ] {
        assert!(!audit.contains(secret), "the audit log holds a secret");
    }
}

/// `ferrometal-bmc-operator`: runs BMCJobs (with `ferrometal job run`) and Rufio Jobs, reads
/// hosts, and gets no Secret and no write to hosts.
#[test]
fn the_bmc_operator_role_runs_jobs_without_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    s.ok(&["create", "namespace", "infra"]);
    s.ok(&[
        "create",
        "secret",
        "generic",
        "bmc-creds",
        "-n",
        "infra",
        "--from-literal=password=s3cr3t-bmc-password",
    ]);
    s.ok(&[
        "create",
        "rolebinding",
        "ops-bmc",
        "-n",
        "infra",
        "--clusterrole=ferrometal-bmc-operator",
        "--user=ops",
    ]);
    let ops = s.user_kubeconfig("ops", &[], "infra");
    ok_as(&s, &ops, &["get", "bmh", "-n", "infra"]);
    assert!(can_i(
        &s,
        &ops,
        &["create", "bmcjobs.ferrometal.io", "-n", "infra"]
    ));
    assert!(can_i(
        &s,
        &ops,
        &["create", "jobs.bmc.tinkerbell.org", "-n", "infra"]
    ));
    assert!(!can_i(&s, &ops, &["get", "secrets", "-n", "infra"]));
    assert!(!can_i(
        &s,
        &ops,
        &["patch", "baremetalhosts", "-n", "infra"]
    ));
    assert!(!can_i(
        &s,
        &ops,
        &["create", "bmcjobs.ferrometal.io", "-n", "default"]
    ));
    let e = fails_as(&s, &ops, &["get", "secret", "bmc-creds", "-n", "infra"]);
    assert!(e.contains("forbidden"), "{e}");

    // The CLI as that user, for a host the admin created (the CLI refuses a missing host).
    let host = "apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {name: h0, namespace: infra}\nspec:\n  online: false\n  bmc: {address: \"redfish+http://127.0.0.1:1/redfish/v1/Systems/1\", credentialsName: bmc-creds}\n";
    let o = s.kubectl_stdin(&["apply", "-f", "-"], Some(host));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = std::process::Command::new(&s.bin)
        .args(["job", "run", "--kubeconfig"])
        .arg(&ops)
        .args([
            "-n",
            "infra",
            "--host",
            "h0",
            "--name",
            "by-ops",
            "power=cycle",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let job = ok_as(
        &s,
        &ops,
        &[
            "get",
            "bmcjob",
            "by-ops",
            "-n",
            "infra",
            "-o",
            "jsonpath={.spec.tasks[0].powerAction}",
        ],
    );
    assert_eq!(job, "cycle");
    // Elsewhere, refused with the 403 text.
    let o = std::process::Command::new(&s.bin)
        .args(["job", "run", "--kubeconfig"])
        .arg(&ops)
        .args(["-n", "default", "--host", "h0", "power=cycle"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("forbidden"), "{}", stderr(&o));
}

/// As kube-apiserver: a server-side apply that would create the object needs `create`, not
/// only the `patch` it is sent with; applying to an object that exists needs `patch` alone.
#[test]
fn a_server_side_apply_that_creates_needs_create() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), free_port(), &["--no-controllers"]);
    s.ok(&["create", "namespace", "apps"]);
    s.ok(&[
        "create",
        "role",
        "patcher",
        "-n",
        "apps",
        "--verb=get,patch",
        "--resource=configmaps",
    ]);
    s.ok(&[
        "create",
        "rolebinding",
        "patcher",
        "-n",
        "apps",
        "--role=patcher",
        "--user=pat",
    ]);
    let pat = s.user_kubeconfig("pat", &[], "apps");
    let manifest = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: apps}}\ndata: {{k: v2}}\n"
        )
    };
    let apply = |name: &str| {
        s.kubectl_with(
            &pat,
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            Some(&manifest(name)),
        )
    };
    let o = apply("fresh");
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(r#"User "pat" cannot create resource "configmaps" in API group "" in the namespace "apps""#),
        "{}",
        stderr(&o)
    );
    assert!(
        s.fails(&["get", "configmap", "fresh", "-n", "apps"])
            .contains("NotFound")
    );

    s.ok(&[
        "create",
        "configmap",
        "old",
        "-n",
        "apps",
        "--from-literal=k=v1",
    ]);
    let o = apply("old");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        s.ok(&[
            "get",
            "configmap",
            "old",
            "-n",
            "apps",
            "-o",
            "jsonpath={.data.k}"
        ]),
        "v2"
    );

    s.ok(&[
        "create",
        "role",
        "creator",
        "-n",
        "apps",
        "--verb=create",
        "--resource=configmaps",
    ]);
    s.ok(&[
        "create",
        "rolebinding",
        "creator",
        "-n",
        "apps",
        "--role=creator",
        "--user=pat",
    ]);
    let o = apply("fresh");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        s.ok(&[
            "get",
            "configmap",
            "fresh",
            "-n",
            "apps",
            "-o",
            "jsonpath={.data.k}"
        ]),
        "v2"
    );
    // Answered as kube-apiserver answers: 201 Created for the apply that created, 200 for the
    // one that changed an object; 403 for the refused one.
    let patch_codes = |name: &str| -> Vec<u64> {
        std::fs::read_to_string(dir.path().join("audit/audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["user"] == "pat" && l["verb"] == "patch" && l["name"] == name)
            .filter_map(|l| l["code"].as_u64())
            .collect()
    };
    s.wait("the applies audited", || {
        patch_codes("fresh") == [403, 201] && patch_codes("old") == [200]
    });
}
