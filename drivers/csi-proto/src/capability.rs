//! The RPC capabilities a plugin's ControllerGetCapabilities and NodeGetCapabilities list,
//! built from the RPC type alone.

use crate::v1::{
    ControllerGetCapabilitiesResponse, ControllerServiceCapability, NodeServiceCapability,
    controller_service_capability, node_service_capability,
};

/// A Controller service capability of RPC type `kind`.
pub fn controller_rpc(
    kind: controller_service_capability::rpc::Type,
) -> ControllerServiceCapability {
    ControllerServiceCapability {
        r#type: Some(controller_service_capability::Type::Rpc(
            controller_service_capability::Rpc {
                r#type: kind as i32,
            },
        )),
    }
}

/// A Node service capability of RPC type `kind`.
pub fn node_rpc(kind: node_service_capability::rpc::Type) -> NodeServiceCapability {
    NodeServiceCapability {
        r#type: Some(node_service_capability::Type::Rpc(
            node_service_capability::Rpc {
                r#type: kind as i32,
            },
        )),
    }
}

/// A ControllerGetCapabilities answer listing the RPC types `kinds`.
pub fn controller_capabilities(
    kinds: impl IntoIterator<Item = controller_service_capability::rpc::Type>,
) -> ControllerGetCapabilitiesResponse {
    ControllerGetCapabilitiesResponse {
        capabilities: kinds.into_iter().map(controller_rpc).collect(),
    }
}
