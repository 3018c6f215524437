//! The CRD schema's validation alone, in process: microseconds per
//! validation of the writes the controllers make most (a provisioned host's
//! status, a BMCJob's status) and of a user's spec edit and create. Every
//! host write pays this in the API server; here it is measured without the
//! rest of the write path. Each case runs twice: on a thread with a 2 MiB
//! stack (a default thread: a stack is mapped and unmapped per validation)
//! and on one with room for the validation (as `ferrometal serve`'s
//! threads have).

use std::time::Instant;

use ferrometal_crdschema::Schema;
use serde_json::{Value, json};

use crate::common::{finish, say};
use crate::stats::Row;

pub struct Opts {
    pub iterations: usize,
}

fn schema_of(kind: &str) -> anyhow::Result<Schema> {
    let crd = ferrometal_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .ok_or_else(|| anyhow::anyhow!("no CRD for {kind}"))?;
    let version = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .ok_or_else(|| anyhow::anyhow!("{kind} has no schema"))?;
    Schema::compile(&serde_json::to_value(version)?)
        .map_err(|e| anyhow::anyhow!("{kind} schema: {e:?}"))
}

/// A provisioned host as the controllers leave it: hardware inspected,
/// image written, conditions and history filled in.
fn provisioned_host() -> Value {
    let nic = |i: usize| {
        json!({"name": format!("eno{i}"), "mac": format!("52:54:00:00:01:{i:02x}"),
               "ip": format!("192.0.2.{}", 10 + i), "model": "0x8086 0x1572",
               "speedGbps": 25, "vlanId": 0, "pxe": i == 0})
    };
    let disk = |i: usize| {
        json!({"name": format!("/dev/sd{}", (b'a' + i as u8) as char),
               "alternateNames": [format!("/dev/disk/by-path/pci-0000:00:1f.2-ata-{i}")],
               "rotational": false, "sizeBytes": 960_197_124_096_u64, "vendor": "ATA",
               "model": "SAMSUNG MZ7LH960", "serialNumber": format!("S4F1NE0M{i:05}"),
               "wwn": format!("0x5002538e0000{i:04x}"), "hctl": format!("{i}:0:0:0"),
               "type": "SSD"})
    };
    let condition = |t: &str| {
        json!({"type": t, "status": "True", "reason": "Provisioned", "message": "",
               "lastTransitionTime": "2026-12-03T05:00:00Z", "observedGeneration": 2})
    };
    let conditions = ["Registered", "Inspected", "Provisioned", "PowerOn"].map(condition);
    let stamp = json!({"start": "2026-12-03T05:00:00Z", "end": "2026-12-03T05:00:04Z"});
    let image = json!({"url": "http://192.0.2.1/images/node.qcow2",
                       "checksum": "http://192.0.2.1/images/node.qcow2.sha256sum",
                       "checksumType": "sha256", "format": "qcow2"});
    json!({
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BareMetalHost",
        "metadata": {"name": "host-00042", "namespace": "metal", "generation": 2,
                     "labels": {"rack": "r12"}, "finalizers": ["baremetalhost.metal3.io"]},
        "spec": {
            "online": true,
            "bootMACAddress": "52:54:00:00:01:00",
            "bmc": {"address": "redfish://192.0.2.200:8000/redfish/v1/Systems/host-00042",
                    "credentialsName": "bmc-secret"},
            "image": image,
            "rootDeviceHints": {"deviceName": "/dev/sda"},
        },
        "status": {
            "operationalStatus": "OK",
            "errorMessage": "",
            "errorCount": 0,
            "lastUpdated": "2026-12-03T05:00:04Z",
            "hardwareProfile": "unknown",
            "hardware": {
                "systemVendor": {"manufacturer": "Emulated", "productName": "Server",
                                 "serialNumber": "SN00042"},
                "firmware": {"bios": {"date": "2026-01-01", "vendor": "EFI", "version": "1.0"}},
                "ramMebibytes": 262_144,
                "nics": (0..4).map(nic).collect::<Vec<_>>(),
                "storage": (0..4).map(disk).collect::<Vec<_>>(),
                "cpu": {"arch": "x86_64", "model": "AMD EPYC", "clockMegahertz": 2450.0,
                        "flags": ["avx2", "sse4_2", "svm", "aes"], "count": 64},
                "hostname": "host-00042",
            },
            "provisioning": {"state": "provisioned", "ID": "5f1c7d1e-0000-4000-8000-000000000042",
                             "image": image, "rootDeviceHints": {"deviceName": "/dev/sda"},
                             "bootMode": "UEFI"},
            "lastAttemptedImage": image,
            "goodCredentials": {"credentials": {"name": "bmc-secret", "namespace": "metal"},
                                "credentialsVersion": "7"},
            "triedCredentials": {"credentials": {"name": "bmc-secret", "namespace": "metal"},
                                 "credentialsVersion": "7"},
            "poweredOn": true,
            "operationHistory": {"register": stamp, "inspect": stamp,
                                 "provision": stamp, "deprovision": {}},
            "conditions": conditions,
        },
    })
}

fn bmc_job() -> Value {
    json!({
        "apiVersion": "metal3.io/v1alpha1",
        "kind": "BMCJob",
        "metadata": {"name": "job-00042", "namespace": "metal", "generation": 1},
        "spec": {"hostRef": {"name": "host-00042"},
                 "tasks": [{"powerAction": "off"},
                           {"oneTimeBootDeviceAction": {"device": ["pxe"], "efiBoot": true}},
                           {"powerAction": "on"}]},
        "status": {"phase": "Running", "progress": "1/3",
                   "startTime": "2026-12-03T05:00:00Z",
                   "tasks": [{"state": "Succeeded", "issued": true,
                              "startTime": "2026-12-03T05:00:00Z",
                              "completionTime": "2026-12-03T05:00:02Z"},
                             {"state": "Running", "issued": true,
                              "startTime": "2026-12-03T05:00:02Z"},
                             {"state": "Pending"}]},
    })
}

/// Microseconds per validation of `new` against `old`, and the errors it
/// gave (which must be none: the objects are valid).
fn time(schema: &Schema, new: &Value, old: Option<&Value>, n: usize) -> anyhow::Result<f64> {
    let errs = schema.validate(new, old);
    anyhow::ensure!(errs.is_empty(), "the bench's object is invalid: {errs:?}");
    let started = Instant::now();
    for _ in 0..n {
        std::hint::black_box(schema.validate(std::hint::black_box(new), old));
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / n as f64)
}

pub fn run(o: Opts) -> anyhow::Result<()> {
    let n = o.iterations.max(1);
    let hosts = schema_of("BareMetalHost")?;
    let jobs = schema_of("BMCJob")?;
    // As the server stores them: defaults applied.
    let mut host = provisioned_host();
    hosts.default(&mut host);
    let mut polled = host.clone();
    polled["status"]["poweredOn"] = json!(false);
    polled["status"]["lastUpdated"] = json!("2026-12-03T05:00:34Z");
    let mut edited = host.clone();
    edited["spec"]["online"] = json!(false);
    edited["metadata"]["generation"] = json!(3);
    let mut job = bmc_job();
    jobs.default(&mut job);
    let mut stepped = job.clone();
    stepped["status"]["progress"] = json!("2/3");
    stepped["status"]["tasks"][1]["state"] = json!("Succeeded");
    stepped["status"]["tasks"][1]["completionTime"] = json!("2026-12-03T05:00:03Z");

    say(&format!("{n} validations per case"));
    let cases: [(&str, &Schema, &Value, Option<&Value>); 4] = [
        (
            "host status write (power poll)",
            &hosts,
            &polled,
            Some(&host),
        ),
        ("host spec edit (online)", &hosts, &edited, Some(&host)),
        ("host create", &hosts, &host, None),
        (
            "BMCJob status write (next task)",
            &jobs,
            &stepped,
            Some(&job),
        ),
    ];
    let mut rows = Vec::new();
    let mut results = serde_json::Map::new();
    let threads = [
        ("2 MiB thread", 2 << 20),
        ("serve's thread", ferrometal_apiserver::THREAD_STACK_BYTES),
    ];
    for (thread, stack) in threads {
        for (name, schema, new, old) in cases {
            let us = std::thread::scope(|scope| {
                std::thread::Builder::new()
                    .stack_size(stack)
                    .spawn_scoped(scope, || time(schema, new, old, n))
                    .map_err(anyhow::Error::from)?
                    .join()
                    .map_err(|_| anyhow::anyhow!("the timing thread panicked"))?
            })?;
            rows.push(Row::new(
                format!("{name}, {thread}"),
                format!("{us:.1} µs"),
                "per validation",
            ));
            results.insert(format!("{name}, {thread}"), json!(us));
        }
    }
    results.insert("iterations".into(), json!(n));
    finish("cel", n, &rows, Value::Object(results))
}
