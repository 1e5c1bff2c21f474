//! Stateful fakes of the OpenStack APIs the Manila CSI driver and operator talk to.
