//! A server on loopback that answers every request with `307 Temporary Redirect` to the same
//! path on another server: what a text or speech server (or anything answering at its address)
//! can do to send a client's data elsewhere.

use axum::http::{header, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Router;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub struct Redirector {
    addr: SocketAddr,
    redirected: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Redirector {
    /// Redirects `/<path>` to `<target origin>/<path>`; `target` like `http://127.0.0.1:9000`.
    pub async fn start(target: &str) -> Redirector {
        let target = target.trim_end_matches('/').to_string();
        let redirected = Arc::new(AtomicUsize::new(0));
        let counter = redirected.clone();
        let app = Router::new().fallback(move |uri: Uri| {
            let target = target.clone();
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, format!("{target}{path}"))],
                )
                    .into_response()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Redirector {
            addr,
            redirected,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests answered with a redirect so far.
    pub fn redirected(&self) -> usize {
        self.redirected.load(Ordering::SeqCst)
    }
}

impl Drop for Redirector {
    fn drop(&mut self) {
        self.task.abort();
    }
}
