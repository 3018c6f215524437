//! The domain and volume XML libvirt is given. Every value from a user is escaped.

/// One claim's VM as libvirt is to define it.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainSpec {
    pub name: String,
    /// `kvm`, or `qemu` for software emulation.
    pub domain_type: String,
    pub cpus: u32,
    pub memory_mib: u32,
    pub uefi: bool,
    pub pool: String,
    pub disk_volume: String,
    /// The disk volume's format: `raw` or `qcow2` (the image's own).
    pub disk_format: String,
    /// The config drive's volume (label `config-2`), attached read-only.
    pub config_volume: Option<String>,
    /// A libvirt network; empty: QEMU's user-mode network.
    pub network: String,
    /// Where the serial console is logged on the libvirt host.
    pub console_log: String,
    /// Recorded in the domain's metadata: whose VM this is.
    pub claim: String,
}

/// XML text and attribute values escaped.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&apos;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The metadata namespace the claim is recorded under.
pub const METADATA_NS: &str = "urn:ferrometal:hostclaim";

/// The disk has an empty `<backingStore/>`: whatever its image's header says, QEMU opens no
/// other file behind it.
pub fn domain_xml(s: &DomainSpec) -> String {
    // q35 with ACPI, as the lab's VMs: without ACPI libvirt cannot shut a guest down.
    // UEFI as libvirt's firmware auto-selection finds it, without Secure Boot: it would pick
    // a build with Microsoft's keys enrolled, which refuses the unsigned loaders of ordinary
    // images ("Security Violation"), as metal3's UEFI (not UEFISecureBoot) mode does not.
    let os = if s.uefi {
        "<os firmware='efi'><type arch='x86_64' machine='q35'>hvm</type>\
         <firmware><feature enabled='no' name='secure-boot'/>\
         <feature enabled='no' name='enrolled-keys'/></firmware><boot dev='hd'/></os>"
    } else {
        "<os><type arch='x86_64' machine='q35'>hvm</type><boot dev='hd'/></os>"
    };
    let nic = if s.network.is_empty() {
        "<interface type='user'><model type='virtio'/></interface>".to_string()
    } else {
        format!(
            "<interface type='network'><source network='{}'/><model type='virtio'/></interface>",
            esc(&s.network)
        )
    };
    let config = s.config_volume.as_ref().map_or(String::new(), |v| {
        format!(
            "<disk type='volume' device='disk'><driver name='qemu' type='raw'/>\
             <source pool='{}' volume='{}'/><target dev='vdb' bus='virtio'/><readonly/></disk>",
            esc(&s.pool),
            esc(v)
        )
    });
    format!(
        "<domain type='{dtype}'>\
<name>{name}</name>\
<metadata><fm:claim xmlns:fm='{ns}' name='{claim}'/></metadata>\
<memory unit='MiB'>{mem}</memory><vcpu>{cpus}</vcpu>{os}\
<features><acpi/><apic/></features><clock offset='utc'/>\
<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>destroy</on_crash>\
<devices>\
<disk type='volume' device='disk'><driver name='qemu' type='{fmt}'/>\
<source pool='{pool}' volume='{disk}'/><backingStore/><target dev='vda' bus='virtio'/></disk>\
{config}{nic}\
<serial type='file'><source path='{log}' append='on'/><target port='0'/></serial>\
<console type='file'><source path='{log}' append='on'/><target type='serial' port='0'/></console>\
<video><model type='none'/></video><memballoon model='none'/>\
</devices></domain>",
        dtype = esc(&s.domain_type),
        name = esc(&s.name),
        ns = METADATA_NS,
        claim = esc(&s.claim),
        mem = s.memory_mib,
        cpus = s.cpus,
        fmt = esc(&s.disk_format),
        pool = esc(&s.pool),
        disk = esc(&s.disk_volume),
        log = esc(&s.console_log),
    )
}

/// A volume of `format` whose capacity is set by what is uploaded (libvirt takes a qcow2's
/// virtual size from its header after the upload).
pub(crate) fn volume_xml(name: &str, format: &str, bytes: u64) -> String {
    format!(
        "<volume><name>{}</name><capacity unit='bytes'>{bytes}</capacity>\
<target><format type='{}'/></target></volume>",
        esc(name),
        esc(format)
    )
}

/// The `<mac address='…'/>` values of a domain's XML, in order.
pub(crate) fn mac_addresses(xml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find("<mac address=") {
        rest = &rest[i + "<mac address=".len()..];
        let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
            continue;
        };
        let value = &rest[1..];
        if let Some(end) = value.find(quote) {
            out.push(value[..end].to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DomainSpec {
        DomainSpec {
            name: "fm-1".into(),
            domain_type: "qemu".into(),
            cpus: 2,
            memory_mib: 1024,
            uefi: false,
            pool: "default".into(),
            disk_volume: "fm-1-disk".into(),
            disk_format: "raw".into(),
            config_volume: Some("fm-1-config".into()),
            network: String::new(),
            console_log: "/var/log/x.log".into(),
            claim: "tenant/web's <0>".into(),
        }
    }

    #[test]
    fn macs_are_read_from_the_definition() {
        let xml = "<interface type='user'><mac address='52:54:00:aa:bb:cc'/></interface>\
                   <interface><mac address=\"52:54:00:00:00:01\"/></interface>";
        assert_eq!(
            mac_addresses(xml),
            ["52:54:00:aa:bb:cc", "52:54:00:00:00:01"]
        );
        assert!(mac_addresses("<domain/>").is_empty());
    }

    #[test]
    fn the_domain_has_its_disks_nic_console_and_escaped_values() {
        let x = domain_xml(&spec());
        assert!(x.starts_with("<domain type='qemu'>"));
        assert!(x.contains(
            "<driver name='qemu' type='raw'/><source pool='default' volume='fm-1-disk'/><backingStore/>"
        ));
        assert!(x.contains("volume='fm-1-config'/><target dev='vdb' bus='virtio'/><readonly/>"));
        assert!(x.contains("<interface type='user'>"));
        assert!(x.contains("<vcpu>2</vcpu>") && x.contains("<memory unit='MiB'>1024</memory>"));
        assert!(x.contains("name='tenant/web&apos;s &lt;0&gt;'"), "{x}");
        assert!(!x.contains("firmware='efi'"));
        let uefi = domain_xml(&DomainSpec {
            uefi: true,
            network: "prov".into(),
            config_volume: None,
            ..spec()
        });
        assert!(uefi.contains("<os firmware='efi'>"));
        assert!(uefi.contains("<feature enabled='no' name='secure-boot'/>"));
        assert!(uefi.contains("<source network='prov'/>"));
        assert!(!uefi.contains("vdb"));
    }
}
