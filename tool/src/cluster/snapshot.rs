//! One read of a live cluster, the one piece of code that reads what every command judges it by:
//! the seed's `CLUSTER NODES`, and for every node it lists its own `CLUSTER NODES`, its memory and
//! replication (`INFO memory stats persistence server replication`), its `cluster_state` (`CLUSTER
//! INFO`) and, on a master, the atomic slot migrations not over (Valkey 9's `CLUSTER
//! GETSLOTMIGRATIONS`); the nodes read side by side, a thread each. `status` reads all but
//! `cluster_state`; `predict` its topology, then its memory again right before it plans; `apply`
//! its topology and memory before its first write, and refreshes the seed's view, the masters'
//! views and their `cluster_state` between slots ([`Snapshot::refresh`]). What stops a plan is said
//! as a [`Finding`] ([`Snapshot::refusal`]). Reads only.

use super::connection::NodeConnection;
use super::error::{Code, NodeError};
use super::finding::Finding;
use super::link::{Access, Link};
use super::memory::{read_memory_info, replicas_of, NodeMemory, ReplicaLink};
use super::migrations::{self, Job};
use super::topology::{nodes_on, refusal, slots_of, LiveCluster, Master, Reach, Replica};
use crate::reply::info_field;
use anyhow::{anyhow, bail, Result};
use ringslot_engine::cluster::{myself, ClusterNode};
use ringslot_engine::SLOT_COUNT;
use std::collections::BTreeMap;

/// What a read takes of each node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// Its own `CLUSTER NODES`.
    pub views: bool,
    /// Its memory and replication (`INFO memory stats persistence server replication`).
    pub memory: bool,
    /// Its `cluster_state` (`CLUSTER INFO`).
    pub state: bool,
    /// On a master, the atomic slot migrations not over.
    pub jobs: bool,
}

impl Parts {
    /// What `status` reads: views, memory and atomic jobs (not `cluster_state`: `CLUSTER
    /// INFO` is not in the rule `status` documents, and what makes it not ok is reported from
    /// the rest).
    pub const STATUS: Parts = Parts {
        views: true,
        memory: true,
        state: false,
        jobs: true,
    };
    /// The topology checked: views and atomic jobs (`predict`'s first read).
    pub const TOPOLOGY: Parts = Parts {
        views: true,
        memory: false,
        state: false,
        jobs: true,
    };
    /// The views and memory (`apply` before its first write).
    pub const PLAN: Parts = Parts {
        views: true,
        memory: true,
        state: false,
        jobs: false,
    };
    /// The memory (`predict`, right before it plans).
    pub const MEMORY: Parts = Parts {
        views: false,
        memory: true,
        state: false,
        jobs: false,
    };
    /// Nothing but the seed's view (a worker of a parallel `apply`, whose checks refresh it).
    pub const NONE: Parts = Parts {
        views: false,
        memory: false,
        state: false,
        jobs: false,
    };
    /// The views and `cluster_state` (`apply`'s check between slots).
    pub const HEALTH: Parts = Parts {
        views: true,
        memory: false,
        state: true,
        jobs: false,
    };
}

/// One node as read.
pub struct NodeRead {
    /// The seed's line for it.
    pub node: ClusterNode,
    /// How the tool reaches it.
    pub link: Link,
    /// Its own `CLUSTER NODES`, where read.
    pub view: Option<Vec<ClusterNode>>,
    /// Its memory, where read.
    pub memory: Option<NodeMemory>,
    /// The `INFO` text its memory was read from (`memory stats persistence server
    /// replication`), where read.
    pub info: Option<String>,
    /// Its `cluster_state`, where read.
    pub state: Option<String>,
    /// The atomic slot migrations not over on it (a master), where read.
    pub jobs: Vec<Job>,
    /// Why it could not be read (the first failure), if so; a node flagged failing is not
    /// read.
    pub unread: Option<String>,
    /// What the node answered when it could not be read, where it answered an error.
    pub unread_code: Option<Code>,
    /// The connection its reads go through, kept for the next refresh.
    con: Option<NodeConnection>,
}

impl NodeRead {
    /// Whether the seed lists it as a master.
    pub fn is_master(&self) -> bool {
        self.node.has("master")
    }

    /// Its replicas as it lists them (`slaveN:` lines), where read.
    pub fn replica_links(&self) -> Vec<ReplicaLink> {
        self.info.as_deref().map(replicas_of).unwrap_or_default()
    }

    /// Its `master_link_status` (a replica), where read.
    pub fn master_link(&self) -> Option<String> {
        info_field(self.info.as_deref()?, "master_link_status")
    }

    /// Why it could not be read, naming it once (`ip:port: ...`); `None` when it was read.
    pub fn why_unread(&self) -> Option<String> {
        let why = self.unread.as_deref()?;
        Some(if why.contains(&self.node.address) {
            why.to_string()
        } else {
            format!("{}: {why}", self.node.address)
        })
    }

    /// Reads `parts` of the node on its kept connection (a new one where it has none).
    fn read(&mut self, parts: Parts) -> Result<()> {
        let con = match self.con.as_mut() {
            Some(con) => con,
            None => self.con.insert(self.link.connect()?),
        };
        if parts.views {
            self.view = Some(nodes_on(con)?);
        }
        if parts.memory {
            let (memory, info) = read_memory_info(con)?;
            self.info = Some(info);
            self.memory = Some(memory);
        }
        if parts.state {
            let info = con.text(&["CLUSTER", "INFO"])?;
            self.state = info_field(&info, "cluster_state");
        }
        if parts.jobs && self.node.has("master") {
            self.jobs = match migrations::list(con) {
                Ok(jobs) => jobs
                    .into_iter()
                    .filter(|j| !migrations::finished(j))
                    .collect(),
                Err(e) if matches!(e.code, Code::UnknownSubcommand | Code::UnknownCommand) => {
                    Vec::new()
                }
                Err(e) => return Err(e.into()),
            };
        }
        Ok(())
    }
}

/// The cluster as one read saw it (see the module docs).
pub struct Snapshot {
    /// The seed's address (its `myself` line), and its `CLUSTER NODES`.
    pub seed: String,
    pub seed_view: Vec<ClusterNode>,
    /// Every node the seed lists with an address, by address.
    pub nodes: BTreeMap<String, NodeRead>,
    seed_con: NodeConnection,
    seed_link: Link,
}

impl Snapshot {
    /// Reads `parts` of every node the seed of `access` lists, side by side (a node flagged
    /// failing, or without an address, is listed and not read). A node that cannot be read is
    /// kept, with why ([`NodeRead::unread`]). Error: the seed cannot be reached or read.
    pub fn read(access: &Access, parts: Parts) -> Result<Snapshot> {
        let seed_link = access.seed();
        let mut seed_con = seed_link.connect()?;
        let seed_view = nodes_on(&mut seed_con)?;
        let seed = myself(&seed_view)
            .map_or_else(|| seed_con.address().to_string(), |n| n.address.clone());
        let reach = Reach::of(access);
        let mut nodes = BTreeMap::new();
        for n in seed_view.iter().filter(|n| !n.address.is_empty()) {
            let link = reach.link(n)?;
            nodes.insert(
                n.address.clone(),
                NodeRead {
                    node: n.clone(),
                    link,
                    view: None,
                    memory: None,
                    info: None,
                    state: None,
                    jobs: Vec::new(),
                    unread: None,
                    unread_code: None,
                    con: None,
                },
            );
        }
        let mut snapshot = Snapshot {
            seed,
            seed_view,
            nodes,
            seed_con,
            seed_link,
        };
        let all: Vec<String> = snapshot.nodes.keys().cloned().collect();
        snapshot.read_nodes(parts, &all);
        Ok(snapshot)
    }

    /// Reads `parts` of the nodes at `addresses`, side by side; a node flagged failing is
    /// not read, and one that fails is marked unread with why.
    fn read_nodes(&mut self, parts: Parts, addresses: &[String]) {
        if parts == Parts::NONE {
            return;
        }
        let mut reading: Vec<&mut NodeRead> = self
            .nodes
            .iter_mut()
            .filter(|(a, _)| addresses.contains(a))
            .map(|(_, n)| n)
            .collect();
        std::thread::scope(|scope| {
            for n in reading.iter_mut() {
                scope.spawn(move || {
                    if let Some(flag) = n.node.failing_flag() {
                        n.unread = Some(format!("flagged `{flag}`: not read"));
                        return;
                    }
                    n.unread_code = None;
                    let kept = n.con.is_some();
                    let mut read = n.read(parts);
                    // A kept connection may have been closed meanwhile (the server's
                    // `timeout`): read once more on a new one.
                    if kept && read.as_ref().is_err_and(lost) {
                        n.con = None;
                        read = n.read(parts);
                    }
                    n.unread = match read {
                        Ok(()) => None,
                        Err(e) => {
                            // The connection may be broken: the next read makes a new one.
                            n.con = None;
                            n.unread_code = e.downcast_ref::<NodeError>().map(|e| e.code.clone());
                            Some(format!("{e:#}"))
                        }
                    };
                });
            }
        });
    }

    /// Reads the seed's view again, then `parts` of the nodes at `addresses`. Error: the seed
    /// no longer answers.
    pub fn refresh(&mut self, parts: Parts, addresses: &[String]) -> Result<()> {
        self.seed_view = match nodes_on(&mut self.seed_con) {
            Ok(view) => view,
            // Closed meanwhile (the server's `timeout`): once more on a new connection.
            Err(e) if lost(&e) => {
                self.seed_con = self.seed_link.connect()?;
                nodes_on(&mut self.seed_con)?
            }
            Err(e) => return Err(e),
        };
        for n in &self.seed_view {
            if let Some(read) = self.nodes.get_mut(&n.address) {
                read.node = n.clone();
            }
        }
        self.read_nodes(parts, addresses);
        Ok(())
    }

    /// The connection the reads of the node at `address` went through, taken for other work
    /// (the next refresh makes its own); a new one where there is none. Error: no node at
    /// `address`, or it cannot be reached.
    pub fn connection(&mut self, address: &str) -> Result<NodeConnection> {
        let n = self
            .nodes
            .get_mut(address)
            .ok_or_else(|| anyhow!("{address} is not a node of the cluster"))?;
        match n.con.take() {
            Some(con) => Ok(con),
            None => Ok(n.link.connect()?),
        }
    }

    /// The node at `address`.
    pub fn node(&self, address: &str) -> Option<&NodeRead> {
        self.nodes.get(address)
    }

    /// The nodes the seed lists as masters, by address.
    pub fn masters(&self) -> impl Iterator<Item = &NodeRead> {
        self.nodes.values().filter(|n| n.is_master())
    }

    /// The nodes the seed lists as replicas of the master at `master`, by address.
    pub fn replicas_of<'a>(&'a self, master: &'a str) -> impl Iterator<Item = &'a NodeRead> {
        let id = self.nodes.get(master).map(|m| m.node.id.clone());
        self.nodes
            .values()
            .filter(move |n| n.node.has("slave") && n.node.master.is_some() && n.node.master == id)
    }

    /// The master (address) of the replica at `address`, as the seed lists it.
    pub fn master_of(&self, address: &str) -> Option<&str> {
        let id = self.nodes.get(address)?.node.master.as_ref()?;
        self.nodes
            .values()
            .find(|n| n.node.id == *id)
            .map(|n| n.node.address.as_str())
    }

    /// What stops a plan on this cluster, the first of: what [`refusal`] finds in the seed's
    /// view and the views read (a node flagged failing, a slot open, a node whose masters or
    /// slot table differ from the seed's), an atomic migration running (its jobs read), a
    /// master that says `cluster_state` is not ok (read).
    pub fn refusal(&self) -> Option<Finding> {
        let views: Vec<(String, Vec<ClusterNode>)> = self
            .nodes
            .values()
            .filter_map(|n| Some((n.node.address.clone(), n.view.clone()?)))
            .collect();
        if let Some(why) = refusal(&self.seed_view, &views) {
            return Some(why);
        }
        if let Some(job) = self.jobs().into_iter().next() {
            return Some(job);
        }
        self.masters().find_map(|n| {
            let state = n.state.as_deref()?;
            (state != "ok").then(|| Finding::ClusterState {
                node: n.node.address.clone(),
                state: state.to_string(),
            })
        })
    }

    /// The atomic slot migrations not over, by the master that lists them.
    pub fn jobs(&self) -> Vec<Finding> {
        let text = |job: &Job, name: &str| job.get(name).cloned().unwrap_or_default();
        self.masters()
            .flat_map(|n| {
                n.jobs.iter().map(move |j| {
                    let peer = if text(j, "operation").eq_ignore_ascii_case("import") {
                        text(j, "source_node")
                    } else {
                        text(j, "target_node")
                    };
                    Finding::AtomicJob {
                        node: n.node.address.clone(),
                        name: text(j, "name"),
                        operation: text(j, "operation"),
                        slots: text(j, "slot_ranges"),
                        state: text(j, "state"),
                        peer: self.address_of(&peer),
                    }
                })
            })
            .collect()
    }

    /// The address of node `id`, else the id itself.
    pub fn address_of(&self, id: &str) -> String {
        self.seed_view
            .iter()
            .find(|n| n.id == id)
            .map_or_else(|| id.to_string(), |n| n.address.clone())
    }

    /// The topology a prediction runs on: the masters in the order of their first slot (those
    /// without slots last, by address), their replicas, the owner of every slot. Error: a
    /// seed that lists no master.
    pub fn live(&self) -> Result<LiveCluster> {
        let mut masters: Vec<Master> = self
            .masters()
            .map(|n| Master {
                address: n.node.address.clone(),
                slots: slots_of(&n.node),
                link: n.link.clone(),
            })
            .collect();
        if masters.is_empty() {
            return Err(anyhow!("{} lists no master", self.seed));
        }
        masters.sort_by(|a, b| {
            let first = |m: &Master| m.slots.first().copied().unwrap_or(u16::MAX);
            (first(a), &a.address).cmp(&(first(b), &b.address))
        });
        let mut owner = vec![None; SLOT_COUNT];
        for (i, m) in masters.iter().enumerate() {
            for &slot in &m.slots {
                if let Some(o) = owner.get_mut(usize::from(slot)) {
                    *o = Some(i);
                }
            }
        }
        let seed = myself(&self.seed_view)
            .and_then(|me| masters.iter().position(|m| m.address == me.address));
        let replicas: Vec<Replica> = self
            .nodes
            .values()
            .filter(|n| n.node.has("slave"))
            .filter_map(|n| {
                Some(Replica {
                    address: n.node.address.clone(),
                    master: self.master_of(&n.node.address)?.to_string(),
                    link: n.link.clone(),
                })
            })
            .collect();
        Ok(LiveCluster {
            masters,
            replicas,
            owner,
            seed,
            nodes: self.seed_view.clone(),
        })
    }
}

/// Whether `e` says the connection was lost (not an error answer).
fn lost(e: &anyhow::Error) -> bool {
    e.downcast_ref::<NodeError>()
        .is_some_and(|e| matches!(e.code, Code::Io))
}

/// Reads and checks the topology from the seed (see [`super::topology`]'s docs), through one
/// [`Snapshot`] of its views and atomic jobs. Errors: a [`Finding`] (a node flagged failing, a
/// slot open, a node that disagrees with the seed, an atomic migration running), or a node
/// that cannot be read.
pub fn read_topology(access: &Access) -> Result<LiveCluster> {
    read_checked(access).map(|(_, topo)| topo)
}

/// [`read_topology`], with the snapshot it was read from (which a prediction refreshes for
/// the nodes' memory before it plans).
pub(crate) fn read_checked(access: &Access) -> Result<(Snapshot, LiveCluster)> {
    let snapshot = Snapshot::read(access, Parts::TOPOLOGY)?;
    if let Some(why) = snapshot.refusal() {
        bail!(why);
    }
    if let Some(why) = snapshot.nodes.values().find_map(|n| n.why_unread()) {
        bail!(why);
    }
    let topo = snapshot.live()?;
    Ok((snapshot, topo))
}

/// Fails when the masters or the slot table changed since `topo` was read: the keys evaluated
/// must be the keys counted.
pub(crate) fn check_unchanged(access: &Access, topo: &LiveCluster) -> Result<()> {
    let after = read_topology(access)?;
    let unchanged = after.masters.len() == topo.masters.len()
        && after
            .masters
            .iter()
            .zip(&topo.masters)
            .all(|(a, b)| a.address == b.address && a.slots == b.slots);
    if !unchanged {
        bail!("the cluster's slot table changed while the prediction ran: run again");
    }
    Ok(())
}
