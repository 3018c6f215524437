//! The agent's side of the agent API: ask for the next instruction, send a report, fetch the
//! config drive. Only the CA from the agent's configuration is trusted for it, and the token
//! travels in the Authorization header only.

use std::time::Duration;

use crate::protocol::{AgentConfig, Instruction, MAX_BODY_BYTES, Report};

pub struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    pub fn new(config: &AgentConfig) -> Result<Api, String> {
        let ca = reqwest::Certificate::from_pem(config.ca_pem.as_bytes())
            .map_err(|e| format!("the agent API's CA in the configuration is not PEM: {e}"))?;
        let http = reqwest::Client::builder()
            .tls_certs_only([ca])
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("building the agent API client: {e}"))?;
        Ok(Api {
            base: config.api_url.trim_end_matches('/').to_string(),
            token: config.token.clone(),
            http,
        })
    }

    pub async fn instruction(&self) -> Result<Instruction, String> {
        let body = self.get("v1/instruction", MAX_BODY_BYTES).await?;
        serde_json::from_slice(&body).map_err(|e| format!("the instruction is not understood: {e}"))
    }

    pub async fn report(&self, report: &Report) -> Result<(), String> {
        let url = format!("{}/v1/report", self.base);
        let response = self
            .http
            .post(&url)
            .bearer_auth(&self.token)
            .json(report)
            .send()
            .await
            .map_err(|e| format!("POST {url}: {}", error_chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("POST {url}: HTTP {status}"));
        }
        Ok(())
    }

    /// A file the API serves to this agent (the config drive), at most `limit` bytes.
    pub async fn file(&self, url: &str, limit: usize) -> Result<Vec<u8>, String> {
        let path = url
            .strip_prefix(&self.base)
            .unwrap_or(url)
            .trim_start_matches('/');
        self.get(path, limit).await
    }

    async fn get(&self, path: &str, limit: usize) -> Result<Vec<u8>, String> {
        let url = format!("{}/{path}", self.base);
        let mut response = self
            .http
            .get(&url)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("GET {url}: HTTP {status}"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?
        {
            if body.len() + chunk.len() > limit {
                return Err(format!(
                    "GET {url}: the answer is larger than {limit} bytes"
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// An error with its causes, which reqwest keeps in `source()` (the refused connection, the
/// untrusted certificate).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
