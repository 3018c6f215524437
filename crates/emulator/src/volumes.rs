//! Hardware RAID: the volumes of a system's storage controller (`Storage/1/Volumes`), created
//! with a POST naming the RAID type, optionally the drives and the capacity, and deleted with a
//! DELETE, as Redfish storage controllers (and Ironic's redfish RAID interface) have them.

use serde_json::{Value, json};

use crate::inventory::{odata, profile};

/// RAID types the controller builds, with the fewest drives each needs.
const RAID_TYPES: [(&str, usize); 7] = [
    ("RAID0", 1),
    ("RAID1", 2),
    ("RAID5", 3),
    ("RAID6", 4),
    ("RAID10", 4),
    ("RAID50", 6),
    ("RAID60", 8),
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    pub id: u64,
    pub name: String,
    pub raid_type: String,
    pub capacity_bytes: u64,
    /// Drive indexes (`DiskN`).
    pub drives: Vec<usize>,
}

#[derive(Default)]
pub struct Volumes {
    next: u64,
    pub list: Vec<Volume>,
}

fn base(index: usize) -> String {
    format!("/redfish/v1/Systems/sys-{index}/Storage/1/Volumes")
}

/// Usable bytes of `raid_type` over drives of `smallest` bytes each.
fn usable(raid_type: &str, drives: usize, smallest: u64) -> u64 {
    let n = drives as u64;
    let data = match raid_type {
        "RAID0" => n,
        "RAID1" => 1,
        "RAID5" => n - 1,
        "RAID6" => n - 2,
        "RAID10" => n / 2,
        "RAID50" => n - 2,
        "RAID60" => n - 4,
        _ => 0,
    };
    data * smallest
}

impl Volumes {
    /// Creates a volume from a POST body; the error is a Redfish message id and text.
    pub fn create(
        &mut self,
        index: usize,
        body: &Value,
    ) -> Result<&Volume, (&'static str, String)> {
        let raid_type = body["RAIDType"].as_str().ok_or((
            "Base.1.8.PropertyMissing",
            "The property RAIDType is a required property.".to_string(),
        ))?;
        let Some((_, min)) = RAID_TYPES.iter().find(|(t, _)| *t == raid_type) else {
            return Err((
                "Base.1.8.PropertyValueNotInList",
                format!("The value {raid_type} for the property RAIDType is not supported."),
            ));
        };
        let disks = profile(index).drives;
        let busy: Vec<usize> = self.list.iter().flat_map(|v| v.drives.clone()).collect();
        let drives: Vec<usize> = match body["Links"]["Drives"].as_array() {
            Some(links) => {
                let mut out = Vec::new();
                for l in links {
                    let path = l["@odata.id"].as_str().unwrap_or_default();
                    let n = path
                        .rsplit('/')
                        .next()
                        .and_then(|d| d.strip_prefix("Disk"))
                        .and_then(|d| d.parse::<usize>().ok())
                        .filter(|d| *d < disks.len());
                    match n {
                        Some(n) => out.push(n),
                        None => {
                            return Err((
                                "Base.1.8.ResourceMissingAtURI",
                                format!("The drive {path} is not a drive of this controller."),
                            ));
                        }
                    }
                }
                out
            }
            // Without drives named, the fewest free drives the type needs.
            None => (0..disks.len())
                .filter(|d| !busy.contains(d))
                .take(*min)
                .collect(),
        };
        if let Some(d) = drives.iter().find(|d| busy.contains(d)) {
            return Err((
                "Base.1.8.ResourceInUse",
                format!("The drive Disk{d} already belongs to a volume."),
            ));
        }
        if drives.len() < *min {
            return Err((
                "Base.1.8.ActionParameterValueError",
                format!(
                    "{raid_type} needs at least {min} drives; {} free drives were given or found.",
                    drives.len()
                ),
            ));
        }
        let smallest = drives.iter().map(|d| disks[*d].bytes).min().unwrap_or(0);
        let max = usable(raid_type, drives.len(), smallest);
        let capacity = match body["CapacityBytes"].as_u64() {
            Some(c) if c > max => {
                return Err((
                    "Base.1.8.PropertyValueOutOfRange",
                    format!("CapacityBytes {c} is more than the {max} bytes {raid_type} offers."),
                ));
            }
            Some(c) => c,
            None => max,
        };
        self.next += 1;
        let name = body["Name"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| format!("Volume {}", self.next));
        self.list.push(Volume {
            id: self.next,
            name,
            raid_type: raid_type.to_string(),
            capacity_bytes: capacity,
            drives,
        });
        Ok(self.list.last().expect("just pushed"))
    }

    pub fn delete(&mut self, id: u64) -> Option<Volume> {
        let at = self.list.iter().position(|v| v.id == id)?;
        Some(self.list.remove(at))
    }

    pub fn get(&self, id: u64) -> Option<&Volume> {
        self.list.iter().find(|v| v.id == id)
    }
}

pub fn path(index: usize, id: u64) -> String {
    format!("{}/{id}", base(index))
}

pub fn volume_doc(index: usize, v: &Volume) -> Value {
    let drives: Vec<Value> = v
        .drives
        .iter()
        .map(|d| {
            odata(&format!(
                "/redfish/v1/Systems/sys-{index}/Storage/1/Drives/Disk{d}"
            ))
        })
        .collect();
    json!({
        "@odata.type": "#Volume.v1_9_0.Volume",
        "@odata.id": path(index, v.id),
        "Id": v.id.to_string(),
        "Name": v.name,
        "RAIDType": v.raid_type,
        "CapacityBytes": v.capacity_bytes,
        "Status": { "State": "Enabled", "Health": "OK" },
        "Links": { "Drives": drives },
    })
}

pub fn collection_doc(index: usize, volumes: &Volumes) -> Value {
    let members: Vec<Value> = volumes
        .list
        .iter()
        .map(|v| odata(&path(index, v.id)))
        .collect();
    json!({
        "@odata.type": "#VolumeCollection.VolumeCollection",
        "@odata.id": base(index),
        "Name": "Volumes",
        "Members@odata.count": members.len(),
        "Members": members,
        "@Redfish.SupportedRAIDTypes": RAID_TYPES.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_are_built_on_free_drives_and_checked() {
        let mut v = Volumes::default();
        // sys-0 has two drives: a mirror takes both.
        let mirror = v
            .create(0, &json!({"Name": "os", "RAIDType": "RAID1"}))
            .unwrap()
            .clone();
        assert_eq!(mirror.drives, [0, 1]);
        assert_eq!(mirror.capacity_bytes, profile(0).drives[0].bytes);
        let err = v.create(0, &json!({"RAIDType": "RAID0"})).unwrap_err();
        assert!(err.1.contains("needs at least 1 drives"), "{err:?}");
        assert!(v.create(0, &json!({"RAIDType": "RAID7"})).is_err());
        assert!(v.delete(mirror.id).is_some());
        let err = v
            .create(0, &json!({"RAIDType": "RAID0", "CapacityBytes": u64::MAX}))
            .unwrap_err();
        assert!(err.1.contains("CapacityBytes"), "{err:?}");
    }
}
