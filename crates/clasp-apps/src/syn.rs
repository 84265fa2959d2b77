//! SYN (CLASP §2.2): a chain of identical no-op operators, each forwarding every record.

use clasp_core::Registry;
use clasp_core::operator::Identity;

/// Registers `syn.noop`: forwards every record unchanged.
pub fn register(r: &mut Registry) {
    r.register_operator("syn.noop", Identity);
}
