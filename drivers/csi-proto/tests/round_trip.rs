//! A real Identity server and client talking over a unix socket and over TCP.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use csi_proto::{
    Endpoint, Error, Listener, connect, connect_lazy, serve,
    v1::{
        GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
        GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
        identity_client::IdentityClient,
        identity_server::{Identity, IdentityServer},
        plugin_capability,
    },
};
use tokio::sync::oneshot;
use tonic::{Request, Response, Status, transport::Server};

struct TinyIdentity;

#[tonic::async_trait]
impl Identity for TinyIdentity {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: "tiny.csi.example.com".into(),
            vendor_version: "0.0.1".into(),
            manifest: [("k".to_owned(), "v".to_owned())].into(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        let service = plugin_capability::Service {
            r#type: plugin_capability::service::Type::ControllerService.into(),
        };
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![PluginCapability {
                r#type: Some(plugin_capability::Type::Service(service)),
            }],
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Err(Status::failed_precondition("tiny is never ready"))
    }
}

/// Starts the tiny server on `endpoint`; returns the bound endpoint, a shutdown trigger
/// and the server task.
async fn start(
    endpoint: &Endpoint,
) -> (
    Endpoint,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<csi_proto::Result<()>>,
) {
    let listener = Listener::bind(endpoint).await.unwrap();
    let bound = listener.local_endpoint();
    let (stop, stopped) = oneshot::channel::<()>();
    let router = Server::builder().add_service(IdentityServer::new(TinyIdentity));
    let task = tokio::spawn(serve(router, listener, async {
        stopped.await.ok();
    }));
    (bound, stop, task)
}

async fn assert_identity_answers(endpoint: &Endpoint) {
    let mut client = IdentityClient::new(connect(endpoint).await.unwrap());
    let info = client
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "tiny.csi.example.com");
    assert_eq!(info.manifest.get("k").map(String::as_str), Some("v"));

    let caps = client
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(caps.capabilities.len(), 1);

    let status = client.probe(ProbeRequest {}).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(status.message(), "tiny is never ready");
}

#[tokio::test]
async fn identity_round_trips_over_a_unix_socket_and_the_socket_is_removed_after() {
    let dir = tempfile::Builder::new()
        .prefix("round-trip-")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("csi.sock");
    let endpoint: Endpoint = format!("unix://{}", socket.display()).parse().unwrap();

    let (bound, stop, task) = start(&endpoint).await;
    assert_eq!(bound, endpoint);
    assert_identity_answers(&endpoint).await;

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    assert!(!socket.exists(), "socket left behind after shutdown");
}

#[tokio::test]
async fn a_lazy_channel_connects_once_the_server_is_up() {
    let dir = tempfile::Builder::new()
        .prefix("round-trip-")
        .tempdir()
        .unwrap();
    let endpoint = Endpoint::Unix(dir.path().join("late.sock"));
    let channel = connect_lazy(&endpoint).unwrap();

    let status = IdentityClient::new(channel.clone())
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");

    let (_, stop, task) = start(&endpoint).await;
    let info = IdentityClient::new(channel)
        .get_plugin_info(GetPluginInfoRequest {})
        .await;
    assert_eq!(info.unwrap().into_inner().name, "tiny.csi.example.com");
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn identity_round_trips_over_tcp_on_a_system_chosen_port() {
    let (bound, stop, task) = start(&"tcp://127.0.0.1:0".parse().unwrap()).await;
    let Endpoint::Tcp(address) = &bound else {
        panic!("not tcp: {bound}")
    };
    assert!(!address.ends_with(":0"), "port not resolved: {address}");
    assert_identity_answers(&bound).await;
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_stale_socket_from_a_previous_run_is_replaced() {
    let dir = tempfile::Builder::new()
        .prefix("round-trip-")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("csi.sock");
    // A socket nobody listens on any more, as a crashed plugin leaves it.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());

    let endpoint = Endpoint::Unix(socket);
    let (_, stop, task) = start(&endpoint).await;
    assert_identity_answers(&endpoint).await;
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn binding_in_a_missing_directory_names_the_directory() {
    let dir = tempfile::Builder::new()
        .prefix("round-trip-")
        .tempdir()
        .unwrap();
    let missing = dir.path().join("no-such-dir");
    let endpoint = Endpoint::Unix(missing.join("csi.sock"));

    let error = Listener::bind(&endpoint).await.unwrap_err();
    assert!(matches!(error, Error::SocketDirMissing { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("directory {} does not exist", missing.display())),
        "{message}"
    );
}

#[tokio::test]
async fn a_regular_file_at_the_socket_path_is_not_deleted() {
    let dir = tempfile::Builder::new()
        .prefix("round-trip-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("important.txt");
    std::fs::write(&path, "keep me").unwrap();

    let error = Listener::bind(&Endpoint::Unix(path.clone()))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotASocket { .. }), "{error:?}");
    assert!(error.to_string().contains("is not a socket"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
}

#[tokio::test]
async fn connecting_to_a_missing_socket_fails_with_the_endpoint_and_cause() {
    let dir = tempfile::Builder::new()
        .prefix("round-trip-")
        .tempdir()
        .unwrap();
    let endpoint = Endpoint::Unix(dir.path().join("nobody.sock"));
    let message = connect(&endpoint).await.unwrap_err().to_string();
    assert!(message.contains(&endpoint.to_string()), "{message}");
    assert!(message.contains("No such file or directory"), "{message}");
}

/// RPCs a server does not implement answer Unimplemented (generated default stubs).
#[tokio::test]
async fn rpcs_left_out_of_an_implementation_answer_unimplemented() {
    use csi_proto::v1::{
        NodeGetInfoRequest, NodeGetInfoResponse, NodeStageVolumeRequest,
        node_client::NodeClient,
        node_server::{Node, NodeServer},
    };

    struct InfoOnly;

    #[tonic::async_trait]
    impl Node for InfoOnly {
        async fn node_get_info(
            &self,
            _: Request<NodeGetInfoRequest>,
        ) -> Result<Response<NodeGetInfoResponse>, Status> {
            Ok(Response::new(NodeGetInfoResponse {
                node_id: "n1".into(),
                ..Default::default()
            }))
        }
    }

    let dir = tempfile::Builder::new()
        .prefix("round-trip-")
        .tempdir()
        .unwrap();
    let endpoint = Endpoint::Unix(dir.path().join("node.sock"));
    let listener = Listener::bind(&endpoint).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let router = Server::builder().add_service(NodeServer::new(InfoOnly));
    let task = tokio::spawn(serve(router, listener, async {
        stopped.await.ok();
    }));

    let mut client = NodeClient::new(connect(&endpoint).await.unwrap());
    let info = client.node_get_info(NodeGetInfoRequest {}).await.unwrap();
    assert_eq!(info.into_inner().node_id, "n1");
    let status = client
        .node_stage_volume(NodeStageVolumeRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}
