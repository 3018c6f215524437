//! `HostClass` (ferrometal.io/v1alpha1, cluster-scoped): the kind of compute a HostClaim gets,
//! as a StorageClass is the kind of storage a PersistentVolumeClaim gets.
//!
//! A claim names its class in the [`HOST_CLASS`] annotation (metal3's HostClaim has no field
//! for it, and an annotation keeps metal3's schema and tools untouched). A claim that names
//! none gets the class marked [`DEFAULT_CLASS`], and when there is none, a BareMetalHost as
//! before. Classes are written by the infrastructure team and readable by tenants: nothing in
//! them is secret (the libvirt connection is a Secret the class only names).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// On a HostClaim: the name of the HostClass to serve it.
pub const HOST_CLASS: &str = "ferrometal.io/host-class";
/// On a HostClass: `"true"` makes it the class of claims that name none (as
/// `storageclass.kubernetes.io/is-default-class`).
pub const DEFAULT_CLASS: &str = "hostclass.ferrometal.io/is-default-class";
/// On a claim served by a libvirt class: the virtual CPUs, memory (MiB) and disk (GiB) it asks
/// for, within the class's limits (the class's sizes when absent).
pub const VM_CPUS: &str = "vm.ferrometal.io/cpus";
pub const VM_MEMORY_MIB: &str = "vm.ferrometal.io/memory-mib";
pub const VM_DISK_GIB: &str = "vm.ferrometal.io/disk-gib";
/// On a claim, written by the controller before it makes the claim's VM: the class that made
/// it. The claim stays with that class (its VM is removed through it) whatever the claim's
/// class annotation or the default class say later.
pub const VM_CLASS: &str = "hostclaim.ferrometal.io/vm-class";
/// The key of the libvirt connection Secret that holds the connection URI.
pub const LIBVIRT_URI_KEY: &str = "uri";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ferrometal.io",
    version = "v1alpha1",
    kind = "HostClass",
    plural = "hostclasses",
    shortname = "hcls",
    category = "ferrometal",
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".spec.provider"}"#,
    printcolumn = r#"{"name":"Default","type":"string","jsonPath":".metadata.annotations.hostclass\\.ferrometal\\.io/is-default-class"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HostClassSpec {
    /// What serves the claims of this class.
    pub provider: Provider,
    /// The parameters of the `libvirt` provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libvirt: Option<LibvirtClass>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// A BareMetalHost chosen by the claim's selector, as a claim without a class gets.
    #[default]
    Baremetal,
    /// A virtual machine of its own on a libvirt host.
    Libvirt,
}

/// How a libvirt class makes its virtual machines.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LibvirtClass {
    /// The Secret holding the libvirt connection URI (key `uri`, e.g. `qemu:///system`).
    /// Tenants never read it: it lives with the infrastructure.
    pub connection_secret_ref: ClassSecretRef,
    /// Virtual CPUs of a VM (default 1), and the most a claim may ask for (default: as many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub cpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub max_cpus: Option<u32>,
    /// Memory of a VM in MiB (default 1024), and the most a claim may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 128, max = 4194304))]
    pub memory_mib: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 128, max = 4194304))]
    pub max_memory_mib: Option<u32>,
    /// Size of a VM's disk in GiB (default 4; a larger image is refused), and the most a
    /// claim may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65536))]
    pub disk_gib: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65536))]
    pub max_disk_gib: Option<u32>,
    /// The libvirt network the VM's NIC joins; empty: QEMU's user-mode network.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub network: String,
    /// `UEFI` or `legacy` (default).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 16))]
    pub boot_mode: String,
    /// The storage pool for the VMs' volumes (default `default`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub pool: String,
    /// The libvirt domain type: `kvm` (default) or `qemu` (software emulation).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 16))]
    pub domain_type: String,
    /// Prefix of the domains' and volumes' names (default `ferrometal-`); the rest is the
    /// claim's uid, so one claim never gets two VMs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 64))]
    pub name_prefix: String,
    /// A directory on the libvirt host where each VM's serial console is logged
    /// (`<domain>.console.log`, default `/var/log/libvirt/qemu`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub console_log_dir: String,
    /// The namespaces whose claims this class serves; empty: every namespace. A claim from
    /// another namespace is told so, and gets nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 63)))]
    pub namespaces: Vec<String>,
    /// URL prefixes a claim's image (and a checksum file it names) must begin with, e.g.
    /// `https://images.example.com/`; empty: any http(s) URL. The controller downloads the
    /// images from its own network: this keeps tenants to the image servers meant for them.
    /// Redirects are then followed only to URLs the prefixes allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 2048)))]
    pub image_url_prefixes: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClassSecretRef {
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// What a libvirt class gives one claim, after the claim's requests are checked against the
/// class's limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmSize {
    pub cpus: u32,
    pub memory_mib: u32,
    pub disk_gib: u32,
}

impl LibvirtClass {
    pub fn pool(&self) -> &str {
        if self.pool.is_empty() {
            "default"
        } else {
            &self.pool
        }
    }

    pub fn name_prefix(&self) -> &str {
        if self.name_prefix.is_empty() {
            "ferrometal-"
        } else {
            &self.name_prefix
        }
    }

    pub fn domain_type(&self) -> &str {
        if self.domain_type.is_empty() {
            "kvm"
        } else {
            &self.domain_type
        }
    }

    pub fn uefi(&self) -> bool {
        self.boot_mode.eq_ignore_ascii_case("uefi")
    }

    /// Whether the class serves claims of `namespace`.
    pub fn serves_namespace(&self, namespace: &str) -> bool {
        self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace)
    }

    pub fn console_log_dir(&self) -> &str {
        if self.console_log_dir.is_empty() {
            "/var/log/libvirt/qemu"
        } else {
            &self.console_log_dir
        }
    }

    /// The size a claim gets: its annotations' requests within the class's limits. The error
    /// names the annotation and its value.
    pub fn size_for(
        &self,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<VmSize, String> {
        let pick =
            |key: &str, base: u32, max: Option<u32>| -> Result<u32, String> {
                let Some(v) = annotations.get(key) else {
                    return Ok(base);
                };
                let n: u32 =
                    v.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("annotation {key}: {v:?} is not a positive number")
                    })?;
                let limit = max.unwrap_or(base).max(base);
                if n > limit {
                    return Err(format!(
                        "annotation {key}: {n} is more than the class allows ({limit})"
                    ));
                }
                Ok(n)
            };
        Ok(VmSize {
            cpus: pick(VM_CPUS, self.cpus.unwrap_or(1), self.max_cpus)?,
            memory_mib: pick(
                VM_MEMORY_MIB,
                self.memory_mib.unwrap_or(1024),
                self.max_memory_mib,
            )?,
            disk_gib: pick(VM_DISK_GIB, self.disk_gib.unwrap_or(4), self.max_disk_gib)?,
        })
    }
}

/// Whether `url` begins with one of `prefixes` (none: every http(s) URL). A prefix that does
/// not end in `/` must be followed by `/`, `?` or nothing, so `https://images.example.com`
/// does not admit `https://images.example.com.elsewhere.org/` or `…com@elsewhere/`.
pub fn url_allowed(prefixes: &[String], url: &str) -> bool {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return false;
    }
    prefixes.is_empty()
        || prefixes.iter().any(|p| {
            url.strip_prefix(p.as_str()).is_some_and(|rest| {
                p.ends_with('/') || rest.is_empty() || rest.starts_with(['/', '?'])
            })
        })
}

/// The class a claim names (its [`HOST_CLASS`] annotation), or else the default class among
/// `classes`. `Ok(None)`: no class at all (a BareMetalHost serves the claim, as before).
pub fn class_for<'a>(
    claim_annotations: Option<&std::collections::BTreeMap<String, String>>,
    classes: &'a [HostClass],
) -> Result<Option<&'a HostClass>, String> {
    use kube::ResourceExt;
    if let Some(name) = claim_annotations.and_then(|a| a.get(HOST_CLASS)) {
        return classes
            .iter()
            .find(|c| c.name_any() == *name)
            .map(Some)
            .ok_or_else(|| format!("annotation {HOST_CLASS}: no HostClass named {name:?}"));
    }
    let defaults: Vec<&HostClass> = classes
        .iter()
        .filter(|c| c.annotations().get(DEFAULT_CLASS).map(String::as_str) == Some("true"))
        .collect();
    match defaults.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        // As Kubernetes with several default StorageClasses: the newest wins.
        many => Ok(many
            .iter()
            .max_by(|a, b| {
                (a.metadata.creation_timestamp.as_ref(), a.name_any())
                    .cmp(&(b.metadata.creation_timestamp.as_ref(), b.name_any()))
            })
            .copied()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn class(name: &str, default: bool) -> HostClass {
        let mut c = HostClass::new(
            name,
            HostClassSpec {
                provider: Provider::Libvirt,
                libvirt: Some(LibvirtClass::default()),
            },
        );
        if default {
            c.metadata.annotations = Some([(DEFAULT_CLASS.to_string(), "true".into())].into());
        }
        c
    }

    #[test]
    fn image_urls_are_held_to_the_class_prefixes() {
        let none: Vec<String> = vec![];
        assert!(url_allowed(&none, "http://10.0.0.1/x.raw"));
        assert!(!url_allowed(&none, "file:///etc/shadow"));
        assert!(!url_allowed(&none, "ftp://host/x"));
        let p = vec![
            "https://images.example.com".to_string(),
            "http://10.1.0.5:8080/pub/".to_string(),
        ];
        for ok in [
            "https://images.example.com/os.qcow2",
            "https://images.example.com",
            "https://images.example.com?x=1",
            "http://10.1.0.5:8080/pub/a.raw",
        ] {
            assert!(url_allowed(&p, ok), "{ok}");
        }
        for refused in [
            "https://images.example.com.elsewhere.org/os.qcow2",
            "https://images.example.com@elsewhere.org/os.qcow2",
            "https://images.example.com:444/os.qcow2",
            "http://images.example.com/os.qcow2",
            "http://10.1.0.5:8080/private/a.raw",
            "http://169.254.169.254/latest/meta-data",
        ] {
            assert!(!url_allowed(&p, refused), "{refused}");
        }
    }

    #[test]
    fn a_class_serves_its_namespaces() {
        let mut lv = LibvirtClass::default();
        assert!(lv.serves_namespace("anyone"));
        lv.namespaces = vec!["team-a".into()];
        assert!(lv.serves_namespace("team-a"));
        assert!(!lv.serves_namespace("team-b"));
    }

    #[test]
    fn a_claim_gets_its_named_class_the_default_or_none() {
        let classes = [class("vm", false), class("fast", true)];
        let named: BTreeMap<_, _> = [(HOST_CLASS.to_string(), "vm".to_string())].into();
        assert_eq!(
            class_for(Some(&named), &classes)
                .unwrap()
                .unwrap()
                .metadata
                .name
                .as_deref(),
            Some("vm")
        );
        assert_eq!(
            class_for(None, &classes)
                .unwrap()
                .unwrap()
                .metadata
                .name
                .as_deref(),
            Some("fast")
        );
        assert!(class_for(None, &classes[..1]).unwrap().is_none());
        let missing: BTreeMap<_, _> = [(HOST_CLASS.to_string(), "gone".to_string())].into();
        let err = class_for(Some(&missing), &classes).unwrap_err();
        assert!(
            err.contains(HOST_CLASS) && err.contains("\"gone\""),
            "{err}"
        );
    }

    #[test]
    fn a_claim_asks_for_more_only_within_the_class_limits() {
        let lv = LibvirtClass {
            cpus: Some(1),
            max_cpus: Some(4),
            memory_mib: Some(512),
            ..Default::default()
        };
        let none = BTreeMap::new();
        assert_eq!(
            lv.size_for(&none).unwrap(),
            VmSize {
                cpus: 1,
                memory_mib: 512,
                disk_gib: 4
            }
        );
        let more: BTreeMap<_, _> = [(VM_CPUS.to_string(), "4".to_string())].into();
        assert_eq!(lv.size_for(&more).unwrap().cpus, 4);
        let too_much: BTreeMap<_, _> = [(VM_CPUS.to_string(), "5".to_string())].into();
        let err = lv.size_for(&too_much).unwrap_err();
        assert!(err.contains(VM_CPUS) && err.contains('5'), "{err}");
        // No max: the class's size is the limit.
        let ram: BTreeMap<_, _> = [(VM_MEMORY_MIB.to_string(), "1024".to_string())].into();
        assert!(lv.size_for(&ram).is_err());
        let junk: BTreeMap<_, _> = [(VM_DISK_GIB.to_string(), "lots".to_string())].into();
        assert!(lv.size_for(&junk).unwrap_err().contains("\"lots\""));
    }

    #[test]
    fn class_yaml_reads() {
        let c: HostClass = serde_yaml::from_str(
            r#"
apiVersion: ferrometal.io/v1alpha1
kind: HostClass
metadata: {name: vms}
spec:
  provider: libvirt
  libvirt:
    connectionSecretRef: {namespace: infra, name: libvirt}
    cpus: 2
    maxCpus: 4
    memoryMib: 2048
    bootMode: UEFI
"#,
        )
        .unwrap();
        let lv = c.spec.libvirt.unwrap();
        assert_eq!(c.spec.provider, Provider::Libvirt);
        assert!(lv.uefi());
        assert_eq!(lv.pool(), "default");
        assert_eq!(lv.connection_secret_ref.name, "libvirt");
    }
}
