//! The OTLP/HTTP exporter.

use std::sync::{Arc, Mutex, mpsc};

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// Sends spans to an OTLP/HTTP collector (protobuf, `POST {endpoint}/v1/traces`) from a task of
/// its own, so exporting never waits on the network. Written with our reqwest (rustls on ring)
/// rather than opentelemetry-otlp, whose client is a second reqwest with aws-lc.
#[derive(Debug)]
pub struct OtlpExporter {
    batches: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Vec<SpanData>>>>,
    resource: Arc<Mutex<Resource>>,
    done: Mutex<Option<mpsc::Receiver<()>>>,
}

impl OtlpExporter {
    pub fn start(endpoint: url::Url) -> Self {
        let url = if endpoint.path().ends_with("/v1/traces") {
            endpoint
        } else {
            let mut url = endpoint;
            let path = format!("{}/v1/traces", url.path().trim_end_matches('/'));
            url.set_path(&path);
            url
        };
        let (batches, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Vec<SpanData>>();
        let resource = Arc::new(Mutex::new(Resource::builder_empty().build()));
        let (done_tx, done) = mpsc::channel();
        let task_resource = resource.clone();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            while let Some(batch) = receiver.recv().await {
                use prost::Message as _;
                let resource = task_resource.lock().expect("resource").clone();
                let request = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
                    resource_spans: opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope(
                        batch,
                        &(&resource).into(),
                    ),
                };
                let sent = client
                    .post(url.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(request.encode_to_vec())
                    .timeout(std::time::Duration::from_secs(10))
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status().is_success() => {}
                    Ok(response) => {
                        tracing::warn!("OTLP collector at {url} answered {}", response.status())
                    }
                    Err(e) => tracing::warn!("cannot send spans to {url}: {e}"),
                }
            }
            let _ = done_tx.send(());
        });
        OtlpExporter {
            batches: Mutex::new(Some(batches)),
            resource,
            done: Mutex::new(Some(done)),
        }
    }
}

impl SpanExporter for OtlpExporter {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        if let Some(batches) = self.batches.lock().expect("batches").as_ref() {
            let _ = batches.send(batch);
        }
        std::future::ready(Ok(()))
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.batches.lock().expect("batches").take();
        if let Some(done) = self.done.lock().expect("done").take() {
            // The sender task runs on another worker; wait for it to send what is queued.
            let wait = || done.recv_timeout(timeout);
            let _ = match tokio::runtime::Handle::try_current() {
                Ok(handle)
                    if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
                {
                    tokio::task::block_in_place(wait)
                }
                _ => wait(),
            };
        }
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        *self.resource.lock().expect("resource") = resource.clone();
    }
}
