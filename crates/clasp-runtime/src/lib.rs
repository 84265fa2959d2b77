//! clasp-runtime: the planner and worker nodes of CLASP §4 (Fig. 5), connected by real TCP.
//!
//! - [`planner`]: ingress queue, scheduling engine for input requests, chain tracking, runtime
//!   statistics, worker registry;
//! - [`worker`]: incoming queue, executor pool, local scheduling engine, keyed state, metrics
//!   monitor;
//! - [`migration`]: the decentralized one-round migration protocol;
//! - [`scaling`]: the autoscaler's steps executed on the cluster (workers, migration);
//! - [`wire`]: the messages and framing of `clasp-wire`; [`net`]: handshake and per-peer
//!   sending/receiving threads;
//! - [`observe`]: what a running job shows observers (the admin server's data);
//! - [`cluster`]: embedded and multi-process deployments over the same code path;
//! - [`fault`]: checkpoints, their stores, recovery and the transactional output.

pub mod cluster;
pub mod fault;
pub mod job;
pub mod metrics;
pub mod migration;
pub mod net;
pub mod observe;
pub mod planner;
pub mod request;
pub mod routing;
pub mod scaling;
pub mod service;
pub mod source;
pub mod wire;
pub mod worker;
