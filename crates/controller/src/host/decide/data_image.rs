//! DataImages, as metal3 attaches them: a provisioned host's DataImage (an ISO) is attached as
//! virtual media, or detached once the DataImage is being deleted, while the host is off on
//! its way back on, so the boot that follows sees it. A refusal or failure is recorded in the
//! DataImage's status and does not hold the host off.

use ferrometal_api::ProvisioningState;

use super::engine::{Engine, Flow, NOW};
use super::protocol::{Call, DataImageResult, Outcome};

impl Engine<'_, '_> {
    pub(super) fn data_image(&mut self, want_on: bool) -> Flow {
        use ProvisioningState as S;
        if !matches!(self.state(), S::Provisioned | S::ExternallyProvisioned)
            || self.st.powered_on
            || !want_on
        {
            return Ok(());
        }
        let Some(work) = self.input.data_image else {
            return Ok(());
        };
        let wanted = (!work.deleting).then(|| work.url.clone());
        if wanted == work.attached
            || self
                .memo
                .as_ref()
                .is_some_and(|m| m.data_image_failed.as_ref() == Some(&wanted))
        {
            return Ok(());
        }
        if wanted.is_some()
            && self
                .st
                .provisioning
                .image
                .as_ref()
                .is_some_and(|i| i.is_live_iso())
        {
            // The host's own live ISO is in the one virtual CD.
            let message = "the host boots a live ISO from its virtual CD: no room for a DataImage";
            if work.error.as_deref() != Some(message) {
                self.d.data_image = Some(DataImageResult::Failed(message.into()));
                self.warning("DataImageFailed", message);
            }
            self.memo_mut().data_image_failed = Some(wanted);
            return Ok(());
        }
        match self.call(Call::DataImage(wanted.clone()))? {
            Outcome::Done => {
                let result = match &wanted {
                    Some(url) => {
                        self.event(
                            "DataImageAttached",
                            format!("{url} attached as virtual media"),
                        );
                        DataImageResult::Attached(url.clone())
                    }
                    None => {
                        self.event("DataImageDetached", "the DataImage was detached");
                        DataImageResult::Detached
                    }
                };
                self.d.data_image = Some(result);
                self.requeue(NOW)
            }
            Outcome::Waiting { requeue_after, .. } => self.waiting(requeue_after),
            Outcome::Failed(e) => {
                self.warning("DataImageFailed", e.message.clone());
                self.d.data_image = Some(DataImageResult::Failed(e.message));
                self.memo_mut().data_image_failed = Some(wanted);
                self.requeue(NOW)
            }
            _ => self.unexpected(),
        }
    }
}
