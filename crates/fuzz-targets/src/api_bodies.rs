//! API request bodies into the store: create (JSON, YAML), replace, merge patch, JSON patch,
//! strategic merge patch and server-side apply of a ConfigMap, a BareMetalHost (CRD schema,
//! CEL, webhook checks) and a BMCJob. No request may end in a 500 (the server turns a panic
//! into one). Every 256 inputs the server is shut down and reopened on the same directory:
//! it must start, and hold exactly what it acknowledged before.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use ferrometal_apiserver::{ApiServer, ServerConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

const RESOURCES: &[&str] = &[
    "/api/v1/namespaces/default/configmaps",
    "/apis/metal3.io/v1alpha1/namespaces/default/baremetalhosts",
    "/apis/ferrometal.io/v1alpha1/namespaces/default/bmcjobs",
];

struct Server {
    runtime: tokio::runtime::Runtime,
    dir: std::path::PathBuf,
    server: Option<ApiServer>,
    client: kube::Client,
    inputs: u64,
}

/// Opens the server on `dir`; `install` applies the CRDs (first open only: a reopened server
/// must serve them from its store, or listing the custom resources fails).
fn open(
    runtime: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    install: bool,
) -> (ApiServer, kube::Client) {
    runtime.block_on(async {
        let mut config = ServerConfig::new(dir);
        config.tls = false;
        let server = ApiServer::open(config).await.expect("the server reopens");
        let client = server.client();
        if install {
            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
            for crd in ferrometal_api::crds() {
                let name = crd.metadata.name.clone().unwrap_or_default();
                crds.patch(
                    &name,
                    &PatchParams::apply("fuzz").force(),
                    &Patch::Apply(&crd),
                )
                .await
                .expect("CRDs install");
            }
        }
        (server, client)
    })
}

static STORE_IN: OnceLock<std::path::PathBuf> = OnceLock::new();

/// Keeps the store under `dir` (the replay test's scratch directory); only before the first
/// input counts.
pub fn store_in(dir: &std::path::Path) {
    let _ = STORE_IN.set(dir.to_path_buf());
}

fn server() -> &'static Mutex<Server> {
    static SERVER: OnceLock<Mutex<Server>> = OnceLock::new();
    SERVER.get_or_init(|| {
        // The server's tasks run on the fuzzing thread (store commits still go to tokio's
        // blocking pool): no wake-up of another worker per request.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // store_in's, else FERROMETAL_FUZZ_DIR (the smoke's scratch), else tmpfs where there is one: a
        // commit's fsync would otherwise dominate.
        let base = match STORE_IN
            .get()
            .cloned()
            .or_else(|| std::env::var_os("FERROMETAL_FUZZ_DIR").map(std::path::PathBuf::from))
        {
            Some(dir) => dir,
            None if std::path::Path::new("/dev/shm").is_dir() => "/dev/shm".into(),
            None => std::env::temp_dir(),
        };
        remove_dead_runs(&base);
        let dir = base.join(format!("ferrometal-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (server, client) = open(&runtime, &dir, true);
        Mutex::new(Server {
            runtime,
            dir,
            server: Some(server),
            client,
            inputs: 0,
        })
    })
}

/// A libFuzzer run ends by exiting: the stores of runs whose process is gone are removed by
/// the next run.
fn remove_dead_runs(base: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(pid) = name.strip_prefix("ferrometal-fuzz-")
            && !std::path::Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// name -> resourceVersion of everything under the fuzzed resources.
async fn contents(client: &kube::Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for resource in RESOURCES {
        let request = http::Request::get(*resource).body(Vec::new()).unwrap();
        let list: serde_json::Value = client.request(request).await.expect("list");
        for item in list["items"].as_array().into_iter().flatten() {
            let meta = &item["metadata"];
            out.insert(
                format!("{resource}/{}", meta["name"].as_str().unwrap_or_default()),
                meta["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    out
}

/// One input.
pub fn run(data: &[u8]) {
    let Some((&op, rest)) = data.split_first() else {
        return;
    };
    let Some((&target, body)) = rest.split_first() else {
        return;
    };
    let mut guard = server().lock().unwrap();
    let state = &mut *guard;
    let collection = RESOURCES[target as usize % RESOURCES.len()];
    let item = format!("{collection}/f");
    let (method, uri, media_type) = match op % 7 {
        0 => ("POST", collection.to_string(), "application/json"),
        1 => ("POST", collection.to_string(), "application/yaml"),
        2 => ("PUT", item, "application/json"),
        3 => ("PATCH", item, "application/merge-patch+json"),
        4 => ("PATCH", item, "application/json-patch+json"),
        5 => ("PATCH", item, "application/strategic-merge-patch+json"),
        _ => (
            "PATCH",
            format!("{item}?fieldManager=fuzz&force=true"),
            "application/apply-patch+yaml",
        ),
    };
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", media_type)
        .body(kube::client::Body::from(body.to_vec()))
        .unwrap();
    let client = state.client.clone();
    state.runtime.block_on(async {
        let response = client
            .send(request)
            .await
            .expect("the in-process transport");
        if response.status().as_u16() >= 500 {
            let status = response.status();
            let bytes = http_body_util_collect(response).await;
            panic!(
                "{method} {collection} answered {status}: {}",
                String::from_utf8_lossy(&bytes)
            );
        }
    });

    state.inputs += 1;
    if state.inputs.is_multiple_of(256) {
        let before = state.runtime.block_on(contents(&client));
        if let Some(server) = state.server.take() {
            state.runtime.block_on(server.shutdown());
        }
        let (server, client) = open(&state.runtime, &state.dir, false);
        let after = state.runtime.block_on(contents(&client));
        assert_eq!(
            before, after,
            "the store lost or changed objects across a reopen"
        );
        // Start the next round from an empty store so it does not grow without end.
        state.runtime.block_on(async {
            for resource in RESOURCES {
                let request = http::Request::delete(*resource).body(Vec::new()).unwrap();
                let _ = client.request_text(request).await;
            }
        });
        state.server = Some(server);
        state.client = client;
    }
}

async fn http_body_util_collect(response: http::Response<kube::client::Body>) -> Vec<u8> {
    use http_body_util::BodyExt;
    match response.into_body().collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    }
}
