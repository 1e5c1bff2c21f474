//! The conformance harness: cluster backends the suites run against.
