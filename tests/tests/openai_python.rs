//! The official `openai` Python client (PyPI `openai`) against `headroom serve` in front of a
//! real llama-server: streamed text on success, `RateLimitError` on overload.

use headroom_tests::llama::LlamaServer;
use serde_json::Value;

#[tokio::test]
async fn the_openai_python_client_sees_text_then_rate_limit_errors() {
    let llama = LlamaServer::start().await;
    let services = headroom_tests::services_for(&llama.base_url());
    services
        .default_text_lane()
        .unwrap()
        .discover()
        .await
        .unwrap();
    let server = headroom_tests::serve(&services).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_client_check.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .arg(server.base_url())
        .output()
        .await
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the openai client check failed (is `openai` installed? scripts/install-test-deps does it):\n{stderr}"
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    assert!(!seen["streamed_text"].as_str().unwrap().trim().is_empty());
    assert_eq!(seen["overload_status"], 429);
    assert_eq!(seen["overload_code"], "text_lane_full");
    assert!(
        seen["overload_retry_after"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert!(seen["overload_message"].as_str().unwrap().contains("busy"));
    assert_eq!(seen["oversized_status"], 400);
    assert_eq!(seen["oversized_code"], "input_too_long");
}
