//! The Redfish client against a BMC whose answers are the fuzz input: every operation a host
//! goes through (session login, system, power, boot, virtual media, inventory, secure boot,
//! logout) reads them. Nothing may panic, hang or keep an unbounded error text.
//!
//! Input: answers separated by 0xFF; each answer's first byte picks its HTTP status, the rest
//! is its body. A request beyond the last answer gets a 404.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ferrometal_bmc::{
    AuthMode, BmcAddress, BmcOptions, BootDevice, BootMode, BootOverride, Credentials, PowerAction,
    connect,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const STATUSES: &[u16] = &[
    200, 200, 200, 200, 201, 204, 302, 307, 400, 401, 404, 409, 500, 503,
];

type Answers = Arc<Mutex<VecDeque<(u16, Vec<u8>)>>>;

struct Fake {
    runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
    answers: Answers,
}

fn fake() -> &'static Fake {
    static FAKE: OnceLock<Fake> = OnceLock::new();
    FAKE.get_or_init(|| {
        // One thread for the fake BMC, the client's connections and the operations: every
        // exchange is handed over within the thread instead of waking another one.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answers: Answers = Arc::default();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let served = answers.clone();
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream, served.clone()));
            }
        });
        Fake {
            runtime,
            addr,
            answers,
        }
    })
}

/// HTTP/1.1 with keep-alive, just enough for reqwest: read a request, answer the next answer.
async fn serve(mut stream: tokio::net::TcpStream, answers: Answers) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.len() > 1 << 20 {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + length);
        let (status, body) = answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((404, b"{}".to_vec()));
        let mut response = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             x-auth-token: fuzz-token\r\netag: \"1\"\r\n",
            body.len()
        );
        if (300..400).contains(&status) {
            response.push_str("location: http://127.0.0.1:1/redfish/v1/elsewhere\r\n");
        }
        if status == 201 {
            response.push_str("location: /redfish/v1/SessionService/Sessions/1\r\n");
        }
        response.push_str("\r\n");
        let mut message = response.into_bytes();
        message.extend_from_slice(&body);
        if stream.write_all(&message).await.is_err() {
            return;
        }
    }
}

/// One input.
pub fn run(data: &[u8]) {
    let fake = fake();
    let Some((flags, rest)) = data.split_first() else {
        return;
    };
    {
        let mut answers = fake.answers.lock().unwrap();
        answers.clear();
        for part in rest.split(|b| *b == 0xFF).take(64) {
            let (pick, body) = part.split_first().unwrap_or((&0, &[]));
            answers.push_back((STATUSES[*pick as usize % STATUSES.len()], body.to_vec()));
        }
    }
    let path = if flags & 1 == 0 {
        "/redfish/v1/Systems/1"
    } else {
        ""
    };
    let address =
        BmcAddress::parse(&format!("redfish-virtualmedia+http://{}{path}", fake.addr)).unwrap();
    let options = BmcOptions {
        timeout: Duration::from_secs(2),
        auth: if flags & 2 == 0 {
            AuthMode::Basic
        } else {
            AuthMode::Session
        },
        ..BmcOptions::default()
    };
    let bmc = connect(
        &address,
        Credentials::new("admin", "fuzz-password"),
        options,
    )
    .unwrap();
    let boot = BootOverride {
        device: BootDevice::Cd,
        once: true,
        mode: Some(BootMode::Uefi),
    };
    let errors: Vec<String> = fake.runtime.block_on(async {
        let mut results = vec![
            bmc.power_state().await.map(drop),
            bmc.power(PowerAction::On).await,
            bmc.set_boot(boot).await,
            bmc.boot_override().await.map(drop),
            bmc.insert_media("http://127.0.0.1:1/x.iso").await,
            bmc.media_status().await.map(drop),
            bmc.eject_media().await,
            bmc.identity().await.map(drop),
        ];
        let mut errors = Vec::new();
        match bmc.inventory().await {
            Ok(inventory) => {
                assert!(
                    inventory.warnings.len() <= 33,
                    "{}",
                    inventory.warnings.len()
                );
                errors.extend(inventory.warnings);
            }
            Err(e) => errors.push(e.to_string()),
        }
        results.push(bmc.secure_boot().await.map(drop));
        results.push(bmc.logout().await);
        errors.extend(
            results
                .into_iter()
                .filter_map(|r| r.err().map(|e| e.to_string())),
        );
        errors
    });
    for e in errors {
        assert!(e.len() < 2000, "an error kept {} bytes: {e:.200}", e.len());
        assert!(
            !e.contains("fuzz-password"),
            "the password reached an error: {e}"
        );
    }
}
