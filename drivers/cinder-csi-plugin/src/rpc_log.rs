//! RPC logging with secrets redacted: [`csi_proto::rpc_log::handle`], shared with the other
//! driver, with this crate's [`Error`](crate::Error) as the handlers' error type.

csi_proto::rpc_handle_for!(crate::Error);
