//! Devices in network namespaces, each joined to the cloud by a veth pair whose device end is
//! shaped by `tc qdisc ... tbf` (bandwidth); the delay is added in user space by the device's
//! link writer, since this kernel has no netem.
//!
//! Device `i` (from 1) lives in namespace `clasp-<pid>-<i>` with address `198.18.<i>.2/24` and a
//! default route through the host end `198.18.<i>.1`. The cloud listens on `198.18.1.1`, which
//! every device reaches through its own link (198.18.0.0/15 is the range set aside for
//! benchmarks, RFC 2544: nothing leaves the machine). Dropping a [`Wan`] deletes the
//! namespaces, and with them both ends of every veth pair.

use crate::error::EdgeError;
use std::process::Command;

/// The emulated wide-area network of one experiment.
#[derive(Debug)]
pub struct Wan {
    namespaces: Vec<String>,
    host_ifs: Vec<String>,
    device_ifs: Vec<String>,
}

/// Runs `ip`/`tc` arguments; the error quotes the command and its output.
fn run(cmd: &str, args: &[&str]) -> Result<(), EdgeError> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| EdgeError::Wan(format!("{cmd} {}: {e}", args.join(" "))))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(EdgeError::Wan(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Whether this process can make network namespaces and shape veths (root, `ip`, `tc`):
/// tries once with a throw-away namespace. The error says why not.
pub fn available() -> Result<(), EdgeError> {
    let probe = format!("clasp-probe-{}", std::process::id());
    run("ip", &["netns", "add", &probe])?;
    let tc = run("tc", &["-V"]);
    run("ip", &["netns", "del", &probe])?;
    tc
}

impl Wan {
    /// Creates `devices` namespaces with their veth links to the host.
    pub fn create(devices: usize) -> Result<Self, EdgeError> {
        let pid = std::process::id() % 100_000;
        let mut wan = Self { namespaces: Vec::new(), host_ifs: Vec::new(), device_ifs: Vec::new() };
        for i in 1..=devices {
            let ns = format!("clasp-{pid}-{i}");
            let (host, dev) = (format!("ce{pid}h{i}"), format!("ce{pid}d{i}"));
            run("ip", &["netns", "add", &ns])?;
            wan.namespaces.push(ns.clone());
            run("ip", &["link", "add", &host, "type", "veth", "peer", "name", &dev])?;
            run("ip", &["link", "set", &dev, "netns", &ns])?;
            wan.host_ifs.push(host.clone());
            wan.device_ifs.push(dev.clone());
            run("ip", &["addr", "add", &format!("198.18.{i}.1/24"), "dev", &host])?;
            run("ip", &["link", "set", &host, "up"])?;
            let inside = |args: &[&str]| {
                let mut a = vec!["netns", "exec", ns.as_str(), "ip"];
                a.extend_from_slice(args);
                run("ip", &a)
            };
            inside(&["addr", "add", &format!("198.18.{i}.2/24"), "dev", &dev])?;
            inside(&["link", "set", &dev, "up"])?;
            inside(&["link", "set", "lo", "up"])?;
            inside(&["route", "add", "default", "via", &format!("198.18.{i}.1")])?;
        }
        Ok(wan)
    }

    /// Where the cloud listens.
    pub fn cloud_ip(&self) -> &'static str {
        "198.18.1.1"
    }

    /// The namespace of device `i` (from 0).
    pub fn namespace(&self, i: usize) -> &str {
        &self.namespaces[i]
    }

    /// Shapes every device→cloud link to `kbit` kbit/s (tbf on the device end), or removes the
    /// shaping.
    pub fn shape(&self, kbit: Option<f64>) -> Result<(), EdgeError> {
        for (ns, dev) in self.namespaces.iter().zip(&self.device_ifs) {
            let _ = run("ip", &["netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"]);
            let Some(kbit) = kbit else { continue };
            // A burst of 10 ms of traffic (at least two full frames) and 500 ms of queue.
            let burst = ((kbit * 1000.0 / 8.0 / 100.0) as u64).max(3200);
            let (rate, burst) = (format!("{kbit}kbit"), format!("{burst}b"));
            run(
                "ip",
                &[
                    "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                    &rate, "burst", &burst, "latency", "500ms",
                ],
            )?;
        }
        Ok(())
    }

    /// Bytes the host received so far over device `i`'s link (frames with their TCP/IP and
    /// Ethernet headers).
    pub fn rx_bytes(&self, i: usize) -> u64 {
        let path = format!("/sys/class/net/{}/statistics/rx_bytes", self.host_ifs[i]);
        std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }
}

impl Drop for Wan {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            if let Err(e) = run("ip", &["netns", "del", ns]) {
                tracing::warn!("removing the emulated WAN: {e}");
            }
        }
    }
}
