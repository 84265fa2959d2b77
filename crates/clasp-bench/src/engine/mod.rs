//! The engines experiments run on: the simulator ([`sim`]), the real runtime ([`runtime`])
//! and the edge/cloud runner ([`edge`]). Each holds what its experiments share: the simulated
//! cluster and its settings, the runtime's emulated testbed, the edge deployments.

pub mod edge;
pub mod runtime;
pub mod sim;
