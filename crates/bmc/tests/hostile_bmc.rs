//! Hostile or broken BMCs (the emulator's hostility faults): no request leaves for another
//! origin, nothing unbounded is read, and what is kept of their text is short.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferrometal_bmc::{
    Bmc, BmcAddress, BmcOptions, BootDevice, BootMode, BootOverride, Credentials, PowerAction,
    connect,
};
use ferrometal_emulator::{Emulator, EmulatorConfig, Fault};

/// A listener that only counts the connections made to it: the "other origin".
struct Trap {
    origin: String,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Trap {
    async fn start() -> Trap {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Trap {
            origin,
            connections,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Trap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn emulator() -> Emulator {
    let config = EmulatorConfig {
        systems: 2,
        // What is tested is where requests go, not the image: the sound system records the
        // insert without fetching it (the hostile one must refuse before any request).
        fetch_media: false,
        ..EmulatorConfig::default()
    };
    Emulator::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn client(emu: &Emulator, index: usize) -> Arc<dyn Bmc> {
    let address = BmcAddress::parse(
        &emu.system_url(index)
            .replace("http://", "redfish-virtualmedia+http://"),
    )
    .unwrap();
    let options = BmcOptions {
        timeout: Duration::from_secs(5),
        ..BmcOptions::default()
    };
    connect(&address, Credentials::new("admin", "password"), options).unwrap()
}

const BOOT: BootOverride = BootOverride {
    device: BootDevice::Cd,
    once: true,
    mode: Some(BootMode::Uefi),
};

/// Every operation a host goes through, each on a fresh client (nothing learned before).
async fn every_operation(emu: &Emulator, index: usize) -> Vec<(&'static str, Result<(), String>)> {
    let s = |r: Result<(), ferrometal_bmc::BmcError>| r.map_err(|e| e.to_string());
    vec![
        (
            "power state",
            s(client(emu, index).power_state().await.map(drop)),
        ),
        (
            "power on",
            s(client(emu, index).power(PowerAction::On).await),
        ),
        ("boot", s(client(emu, index).set_boot(BOOT).await)),
        (
            "insert",
            s(client(emu, index).insert_media("http://img/x.iso").await),
        ),
        ("eject", s(client(emu, index).eject_media().await)),
        ("identity", s(client(emu, index).identity().await.map(drop))),
        ("inventory", {
            match client(emu, index).inventory().await {
                Ok(inv) if inv.warnings.is_empty() => Ok(()),
                Ok(inv) => Err(inv.warnings.join("; ")),
                Err(e) => Err(e.to_string()),
            }
        }),
    ]
}

#[tokio::test]
async fn links_and_action_targets_to_another_origin_are_refused() {
    let emu = emulator().await;
    let trap = Trap::start().await;
    emu.set_fault(1, Some(Fault::ForeignLinks(trap.origin.clone())));
    let results = every_operation(&emu, 1).await;
    assert_eq!(
        trap.connections(),
        0,
        "a request left for {}: {results:?}",
        trap.origin
    );
    // The system itself is read at its own address (and its inventory comes inline, expanded);
    // whatever it links is refused by name.
    let refused: Vec<_> = results
        .iter()
        .filter(|(_, r)| {
            r.as_ref()
                .is_err_and(|e| e.contains("outside the BMC's origin"))
        })
        .map(|(op, _)| *op)
        .collect();
    for op in ["power on", "insert", "eject"] {
        assert!(refused.contains(&op), "{op} not refused: {results:?}");
    }
    let state = emu.state(1);
    // Only the boot override, PATCHed on the system at the address we were given.
    assert_eq!(state.actions, ["PatchBoot"]);
    assert!(state.virtual_media.image.is_none());
    // The same client code against a sound system still works.
    assert!(
        every_operation(&emu, 0)
            .await
            .iter()
            .all(|(_, r)| r.is_ok())
    );
}

#[tokio::test]
async fn redirects_are_reported_not_followed() {
    let emu = emulator().await;
    let trap = Trap::start().await;
    emu.set_fault(1, Some(Fault::Redirect(trap.origin.clone())));
    let results = every_operation(&emu, 1).await;
    assert_eq!(
        trap.connections(),
        0,
        "a request left for {}: {results:?}",
        trap.origin
    );
    for (op, result) in &results {
        let err = result.as_ref().expect_err(op);
        assert!(
            err.contains("HTTP 307 redirecting to") && err.contains("not followed"),
            "{op}: {err}"
        );
    }
}

#[tokio::test]
async fn huge_bodies_are_refused_and_long_errors_cut() {
    let emu = emulator().await;
    emu.set_fault(1, Some(Fault::HugeBody(64 << 20)));
    let err = client(&emu, 1).power_state().await.unwrap_err().to_string();
    assert!(err.contains("over the limit of 8 MiB"), "{err}");

    emu.set_fault(1, Some(Fault::LongError(1 << 20)));
    let err = client(&emu, 1).power_state().await.unwrap_err().to_string();
    assert!(
        err.contains("HTTP 500") && err.len() < 1000,
        "{} bytes",
        err.len()
    );
}

#[tokio::test]
async fn long_member_lists_are_read_up_to_a_cap() {
    let emu = emulator().await;
    emu.set_fault(1, Some(Fault::ManyMembers(1000)));
    emu.reset_counters();
    let inv = client(&emu, 1).inventory().await.unwrap();
    assert_eq!(inv.cpus.len(), 256);
    assert!(
        inv.warnings
            .iter()
            .any(|w| w.contains("lists 1000 members; the first 256 were read")),
        "{:?}",
        inv.warnings
    );
    assert!(inv.warnings.len() <= 33, "{:?}", inv.warnings);
    // Expanded inline, so the cap bounds memory, not just requests.
    assert!(emu.counters().total < 10, "{:?}", emu.counters());
}

#[tokio::test]
async fn a_certificate_nobody_trusts_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let files = ferrometal_apiserver::tls::ensure(dir.path(), &[]).unwrap();
    let acceptor =
        tokio_rustls::TlsAcceptor::from(ferrometal_apiserver::tls::server_config(&files).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = acceptor.accept(stream).await;
        }
    });
    let address = BmcAddress::parse(&format!(
        "redfish+https://127.0.0.1:{port}/redfish/v1/Systems/1"
    ))
    .unwrap();
    let bmc = connect(
        &address,
        Credentials::new("admin", "password"),
        BmcOptions::default(),
    )
    .unwrap();
    let err = bmc.power_state().await.unwrap_err().to_string();
    server.abort();
    assert!(
        err.contains("TLS certificate is not accepted")
            && err.contains("disableCertificateVerification"),
        "{err}"
    );
}
