//! Create: a new object through admission into the store.

use std::sync::Arc;

use serde_json::Value;

use super::{Reply, WriteOpts};
use crate::meta;
use crate::registry::Resource;
use crate::state::Core;
use crate::status::ApiError;
use crate::store::Op;

impl Core {
    pub async fn create(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        obj: Value,
        opts: &WriteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let obj = self.prepare_create(res, ns, obj, opts, false)?;
        self.commit_create(res, ns, obj, opts).await
    }

    pub(super) async fn commit_create(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        obj: Value,
        opts: &WriteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let name = meta::name_of(&obj).to_string();
        let store_ns = if res.namespaced { ns } else { "" };
        let dry = opts.dry_run;
        let (results, reply) = self
            .store
            .write(|s| {
                self.check_namespace(s, res, ns)?;
                if s.get(&res.key, store_ns, &name).is_some() {
                    return Err(ApiError::already_exists(&res.target(&name)));
                }
                if dry {
                    return Ok((Vec::new(), Reply::Dry(obj)));
                }
                Ok((
                    vec![Op::Put {
                        resource: res.key.clone(),
                        namespace: store_ns.into(),
                        name: name.clone(),
                        value: obj,
                    }],
                    Reply::Written,
                ))
            })
            .await?;
        self.after_write(res);
        Ok(reply.into_json(self, res, &results))
    }
}
