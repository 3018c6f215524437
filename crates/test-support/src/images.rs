//! An image server for tests whose BMC fetches what it is told to insert (the built-in emulator,
//! like real BMCs and sushy-tools, refuses an image nothing serves).
//!
//! Any path answers 200 with a few KiB, except paths under `/missing/` (404) and `/private/`
//! (401): enough for a BMC to see the image served, and for the refusals to be driven on purpose.
//! It runs in a thread of the test process, so it cannot outlive the test.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct ImageServer {
    pub port: u16,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl ImageServer {
    pub fn start() -> ImageServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the image server");
        let port = listener.local_addr().expect("a bound address").port();
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counted, stopped) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                counted.fetch_add(1, Ordering::Relaxed);
                std::thread::spawn(move || answer(conn));
            }
        });
        ImageServer {
            port,
            requests,
            stop,
        }
    }

    /// `http://127.0.0.1:PORT/{path}`; `path` has no leading slash.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// Requests answered so far (every fetch a BMC made).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for ImageServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn answer(conn: TcpStream) {
    let mut reader = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // Headers are read and ignored: the path decides the answer.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let (status, body): (&str, &[u8]) = if path.starts_with("/missing/") {
        ("404 Not Found", b"not here\n")
    } else if path.starts_with("/private/") {
        ("401 Unauthorized", b"credentials required\n")
    } else {
        ("200 OK", &[0x42; 4096])
    };
    let mut conn = conn;
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
}
