//! Network namespaces.
