//! Each node's memory under each plan and method, walked through the one memory model
//! ([`crate::cluster::budget`]): the same walk `ringslot apply` checks a plan with before its
//! first write, so that a plan this says fits is one apply does not refuse for memory, on a
//! cluster that has not changed since (`apply` judges with its own `--batch-bytes` and
//! `--headroom`, this with their defaults unless `--headroom` is given).

use crate::cluster::budget::{default_batch, Budget, Fit, Judgement, Method, MoveSize, Walk};
use crate::plan::SlotPlan;
use serde::Serialize;

/// One plan walked by one method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanWalk {
    /// The plan (`redis-cli`, `by bytes`, ...).
    pub plan: String,
    /// Every node through it (its method inside).
    pub walk: Walk,
}

/// The cluster's memory against its limits, as it stands and under every plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    /// The part of each limit kept free, a fraction (`--headroom` / 100).
    pub headroom: f64,
    /// Every node held to a limit, as it stands now (a master at or past its limit less the
    /// headroom is `in_margin` or `crosses`: full, which a plan relieves and never makes
    /// worse by taking bytes off it).
    pub standing: Vec<Judgement>,
    /// Each plan under each method.
    pub walks: Vec<PlanWalk>,
}

impl Capacity {
    /// The walk of `plan` by `method`.
    pub fn walk(&self, plan: &str, method: Method) -> Option<&Walk> {
        self.walks
            .iter()
            .find(|w| w.plan == plan && w.walk.method == method)
            .map(|w| &w.walk)
    }

    /// The worst fit of the node at `address` under any plan and method (`None`: no plan
    /// judges it).
    pub fn worst(&self, address: &str) -> Option<Fit> {
        self.walks
            .iter()
            .filter_map(|w| w.walk.node(address)?.worst.as_ref().map(|j| j.fit))
            .max()
    }

    /// The standing of the node at `address` now, if it is held to a limit.
    pub fn standing(&self, address: &str) -> Option<&Judgement> {
        self.standing.iter().find(|j| j.node == address)
    }
}

/// A plan to walk: its name, its moves in the order they are carried out, and the masters it
/// drains.
pub struct PlanMoves {
    pub plan: String,
    pub moves: Vec<MoveSize>,
    pub drained: Vec<String>,
}

impl PlanMoves {
    /// A plan by weight as `apply` weighs it ([`SlotPlan::sizes`], [`SlotPlan::drained`]).
    pub fn of_plan(name: &str, plan: &SlotPlan) -> PlanMoves {
        PlanMoves {
            plan: name.to_string(),
            moves: plan.sizes(),
            drained: plan.drained(),
        }
    }
}

/// Every plan of `plans` walked by each of `methods` through `budget`, with the batches
/// `apply` walks it with by default ([`default_batch`]).
pub fn capacity(budget: &Budget, plans: &[PlanMoves], methods: &[Method]) -> Capacity {
    let standing = budget
        .masters()
        .map(|m| m.address.clone())
        .chain(budget.replicas().map(|(r, _)| r.address.clone()))
        .filter_map(|a| budget.standing(&a))
        .collect();
    let walks = plans
        .iter()
        .flat_map(|p| {
            methods.iter().map(|&method| PlanWalk {
                plan: p.plan.clone(),
                walk: budget.walk(&p.moves, default_batch(method), method, &p.drained),
            })
        })
        .collect();
    Capacity {
        headroom: budget.headroom,
        standing,
        walks,
    }
}
