//! The conformance suites.
