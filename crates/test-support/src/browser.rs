//! A real browser for the web console's tests: headless Chromium driven over WebDriver
//! (`scripts/browser.sh` starts Debian's chromedriver with a fresh profile directory). The
//! driver and its browsers stop with the test, however it ends.

use std::path::Path;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use crate::peers::{TempDir, run_script};

pub struct Browser {
    pub client: Client,
    dir: TempDir,
}

impl Browser {
    /// A new headless browser with an empty profile, 1400x1000.
    pub async fn start() -> Browser {
        let dir = TempDir::new();
        let port = run_script("browser.sh", &["start", dir.path_str()]);
        let profile = dir.path().join("profile");
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", port.trim()))
            .await
            .unwrap_or_else(|e| {
                let log = std::fs::read_to_string(dir.path().join("chromedriver.log"))
                    .unwrap_or_default();
                panic!("no browser session: {e}\n{log}")
            });
        Browser { client, dir }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Waits (up to `limit`) until `css` matches an element, and returns its text.
    pub async fn text(&self, css: &str, limit: Duration) -> String {
        match self
            .client
            .wait()
            .at_most(limit)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e.text().await.unwrap(),
            Err(e) => panic!("no {css} within {limit:?}: {e}\n{}", self.state().await),
        }
    }

    /// Where the page is, what it shows and the script errors it recorded (for failures).
    pub async fn state(&self) -> String {
        let v = self
            .client
            .execute(
                "return [location.href, document.body.innerText, JSON.stringify(window.consoleErrors || [])].join('\\n---\\n')",
                vec![],
            )
            .await;
        format!("{v:?}")
    }

    /// Waits until `script` (a function body) returns true.
    pub async fn until(&self, what: &str, limit: Duration, script: &str) {
        let start = std::time::Instant::now();
        loop {
            let v = self.client.execute(script, vec![]).await.unwrap();
            if v == Value::Bool(true) {
                return;
            }
            if start.elapsed() > limit {
                panic!("{what}: not within {limit:?}\n{}", self.state().await);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Runs `script` as an async function body (its value is what it returns).
    pub async fn eval_async(&self, script: &str) -> Value {
        let wrapped = format!(
            "const done = arguments[arguments.length - 1]; (async () => {{ {script} }})().then(done, (e) => done('error: ' + e));"
        );
        self.client.execute_async(&wrapped, vec![]).await.unwrap()
    }

    pub async fn fill(&self, css: &str, text: &str) {
        let e = self.client.find(Locator::Css(css)).await.unwrap();
        e.clear().await.unwrap();
        e.send_keys(text).await.unwrap();
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    /// Clicks `css` and accepts the confirmation it opens.
    pub async fn click_and_confirm(&self, css: &str) {
        self.click(css).await;
        for _ in 0..50 {
            if self.client.accept_alert().await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} asked for no confirmation");
    }

    /// A PNG of the window, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let png = self.client.screenshot().await.unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }

    /// The whole page as the browser holds it now (after the script ran).
    pub async fn html(&self) -> String {
        self.client.source().await.unwrap()
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(crate::peers::repo_root().join("scripts/browser.sh"))
            .args(["stop", self.dir.path_str()])
            .output();
    }
}
