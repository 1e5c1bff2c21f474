//! node-driver-registrar
