//! `faults`: checked and resolved once into what the engine needs — which instances fail at random and how
//! their up times and repairs are drawn, the scheduled outages by instance index, the retry limit and the
//! seed. What the engine does with them is in `engine/faults.rs`.

use super::spec::{FaultDist, FaultsSpec, InstanceFaultsSpec, LinkFaultScope};
use super::{Link, LinkModel, Topology, Workload};
use crate::error::{Error, Result};

/// Resolved `faults`.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Random failures (`faults.instance`; `None`: only the scheduled ones).
    pub random: Option<RandomFaults>,
    /// Scheduled outages: (instance index in the engine's order — the front pool, then the decode pool —,
    /// failure time, down time), in the order given.
    pub events: Vec<(usize, f64, f64)>,
    /// Random failures of the network link (`faults.link`; `None`: none).
    pub link: Option<RandomLink>,
    /// Scheduled outages of the network link: (channel, `None` for the whole link; failure time, down time).
    pub link_events: Vec<(Option<u32>, f64, f64)>,
    /// The network link's channels.
    pub channels: u32,
    pub max_retries: u32,
    pub seed: u64,
    /// `faults.transfer_failure_p` and `faults.retry_s`.
    pub transfer_failure_p: f64,
    pub retry_s: f64,
    /// The section as given with its defaults filled in (for the echo).
    pub spec: FaultsSpec,
}

/// `faults.link`, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomLink {
    pub mtbf_s: f64,
    pub mttr_s: f64,
    pub dist: FaultDist,
    /// Each channel on its own (`scope = "channel"`), else the whole link.
    pub per_channel: bool,
}

/// `faults.instance`, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomFaults {
    pub mtbf_s: f64,
    pub mttr_s: f64,
    pub dist: FaultDist,
    /// Whether the front pool's (prefill or colocated) and the decode pool's instances fail.
    pub front: bool,
    pub back: bool,
}

fn finite_positive(path: &str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::field(path, format!("must be a positive, finite number of seconds, got {v}")))
    }
}

fn random(r: &InstanceFaultsSpec, topology: &Topology) -> Result<RandomFaults> {
    let mtbf_s = finite_positive("faults.instance.mtbf_s", r.mtbf_s)?;
    let mttr_s = finite_positive("faults.instance.mttr_s", r.mttr_s)?;
    let colocated = matches!(topology, Topology::Colocated { .. });
    let (mut front, mut back) = (r.pools.is_none(), r.pools.is_none() && !colocated);
    for (k, p) in r.pools.iter().flatten().enumerate() {
        let path = format!("faults.instance.pools[{k}]");
        match (p.as_str(), colocated) {
            ("colocated", true) | ("prefill", false) => front = true,
            ("decode", false) => back = true,
            _ => {
                let known = if colocated { "\"colocated\"" } else { "\"prefill\" or \"decode\"" };
                return Err(Error::field(path, format!("no pool {p:?} in this scenario: use {known}")));
            }
        }
    }
    if !front && !back {
        return Err(Error::field("faults.instance.pools", "names no pool: leave it out for every pool"));
    }
    Ok(RandomFaults { mtbf_s, mttr_s, dist: r.dist, front, back })
}

/// The instance index of `name` (`"<pool>-<k>"`) in the engine's order.
fn instance_index(name: &str, path: &str, topology: &Topology) -> Result<usize> {
    let pools: Vec<(&str, u32)> = match topology {
        Topology::Disaggregated { prefill, decode } => {
            vec![("prefill", prefill.instances), ("decode", decode.instances)]
        }
        Topology::Colocated { pool } => vec![("colocated", pool.instances)],
    };
    let mut first = 0usize;
    for (pool, n) in &pools {
        if let Some(digits) = name.strip_prefix(pool).and_then(|x| x.strip_prefix('-')) {
            // Written as the summary names instances: no sign, no leading zeros.
            return match digits.parse::<u32>() {
                Ok(k) if k < *n && k.to_string() == digits => Ok(first + k as usize),
                _ => Err(Error::field(
                    path,
                    format!(
                        "no instance {name:?}: the {pool} pool has {n}, {pool}-0 to {pool}-{}",
                        n.saturating_sub(1)
                    ),
                )),
            };
        }
        first += *n as usize;
    }
    let names: Vec<String> = pools.iter().map(|(p, _)| format!("\"{p}-<k>\"")).collect();
    Err(Error::field(path, format!("no instance {name:?}: name one as {}", names.join(" or "))))
}

/// Check `spec` against the scenario it belongs to (`topology`, the workload for the default seed, and what
/// the engine cannot yet combine with faults, named).
pub(super) fn resolve(
    spec: &FaultsSpec,
    topology: &Topology,
    link: &Link,
    workload: &Workload,
    refused: &[(&str, bool, &str)],
) -> Result<Faults> {
    let colocated = matches!(topology, Topology::Colocated { .. });
    // Link failures need a link, whose channels are FCFS servers (a processor-sharing link has no channels
    // to fail one by one).
    let link_check = |path: &str| -> Result<()> {
        if colocated {
            return Err(Error::field(path, "a colocated scenario has no link to fail"));
        }
        if link.model == LinkModel::Shared {
            return Err(Error::field(path, "link failures need FCFS channels: link.model \"fcfs\" or \"host_staged\""));
        }
        Ok(())
    };
    let random_link = match &spec.link {
        None => None,
        Some(l) => {
            link_check("faults.link")?;
            Some(RandomLink {
                mtbf_s: finite_positive("faults.link.mtbf_s", l.mtbf_s)?,
                mttr_s: finite_positive("faults.link.mttr_s", l.mttr_s)?,
                dist: l.dist,
                per_channel: l.scope == LinkFaultScope::Channel,
            })
        }
    };
    let p = spec.transfer_failure_p;
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::field("faults.transfer_failure_p", format!("must be a probability in [0, 1], got {p}")));
    }
    if p > 0.0 && colocated {
        return Err(Error::field("faults.transfer_failure_p", "a colocated scenario has no hand-off to fail"));
    }
    if !(spec.retry_s.is_finite() && spec.retry_s >= 0.0) {
        return Err(Error::field("faults.retry_s", format!("must be a finite time ≥ 0 s, got {}", spec.retry_s)));
    }
    for &(field, on, why) in refused {
        if on {
            return Err(Error::field(field, format!("cannot be combined with faults yet: {why}")));
        }
    }
    let random = spec.instance.as_ref().map(|r| random(r, topology)).transpose()?;
    let (mut events, mut link_events) = (Vec::new(), Vec::new());
    for (k, e) in spec.events.iter().enumerate() {
        let at = format!("faults.events[{k}]");
        if !(e.at_s.is_finite() && e.at_s >= 0.0) {
            return Err(Error::field(format!("{at}.at_s"), format!("must be a finite time ≥ 0 s, got {}", e.at_s)));
        }
        let for_s = finite_positive(&format!("{at}.for_s"), e.for_s)?;
        match (&e.instance, &e.link) {
            (Some(name), None) => {
                if e.channel.is_some() {
                    return Err(Error::field(format!("{at}.channel"), "only for a link's outage (link: \"kv-link\")"));
                }
                events.push((instance_index(name, &format!("{at}.instance"), topology)?, e.at_s, for_s));
            }
            (None, Some(name)) => {
                link_check(&format!("{at}.link"))?;
                if name != "kv-link" {
                    return Err(Error::field(
                        format!("{at}.link"),
                        format!("no link {name:?}: the network link, the one that fails, is \"kv-link\""),
                    ));
                }
                if let Some(c) = e.channel.filter(|&c| c >= link.channels) {
                    return Err(Error::field(
                        format!("{at}.channel"),
                        format!("no channel {c}: the link has {} (0 to {})", link.channels, link.channels - 1),
                    ));
                }
                link_events.push((e.channel, e.at_s, for_s));
            }
            _ => {
                return Err(Error::field(
                    &at,
                    "name what fails: an instance (\"instance\": \"decode-0\") or the link (\"link\": \"kv-link\"), \
                     not both",
                ))
            }
        }
    }
    let seed = spec.seed.unwrap_or(match workload {
        Workload::Generated { seed, .. } => *seed,
        Workload::Sessions(w) => w.seed,
        _ => 1,
    });
    let mut echoed = spec.clone();
    echoed.seed = Some(seed);
    Ok(Faults {
        random,
        events,
        link: random_link,
        link_events,
        channels: link.channels,
        max_retries: spec.max_retries,
        seed,
        transfer_failure_p: p,
        retry_s: spec.retry_s,
        spec: echoed,
    })
}
