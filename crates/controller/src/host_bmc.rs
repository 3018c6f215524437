//! A direct connection to a host's BMC for controllers that only read from it (firmware
//! settings and versions): the address of the BareMetalHost and the credentials the host
//! controller caches, with a bounded timeout; the key of the per-BMC gate the reads go through.

use std::sync::Arc;
use std::time::Duration;

use ferrometal_api::BareMetalHost;
use ferrometal_bmc::{Bmc, BmcAddress, BmcOptions};
use futures::Stream;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::bmc_gate::BmcGate;
use crate::detached::{Detached, Found};
use crate::error::Error;
use crate::secrets::{CredentialsObservation, SecretCache, read_credentials};

/// Connects to `host`'s BMC with the credentials the host controller uses (its cache of the
/// Secrets hosts reference, read on a miss). The outer error is the API's (retry); the inner
/// one says, in words fit for a condition, why the host's BMC cannot be reached as configured.
pub async fn connect(
    client: &kube::Client,
    secrets: &SecretCache,
    host: &BareMetalHost,
    timeout: Duration,
) -> Result<Result<(Arc<dyn Bmc>, String), String>, Error> {
    let Some(bmc) = host.spec.bmc.as_ref().filter(|b| !b.address.is_empty()) else {
        return Ok(Err("the host has no BMC".into()));
    };
    let address = match BmcAddress::parse(&bmc.address) {
        Ok(a) => a,
        Err(e) => return Ok(Err(format!("spec.bmc.address: {e}"))),
    };
    let credentials = match read_credentials(client, secrets, host).await? {
        (_, Some(credentials)) => credentials,
        (CredentialsObservation::MissingKey { secret, key }, None) => {
            return Ok(Err(format!(
                "the BMC credentials Secret {secret} has no {key}"
            )));
        }
        (_, None) => {
            return Ok(Err(format!(
                "the BMC credentials Secret {} is missing",
                bmc.credentials_name
            )));
        }
    };
    let options = BmcOptions {
        timeout,
        disable_certificate_verification: bmc.disable_certificate_verification,
        ..BmcOptions::default()
    };
    Ok(ferrometal_bmc::connect(&address, credentials, options)
        .map(|b| (b, BmcGate::key(&address)))
        .map_err(|e| e.to_string()))
}

/// What the read-only host controllers (firmware settings, firmware components) share.
pub struct ReadContext {
    pub client: kube::Client,
    pub gate: Arc<BmcGate>,
    /// The host controller's credentials cache.
    pub secrets: Arc<SecretCache>,
    /// The hosts this process runs.
    pub hosts: kube::runtime::reflector::Store<BareMetalHost>,
    /// The timeout of each BMC request.
    pub timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("writing {0}: {1}")]
    Write(String, kube::Error),
    #[error("reading a BMC credentials Secret: {0}")]
    Secret(Error),
}

/// Connects to `host`'s BMC and runs one read through the per-BMC gate, logging out after.
/// The inner error, in words fit for a condition, is why the BMC could not be read.
async fn read<T, F, Fut>(ctx: &ReadContext, host: &BareMetalHost, what: F) -> ReadResult<T>
where
    F: FnOnce(Arc<dyn Bmc>) -> Fut,
    Fut: std::future::Future<Output = Result<T, ferrometal_bmc::BmcError>>,
{
    let (bmc, key) = match connect(&ctx.client, &ctx.secrets, host, ctx.timeout)
        .await
        .map_err(ReadError::Secret)?
    {
        Ok(connected) => connected,
        Err(why) => return Ok(Err(why)),
    };
    let read = ctx.gate.run(&key, what(bmc.clone())).await;
    let _ = bmc.logout().await;
    Ok(read.map_err(|e| e.to_string()))
}

/// How a read started by [`Reads::start`] ended: the BMC's answer, or in words fit for a
/// condition why it could not be had; the outer error is the API's (retry).
pub type ReadResult<T> = Result<Result<T, String>, ReadError>;

/// What a reconcile finds of its object's read.
pub enum Taken<T> {
    /// None running or finished: start one if the object needs it.
    Idle,
    /// One runs; its end wakes the object.
    Running,
    /// One ended; `deferred` when reconciles came while it ran (look again after applying it).
    Done { read: ReadResult<T>, deferred: bool },
}

/// The BMC reads (and the few writes, such as event subscriptions) of one read-only
/// controller, each on its own task: a hung BMC holds that task until the BMC timeout, never
/// one of the controller's few workers, so one rack of hung BMCs does not stall every other
/// host's firmware objects. A reconcile starts the read and returns; the read's end wakes the
/// object (through the stream [`Reads::new`] returns, for the controller's `reconcile_on`), and
/// the next reconcile takes the answer and writes what follows from it.
pub struct Reads<K: kube::Resource<DynamicType = ()> + 'static, T> {
    detached: Detached<K, ReadResult<T>>,
    objects: Store<K>,
}

/// Looks again after this long should a finished read's wake-up be lost (it is not: this only
/// bounds the damage of a bug).
pub const READ_BACKSTOP: Duration = Duration::from_secs(300);

impl<K, T> Reads<K, T>
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    T: Send + 'static,
{
    /// The registry for the objects of `objects` (a read for an object deleted meanwhile is
    /// dropped), and the objects to wake when their read ends.
    pub fn new(objects: Store<K>) -> (Self, impl Stream<Item = ObjectRef<K>> + Send + 'static) {
        let (detached, woken) = Detached::new();
        let woken = futures::stream::unfold(woken, |mut rx| async move {
            rx.recv().await.map(|object| (object, rx))
        });
        (Reads { detached, objects }, woken)
    }

    fn key(object: &K) -> String {
        format!(
            "{}/{}",
            object.meta().namespace.as_deref().unwrap_or_default(),
            object.meta().name.as_deref().unwrap_or_default()
        )
    }

    /// Takes `object`'s finished read, if any (once); notes a reconcile that came while it runs.
    pub fn take(&self, object: &K) -> Taken<T> {
        match self.detached.take(&Self::key(object)) {
            Found::Idle => Taken::Idle,
            Found::Running => Taken::Running,
            Found::Finished { state, deferred } => Taken::Done {
                read: state,
                deferred,
            },
        }
    }

    /// Starts `what` on `host`'s BMC for `object` (connect, the per-BMC gate, log out after)
    /// and says what the reconcile returns meanwhile.
    pub fn start<F, Fut>(
        &self,
        ctx: &Arc<ReadContext>,
        host: Arc<BareMetalHost>,
        object: &K,
        what: F,
    ) -> Action
    where
        F: FnOnce(Arc<dyn Bmc>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, ferrometal_bmc::BmcError>> + Send + 'static,
    {
        let ctx = ctx.clone();
        let objects = self.objects.clone();
        self.detached.spawn(
            Self::key(object),
            ObjectRef::from_obj(object),
            move |o| objects.get(o).is_some(),
            async move { read(&ctx, &host, what).await },
        );
        Action::requeue(READ_BACKSTOP)
    }
}

/// The object of kind `K` named as `object`, in its namespace (how metal3 names a host's
/// firmware objects after the host, both ways).
pub fn named_after<F, K>(
    object: std::sync::Arc<F>,
) -> Option<kube::runtime::reflector::ObjectRef<K>>
where
    F: kube::ResourceExt,
    K: kube::Resource<DynamicType = ()>,
{
    let ns = object.namespace()?;
    Some(kube::runtime::reflector::ObjectRef::new(&object.name_any()).within(&ns))
}

/// A host whose BMC answers for it: registered, not being deleted, not detached (a detached
/// host's BMC is left alone entirely).
pub fn readable(host: &BareMetalHost) -> bool {
    let state = host
        .status
        .as_ref()
        .map(|s| s.provisioning.state)
        .unwrap_or_default();
    readable_in(host, state)
}

/// [`readable`] with the provisioning state the host is about to be written with.
pub fn readable_in(host: &BareMetalHost, state: ferrometal_api::ProvisioningState) -> bool {
    use ferrometal_api::ProvisioningState as S;
    let detached =
        host.annotations()
            .contains_key(ferrometal_api::annotations::DETACHED)
            || host.status.as_ref().is_some_and(|s| {
                s.operational_status == ferrometal_api::OperationalStatus::Detached
            });
    host.metadata.deletion_timestamp.is_none()
        && !detached
        && !matches!(
            state,
            S::None | S::Unmanaged | S::Registering | S::Deleting | S::PoweringOffBeforeDelete
        )
}

/// Hash of what should make a host's read-only companions (firmware settings and versions, BMC
/// event subscriptions) look at its BMC again: its spec (the BMC's address), its annotations,
/// its state, operational status and error (a registration, a change applied or failed), its
/// power (a boot is when a BMC applies staged settings) and its deletion. A host's other status
/// writes (power checks, timings, progress) do not, so they cost these controllers nothing.
pub fn read_trigger(host: &BareMetalHost) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    host.metadata.uid.hash(&mut h);
    host.metadata.generation.hash(&mut h);
    host.metadata.annotations.hash(&mut h);
    host.metadata.deletion_timestamp.is_some().hash(&mut h);
    if let Some(s) = &host.status {
        s.provisioning.state.hash(&mut h);
        s.operational_status.hash(&mut h);
        s.error_type.hash(&mut h);
        s.powered_on.hash(&mut h);
    }
    Some(h.finish())
}

/// Whether a firmware object that asks for nothing has been read already for its current
/// spec (condition `read` True at its generation): such an object is read when it is made
/// (each registered host gets one) and when its spec changes, not on every change of its host,
/// so a fleet going through provisioning costs its BMCs nothing more.
pub fn read_and_idle(
    asks_nothing: bool,
    conditions: &[ferrometal_api::Condition],
    generation: Option<i64>,
    read: &str,
) -> bool {
    asks_nothing
        && conditions
            .iter()
            .any(|c| c.type_ == read && c.status == "True" && c.observed_generation == generation)
}
