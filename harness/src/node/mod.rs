//! The node agent: a kubelet simulation that registers a Node and runs the pods bound to it.
