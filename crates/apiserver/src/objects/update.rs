//! Update (PUT): a whole new version of an object.

use std::sync::Arc;

use serde_json::Value;

use super::WriteOpts;
use crate::registry::Resource;
use crate::state::Core;
use crate::status::ApiError;

impl Core {
    pub async fn update(
        &self,
        res: &Arc<Resource>,
        ns: &str,
        name: &str,
        new: Value,
        opts: &WriteOpts,
    ) -> Result<bytes::Bytes, ApiError> {
        let (results, reply) = self
            .guaranteed_update(res, ns, name, |old| {
                let Some(old) = old else {
                    return Err(ApiError::not_found(&res.target(name)));
                };
                self.prepare_update(res, old, None, new.clone(), opts, false)
            })
            .await?;
        self.after_write(res);
        Ok(reply.into_json(self, res, &results))
    }
}
